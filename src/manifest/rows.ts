// A manifest row as read, before its fields are typed: every value keeps the file and line it came
// from. The reader (source.ts) makes these and the field tables (fields.ts) type them; both import
// this module, not each other.

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
