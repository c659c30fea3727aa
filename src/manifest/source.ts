// Reads manifest files into rows of located fields: every value keeps the file and line it came
// from, so every later check can name them. YAML through `yaml`'s document API (node ranges and
// a LineCounter), CSV through csv-parse (record line numbers).
import { dirname, extname, relative, resolve } from "node:path";
import { parse as parseCsv } from "csv-parse/sync";
import type { Alias, Document, Node, Pair, YAMLMap } from "yaml";
import type { ToJSContext } from "yaml/util";
import { traceStart } from "../trace.js";
import { LINE_FIELDS, SHOT_FIELDS } from "./fields.js";
import { FILE_LIMITS, FileError, type ReadOptions, readTextFile } from "./files.js";
import { didYouMean, type Problems, quoted } from "./problems.js";
import type { Fields, Located, RawRow, RowKind } from "./rows.js";

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

export const TOP_LEVEL_FIELDS = [
  "name",
  "output",
  "budget",
  "defaults",
  "vars",
  "skills",
  "templates",
  "shots",
  "lines",
  "timing",
  "assemble",
] as const;

/** Shown paths are relative to the working directory when that is shorter. */
export function displayPath(path: string, cwd: string): string {
  const rel = relative(cwd, path);
  return rel && !rel.startsWith("..") && rel.length < path.length ? rel : path;
}

/** More columns than any manifest has: a file with a million would make a million errors. */
export const MAX_COLUMNS = 1000;

/**
 * Reads a file through the safe reader; a failure is reported at `where` (the file itself, or the
 * manifest line naming it).
 */
async function readText(
  path: string,
  limit: ReadOptions,
  where: { file: string; line: number; field: string; prefix?: string },
  problems: Problems,
): Promise<string | undefined> {
  try {
    return await readTextFile(path, limit);
  } catch (error) {
    const reason = error instanceof FileError ? error.message : `cannot be read (${error})`;
    problems.error(where.file, where.line, where.field, `${where.prefix ?? ""}${reason}`);
    return undefined;
  }
}

export async function readManifest(
  path: string,
  cwd: string,
  problems: Problems,
): Promise<RawManifest | undefined> {
  const abs = resolve(cwd, path);
  const display = displayPath(abs, cwd);
  const manifest: RawManifest = {
    path: abs,
    display,
    dir: dirname(abs),
    top: new Map(),
    defaults: { shot: new Map(), line: new Map() },
    shots: [],
    lines: [],
  };
  const csv = extname(abs).toLowerCase() === ".csv";
  const limit = csv
    ? { maxBytes: FILE_LIMITS.csv, what: "a CSV manifest" }
    : { maxBytes: FILE_LIMITS.manifest, what: "a manifest" };
  const text = await readText(abs, limit, { file: display, line: 0, field: "" }, problems);
  if (text === undefined) return undefined;
  traceStart("manifest read");
  if (csv) {
    const rows = csvRows(text, display, undefined, problems);
    for (const row of rows) (row.kind === "shot" ? manifest.shots : manifest.lines).push(row);
    return manifest;
  }
  await readYaml(manifest, text, cwd, problems);
  traceStart("yaml read into rows");
  return manifest;
}

/** The YAML library, loaded on first use: a bare CSV manifest never needs it. */
type Yaml = typeof import("yaml") & Pick<typeof import("yaml/util"), "toJS">;
let yamlLibrary: Promise<Yaml> | undefined;
function loadYaml(): Promise<Yaml> {
  yamlLibrary ??= Promise.all([import("yaml"), import("yaml/util")]).then(([yaml, util]) => ({
    ...yaml,
    toJS: util.toJS,
  }));
  return yamlLibrary;
}

