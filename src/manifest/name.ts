// The run name of a manifest without loading it: what the state and the in-process sandbox's
// files are named after, known before anything is validated.
import { readFile } from "node:fs/promises";
import { basename, dirname, extname, resolve } from "node:path";
import { parse } from "yaml";

export async function peekManifest(path: string, cwd: string): Promise<{ name: string; dir: string }> {
  const abs = resolve(cwd, path);
  const stem = basename(abs, extname(abs));
  if (extname(abs).toLowerCase() === ".csv") return { name: stem, dir: dirname(abs) };
  try {
    const doc = parse(await readFile(abs, "utf8")) as { name?: unknown } | null;
    return { name: typeof doc?.name === "string" && doc.name ? doc.name : stem, dir: dirname(abs) };
  } catch {
    // The full load reports what is wrong; this only names files.
    return { name: stem, dir: dirname(abs) };
  }
}
