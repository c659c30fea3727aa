// A scratch folder per test file: write a few files, load the first as the manifest, and get the
// problems formatted as the CLI prints them.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatProblem, type LoadedManifest, loadManifest } from "../../src/manifest/index.js";

export interface Loaded extends LoadedManifest {
  formatted: string[];
  warned: string[];
}

export interface Workspace {
  root: string;
  /** A fresh folder under the root, with `files` written into it. */
  folder(files?: Record<string, string | Buffer>): Promise<string>;
  /** Writes `files` into a fresh folder and loads `manifest` (default: the first file) from there. */
  load(
    files: Record<string, string | Buffer>,
    options?: { manifest?: string; speechPrice?: number },
  ): Promise<Loaded>;
  /** Loads a manifest from `cwd`. */
  loadFrom(cwd: string, manifest: string, speechPrice?: number): Promise<Loaded>;
  remove(): Promise<void>;
}

export async function workspace(prefix = "clapper-manifest-"): Promise<Workspace> {
  const root = await mkdtemp(join(tmpdir(), prefix));
  let n = 0;
  const folder = async (files: Record<string, string | Buffer> = {}) => {
    const sub = join(root, `case-${n++}`);
    await mkdir(sub, { recursive: true });
    for (const [name, data] of Object.entries(files)) {
      await mkdir(join(sub, name, ".."), { recursive: true });
      await writeFile(join(sub, name), data);
    }
    return sub;
  };
  const loadFrom = async (cwd: string, manifest: string, speechPrice = 2): Promise<Loaded> => {
    const r = await loadManifest(manifest, { cwd, speechPrice });
    return { ...r, formatted: r.errors.map(formatProblem), warned: r.warnings.map(formatProblem) };
  };
  return {
    root,
    folder,
    async load(files, options = {}) {
      const sub = await folder(files);
      return loadFrom(sub, options.manifest ?? (Object.keys(files)[0] as string), options.speechPrice);
    },
    loadFrom,
    remove: () => rm(root, { recursive: true, force: true }),
  };
}

/** A YAML (or CSV) file from its lines, newline-terminated. */
export const yaml = (...lines: string[]): string => `${lines.join("\n")}\n`;
