// Shots with `duration: auto`, fitted to their stored narration: from the run's state where every
// line is stored for its current text (a resumed or repeated run), and, during a run, once the lines
// a shot waits for have ended. A fitted shot is the request an explicit duration would make, so its
// fingerprint decides reuse as any shot's does.
import type { Logger } from "pino";
import {
  fitShot,
  type Job,
  MAX_SHOT_S,
  outputKey,
  overrun,
  unfitted,
  type VideoJob,
} from "../manifest/index.js";
import { wavSeconds } from "../media/wav.js";
import type { Sink } from "../sinks/sink.js";
import type { RunState } from "../state/run-state.js";

/** Enough of a WAV for its header, even with metadata chunks before `data`. */
const WAV_HEAD_BYTES = 64 * 1024;

export type Narration =
  | { seconds: number[] }
  /** Lines not stored for their current version (or whose length cannot be read), and why. */
  | { missing: Array<{ id: string; why: string }> };

/**
 * The lengths of an auto shot's lines as stored for their current versions, in order. The state
 * says how long each is; a line stored before it did (or found in the store) is measured from its
 * WAV header through `sink`.
 */
export async function narrationOf(
  shot: VideoJob,
  state: RunState,
  byId: ReadonlyMap<string, Job>,
  sink?: Sink,
): Promise<Narration> {
  const seconds: number[] = [];
  const missing: Array<{ id: string; why: string }> = [];
  for (const id of shot.auto?.lines ?? []) {
    const line = byId.get(id);
    const st = state.jobs[id];
    if (!line || !st || st.status !== "stored" || st.output?.fingerprint !== line.fingerprint) {
      const why =
        st?.status === "failed" || st?.status === "cancelled"
          ? `${id} ${st.status}${st.error ? ` (${st.error.message})` : ""}`
          : `${id} is not generated yet`;
      missing.push({ id, why });
      continue;
    }
    let length = st.output.seconds;
    if (length === undefined && sink) {
      const head = await sink.readHead(outputKey(line), WAV_HEAD_BYTES).catch(() => undefined);
      length = head ? wavSeconds(head) : undefined;
    }
    if (length === undefined || !Number.isFinite(length) || length <= 0) {
      missing.push({ id, why: `the length of ${id}'s stored audio cannot be read (${st.output.uri})` });
      continue;
    }
    seconds.push(length);
  }
  return missing.length > 0 ? { missing } : { seconds };
}

/**
 * Fits, in place, every auto shot whose narration is stored: what a run or a report does before it
 * compares the jobs with the state. Returns the shots fitted.
 */
export async function fitFromState(
  jobs: Job[],
  state: RunState,
  sink?: Sink,
  /** Shots to leave unfitted (their lines are to be made again). */
  wait?: (shot: VideoJob) => boolean,
): Promise<VideoJob[]> {
  const fitted: VideoJob[] = [];
  let byId: Map<string, Job> | undefined;
  for (const [i, job] of jobs.entries()) {
    if (!unfitted(job) || wait?.(job)) continue;
    byId ??= new Map(jobs.map((j) => [j.id, j]));
    const narration = await narrationOf(job, state, byId, sink);
    if (!("seconds" in narration)) continue;
    const shot = fitShot(job, narration.seconds);
    jobs[i] = shot;
    fitted.push(shot);
  }
  return fitted;
}

/** Says how long a fitted shot came out, and warns when its narration is longer than any shot. */
export function logFitted(log: Logger, shot: VideoJob): void {
  const auto = shot.auto;
  if (auto?.fitted === undefined || auto.narration === undefined) return;
  log.info(
    { job: shot.id, event: "timed", narration_seconds: auto.narration, duration: auto.fitted },
    `timed to its narration: ${auto.narration} s of lines, ${auto.fitted} s with lead and tail`,
  );
  const over = overrun(shot);
  if (over)
    log.warn(
      { job: shot.id, event: "narration-too-long", narration_seconds: auto.narration, duration: auto.fitted },
      `its narration (${auto.narration} s, ${over.wanted.toFixed(2)} s with lead and tail) is longer than the longest shot (${MAX_SHOT_S} s): the narration runs past the shot's end`,
    );
}
