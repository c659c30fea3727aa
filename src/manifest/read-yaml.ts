// Reads a YAML manifest into its top-level fields, defaults and rows of located fields, through
// `yaml`'s document API: node ranges and a LineCounter give every value the line it came from.
// Rows may be written inline or kept in a CSV file the manifest names (`shots: shots.csv`).
import { extname, resolve } from "node:path";
import type { Alias, Document, LineCounter, Node, Pair, YAMLMap } from "yaml";
import type { ToJSContext } from "yaml/util";
import { startStep } from "../trace.js";
import { csvRows } from "./csv-rows.js";
import { FILE_LIMITS, readText } from "./files.js";
import { didYouMean, displayPath, type Problems, quoted } from "./problems.js";
import type { Fields, Located, RawManifest, RowKind } from "./rows.js";

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

export async function readYaml(
  manifest: RawManifest,
  text: string,
  cwd: string,
  problems: Problems,
): Promise<void> {
  const yaml = await loadYaml();
  startStep("yaml loaded");
  const counter = new yaml.LineCounter();
  // `merge`: `<<: *anchor` merge keys (YAML 1.1, widely used to share settings between rows).
  const doc = yaml.parseDocument(text, {
    lineCounter: counter,
    prettyErrors: false,
    uniqueKeys: true,
    merge: true,
  });
  startStep("yaml parsed");
  const reader = new YamlReader(yaml, doc, counter, manifest.display, problems);
  reader.reportSyntax();
  if (doc.errors.length > 0) return;
  const root = doc.contents;
  if (!yaml.isMap(root)) {
    problems.error(
      manifest.display,
      reader.lineOf(root as Node),
      "",
      "expected a mapping with name, shots, lines, ...",
    );
    return;
  }
  for (const pair of root.items) {
    const key = reader.keyOf(pair);
    const node = pair.value as Node | null;
    const line = reader.lineOf(pair) || reader.lineOf(node);
    // `x-...` keys hold YAML anchors for the rows (as in Compose files); they are not read.
    if (key.startsWith("x-")) continue;
    if (!(TOP_LEVEL_FIELDS as readonly string[]).includes(key)) {
      problems.error(
        manifest.display,
        reader.lineOf(pair),
        key,
        `unknown field${didYouMean(key, TOP_LEVEL_FIELDS)}`,
      );
      continue;
    }
    if (key === "shots" || key === "lines") await readRows(reader, manifest, key, node, line, cwd);
    else if (key === "defaults") readDefaults(reader, manifest, node, line);
    else manifest.top.set(key, reader.located(node, line));
  }
}

/** `shots:` or `lines:`: a list of mappings, or the path of a CSV file of them. */
async function readRows(
  reader: YamlReader,
  manifest: RawManifest,
  key: "shots" | "lines",
  node: Node | null,
  line: number,
  cwd: string,
): Promise<void> {
  const { isMap, isScalar, isSeq } = reader.yaml;
  const kind: RowKind = key === "shots" ? "shot" : "line";
  const target = kind === "shot" ? manifest.shots : manifest.lines;
  if (isScalar(node) && typeof node.value === "string") {
    // A CSV file of rows, relative to the manifest. Only a .csv: an error quotes a little of the
    // file it reads, and `lines: key.txt` must not quote a key file.
    if (extname(node.value).toLowerCase() !== ".csv") {
      reader.error(line, key, `expected a .csv file of ${key}, got ${quoted(node.value, 100)}`);
      return;
    }
    const csvPath = resolve(manifest.dir, node.value);
    const csvDisplay = displayPath(csvPath, cwd);
    const where = { file: manifest.display, line, field: key, prefix: `${node.value}: ` };
    const limit = { maxBytes: FILE_LIMITS.csv, what: "a CSV file" };
    const csvText = await readText(csvPath, limit, where, reader.problems);
    // One by one: a spread of 200,000 rows into push() overflows the call stack.
    if (csvText !== undefined)
      for (const row of csvRows(csvText, csvDisplay, kind, reader.problems)) target.push(row);
  } else if (isSeq(node)) {
    for (const written of node.items) {
      const item = reader.deref(written);
      if (!isMap(item)) {
        reader.error(reader.lineOf(written as Node), key, `expected each ${kind} to be a mapping`);
        continue;
      }
      reader.unreadable = false;
      const fields = reader.fieldsOf(item);
      target.push({
        kind,
        file: manifest.display,
        line: reader.lineOf(written as Node),
        fields,
        ...(reader.unreadable ? { unreadable: reader.unreadable } : {}),
      });
    }
  } else if (node !== null) {
    reader.error(line, key, `expected a CSV file path or a list of ${key}`);
  }
}

