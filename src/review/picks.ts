// picks.yaml: the take a producer chose for each shot, kept beside the manifest
// (`shots: { s02: 2 }`, takes counted from 1). The review page writes it; `assemble` reads it, and
// a pick there overrides the manifest's `assemble.takes`.
import { randomBytes } from "node:crypto";
import { open, rename, rm } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import * as yaml from "yaml";

/** The picks file of a manifest: `picks.yaml` in the manifest's folder. */
export function picksPath(manifestPath: string): string {
  return join(dirname(manifestPath), "picks.yaml");
}

/** A bad picks file: the file, the line and the field, as a manifest's problems are told. */
export class PicksError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly field: string,
    readonly reason: string,
  ) {
    super(`${file}${line > 0 ? `:${line}` : ""}: ${field ? `${field}: ` : ""}${reason}`);
    this.name = "PicksError";
  }
}

/** A picks file is a few lines; anything far larger is not one. */
const MAX_PICKS_BYTES = 1024 * 1024;
/** Takes are counted from 1, and a shot has at most this many (the manifest's own limit is lower). */
const MAX_TAKE = 1000;

/**
 * Judges one pick against what the picks are for (a manifest's shots and their takes): a reason it
 * cannot be, or undefined. The reason is told with the pick's own line and field.
 */
type PickCheck = (shot: string, take: number) => string | undefined;

/** The picks in a picks file: shot id -> take (from 1). No file: no picks. */
export async function readPicks(file: string, check?: PickCheck): Promise<Record<string, number>> {
  let text: string;
  try {
    const handle = await open(file, "r");
    try {
      const { size } = await handle.stat();
      if (size > MAX_PICKS_BYTES) throw new PicksError(file, 0, "", `larger than ${MAX_PICKS_BYTES} bytes`);
      text = await handle.readFile("utf8");
    } finally {
      await handle.close();
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw error;
  }
  return parsePicks(text, file, check);
}

/** Parses picks.yaml's text; every problem names the file, line and field. */
export function parsePicks(text: string, file: string, check?: PickCheck): Record<string, number> {
  const counter = new yaml.LineCounter();
  const doc = yaml.parseDocument(text, { lineCounter: counter, uniqueKeys: true });
  const lineOf = (node: unknown) => {
    const range = (node as { range?: [number, number, number] } | null)?.range;
    return range ? counter.linePos(range[0]).line : 0;
  };
  if (doc.errors.length > 0) {
    const first = doc.errors[0];
    throw new PicksError(
      file,
      first?.linePos?.[0]?.line ?? 0,
      "",
      first?.message.split("\n")[0] ?? "not YAML",
    );
  }
  const root = doc.contents;
  if (root === null || (yaml.isScalar(root) && root.value === null)) return {};
  if (!yaml.isMap(root)) throw new PicksError(file, lineOf(root), "", "expected a mapping with `shots:`");
  const picks: Record<string, number> = {};
  for (const pair of root.items) {
    const key = yaml.isScalar(pair.key) ? String(pair.key.value) : "";
    if (key !== "shots") throw new PicksError(file, lineOf(pair.key), key, "unknown field (only `shots`)");
    const shots = pair.value;
    if (shots === null || (yaml.isScalar(shots) && shots.value === null)) continue;
    if (!yaml.isMap(shots)) {
      throw new PicksError(file, lineOf(shots), "shots", "expected a mapping of shot id: take number");
    }
    readShots(shots, file, lineOf, picks, check);
  }
  return picks;
}

/** `shots:`'s entries into `picks`. */
function readShots(
  shots: yaml.YAMLMap,
  file: string,
  lineOf: (node: unknown) => number,
  picks: Record<string, number>,
  check: PickCheck | undefined,
) {
  for (const entry of shots.items) {
    const shot = yaml.isScalar(entry.key) ? String(entry.key.value) : "";
    const value = yaml.isScalar(entry.value) ? entry.value.value : undefined;
    if (!shot) throw new PicksError(file, lineOf(entry.key), "shots", "expected a shot id as the key");
    if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > MAX_TAKE) {
      throw new PicksError(
        file,
        lineOf(entry.value ?? entry.key),
        `shots.${shot}`,
        `expected a take number (1, 2, ...), got ${JSON.stringify(value ?? null)}`,
      );
    }
    const wrong = check?.(shot, value);
    if (wrong !== undefined) throw new PicksError(file, lineOf(entry.key), `shots.${shot}`, wrong);
    picks[shot] = value;
  }
}

/** The text of a picks file: shots in the order given. */
function formatPicks(picks: Readonly<Record<string, number>>): string {
  const header = "# The take picked for each shot (takes count from 1); `clapper assemble` uses them.\n";
  return header + yaml.stringify({ shots: { ...picks } });
}

/**
 * Writes picks.yaml whole or not at all: a temporary file beside it, flushed, then renamed over it, so
 * a reader (or a kill) never sees half a file.
 */
export async function writePicks(file: string, picks: Readonly<Record<string, number>>): Promise<void> {
  const temp = join(dirname(file), `.${basename(file)}.${randomBytes(6).toString("hex")}.tmp`);
  const handle = await open(temp, "w");
  try {
    await handle.writeFile(formatPicks(picks), "utf8");
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await rename(temp, file);
  } catch (error) {
    await rm(temp, { force: true });
    throw error;
  }
}
