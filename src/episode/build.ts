// The episode built from its local inputs by ffmpeg, in a temporary file, and checked: one video and
// one audio stream, as long as its shots. The use case (./assemble.ts) chooses the inputs, fetches
// them and puts the checked episode in place.

import type { Timing } from "../manifest/index.js";
import { mediaSeconds } from "../media/kinds.js";
import { mp4FileSeconds } from "../media/mp4.js";
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
import { type ChosenShot, hashFile, type Stored } from "./inputs.js";
import type { AssembleSettings } from "./settings.js";

/** An input as the build reads it: its stored facts and a local file holding its bytes. */
export interface LocalShot extends ChosenShot {
  path: string;
  lines: Array<Stored & { path: string }>;
}

interface BuildOptions {
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

interface PlacedLine extends Omit<Stored, "key"> {
  duration_seconds: number;
  /** Where it starts in the episode. */
  start_seconds: number;
  /** Where it is last heard: its end, or its shot's when cut there (its start when never heard). */
  end_seconds: number;
  /** It ran past its shot's end and was cut there. */
  cut?: true;
}

interface PlacedShot {
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
    const lines = placeLines(f.lines, f.shot.id, cut, { leadSamples, gapSamples }, warnings);
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

/**
 * A shot's lines where the filter graph puts them: the first `lead` into the shot, each next `gap`
 * after the previous ends, counted in samples as episodeArgs counts them; cut at the shot's end.
 */
function placeLines(
  lines: ReadonlyArray<Stored & { seconds: number }>,
  shotId: string,
  cut: { samples: number; startSeconds: number },
  spacing: { leadSamples: number; gapSamples: number },
  warnings: string[],
): PlacedLine[] {
  const shotSeconds = cut.samples / SAMPLE_RATE;
  let at = spacing.leadSamples;
  return lines.map((l, k) => {
    if (k > 0) at += spacing.gapSamples;
    const start = at / SAMPLE_RATE;
    at += Math.round(l.seconds * SAMPLE_RATE);
    const over = at / SAMPLE_RATE - shotSeconds;
    if (over > 0)
      warnings.push(
        start >= shotSeconds
          ? `line ${l.id} would start after shot ${shotId} ends (${round3(shotSeconds)} s): not heard`
          : `line ${l.id} runs ${round3(over)} s past the end of shot ${shotId}: cut there`,
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
      end_seconds: round3(cut.startSeconds + Math.max(start, Math.min(at / SAMPLE_RATE, shotSeconds))),
      ...(over > 0 ? { cut: true as const } : {}),
    };
  });
}

/** The music fades out over the episode's last seconds (at most half of it). */
const MUSIC_FADE_OUT_S = 2;

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