/** `defaults: {shot: {...}, line: {...}}`. */
function readDefaults(reader: YamlReader, manifest: RawManifest, node: Node | null, line: number): void {
  const { isMap } = reader.yaml;
  if (!isMap(node)) {
    if (node !== null) reader.error(line, "defaults", "expected a mapping with shot and line");
    return;
  }
  for (const d of node.items) {
    const which = reader.keyOf(d);
    if (which !== "shot" && which !== "line") {
      reader.error(
        reader.lineOf(d),
        `defaults.${which}`,
        `unknown field${didYouMean(which, ["shot", "line"])}`,
      );
      continue;
    }
    if (isMap(d.value)) manifest.defaults[which] = reader.fieldsOf(d.value);
    else if (d.value !== null) {
      reader.error(reader.lineOf(d), `defaults.${which}`, "expected a mapping of field: value");
    }
  }
}

/** One parsed document, read into located values; problems are reported at the manifest's lines. */
class YamlReader {
  /** Set by fieldsOf when part of a mapping could not be read. */
  unreadable = false;
  private readonly anchors: Anchors;

  constructor(
    readonly yaml: Yaml,
    private readonly doc: Document,
    private readonly counter: LineCounter,
    private readonly display: string,
    readonly problems: Problems,
  ) {
    this.anchors = new Anchors(doc, yaml);
  }

  error(line: number, field: string, message: string): void {
    this.problems.error(this.display, line, field, message);
  }

  /** The parser's errors. With prettyErrors off, they carry offsets (`pos`), not line positions. */
  reportSyntax(): void {
    for (const error of this.doc.errors) {
      let offset = error.pos[0];
      let where = "";
      // A quote left open is noticed at the end of the file; the line that opened it is the one to fix.
      if (error.code === "MISSING_CHAR" && /quote/i.test(error.message)) {
        this.yaml.visit(this.doc, {
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
      const line = error.linePos?.[0]?.line ?? this.counter.linePos(offset).line;
      this.error(line, "", `YAML: ${error.message.split("\n")[0]}${where}`);
    }
  }

  /** The plain value of a node; aliases resolve to what their anchor holds (not exponentially). */
  jsOf(node: Node | null | undefined): unknown {
    if (!node || !this.yaml.isNode(node)) return null;
    try {
      return this.anchors.toJS(node);
    } catch (error) {
      this.error(this.lineOf(node), "", `YAML: ${(error as Error).message}`);
      return null;
    }
  }

  deref(node: unknown): unknown {
    return this.yaml.isAlias(node) ? this.anchors.target(node) : node;
  }

  /** A key as text; the merge key `<<` is a symbol in the document model. */
  keyOf(pair: Pair): string {
    const key = this.yaml.isScalar(pair.key) ? pair.key.value : pair.key;
    return typeof key === "symbol" ? "<<" : String(key);
  }

  lineOf(node: Node | Pair | null | undefined): number {
    const range =
      (node as Node | undefined)?.range ?? ((node as Pair | undefined)?.key as Node | undefined)?.range;
    return range ? this.counter.linePos(range[0]).line : 0;
  }

  /** A field's value at `line`, with the lines of its nested items when it is a list or mapping. */
  located(node: Node | null, line: number): Located {
    const located: Located = { value: this.jsOf(node), line, fromCsv: false };
    if (this.yaml.isSeq(node) || this.yaml.isMap(node)) {
      located.paths = {};
      this.nestedLines(node, "", located.paths);
    }
    return located;
  }

  fieldsOf(map: YAMLMap): Fields {
    const { isMap, isSeq } = this.yaml;
    const fields: Fields = new Map();
    const merged: Fields = new Map();
    for (const pair of map.items) {
      const key = this.keyOf(pair);
      if (key === "<<") {
        // Merged fields keep the lines where the anchor wrote them; the row's own keys win.
        const sources = isSeq(pair.value) ? pair.value.items : [pair.value];
        for (const source of sources.map((s) => this.deref(s))) {
          if (!isMap(source)) {
            this.error(this.lineOf(pair), "<<", "expected an alias of a mapping (<<: *name)");
            this.unreadable = true;
            continue;
          }
          for (const [name, located] of this.fieldsOf(source))
            if (!merged.has(name)) merged.set(name, located);
        }
        continue;
      }
      const valueNode = pair.value as Node | null;
      // A field is where its key is (a block list or mapping starts on the next line).
      fields.set(key, this.located(valueNode, this.lineOf(pair) || this.lineOf(valueNode)));
    }
    for (const [name, located] of merged) if (!fields.has(name)) fields.set(name, located);
    return fields;
  }

  /** `[2]` and `[2].value` of a list of mappings, each with its own line. */
  private nestedLines(node: Node, prefix: string, out: Record<string, number>): void {
    const { isMap, isSeq } = this.yaml;
    if (isSeq(node)) {
      node.items.forEach((item, i) => {
        const path = `${prefix}[${i}]`;
        out[path] = this.lineOf(item as Node);
        if (isSeq(item) || isMap(item)) this.nestedLines(item, path, out);
      });
    } else if (isMap(node)) {
      for (const pair of node.items) {
        const key = this.keyOf(pair);
        const path = `${prefix}.${key}`;
        const value = pair.value as Node | null;
        out[path] = this.lineOf(value) || this.lineOf(pair);
        if (value && (isSeq(value) || isMap(value))) this.nestedLines(value, path, out);
      }
    }
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
