// `clapper assemble`: the run's stored shots and lines cut into one episode. This module chooses the
// inputs from the run's state (refusing what is not stored, or stored for an older version of its
// row), fingerprints them, and builds and checks the episode in a temporary file; the command
// (src/cli/commands/assemble/) finds the run, fetches the inputs and puts the episode in place.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import stableStringify from "safe-stable-stringify";
import { mp4FileSeconds } from "../api/mp4.js";
import type { JobState, RunState } from "../engine/state.js";
import { DEFAULT_ASSEMBLE } from "../manifest/assemble.js";
import type { AssembleSettings, SpeechJob, Timing, VideoJob } from "../manifest/index.js";
import { type Job, outputKey } from "../manifest/index.js";
import { mediaSeconds } from "../results/media.js";
import {
  cutPoints,
  type EpisodePlan,
  episodeArgs,
  type Probed,
  parseProbe,
  probeArgs,
  type Rational,
  SAMPLE_RATE,
} from "./ffmpeg.js";
import { runFfmpeg } from "./ffmpeg-run.js";

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
  lines: Stored[];
}

export interface Refusal {
  job: string;
  reason: string;
}

export interface Chosen {
  shots: ChosenShot[];
  /** Lines with no `shot:`: they belong to no shot, so to no place in the episode. */
  unplaced: string[];
  refusals: Refusal[];
}

const kindWord = (job: Job) => (job.kind === "video" ? "shot" : "line");

