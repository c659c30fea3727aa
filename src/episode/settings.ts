// The manifest's `assemble:` block: how `clapper assemble` cuts the run's shots and lines into one
// episode. Checked with the rest of the manifest (plan sees a missing music file before a run pays
// for anything); the episode itself is made by ./assemble.ts.
import { resolve } from "node:path";
import { show } from "../api/common.js";
import { checkRegularFile, FileError } from "../manifest/files.js";
import type { Job } from "../manifest/job.js";
import { didYouMean } from "../manifest/problems.js";
import { takeCounts, takeProblem } from "./takes.js";

type Transition = "none" | "fade";

export interface AssembleSettings {
  /** A music bed under the whole episode: the absolute path, and the path as written. */
  music?: { path: string; written: string };
  /** The bed's gain in dB (negative: under the narration). */
  musicDb: number;
  /** `fade`: each shot fades in from black and out to black inside its own length. */
  transition: Transition;
  transitionSeconds: number;
  /** Shot id -> the take used; a shot not named uses take 1. */
  takes: Record<string, number>;
}

export const DEFAULT_ASSEMBLE: AssembleSettings = {
  musicDb: -18,
  transition: "none",
  transitionSeconds: 0.5,
  takes: {},
};

export const FIELDS = ["music", "music_db", "transition", "transition_seconds", "takes"] as const;
export const TRANSITIONS: readonly Transition[] = ["none", "fade"];
export const MIN_DB = -60;
export const MAX_DB = 0;
/** A fade longer than this is no transition but a scene of black. */
export const MAX_TRANSITION_S = 5;

type Fail = (key: string, message: string) => void;

/** `assemble.music`: a file that exists, relative to the manifest. */
async function readMusic(
  music: unknown,
  manifestDir: string,
  fail: Fail,
): Promise<AssembleSettings["music"] | undefined> {
  if (typeof music !== "string" || music.trim() === "") {
    fail("assemble.music", `expected an audio file path, got ${show(music)}`);
    return undefined;
  }
  const path = resolve(manifestDir, music);
  try {
    // Only looked at here: the bytes are hashed when the episode is assembled.
    await checkRegularFile(path);
    return { path, written: music };
  } catch (error) {
    fail(
      "assemble.music",
      error instanceof FileError && error.problem === "missing"
        ? `file not found: ${music} (relative to the manifest)`
        : `${music}: ${error instanceof Error ? error.message : String(error)}`,
    );
    return undefined;
  }
}

/** `assemble.takes`: shot id -> take number, each read into `into`. */
function readTakes(value: unknown, into: Record<string, number>, fail: Fail): void {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail("assemble.takes", `expected a mapping of shot id: take number, got ${show(value)}`);
    return;
  }
  for (const [shot, take] of Object.entries(value)) {
    if (typeof take === "number" && Number.isInteger(take) && take >= 1) into[shot] = take;
    else fail(`assemble.takes.${shot}`, `expected a take number (1, 2, ...), got ${show(take)}`);
  }
}

/** `assemble: {music, music_db, transition, transition_seconds, takes}`, each optional. */
export async function readAssemble(
  value: unknown,
  manifestDir: string,
  fail: Fail,
): Promise<AssembleSettings | undefined> {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "object" || Array.isArray(value)) {
    fail("assemble", `expected {music, music_db, transition, transition_seconds, takes}, got ${show(value)}`);
    return undefined;
  }
  const settings: AssembleSettings = { ...DEFAULT_ASSEMBLE, takes: {} };
  const v = value as Record<string, unknown>;
  for (const k of Object.keys(v)) {
    if (!(FIELDS as readonly string[]).includes(k))
      fail(`assemble.${k}`, `unknown field${didYouMean(k, FIELDS) || ` (known: ${FIELDS.join(", ")})`}`);
  }
  if (v.music !== undefined && v.music !== null) {
    const music = await readMusic(v.music, manifestDir, fail);
    if (music) settings.music = music;
  }
  if (v.music_db !== undefined) {
    if (
      typeof v.music_db === "number" &&
      Number.isFinite(v.music_db) &&
      v.music_db >= MIN_DB &&
      v.music_db <= MAX_DB
    )
      settings.musicDb = v.music_db;
    else
      fail("assemble.music_db", `expected a gain in dB from ${MIN_DB} to ${MAX_DB}, got ${show(v.music_db)}`);
  }
  if (v.transition !== undefined) {
    if (typeof v.transition === "string" && (TRANSITIONS as readonly string[]).includes(v.transition))
      settings.transition = v.transition as Transition;
    else fail("assemble.transition", `expected one of ${TRANSITIONS.join(", ")}, got ${show(v.transition)}`);
  }
  if (v.transition_seconds !== undefined) {
    const s = v.transition_seconds;
    if (typeof s === "number" && Number.isFinite(s) && s > 0 && s <= MAX_TRANSITION_S)
      settings.transitionSeconds = s;
    else
      fail(
        "assemble.transition_seconds",
        `expected seconds above 0 and at most ${MAX_TRANSITION_S}, got ${show(s)}`,
      );
  }
  if (v.takes !== undefined && v.takes !== null) readTakes(v.takes, settings.takes, fail);
  return settings;
}

/** Each `assemble.takes` entry names a shot of the manifest and one of its takes. */
export function checkTakes(settings: AssembleSettings | undefined, jobs: readonly Job[], fail: Fail): void {
  if (!settings) return;
  const counts = takeCounts(jobs);
  for (const [shot, take] of Object.entries(settings.takes)) {
    const problem = takeProblem(counts, shot, take);
    if (problem !== undefined) fail(`assemble.takes.${shot}`, problem);
  }
}