async function readYaml(manifest: RawManifest, text: string, cwd: string, problems: Problems): Promise<void> {
  const yaml = await loadYaml();
  traceStart("yaml loaded");
  const { isAlias, isMap, isNode, isScalar, isSeq, LineCounter, parseDocument, visit } = yaml;
  const counter = new LineCounter();
  // `merge`: `<<: *anchor` merge keys (YAML 1.1, widely used to share settings between rows).
  const doc = parseDocument(text, {
    lineCounter: counter,
    prettyErrors: false,
    uniqueKeys: true,
    merge: true,
  });
  traceStart("yaml parsed");
  const anchors = new Anchors(doc, yaml);
  /** The plain value of a node; aliases resolve to what their anchor holds (not exponentially). */
  const jsOf = (node: Node | null | undefined): unknown => {
    if (!node || !isNode(node)) return null;
    try {
      return anchors.toJS(node);
    } catch (error) {
      problems.error(manifest.display, lineOf(node), "", `YAML: ${(error as Error).message}`);
      return null;
    }
  };
  const deref = (node: unknown): unknown => (isAlias(node) ? anchors.target(node) : node);
  /** A key as text; the merge key `<<` is a symbol in the document model. */
  const keyOf = (pair: Pair): string => {
    const key = isScalar(pair.key) ? pair.key.value : pair.key;
    return typeof key === "symbol" ? "<<" : String(key);
  };
  const lineOf = (node: Node | Pair | null | undefined): number => {
    const range =
      (node as Node | undefined)?.range ?? ((node as Pair | undefined)?.key as Node | undefined)?.range;
    return range ? counter.linePos(range[0]).line : 0;
  };
  // With prettyErrors off, errors carry offsets (`pos`), not line positions.
  for (const error of doc.errors) {
    let offset = error.pos[0];
    let where = "";
    // A quote left open is noticed at the end of the file; the line that opened it is the one to fix.
    if (error.code === "MISSING_CHAR" && /quote/i.test(error.message)) {
      visit(doc, {
        Scalar(_, node) {
          const range = node.range;
          if (
            (node.type === "QUOTE_DOUBLE" || node.type === "QUOTE_SINGLE") &&
            range &&
            range[0] < offset &&
            range[1] >= offset
          ) {
            offset = range[0];
            where = " opened on this line";
          }
        },
      });
    }
    const line = error.linePos?.[0]?.line ?? counter.linePos(offset).line;
    problems.error(manifest.display, line, "", `YAML: ${error.message.split("\n")[0]}${where}`);
  }
  if (doc.errors.length > 0) return;
  const root = doc.contents;
  if (!isMap(root)) {
    problems.error(
      manifest.display,
      lineOf(root as Node),
      "",
      "expected a mapping with name, shots, lines, ...",
    );
    return;
  }
  /** Set by fieldsOf when part of a mapping could not be read. */
  let unreadable = false;
  const fieldsOf = (map: YAMLMap): Fields => {
    const fields: Fields = new Map();
    const merged: Fields = new Map();
    for (const pair of map.items) {
      const key = keyOf(pair);
      if (key === "<<") {
        // Merged fields keep the lines where the anchor wrote them; the row's own keys win.
        const sources = isSeq(pair.value) ? pair.value.items : [pair.value];
        for (const source of sources.map(deref)) {
          if (!isMap(source)) {
            problems.error(
              manifest.display,
              lineOf(pair),
              "<<",
              "expected an alias of a mapping (<<: *name)",
            );
            unreadable = true;
            continue;
          }
          for (const [name, located] of fieldsOf(source)) if (!merged.has(name)) merged.set(name, located);
        }
        continue;
      }
      const valueNode = pair.value as Node | null;
      const value = jsOf(valueNode);
      // A field is where its key is (a block list or mapping starts on the next line).
      const located: Located = { value, line: lineOf(pair) || lineOf(valueNode), fromCsv: false };
      if (isSeq(valueNode) || isMap(valueNode)) {
        const paths: Record<string, number> = {};
        nestedLines(valueNode, "", paths);
        located.paths = paths;
      }
      fields.set(key, located);
    }
    for (const [name, located] of merged) if (!fields.has(name)) fields.set(name, located);
    return fields;
  };
  /** `[2]` and `[2].value` of a list of mappings, each with its own line. */
  const nestedLines = (node: Node, prefix: string, out: Record<string, number>): void => {
    if (isSeq(node)) {
      node.items.forEach((item, i) => {
        const path = `${prefix}[${i}]`;
        out[path] = lineOf(item as Node);
        if (isSeq(item) || isMap(item)) nestedLines(item, path, out);
      });
    } else if (isMap(node)) {
      for (const pair of node.items) {
        const key = keyOf(pair);
        const path = `${prefix}.${key}`;
        const value = pair.value as Node | null;
        out[path] = lineOf(value) || lineOf(pair);
        if (value && (isSeq(value) || isMap(value))) nestedLines(value, path, out);
      }
    }
  };

  for (const pair of root.items) {
    const key = keyOf(pair);
    const node = pair.value as Node | null;
    const line = lineOf(pair) || lineOf(node);
    // `x-...` keys hold YAML anchors for the rows (as in Compose files); they are not read.
    if (key.startsWith("x-")) continue;
    if (!(TOP_LEVEL_FIELDS as readonly string[]).includes(key)) {
      problems.error(
        manifest.display,
        lineOf(pair),
        key,
        `unknown field${didYouMean(key, TOP_LEVEL_FIELDS)}`,
      );
      continue;
    }
    if (key === "shots" || key === "lines") {
      const kind: RowKind = key === "shots" ? "shot" : "line";
      const target = kind === "shot" ? manifest.shots : manifest.lines;
      if (isScalar(node) && typeof node.value === "string") {
        // A CSV file of rows, relative to the manifest. Only a .csv: an error quotes a little of the
        // file it reads, and `lines: key.txt` must not quote a key file.
        if (extname(node.value).toLowerCase() !== ".csv") {
          problems.error(
            manifest.display,
            line,
            key,
            `expected a .csv file of ${key}, got ${quoted(node.value, 100)}`,
          );
          continue;
        }
        const csvPath = resolve(manifest.dir, node.value);
        const csvDisplay = displayPath(csvPath, cwd);
        const where = { file: manifest.display, line, field: key, prefix: `${node.value}: ` };
        const limit = { maxBytes: FILE_LIMITS.csv, what: "a CSV file" };
        const csvText = await readText(csvPath, limit, where, problems);
        // One by one: a spread of 200,000 rows into push() overflows the call stack.
        if (csvText !== undefined)
          for (const row of csvRows(csvText, csvDisplay, kind, problems)) target.push(row);
      } else if (isSeq(node)) {
        for (const written of node.items) {
          const item = deref(written);
          if (!isMap(item)) {
            problems.error(
              manifest.display,
              lineOf(written as Node),
              key,
              `expected each ${kind} to be a mapping`,
            );
            continue;
          }
          unreadable = false;
          const fields = fieldsOf(item);
          target.push({
            kind,
            file: manifest.display,
            line: lineOf(written as Node),
            fields,
            ...(unreadable ? { unreadable } : {}),
          });
        }
      } else if (node !== null) {
        problems.error(manifest.display, line, key, `expected a CSV file path or a list of ${key}`);
      }
      continue;
    }
    if (key === "defaults") {
      if (!isMap(node)) {
        if (node !== null)
          problems.error(manifest.display, line, key, "expected a mapping with shot and line");
        continue;
      }
      for (const d of node.items) {
        const which = keyOf(d);
        if (which !== "shot" && which !== "line") {
          problems.error(
            manifest.display,
            lineOf(d),
            `defaults.${which}`,
            `unknown field${didYouMean(which, ["shot", "line"])}`,
          );
          continue;
        }
        if (isMap(d.value)) manifest.defaults[which] = fieldsOf(d.value);
        else if (d.value !== null) {
          problems.error(
            manifest.display,
            lineOf(d),
            `defaults.${which}`,
            "expected a mapping of field: value",
          );
        }
      }
      continue;
    }
    const value = jsOf(node);
    const located: Located = { value, line, fromCsv: false };
    if (isSeq(node) || isMap(node)) {
      located.paths = {};
      nestedLines(node, "", located.paths);
    }
    manifest.top.set(key, located);
  }
}

