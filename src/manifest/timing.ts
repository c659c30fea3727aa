// `duration: auto`: a shot as long as its narration. Before the lines exist the shot's length is an
// estimate from their text (what `plan` shows and costs); admission holds the longest the shot could
// be; once every line is stored, its real length (read from the WAV) fits the shot, and the fitted
// shot is the very request an explicit `duration:` of that length would make, fingerprint included.
import { createHash } from "node:crypto";
import { configure } from "safe-stable-stringify";
import { show } from "../api/common.js";
import { videoPoints } from "../api/video.js";
import { type Job, perKind, type SpeechJob, type VideoJob } from "./job.js";
import { didYouMean, type Problems } from "./problems.js";

const stableStringify = configure({ deterministic: true });

/** The service's range of a video's duration (video spec: 4 to 30 seconds inclusive). */
export const MIN_SHOT_S = 4;
export const MAX_SHOT_S = 30;

/** Seconds of silence before a shot's first line, between its lines, and after its last line. */
export interface Timing {
  lead: number;
  gap: number;
  tail: number;
}

export const DEFAULT_TIMING: Timing = { lead: 0.5, gap: 0.25, tail: 0.5 };

/** More than this between lines is a pause no narration means; likely seconds taken for ms. */
export const MAX_TIMING_S = 10;

export interface AutoDuration {
  /** The shot's narration in manifest order (`line/n01`, ...). */
  lines: string[];
  timing: Timing;
  /** Seconds estimated from the lines' text and speed, before they exist. */
  estimated: number;
  /** Seconds fitted to the stored lines; the job's duration, fingerprint and points follow it. */
  fitted?: number;
  /** The narration's real length (lines and gaps, without lead and tail), once fitted. */
  narration?: number;
  /** Points at the longest duration the shot may get: what admission holds until it is fitted. */
  maxPoints: number;
  /** What the fingerprint is made of, less the duration. */
  basis: { request: Record<string, unknown>; take?: number };
}

/**
 * Counted characters (letters and digits) spoken per second at speed 1: about 150 words a minute
 * for alphabetic scripts; Chinese and Japanese speak about 4 to 5 characters a second. An estimate
 * only: the admission holds the longest shot, and the real length is read from the WAV.
 */
const CHARS_PER_SECOND: Record<string, number> = { ZH: 4.5, JA: 5, AR: 12 };
const DEFAULT_CHARS_PER_SECOND = 14;

function estimateLineSeconds(line: SpeechJob): number {
  const rate = CHARS_PER_SECOND[line.request.language ?? "EN"] ?? DEFAULT_CHARS_PER_SECOND;
  const speed = line.request.speed ?? 1;
  return Math.max(0.5, line.countedChars / rate) / speed;
}

/** The shot's length for lines of these lengths: lead, lines with gaps, tail; whole seconds in range. */
export function fitSeconds(
  lineSeconds: readonly number[],
  timing: Timing,
): { duration: number; narration: number; over: boolean } {
  const narration =
    lineSeconds.reduce((sum, s) => sum + s, 0) + timing.gap * Math.max(0, lineSeconds.length - 1);
  const total = timing.lead + narration + timing.tail;
  // A thousandth of slack: 6.0000001 s of float arithmetic is a 6 s shot, not a 7 s one.
  const whole = Math.ceil(total - 1e-3);
  return {
    duration: Math.min(MAX_SHOT_S, Math.max(MIN_SHOT_S, whole)),
    narration: round3(narration),
    over: whole > MAX_SHOT_S,
  };
}

const round3 = (n: number) => Math.round(n * 1000) / 1000;

export function fingerprintOf(value: unknown): string {
  return createHash("sha256")
    .update(stableStringify(value) ?? "")
    .digest("hex");
}

/** The fingerprint of a shot's request at `duration`: the same whether written or fitted. */
function shotFingerprint(basis: AutoDuration["basis"], duration: number | "auto", extra = {}): string {
  const { take, request } = basis;
  return fingerprintOf({
    v: 1,
    kind: "video",
    request: { ...request, duration },
    ...(take !== undefined ? { take } : {}),
    ...extra,
  });
}

/** The shot fitted to its stored lines' lengths (seconds, in the order of `auto.lines`). */
export function fitShot(job: VideoJob, lineSeconds: readonly number[]): VideoJob {
  const auto = job.auto as AutoDuration;
  const fit = fitSeconds(lineSeconds, auto.timing);
  return {
    ...job,
    duration: fit.duration,
    request: { ...job.request, duration: fit.duration },
    fingerprint: shotFingerprint(auto.basis, fit.duration),
    points: videoPoints(job.request.resolution, fit.duration),
    auto: { ...auto, fitted: fit.duration, narration: fit.narration },
  };
}

