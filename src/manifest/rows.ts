// A manifest and its rows as read, before their fields are typed: every value keeps the file and
// line it came from. The readers (source.ts, read-yaml.ts, csv-rows.ts) make these and the field
// tables (fields.ts) type them; both import this module, not each other.

export type RowKind = "shot" | "line";

export interface Located {
  value: unknown;
  line: number;
  /** CSV cells are text and need coercing; YAML values are typed already. */
  fromCsv: boolean;
  /** Lines of nested YAML items, by path below the field: `[2]`, `[0].value`. */
  paths?: Record<string, number>;
}

export type Fields = Map<string, Located>;

export interface RawRow {
  kind: RowKind;
  file: string;
  line: number;
  fields: Fields;
  /** Something of the row could not be read (reported already): it is checked, but makes no job. */
  unreadable?: boolean;
}

export interface RawManifest {
  /** Absolute path of the manifest. */
  path: string;
  /** The manifest path as shown in messages. */
  display: string;
  dir: string;
  top: Fields;
  defaults: { shot: Fields; line: Fields };
  shots: RawRow[];
  lines: RawRow[];
}