/** The stored output of `job`, or why it cannot be used. */
function storedOf(job: Job, st: JobState | undefined): Stored | Refusal {
  const what = `${kindWord(job)} ${job.rowId} (${job.id})`;
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

/**
 * The shots of the manifest in order (take 1, or the take `assemble.takes` names), each with the
 * lines whose `shot:` names it, in manifest order; every input not stored for its current version is
 * a refusal, all of them listed.
 */
export function chooseInputs(jobs: readonly Job[], state: RunState, settings: AssembleSettings): Chosen {
  const shots: ChosenShot[] = [];
  const refusals: Refusal[] = [];
  const unplaced: string[] = [];
  const seen = new Set<string>();
  const linesOf = new Map<string, SpeechJob[]>();
  for (const job of jobs) {
    if (job.kind !== "speech") continue;
    if (job.shot === undefined) {
      unplaced.push(job.rowId);
      continue;
    }
    linesOf.set(job.shot, [...(linesOf.get(job.shot) ?? []), job]);
  }
  for (const job of jobs) {
    if (job.kind !== "video" || seen.has(job.rowId)) continue;
    seen.add(job.rowId);
    const take = settings.takes[job.rowId] ?? 1;
    const chosen = jobs.find(
      (j): j is VideoJob => j.kind === "video" && j.rowId === job.rowId && (j.take ?? 1) === take,
    );
    if (!chosen) {
      refusals.push({ job: job.id, reason: `shot ${job.rowId} has no take ${take}` });
      continue;
    }
    const shot = storedOf(chosen, state.jobs[chosen.id]);
    const lines: Stored[] = [];
    for (const line of linesOf.get(job.rowId) ?? []) {
      const stored = storedOf(line, state.jobs[line.id]);
      if ("reason" in stored) refusals.push(stored);
      else lines.push(stored);
    }
    if ("reason" in shot) refusals.push(shot);
    else shots.push({ ...shot, take, lines });
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
}): string {
  const s = o.settings;
  return createHash("sha256")
    .update(
      stableStringify({
        v: 1,
        shots: o.shots.map((shot) => ({
          job: shot.job,
          sha256: shot.sha256,
          lines: shot.lines.map((l) => ({ job: l.job, sha256: l.sha256 })),
        })),
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

/** An input as the build reads it: its stored facts and a local file holding its bytes. */
export interface LocalShot extends ChosenShot {
  path: string;
  lines: Array<Stored & { path: string }>;
}

export interface BuildOptions {
  shots: readonly LocalShot[];
  timing: Timing;
  settings: AssembleSettings;
  music?: { path: string } | undefined;
  /** The temporary file ffmpeg writes. */
  output: string;
  binary: string;
  /** ffmpeg's time for the episode; undefined: 120 s plus 6 s per second of episode. */
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
}

export interface PlacedLine extends Omit<Stored, "key"> {
  duration_seconds: number;
  /** Where it starts in the episode. */
  start_seconds: number;
  /** It ran past its shot's end and was cut there. */
  cut?: true;
}

export interface PlacedShot {
  id: string;
  job: string;
  take: number;
  fingerprint: string;
  uri: string;
  bytes: number;
  sha256: string;
  width: number;
  height: number;
  fps: string;
  duration_seconds: number;
  start_seconds: number;
  lines: PlacedLine[];
}

export interface Built {
  bytes: number;
  sha256: string;
  duration_seconds: number;
  expected_seconds: number;
  width: number;
  height: number;
  fps: string;
  streams: { video: number; audio: number };
  shots: PlacedShot[];
  warnings: string[];
  ffmpeg_seconds: number;
}

/** The build or its check failed: the message says which input or which rule. */
export class AssembleError extends Error {
  override name = "AssembleError";
  constructor(
    message: string,
    readonly tail: readonly string[] = [],
  ) {
    super(message);
  }
}

const PROBE_TIMEOUT_MS = 30_000;
const round3 = (n: number) => Math.round(n * 1000) / 1000;
const rateText = (r: Rational) => (r.den === 1 ? String(r.num) : `${r.num}/${r.den}`);

async function probe(path: string, o: BuildOptions): Promise<Probed> {
  const r = await runFfmpeg(probeArgs(path), {
    binary: o.binary,
    timeoutMs: PROBE_TIMEOUT_MS,
    signal: o.signal,
    // With no output named, ffmpeg describes the input and exits 1.
    acceptExit: (code) => code === 1,
  });
  return parseProbe(r.stderr);
}

/** The value most shots have; a tie goes to the one met first. */
function mostCommon<T>(values: readonly T[], key: (v: T) => string): T | undefined {
  const counts = new Map<string, { value: T; n: number; first: number }>();
  values.forEach((value, i) => {
    const k = key(value);
    const c = counts.get(k);
    if (c) c.n += 1;
    else counts.set(k, { value, n: 1, first: i });
  });
  let best: { value: T; n: number; first: number } | undefined;
  for (const c of counts.values())
    if (!best || c.n > best.n || (c.n === best.n && c.first < best.first)) best = c;
  return best?.value;
}

/**
 * Makes the episode in `o.output` and checks it: one video and one audio stream, and a length equal
 * to the sum of its shots' lengths within one frame. Throws AssembleError (or FfmpegError).
 */
export async function buildEpisode(o: BuildOptions): Promise<Built> {
  const warnings: string[] = [];
  const facts = [];
  for (const shot of o.shots) {
    const seconds = await mp4FileSeconds(shot.path).catch(() => undefined);
    if (!seconds || !(seconds > 0))
      throw new AssembleError(`shot ${shot.id}: ${shot.uri} has no readable MP4 duration`);
    const probed = await probe(shot.path, o);
    if (!probed.video)
      throw new AssembleError(`shot ${shot.id}: ${shot.uri} has no video stream ffmpeg can read`);
    const lines = [];
    for (const line of shot.lines) {
      const d = await mediaSeconds(line.path, "speech").catch(() => undefined);
      if (!d || !(d > 0))
        throw new AssembleError(`line ${line.id}: ${line.uri} has no readable audio duration`);
      lines.push({ ...line, seconds: d });
    }
    facts.push({ shot, seconds, video: probed.video, lines });
  }
  const size = mostCommon(
    facts.map((f) => f.video),
    (v) => `${v.width}x${v.height}`,
  );
  const fps = mostCommon(
    facts.flatMap((f) => (f.video.fps ? [f.video.fps] : [])),
    rateText,
  ) ?? { num: 24, den: 1 };
  if (!size) throw new AssembleError("no shot has a video size ffmpeg can read");
  const cuts = cutPoints(
    facts.map((f) => f.seconds),
    fps,
  );
  const expected = facts.reduce((sum, f) => sum + f.seconds, 0);
  const leadSamples = Math.round(o.timing.lead * SAMPLE_RATE);
  const gapSamples = Math.round(o.timing.gap * SAMPLE_RATE);
  const placed: PlacedShot[] = facts.map((f, i) => {
    const cut = cuts[i] as (typeof cuts)[number];
    const shotSeconds = cut.samples / SAMPLE_RATE;
    let at = leadSamples;
    const lines: PlacedLine[] = f.lines.map((l, k) => {
      if (k > 0) at += gapSamples;
      const start = at / SAMPLE_RATE;
      at += Math.round(l.seconds * SAMPLE_RATE);
      const over = at / SAMPLE_RATE - shotSeconds;
      if (over > 0)
        warnings.push(
          start >= shotSeconds
            ? `line ${l.id} would start after shot ${f.shot.id} ends (${round3(shotSeconds)} s): not heard`
            : `line ${l.id} runs ${round3(over)} s past the end of shot ${f.shot.id}: cut there`,
        );
      return {
        id: l.id,
        job: l.job,
        fingerprint: l.fingerprint,
        uri: l.uri,
        bytes: l.bytes,
        sha256: l.sha256,
        duration_seconds: round3(l.seconds),
        start_seconds: round3(cut.startSeconds + start),
        ...(over > 0 ? { cut: true as const } : {}),
      };
    });
    if (f.video.width !== size.width || f.video.height !== size.height) {
      warnings.push(
        `shot ${f.shot.id} is ${f.video.width}x${f.video.height}: scaled to fit ${size.width}x${size.height}, padded with black`,
      );
    }
    return {
      id: f.shot.id,
      job: f.shot.job,
      take: f.shot.take,
      fingerprint: f.shot.fingerprint,
      uri: f.shot.uri,
      bytes: f.shot.bytes,
      sha256: f.shot.sha256,
      width: f.video.width,
      height: f.video.height,
      fps: f.video.fps ? rateText(f.video.fps) : "unknown",
      duration_seconds: round3(f.seconds),
      start_seconds: round3(cut.startSeconds),
      lines,
    };
  });
  const s = o.settings;
  const plan: EpisodePlan = {
    width: size.width,
    height: size.height,
    fps,
    shots: facts.map((f, i) => ({
      path: f.shot.path,
      frames: (cuts[i] as (typeof cuts)[number]).frames,
      samples: (cuts[i] as (typeof cuts)[number]).samples,
      lines: f.lines.map((l) => ({ path: l.path })),
    })),
    leadSamples,
    gapSamples,
    fadeSeconds: s.transition === "fade" ? s.transitionSeconds : 0,
    ...(o.music ? { music: { path: o.music.path, db: s.musicDb, fadeOutSeconds: MUSIC_FADE_OUT_S } } : {}),
    output: o.output,
  };
  const timeoutMs = o.timeoutMs ?? 120_000 + expected * 6000;
  plan.timeLimitSeconds = timeoutMs / 1000;
  const started = performance.now();
  await runFfmpeg(episodeArgs(plan), { binary: o.binary, timeoutMs, signal: o.signal });
  const ffmpegSeconds = (performance.now() - started) / 1000;
  const checked = await checkEpisode(o.output, expected, fps, o);
  const hashed = await hashFile(o.output, o.signal);
  return {
    ...hashed,
    duration_seconds: round3(checked.seconds),
    expected_seconds: round3(expected),
    width: size.width,
    height: size.height,
    fps: rateText(fps),
    streams: checked.streams,
    shots: placed,
    warnings,
    ffmpeg_seconds: round3(ffmpegSeconds),
  };
}

/** The music fades out over the episode's last seconds (at most half of it). */
export const MUSIC_FADE_OUT_S = 2;

/**
 * The episode as a player sees it: its streams counted by music-metadata (the MP4's tracks) and by
 * ffmpeg's own reading, its length from both the movie header and the audio track, each within one
 * frame of the sum of the shots.
 */
async function checkEpisode(
  path: string,
  expected: number,
  fps: Rational,
  o: BuildOptions,
): Promise<{ seconds: number; streams: { video: number; audio: number } }> {
  const frame = fps.den / fps.num;
  const { parseFile } = await import("music-metadata");
  const meta = await parseFile(path, { duration: true });
  const tracks = meta.format.trackInfo ?? [];
  const audio = tracks.filter((t) => t.audio !== undefined || t.type === 2).length;
  const video = tracks.filter(
    (t) => t.video !== undefined || /avc1|hvc1|hev1|avc3/i.test(t.codecName ?? ""),
  ).length;
  const probed = await probe(path, o);
  if (video !== 1 || audio !== 1 || probed.videoStreams !== 1 || probed.audioStreams !== 1) {
    throw new AssembleError(
      `the episode has ${probed.videoStreams} video and ${probed.audioStreams} audio streams (${video} and ${audio} tracks), not one of each`,
    );
  }
  const header = await mp4FileSeconds(path);
  const audioSeconds = meta.format.duration;
  for (const [what, seconds] of [
    ["its movie header", header],
    ["its audio track", audioSeconds],
  ] as const) {
    if (seconds === undefined || Math.abs(seconds - expected) > frame + 1e-6) {
      throw new AssembleError(
        `the episode lasts ${seconds === undefined ? "an unknown time" : `${round3(seconds)} s`} by ${what}, not the ${round3(expected)} s its shots add up to (within one frame, ${round3(frame)} s)`,
      );
    }
  }
  return { seconds: header as number, streams: { video, audio } };
}

export { DEFAULT_ASSEMBLE };

/** Size of a local file, or undefined when there is none. */
export async function fileSize(path: string): Promise<number | undefined> {
  try {
    return (await stat(path)).size;
  } catch {
    return undefined;
  }
}