/**
 * How long the narration of a fitted auto shot wants to be (with lead and tail) when that is more
 * than the longest shot, or undefined when it fits: what the log and the report warn of.
 */
export function overrun(job: VideoJob): { wanted: number } | undefined {
  const auto = job.auto;
  if (auto?.fitted === undefined || auto.narration === undefined) return undefined;
  const wanted = auto.timing.lead + auto.narration + auto.timing.tail;
  // The same slack as fitSeconds: 30.0000001 s of float arithmetic fits a 30 s shot.
  return wanted > MAX_SHOT_S + 1e-3 ? { wanted } : undefined;
}

type AutoShot = VideoJob & { auto: AutoDuration };

/** The job when it is a shot timed to its narration (`duration: auto`). */
const autoShot = perKind<AutoShot | undefined>({
  video: (shot) => (shot.auto !== undefined ? (shot as AutoShot) : undefined),
  speech: () => undefined,
});

/** The job when it is a line that narrates a shot. */
const narration = perKind<(SpeechJob & { shot: string }) | undefined>({
  video: () => undefined,
  speech: (line) => (line.shot !== undefined ? (line as SpeechJob & { shot: string }) : undefined),
});

/** An auto shot whose lines are not all stored yet. */
export function unfitted(job: Job): job is AutoShot {
  const shot = autoShot(job);
  return shot !== undefined && shot.auto.fitted === undefined;
}

/**
 * Gives each auto shot its lines, its estimate and its provisional fingerprint (made of its lines'
 * fingerprints: an edited line changes it, so the shot is fitted again, and only that shot).
 */
export function linkAutoShots(jobs: Job[], timing: Timing, problems: Problems): void {
  const linesOf = new Map<string, SpeechJob[]>();
  for (const job of jobs) {
    const line = narration(job);
    if (!line) continue;
    const list = linesOf.get(line.shot);
    if (list) list.push(line);
    else linesOf.set(line.shot, [line]);
  }
  const warned = new Set<string>();
  for (const [i, each] of jobs.entries()) {
    const job = autoShot(each);
    if (!job) continue;
    const lines = linesOf.get(job.rowId) ?? [];
    if (lines.length === 0) {
      if (!warned.has(job.rowId))
        problems.error(
          job.file,
          job.line,
          "duration",
          `auto times the shot to its narration, but no line names this shot (add lines with shot: ${job.rowId}, or give the duration in seconds)`,
        );
      warned.add(job.rowId);
      continue;
    }
    const fit = fitSeconds(lines.map(estimateLineSeconds), timing);
    if (fit.over && !warned.has(job.rowId)) {
      problems.warn(
        job.file,
        job.line,
        "duration",
        `auto: the narration is estimated at ${fit.narration.toFixed(1)} s with lead and tail, longer than the longest shot (${MAX_SHOT_S} s): the shot will be ${MAX_SHOT_S} s and the narration will run past its end`,
      );
    }
    warned.add(job.rowId);
    const auto: AutoDuration = {
      ...job.auto,
      lines: lines.map((line) => line.id),
      timing,
      estimated: fit.duration,
      maxPoints: videoPoints(job.request.resolution, MAX_SHOT_S),
    };
    jobs[i] = {
      ...job,
      duration: fit.duration,
      points: videoPoints(job.request.resolution, fit.duration),
      fingerprint: shotFingerprint(auto.basis, "auto", {
        narration: lines.map((line) => line.fingerprint),
        timing,
      }),
      auto,
    };
  }
}

/** `timing: {lead, gap, tail}` in seconds, each optional; the defaults fill what is left out. */
export function readTiming(value: unknown, fail: (key: string, message: string) => void): Timing {
  const timing = { ...DEFAULT_TIMING };
  if (value === undefined || value === null) return timing;
  if (typeof value !== "object" || Array.isArray(value)) {
    fail("timing", `expected {lead, gap, tail} in seconds, got ${show(value)}`);
    return timing;
  }
  for (const [k, v] of Object.entries(value)) {
    if (k !== "lead" && k !== "gap" && k !== "tail") {
      fail(
        `timing.${k}`,
        `unknown field${didYouMean(k, ["lead", "gap", "tail"]) || " (known: lead, gap, tail)"}`,
      );
      continue;
    }
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0 || v > MAX_TIMING_S) {
      fail(`timing.${k}`, `expected seconds from 0 to ${MAX_TIMING_S}, got ${show(v)}`);
      continue;
    }
    timing[k] = v;
  }
  return timing;
}
