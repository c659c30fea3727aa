// Reads CSV text into rows of located fields, through csv-parse (record byte offsets give each row
// the line it starts on). A bare CSV manifest says each row's kind in a `kind` column; a CSV file a
// YAML manifest names (`shots: shots.csv`) holds rows of one kind.
import { parse as parseCsv } from "csv-parse/sync";
import { LINE_FIELDS, SHOT_FIELDS } from "./fields.js";
import { didYouMean, type Problems, quoted } from "./problems.js";
import type { Fields, RawRow, RowKind } from "./rows.js";

/** More columns than any manifest has: a file with a million would make a million errors. */
export const MAX_COLUMNS = 1000;

/** A record of cells and the line it starts on. */
interface CsvRecord {
  record: string[];
  line: number;
}

/** The header's column names, and the columns whose cells are ignored (reported at the header). */
interface Header {
  names: string[];
  ignored: Set<number>;
}

/** CSV rows; `kind` undefined means a bare CSV manifest whose `kind` column says shot or line. */
export function csvRows(
  text: string,
  display: string,
  kind: RowKind | undefined,
  problems: Problems,
): RawRow[] {
  const startLine = lineStarts(text);
  // Refused before the whole file is parsed: a million columns take seconds to split.
  const width = headerWidth(text);
  if (width !== undefined && width > MAX_COLUMNS) {
    problems.error(display, startLine(0), "", tooWide(width, kind));
    return [];
  }
  const records = parseRecords(text, display, startLine, problems);
  if (!records) return [];
  const [head, ...rest] = records;
  if (!head) {
    problems.error(display, 0, "", "the CSV file is empty (expected a header row)");
    return [];
  }
  // Spreadsheets export rows of empty cells (",,,") below the data; they are not rows.
  const body = rest.filter(({ record }) => record.some((cell) => cell !== ""));
  if (head.record.length > MAX_COLUMNS) {
    problems.error(display, head.line, "", tooWide(head.record.length, kind));
    return [];
  }
  const header = readHeader(head, display, kind, problems);
  const rows: RawRow[] = [];
  for (const record of body) {
    const row = rowOf(record, header, display, kind, problems);
    if (row) rows.push(row);
  }
  return rows;
}

/** The records of the file with the line each starts on; undefined when it does not parse (reported). */
function parseRecords(
  text: string,
  display: string,
  startLine: (offset: number) => number,
  problems: Problems,
): CsvRecord[] | undefined {
  let parsed: Array<{ record: string[]; info: { bytes: number } }>;
  try {
    parsed = parseCsv(text, {
      bom: true,
      info: true,
      relax_column_count: true,
      skip_empty_lines: true,
      trim: true,
    }) as unknown as Array<{ record: string[]; info: { bytes: number } }>;
  } catch (error) {
    reportParseError(error as Error & { code?: string; lines?: number }, text, display, startLine, problems);
    return undefined;
  }
  // csv-parse counts a record's line where it ends (a quoted cell may span lines, and CRLF files
  // are miscounted); the line where each record starts comes from its byte offset instead.
  let end = 0;
  return parsed.map(({ record, info }) => {
    const line = startLine(end);
    end = info.bytes;
    return { record, line };
  });
}

