// Reads a manifest file into rows of located fields: every value keeps the file and line it came
// from, so every later check can name them. A YAML manifest through `read-yaml.ts`, a bare CSV
// manifest (and the CSV files a YAML one names) through `csv-rows.ts`.
import { dirname, extname, resolve } from "node:path";
import { startStep } from "../trace.js";
import { csvRows } from "./csv-rows.js";
import { FILE_LIMITS, readText } from "./files.js";
import { displayPath, type Problems } from "./problems.js";
import { readYaml } from "./read-yaml.js";
import type { RawManifest } from "./rows.js";

// The CSV reader's seam, tested on its own.
export { csvRows, MAX_COLUMNS } from "./csv-rows.js";

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
  startStep("manifest read");
  if (csv) {
    const rows = csvRows(text, display, undefined, problems);
    for (const row of rows) (row.kind === "shot" ? manifest.shots : manifest.lines).push(row);
    return manifest;
  }
  await readYaml(manifest, text, cwd, problems);
  startStep("yaml read into rows");
  return manifest;
}
