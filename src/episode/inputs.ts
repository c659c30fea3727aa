// The episode's inputs: the run's stored shots and lines chosen from its state (refusing what is
// not stored, or stored for an older version of its row), and the fingerprint that says whether
// the episode in place is still the one they make.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import stableStringify from "safe-stable-stringify";
import type { Job, SpeechJob, Timing, VideoJob } from "../manifest/index.js";
import { outputKey } from "../manifest/index.js";
import type { JobState, RunState } from "../state/run-state.js";
import { versionName } from "../state/versions.js";
import { isLine, isShot, PART } from "./parts.js";
import type { AssembleSettings } from "./settings.js";
import { versionNumber } from "./takes.js";

/** A stored output the episode is made from, as the state records it. */
export interface Stored {
  /** `s01`, `n01`. */
  id: string;
  job: string;
  fingerprint: string;
  uri: string;
  bytes: number;
  sha256: string;
  /** Where the run stores it under its output (`shots/s01.mp4`). */
  key: string;
}

export interface ChosenShot extends Stored {
  take: number;
  /** The kept version of the take picked instead of its current output (the N of `.vN`). */
  version?: number;
  lines: Stored[];
}

interface Refusal {
  job: string;
  reason: string;
}

export interface Chosen {
  shots: ChosenShot[];
  /** Lines with no `shot:`: they belong to no shot, so to no place in the episode. */
  unplaced: string[];
  refusals: Refusal[];
}

/** The stored output of `job`, or why it cannot be used. */
function storedOf(job: Job, st: JobState | undefined): Stored | Refusal {
  const what = `${PART[job.kind]} ${job.rowId} (${job.id})`;
  if (!st) return { job: job.id, reason: `${what} has not been generated yet` };
  if (st.status !== "stored" || !st.output)
    return { job: job.id, reason: `${what} is not stored yet (${st.status})` };
  if (st.output.fingerprint !== job.fingerprint || st.fingerprint !== job.fingerprint)
    return {
      job: job.id,
      reason: `${what} was edited in the manifest since its output was made`,
    };
  const { uri, bytes, sha256 } = st.output;
  return {
    id: job.rowId,
    job: job.id,
    fingerprint: job.fingerprint,
    uri,
    bytes,
    sha256,
    key: outputKey(job),
  };
}

/** Kept version `n` of `job`, as the state records it, or why it cannot be used. */
function keptOf(job: Job, st: JobState | undefined, n: number): Stored | Refusal {
  const kept = st?.versions?.find((v) => versionNumber(v.uri) === n);
  if (!kept)
    return { job: job.id, reason: `${PART[job.kind]} ${job.rowId} (${job.id}) has no kept version ${n}` };
  const key = outputKey(job);
  return {
    id: job.rowId,
    job: job.id,
    fingerprint: job.fingerprint,
    uri: kept.uri,
    bytes: kept.bytes,
    sha256: kept.sha256,
    // Beside the job's output, under the version's own name (`shots/s02.v1.mp4`).
    key: `${key.slice(0, key.lastIndexOf("/") + 1)}${versionName(kept.uri)}`,
  };
}

/**
 * The shots of the manifest in order (take 1, or the take `assemble.takes` names), each with the
 * lines whose `shot:` names it, in manifest order; every input not stored for its current version is
 * a refusal, all of them listed.
 */
export function chooseInputs(
  jobs: readonly Job[],
  state: RunState,
  settings: AssembleSettings,
  /** Shot id -> the kept version of its take picked instead of the current output. */
  versions: Readonly<Record<string, number>> = {},
): Chosen {
  const shots: ChosenShot[] = [];
  const refusals: Refusal[] = [];
  const unplaced: string[] = [];
  const seen = new Set<string>();
  const linesOf = new Map<string, SpeechJob[]>();
  for (const job of jobs) {
    if (!isLine(job)) continue;
    if (job.shot === undefined) {
      unplaced.push(job.rowId);
      continue;
    }
    linesOf.set(job.shot, [...(linesOf.get(job.shot) ?? []), job]);
  }
  for (const job of jobs) {
    if (!isShot(job) || seen.has(job.rowId)) continue;
    seen.add(job.rowId);
    const take = settings.takes[job.rowId] ?? 1;
    const chosen = jobs.find(
      (j): j is VideoJob => isShot(j) && j.rowId === job.rowId && (j.take ?? 1) === take,
    );
    if (!chosen) {
      refusals.push({ job: job.id, reason: `shot ${job.rowId} has no take ${take}` });
      continue;
    }
    const version = versions[job.rowId];
    const shot =
      version === undefined
        ? storedOf(chosen, state.jobs[chosen.id])
        : keptOf(chosen, state.jobs[chosen.id], version);
    const lines: Stored[] = [];
    for (const line of linesOf.get(job.rowId) ?? []) {
      const stored = storedOf(line, state.jobs[line.id]);
      if ("reason" in stored) refusals.push(stored);
      else lines.push(stored);
    }
    if ("reason" in shot) refusals.push(shot);
    else shots.push({ ...shot, take, ...(version === undefined ? {} : { version }), lines });
  }
  return { shots, unplaced, refusals };
}

/** What decides the episode's bytes: when it is unchanged, the episode in place is up to date. */
export function inputsFingerprint(o: {
  shots: readonly ChosenShot[];
  timing: Timing;
  settings: AssembleSettings;
  music?: { sha256: string } | undefined;
  ffmpegVersion: string;
  target: string;
  /** The captions' format, and each line job's text (what its cue says). */
  captions: { format: number; texts: ReadonlyMap<string, string> };
}): string {
  const s = o.settings;
  return createHash("sha256")
    .update(
      stableStringify({
        v: 2,
        // The take picked is in the job (`shot/s02/take-2`) and its bytes; named too, for the reader.
        shots: o.shots.map((shot) => ({
          job: shot.job,
          take: shot.take,
          version: shot.version ?? null,
          sha256: shot.sha256,
          lines: shot.lines.map((l) => ({ job: l.job, sha256: l.sha256, text: o.captions.texts.get(l.job) })),
        })),
        captions: o.captions.format,
        // The tail sets no place in the episode (a shot's length does).
        timing: { lead: o.timing.lead, gap: o.timing.gap },
        transition: s.transition,
        transition_seconds: s.transition === "none" ? 0 : s.transitionSeconds,
        music: o.music ? { sha256: o.music.sha256, db: s.musicDb } : null,
        ffmpeg: o.ffmpegVersion,
        target: o.target,
      }) ?? "",
    )
    .digest("hex");
}

export async function hashFile(
  path: string,
  signal?: AbortSignal,
): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash("sha256");
  let bytes = 0;
  for await (const chunk of createReadStream(path, signal ? { signal } : {})) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { bytes, sha256: hash.digest("hex") };
}