function reportParseError(
  e: Error & { code?: string; lines?: number },
  text: string,
  display: string,
  startLine: (offset: number) => number,
  problems: Problems,
): void {
  const trouble = quoteTrouble(Buffer.from(text, "utf8"));
  if (trouble && (e.code === "CSV_QUOTE_NOT_CLOSED" || e.code === "CSV_INVALID_CLOSING_QUOTE")) {
    // The parser notices a quote left open where it stops, lines later; the line that opened
    // the quote is the one to fix, and it is said in words, not in the parser's.
    const opened = startLine(trouble.open);
    const closed = trouble.close === undefined ? undefined : lineOf(text, trouble.close);
    const message =
      closed === undefined
        ? `CSV: a quoted cell opens on this line and is never closed ${MISSING_QUOTE}`
        : closed > opened
          ? `CSV: a quoted cell opens on this line and is not closed before line ${closed} ${MISSING_QUOTE}`
          : 'CSV: a quoted cell on this line has a " inside it that is not doubled: write it as "" (for example "A ""lighthouse"" at dusk")';
    problems.error(display, opened, "", message);
  } else if (e.code === "INVALID_OPENING_QUOTE") {
    const field = Number(/on field (\d+)/.exec(e.message)?.[1] ?? Number.NaN);
    const column = csvHeader(text)?.[field];
    problems.error(
      display,
      e.lines ?? 0,
      column ?? "",
      `CSV: a " inside a cell that does not start with one: quote the whole cell and double each " inside it (for example "A ""lighthouse"" at dusk")`,
    );
  } else {
    // csv-parse quotes the cell it stopped in (`value is "..."`): a snippet of it at most.
    const message = e.message.replace(/"((?:[^"\\]|\\.)*)"/g, (whole, inner: string) => {
      try {
        return quoted(JSON.parse(`"${inner}"`) as string);
      } catch {
        return whole.length > 42 ? `${whole.slice(0, 40)}…"` : whole;
      }
    });
    problems.error(display, e.lines ?? 0, "", `CSV: ${message}`);
  }
}

/** The header's names; a name twice, or one no row may have, is reported once, here. */
function readHeader(head: CsvRecord, display: string, kind: RowKind | undefined, problems: Problems): Header {
  const names = head.record.map((h) => h.trim());
  const seen = new Set<string>();
  // Unknown columns are reported once, at the header, and their cells ignored.
  const known = [
    ...(kind !== "line" ? Object.keys(SHOT_FIELDS) : []),
    ...(kind !== "shot" ? Object.keys(LINE_FIELDS) : []),
    "kind",
  ];
  const ignored = new Set<number>();
  names.forEach((name, i) => {
    if (name && seen.has(name))
      problems.error(display, head.line, name, "column appears twice in the header");
    seen.add(name);
    if (name && !known.includes(name) && !(name.startsWith("vars.") && name.length > 5)) {
      const what = kind ? `${kind} field` : "field";
      problems.error(
        display,
        head.line,
        name,
        `unknown column: no such ${what}${didYouMean(name, [...new Set(known)])}`,
      );
      ignored.add(i);
    }
  });
  return { names, ignored };
}

/** A record as a row, or undefined when it makes none (reported). */
function rowOf(
  { record, line }: CsvRecord,
  header: Header,
  display: string,
  kind: RowKind | undefined,
  problems: Problems,
): RawRow | undefined {
  if (record.length > header.names.length) {
    problems.error(display, line, "", `expected ${header.names.length} columns, got ${record.length}`);
    return undefined;
  }
  const fields: Fields = new Map();
  record.forEach((cell, i) => {
    if (header.ignored.has(i)) return;
    const name = header.names[i] ?? "";
    // An empty cell means "not set": defaults apply.
    if (cell === "") return;
    if (name === "") {
      problems.error(display, line, `column ${i + 1}`, "a value in a column without a header");
      return;
    }
    fields.set(name, { value: cell, line, fromCsv: true });
  });
  const rowKind = kindOf(fields, kind, display, line, problems);
  return rowKind ? { kind: rowKind, file: display, line, fields } : undefined;
}

/**
 * The row's kind, its `kind` cell taken out of its fields: what the cell says in a bare CSV
 * manifest, else the file's, which the cell may only repeat. Undefined when wrong (reported).
 */
function kindOf(
  fields: Fields,
  kind: RowKind | undefined,
  display: string,
  line: number,
  problems: Problems,
): RowKind | undefined {
  const kindCell = fields.get("kind");
  if (kind === undefined) {
    fields.delete("kind");
    const value = String(kindCell?.value ?? "");
    if (value !== "shot" && value !== "line") {
      problems.error(
        display,
        line,
        "kind",
        kindCell
          ? `expected "shot" or "line", got ${quoted(value)}`
          : 'is required in a bare CSV manifest ("shot" or "line")',
      );
      return undefined;
    }
    return value;
  }
  if (kindCell) {
    fields.delete("kind");
    if (kindCell.value !== kind) {
      problems.error(
        display,
        line,
        "kind",
        `this file holds ${kind}s, got ${quoted(String(kindCell.value))}`,
      );
      return undefined;
    }
  }
  return kind;
}

