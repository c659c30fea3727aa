// picks.yaml: the take a producer chose for each shot, kept beside the manifest
// (`shots: { s02: 2 }`, takes counted from 1), or one of a take's kept versions
// (`s02: { take: 2, version: 1 }`, the N of `shots/s02.v1.mp4`). The review page writes it; `assemble` reads it, and
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
/** Kept versions are numbered from 1; the run looks no further than this many (src/run/versions.ts). */
const MAX_VERSION = 100_000;

/** One shot's pick: a take (from 1) and, when an earlier output of it was chosen, its version's number. */
export interface Pick {
  take: number;
  version?: number;
}

/** Why a pick cannot be, and whether it is its `version:` that is wrong (else the shot's entry). */
interface PickProblem {
  message: string;
  at?: "version";
}

/**
 * Judges one pick against what the picks are for (a manifest's shots and their takes): a reason it
 * cannot be, or undefined. The reason is told with the pick's own line and field.
 */
type PickCheck = (shot: string, pick: Pick) => PickProblem | undefined;

/** The picks in a picks file: shot id -> pick. No file: no picks. */
export async function readPicks(file: string, check?: PickCheck): Promise<Record<string, Pick>> {
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
export function parsePicks(text: string, file: string, check?: PickCheck): Record<string, Pick> {
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
  const picks: Record<string, Pick> = {};
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

type LineOf = (node: unknown) => number;

/** `shots:`'s entries into `picks`. */
function readShots(
  shots: yaml.YAMLMap,
  file: string,
  lineOf: LineOf,
  picks: Record<string, Pick>,
  check: PickCheck | undefined,
) {
  for (const entry of shots.items) {
    const shot = yaml.isScalar(entry.key) ? String(entry.key.value) : "";
    if (!shot) throw new PicksError(file, lineOf(entry.key), "shots", "expected a shot id as the key");
    const pick = yaml.isMap(entry.value)
      ? pickOfMap(entry.value, `shots.${shot}`, file, lineOf)
      : {
          take: numberIn(entry.value ?? entry.key, `shots.${shot}`, "a take number", MAX_TAKE, file, lineOf),
        };
    const wrong = check?.(shot, pick);
    if (wrong !== undefined) {
      const atVersion = wrong.at === "version" && yaml.isMap(entry.value);
      const node = atVersion ? (entry.value as yaml.YAMLMap).get("version", true) : entry.key;
      throw new PicksError(file, lineOf(node), `shots.${shot}${atVersion ? ".version" : ""}`, wrong.message);
    }
    picks[shot] = pick;
  }
}

/** `{ take: 2, version: 1 }` (take defaults to 1). */
function pickOfMap(map: yaml.YAMLMap, field: string, file: string, lineOf: LineOf): Pick {
  const pick: Pick = { take: 1 };
  for (const pair of map.items) {
    const key = yaml.isScalar(pair.key) ? String(pair.key.value) : "";
    const node = pair.value ?? pair.key;
    if (key === "take") pick.take = numberIn(node, `${field}.take`, "a take number", MAX_TAKE, file, lineOf);
    else if (key === "version")
      pick.version = numberIn(node, `${field}.version`, "a kept version's number", MAX_VERSION, file, lineOf);
    else
      throw new PicksError(
        file,
        lineOf(pair.key),
        `${field}.${key}`,
        "unknown field (only `take` and `version`)",
      );
  }
  return pick;
}

/** A whole number from 1 to `max`, or a PicksError at its line. */
function numberIn(
  node: unknown,
  field: string,
  what: string,
  max: number,
  file: string,
  lineOf: LineOf,
): number {
  const value = yaml.isScalar(node) ? node.value : undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > max) {
    throw new PicksError(
      file,
      lineOf(node),
      field,
      `expected ${what} (1, 2, ...), got ${JSON.stringify(value ?? null)}`,
    );
  }
  return value;
}

/** The picks as picks.yaml holds them: a plain take number, or `{take, version}` for a kept version. */
export function picksAsWritten(picks: Readonly<Record<string, Pick>>): Record<string, number | Pick> {
  return Object.fromEntries(
    Object.entries(picks).map(([shot, p]) => [
      shot,
      p.version === undefined ? p.take : { take: p.take, version: p.version },
    ]),
  );
}

/** The text of a picks file: shots in the order given. */
function formatPicks(picks: Readonly<Record<string, Pick>>): string {
  const header = "# The take picked for each shot (takes count from 1); `clapper assemble` uses them.\n";
  return header + yaml.stringify({ shots: picksAsWritten(picks) }, { collectionStyle: "any" });
}

/**
 * Writes picks.yaml whole or not at all: a temporary file beside it, flushed, then renamed over it, so
 * a reader (or a kill) never sees half a file.
 */
export async function writePicks(file: string, picks: Readonly<Record<string, Pick>>): Promise<void> {
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