/**
 * The anchors and aliases of a document, listed once. Left to itself, `yaml` lists them by walking
 * the whole document again for every alias it resolves: with a merge key (`<<: *shot`) in every
 * row, a 2,000-row manifest took seconds to read. Built on first need (most manifests have no
 * alias), by `yaml` itself when an alias is first met in a value, else here.
 */
class Anchors {
  /** Aliases and anchored nodes in document order: `yaml`'s own aliasResolveCache. */
  private ordered: Node[] | undefined;
  private targets: Map<Alias, Node | undefined> | undefined;

  constructor(
    private readonly doc: Document,
    private readonly yaml: Yaml,
  ) {}

  /** What node.toJS(doc, { maxAliasCount: 1000 }) returns (aliases counted afresh per call, as there). */
  toJS(node: Node): unknown {
    const ctx: ToJSContext = {
      anchors: new Map(),
      ...(this.ordered ? { aliasResolveCache: this.ordered } : {}),
      doc: this.doc as ToJSContext["doc"],
      keep: true,
      mapAsMap: false,
      mapKeyWarned: false,
      maxAliasCount: 1000,
    };
    const value: unknown = this.yaml.toJS(node, "", ctx);
    this.ordered ??= ctx.aliasResolveCache;
    return value;
  }

  /** The node an alias stands for, as Alias.resolve finds it: the last one so anchored before it. */
  target(alias: Alias): Node | undefined {
    if (!this.targets) {
      this.ordered ??= this.list();
      const last = new Map<string, Node>();
      this.targets = new Map();
      for (const node of this.ordered) {
        if (this.yaml.isAlias(node)) this.targets.set(node, last.get(node.source));
        else if (node.anchor) last.set(node.anchor, node);
      }
    }
    return this.targets.get(alias);
  }