function tooWide(columns: number, kind: RowKind | undefined): string {
  return `expected at most ${MAX_COLUMNS} columns, got ${columns} (is this a CSV file of ${kind ?? "row"}s?)`;
}

/**
 * The number of columns of the first line when it may be over MAX_COLUMNS; undefined when it is
 * surely not, or when only the full parse can tell (a header spread over lines by quotes).
 */
function headerWidth(text: string): number | undefined {
  const end = text.indexOf("\n");
  const line = end < 0 ? text : text.slice(0, end);
  let commas = 0;
  for (let i = line.indexOf(","); i >= 0; i = line.indexOf(",", i + 1)) commas++;
  if (commas < MAX_COLUMNS) return undefined;
  if (!line.includes('"')) return commas + 1;
  try {
    return (parseCsv(line, { bom: true, relax_column_count: true, to: 1 }) as string[][])[0]?.length;
  } catch {
    return undefined;
  }
}

const MISSING_QUOTE = '(its closing " is missing; a " inside a cell is written "")';

/**
 * The first quoted cell that does not end as a cell must, read as csv-parse reads: `open` is the
 * offset of its opening quote (a quote opens a cell only at its start, spaces aside; `""` inside
 * is a quote), `close` that of the quote taken for its end when something other than a separator
 * follows it; no `close` when the file ends inside it.
 */
function quoteTrouble(bytes: Buffer): { open: number; close?: number } | undefined {
  let open: number | undefined;
  let cellStart = true;
  let i = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
  for (; i < bytes.length; i++) {
    const b = bytes[i];
    if (open !== undefined) {
      if (b !== 0x22) continue;
      if (bytes[i + 1] === 0x22) {
        i++;
        continue;
      }
      let next = i + 1;
      while (bytes[next] === 0x20 || bytes[next] === 0x09) next++;
      const after = bytes[next];
      if (after !== undefined && after !== 0x2c && after !== 0x0a && after !== 0x0d)
        return { open, close: i };
      open = undefined;
      cellStart = false;
      continue;
    }
    if (b === 0x22 && cellStart) open = i;
    else if (b === 0x2c || b === 0x0a || b === 0x0d) cellStart = true;
    else if (b !== 0x20 && b !== 0x09) cellStart = false;
  }
  return open === undefined ? undefined : { open };
}

/** The 1-based line of a byte offset of `text`. */
function lineOf(text: string, offset: number): number {
  const bytes = Buffer.from(text, "utf8").subarray(0, offset);
  let line = 1;
  for (let i = 0; i < bytes.length; i++) {
    if (bytes[i] === 0x0a || (bytes[i] === 0x0d && bytes[i + 1] !== 0x0a)) line++;
  }
  return line;
}

/** The header row's cells, when it parses. */
function csvHeader(text: string): string[] | undefined {
  try {
    return (parseCsv(text, { bom: true, relax_column_count: true, to: 1, trim: true }) as string[][])[0];
  } catch {
    return undefined;
  }
}

/**
 * Line numbers from byte offsets of `text` (UTF-8, BOM included, as csv-parse counts): the line of
 * the first character at or after `offset` that is not a line break, space, tab or BOM. Offsets
 * must not decrease from one call to the next.
 */
function lineStarts(text: string): (offset: number) => number {
  const bytes = Buffer.from(text, "utf8");
  let pos = 0;
  let line = 1;
  return (offset: number) => {
    let at = Math.max(offset, pos);
    if (at === 0 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) at = 3;
    while (
      at < bytes.length &&
      (bytes[at] === 0x0a || bytes[at] === 0x0d || bytes[at] === 0x20 || bytes[at] === 0x09)
    ) {
      at++;
    }
    for (; pos < at; pos++) {
      const b = bytes[pos];
      if (b === 0x0a || (b === 0x0d && bytes[pos + 1] !== 0x0a)) line++;
    }
    return line;
  };
}