  private list(): Node[] {
    const { isAlias, isCollection, isScalar, visit } = this.yaml;
    const nodes: Node[] = [];
    visit(this.doc, {
      Node: (_key, node) => {
        if (isAlias(node) || ((isScalar(node) || isCollection(node)) && node.anchor)) nodes.push(node);
      },
    });
    return nodes;
  }
}

/** CSV rows; `kind` undefined means a bare CSV manifest whose `kind` column says shot or line. */
export function csvRows(
  text: string,
  display: string,
  kind: RowKind | undefined,
  problems: Problems,
): RawRow[] {
  let parsed: Array<{ record: string[]; info: { bytes: number } }>;
  const startLine = lineStarts(text);
  // Refused before the whole file is parsed: a million columns take seconds to split.
  const width = headerWidth(text);
  if (width !== undefined && width > MAX_COLUMNS) {
    problems.error(display, startLine(0), "", tooWide(width, kind));
    return [];
  }
  try {
    parsed = parseCsv(text, {
      bom: true,
      info: true,
      relax_column_count: true,
      skip_empty_lines: true,
      trim: true,
    }) as unknown as Array<{ record: string[]; info: { bytes: number } }>;
  } catch (error) {
    const e = error as Error & { code?: string; lines?: number };
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
    return [];
  }
  // csv-parse counts a record's line where it ends (a quoted cell may span lines, and CRLF files
  // are miscounted); the line where each record starts comes from its byte offset instead.
  let end = 0;
  const records = parsed.map(({ record, info }) => {
    const line = startLine(end);
    end = info.bytes;
    return { record, line };
  });
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
  const header = head.record.map((h) => h.trim());
  const seen = new Set<string>();
  // Unknown columns are reported once, at the header, and their cells ignored.
  const known = [
    ...(kind !== "line" ? Object.keys(SHOT_FIELDS) : []),
    ...(kind !== "shot" ? Object.keys(LINE_FIELDS) : []),
    "kind",
  ];
  const ignored = new Set<number>();
  header.forEach((name, i) => {
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
  const rows: RawRow[] = [];
  for (const { record, line } of body) {
    if (record.length > header.length) {
      problems.error(display, line, "", `expected ${header.length} columns, got ${record.length}`);
      continue;
    }
    const fields: Fields = new Map();
    record.forEach((cell, i) => {
      if (ignored.has(i)) return;
      const name = header[i] ?? "";
      // An empty cell means "not set": defaults apply.
      if (cell === "") return;
      if (name === "") {
        problems.error(display, line, `column ${i + 1}`, "a value in a column without a header");
        return;
      }
      fields.set(name, { value: cell, line, fromCsv: true });
    });
    let rowKind = kind;
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
        continue;
      }
      rowKind = value;
    } else if (kindCell) {
      fields.delete("kind");
      if (kindCell.value !== kind) {
        problems.error(
          display,
          line,
          "kind",
          `this file holds ${kind}s, got ${quoted(String(kindCell.value))}`,
        );
        continue;
      }
    }
    rows.push({ kind: rowKind as RowKind, file: display, line, fields });
  }
  return rows;
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
