// Stage 4, execute: every job's life (src/run/jobs.ts) under its service's in-flight limit,
// all jobs started together; the tasks no job follows any more (edited-away versions, removed rows)
// followed to their end; `--max-failures` watched as jobs end; and a stop honoured with a short
// grace for requests still queued.
import type { VideoTask } from "../../api/video.js";
import { SpeechPricer } from "../../budget/pricing.js";
import { logFitted, narrationOf } from "../../episode/fitting.js";
import {
  type AutoDuration,
  fitShot,
  type Job,
  outputKey,
  unfitted,
  type VideoJob,
} from "../../manifest/index.js";
import { KINDS } from "../../report/kinds.js";
import { StillsAsStored } from "../../review/stills.js";
import type { JobState } from "../../state/run-state.js";
import { StateStoreError } from "../../state/s3-journal.js";
import { SpeechPoller } from "../../tracking/speech-poller.js";
import { DEFAULT_TRACK_OPTIONS } from "../../tracking/track.js";
import { VideoPoller } from "../../tracking/video-poller.js";
import type { RunContext } from "../context.js";
import { errorInfo } from "../errors.js";
import { JobRunner, nominalMs } from "../jobs.js";
import type { MaxFailures, RunGate, RunOutcome, StoppedBy } from "../types.js";
import type { Admitted } from "./admission.js";
import type { Opened } from "./open.js";
import type { Prepared } from "./prepare.js";

/** After an interrupt, how long jobs get to reach a clean stop before the run saves and leaves. */
const ABORT_GRACE_MS = 1500;

export interface Executed {
  runner: JobRunner;
  /** Set when --max-failures stopped new submissions. */
  stoppedBy: StoppedBy | undefined;
  /** Requests made by the trackers (the run's polling cost). */
  pollRequests: number;
}

/** Why --max-failures stops the run now, or undefined while the failures are within it. */
export function tooManyFailures(
  limit: MaxFailures | undefined,
  failed: number,
  ended: number,
): string | undefined {
  if (!limit) return undefined;
  if ("count" in limit) {
    return failed > limit.count
      ? `${failed} jobs failed, more than --max-failures ${limit.count}`
      : undefined;
  }
  // A share of a handful says little: the first failures of a run do not stop it on their own.
  if (ended < 5) return undefined;
  const share = (failed / ended) * 100;
  return share > limit.percent
    ? `${failed} of the ${ended} jobs that ended failed (${Number(share.toFixed(1))}%), more than --max-failures ${limit.percent}%`
    : undefined;
}

export async function execute(
  ctx: RunContext,
  gate: RunGate,
  opened: Opened,
  admitted: Admitted,
  prepared: Prepared,
): Promise<Executed | RunOutcome> {
  const { video, speech } = pollers(ctx);
  // The watcher stops the runner's submissions; the runner tells the watcher of each change.
  let runner: JobRunner | undefined;
  const watch = watchJobs(ctx, gate, admitted, () => runner, { video, speech });
  runner = jobRunner(ctx, opened, admitted, prepared, { video, speech }, watch.changed);
  const life = runner;
  ctx.feed.setPhase("submitting");

  const { planned, store } = admitted;
  const work = admitted.admission.work;
  const planIds = new Set(planned.jobs.map((job) => job.id));
  const orphans = Object.values(store.state.jobs).filter(
    (st) =>
      (st.previous ?? []).some((a) => a.spent === undefined) ||
      (!planIds.has(st.id) && st.attempts.some((a) => a.spent === undefined)),
  );
  const narrated = narrations(ctx, opened, admitted, life, watch.changed);
  const running = await runAll(
    ctx,
    gate,
    [
      ...longestFirst(work).map((job) =>
        unfitted(job) ? narrated.shot(job) : { id: job.id, kind: job.kind, life: () => life.run(job) },
      ),
      ...orphans.map((st: JobState) => ({
        id: st.id,
        kind: st.kind,
        life: () => life.settleOrphans(st, !planIds.has(st.id)),
      })),
    ],
    narrated.ended,
  );
  if (running > 0)
    ctx.log.warn({ event: "interrupted", waiting: running }, "leaving jobs still queued for a request");

  const statePath = opened.located.statePath;
  if (ctx.broken) {
    // A state in S3 that cannot be reached is a store that is gone, as for the output (it ends `unreachable`).
    const gone = ctx.broken instanceof StateStoreError && ctx.broken.kind === "unreachable";
    return {
      end: gone ? "unreachable" : "state-unwritable",
      message: `the run's state could not be written (${errorInfo(ctx.broken).message}); it stopped: run again once ${gone ? "the store is reachable" : "the disk is fixed"} (creates in flight are sent again with their keys)`,
      statePath,
    };
  }
  // Another process holds the state now: nothing more is written to it, or to the reports.
  if (opened.lockLost.aborted) {
    return {
      end: "locked",
      message: `${(opened.lockLost.reason as Error).message}; this run stopped`,
      statePath,
    };
  }
  if (ctx.seams.sightings) {
    ctx.log.info(
      {
        event: "tracking",
        requests: video.requests + speech.requests,
        sighted: video.sighted + speech.sighted,
      },
      `tracking: ${video.requests + speech.requests} requests; ${video.sighted + speech.sighted} task(s) seen ended by another process's reads`,
    );
  }
  return { runner: life, stoppedBy: watch.stoppedBy(), pollRequests: video.requests + speech.requests };
}

/**
 * The jobs in the order they take their slots and their turns to be created: the longest first,
 * so that they do not start last and finish last (48.8 s against a 38.4 s bound in manifest
 * order). Both services' jobs are ordered together by their nominal time, so a long shot is not
 * created after a queue of short lines; ties keep manifest order.
 */
export function longestFirst(jobs: readonly Job[]): Job[] {
  return jobs
    .map((job, i) => ({ job, i, size: nominalMs(job) }))
    .sort((a, b) => b.size - a.size || a.i - b.i)
    .map((x) => x.job);
}

/** The trackers; a look that fails after every retry may mean the service is gone. */
function pollers(ctx: RunContext): { video: VideoPoller; speech: SpeechPoller } {
  const { options } = ctx;
  const track = { ...DEFAULT_TRACK_OPTIONS, ...options.track };
  // With callbacks, a video task is looked at only now and then: the callbacks bring the news.
  const videoTrack = options.callback ? { ...track, minIntervalMs: track.minIntervalMs * 10 } : track;
  let listFailures = 0;
  const trouble = (taskId: string, error: unknown, failures: number) => {
    const list = taskId === "(list)";
    const n = list ? ++listFailures : failures;
    // One line at the 1st, 2nd, 4th, 8th... failure of a task (or of the lists), with the count: a
    // task unreadable for ten minutes is a dozen lines, not thousands.
    if ((n & (n - 1)) === 0) {
      ctx.log.warn(
        { event: "poll-failed", task_id: taskId, failures: n, error: errorInfo(error) },
        list
          ? `a list of tasks could not be read (${n} ${n === 1 ? "time" : "times"} so far); the tasks are looked at one by one`
          : `task ${taskId} could not be read (${n} failed ${n === 1 ? "look" : "looks"} in a row); looking again later, less often`,
      );
    }
    // A list that fails falls back to looks at single tasks, which decide.
    if (!list) ctx.unavailable(error);
  };
  const video = new VideoPoller(options.clients.video, videoTrack, ctx.stop.signal, trouble);
  const speech = new SpeechPoller(options.clients.speech, track, ctx.stop.signal, trouble);
  // With a coordinator, what the account's other processes read answers for this one too.
  const sightings = ctx.seams.sightings;
  if (sightings) {
    video.share(sightings.video);
    speech.share(sightings.speech);
  }
  ctx.onCallback = (task: VideoTask) => video.offer(task);
  return { video, speech };
}

function jobRunner(
  ctx: RunContext,
  opened: Opened,
  admitted: Admitted,
  prepared: Prepared,
  trackers: { video: VideoPoller; speech: SpeechPoller },
  progress: (job?: Job) => void,
): JobRunner {
  const { options } = ctx;
  const { planned, maxPoints, listener } = admitted;
  const price = planned.speechPrice.value;
  return new JobRunner({
    clients: options.clients,
    sink: opened.sink,
    stager: opened.stager,
    journal: admitted.store,
    ledger: admitted.ledger,
    pricer: new SpeechPricer(
      (s) => options.clients.speech.pricing(s ? { signal: s } : {}),
      price !== null ? { perTen: price, version: 0 } : undefined,
    ),
    exactSpeechPricing: maxPoints !== undefined,
    trackers,
    onStored: (job, output) => {
      if (!KINDS[job.kind].still || ctx.options.stills === false) return;
      if (!ctx.stills) {
        const stills = new StillsAsStored(opened.sink, { signal: ctx.stop.signal, nice: 10 });
        // Settled by finish before the reports; a run that ends otherwise leaves no ffmpeg behind.
        ctx.defer(() => stills.close());
        ctx.stills = stills;
      }
      ctx.stills.add(output);
    },
    ...(options.callback && listener
      ? { callback: { url: options.callback.url, token: listener.token } }
      : {}),
    name: opened.located.manifest.name,
    maxAttempts: options.maxAttempts ?? 2,
    ...(options.retryFailed ? { retryFailed: true } : {}),
    ...(options.maxResultBytes !== undefined ? { maxResultBytes: options.maxResultBytes } : {}),
    skillIds: prepared.skillIds,
    voiceRefs: prepared.voiceRefs,
    signal: ctx.stop.signal,
    unavailable: ctx.unavailable,
    unreachable: (error) => ctx.halt.unreachable(error),
    log: ctx.log,
    progress,
    fail: ctx.fail,
  });
}

/**
 * The progress feed and --max-failures, told of each job's change: counts kept job by job, and
 * new submissions stopped once too many jobs of this run failed.
 */
function watchJobs(
  ctx: RunContext,
  gate: RunGate,
  admitted: Admitted,
  runner: () => JobRunner | undefined,
  trackers: { video: VideoPoller; speech: SpeechPoller },
): { changed(job?: Job): void; stoppedBy(): StoppedBy | undefined } {
  const { planned, store, maxPoints, ledger } = admitted;
  const workIds = new Set(admitted.admission.work.map((job) => job.id));
  const statusOf = (id: string) => store.state.jobs[id]?.status ?? "pending";
  const limit = (t: { tasks: { concurrency?: number } }) => t.tasks.concurrency ?? 0;
  ctx.feed.start(
    {
      total: planned.jobs.length,
      state: () => store.state,
      work: workIds,
      ...(maxPoints !== undefined ? { cap: maxPoints } : {}),
      ledger: () => ledger.snapshot(),
      inFlight: (kind) => trackers[kind].inFlight(),
      durations: (kind) => trackers[kind].durations,
      inFlightLimit: { video: limit(gate.video), speech: limit(gate.speech) },
    },
    planned.jobs.map((job) => ({ id: job.id, kind: job.kind, status: statusOf(job.id) })),
  );
  let ended = 0;
  let failed = 0;
  let stoppedBy: StoppedBy | undefined;
  const changed = (job?: Job): void => {
    if (!job) {
      ctx.feed.flush();
      return;
    }
    const now = statusOf(job.id);
    const was = ctx.feed.job(job.id, job.kind, now);
    if (was === now || !workIds.has(job.id)) return;
    if (now === "stored" || now === "failed" || now === "cancelled") ended += 1;
    if (now === "failed") failed += 1;
    const why = tooManyFailures(ctx.options.maxFailures, failed, ended);
    const r = runner();
    if (why && r && !r.stopped) {
      stoppedBy = "max-failures";
      r.stopSubmitting(`${why}: new submissions stopped; the tasks in flight were let finish`, true);
      ctx.log.warn({ event: "max-failures", failed, ended }, why);
    }
  };
  return { changed, stoppedBy: () => stoppedBy };
}

/** A job's life in the run; `ready`, when given, is awaited first, and false skips the life. */
interface Life {
  id: string;
  kind: "video" | "speech";
  life: () => Promise<void>;
  ready?: () => Promise<boolean>;
}

/**
 * Shots timed to their narration: each waits for its lines' lives to end, is fitted to their stored
 * lengths and declared with the fitted request's fingerprint, then runs as any shot (or is reused,
 * when the store holds that very request's result). A line that failed fails its shot before it
 * costs anything; a run stopped first leaves the shot pending.
 */
function narrations(
  ctx: RunContext,
  opened: Opened,
  admitted: Admitted,
  runner: JobRunner,
  changed: (job: Job) => void,
): { shot(job: VideoJob & { auto: AutoDuration }): Life; ended(id: string): void } {
  const { planned, store } = admitted;
  const waits = new Map<string, { done: Promise<void>; resolve: () => void }>();
  const waitFor = (id: string) => {
    let entry = waits.get(id);
    if (!entry) {
      let resolve = () => {};
      const done = new Promise<void>((r) => {
        resolve = r;
      });
      entry = { done, resolve };
      waits.set(id, entry);
    }
    return entry;
  };
  const work = new Set(admitted.admission.work.map((job) => job.id));
  // Built once: every shot looks its lines up here, and takes its own place when fitted.
  const byId = new Map(planned.jobs.map((j) => [j.id, j]));
  const indexOf = new Map(planned.jobs.map((j, i) => [j.id, i]));
  const stopped = () => ctx.stop.signal.aborted || runner.stopped;
  const shot = (job: VideoJob & { auto: AutoDuration }): Life => {
    let fitted: VideoJob | undefined;
    const ready = async (): Promise<boolean> => {
      // Lines this run does not work on have ended already (stored, or failed for good).
      await Promise.all(job.auto.lines.filter((id) => work.has(id)).map((id) => waitFor(id).done));
      if (stopped()) return false;
      const narration = await narrationOf(job, store.state, byId, opened.sink);
      if ("missing" in narration) {
        // A run stopped mid-way leaves the lines pending: the shot waits for the next run.
        if (stopped()) return false;
        const error = {
          code: "narration_missing",
          message: `its duration is auto, and its narration is not all there: ${narration.missing.map((m) => m.why).join("; ")}`,
        };
        await store.append({ t: "failed", id: job.id, error }, { durable: true });
        ctx.log.error({ job: job.id, event: "failed", error }, error.message);
        changed(job);
        return false;
      }
      fitted = fitShot(job, narration.seconds);
      logFitted(ctx.log, fitted);
      const index = indexOf.get(job.id);
      if (index !== undefined) planned.jobs[index] = fitted;
      await store.append(
        {
          t: "job",
          id: job.id,
          kind: "video",
          fingerprint: fitted.fingerprint,
          estimate: fitted.points ?? 0,
        },
        { durable: true },
      );
      // Re-timed to the length it had: the result stored for that very request is the shot's.
      const st = store.state.jobs[job.id];
      if (st?.output?.fingerprint === fitted.fingerprint) {
        const entry = await opened.sink.stat(outputKey(fitted)).catch(() => undefined);
        if (entry && entry.bytes === st.output.bytes) {
          await store.append({ t: "skip", id: job.id }, { durable: true });
          ctx.log.info(
            { job: job.id, event: "reused", uri: st.output.uri },
            "reused: its narration kept its length",
          );
          changed(fitted);
          return false;
        }
      }
      return !stopped();
    };
    return { id: job.id, kind: "video", ready, life: () => runner.run(fitted as VideoJob) };
  };
  return { shot, ended: (id) => waitFor(id).resolve() };
}

/**
 * Lives started in one turn of the event loop. Started all at once, a hundred lives each did their
 * first steps (reserve, intent, log line, request body) before the first create could go on with
 * what the disk and the gate answered it: it reached the service about 28 ms after this stage began
 * (bench:startup, medians of 10 alternated runs at load 3), 14 ms with a few lives per turn. Only a
 * handful may leave at once anyway (the pace's start burst); the rest wait for their turn either way.
 */
const STARTED_PER_TURN = 8;

/** A promise per turn of the event loop from now: turn k resolves k turns later (0: at once). */
function loopTurns(): (turn: number) => Promise<void> {
  const turns: Array<Promise<void>> = [Promise.resolve()];
  return (turn) => {
    for (let k = turns.length; k <= turn; k++) {
      const before = turns[k - 1] as Promise<void>;
      turns.push(before.then(() => new Promise<void>((resolve) => setImmediate(resolve))));
    }
    return turns[turn] as Promise<void>;
  };
}

/**
 * Runs every life under its service's in-flight limit and waits for all of them, or, once the run
 * is stopped, for a short grace: requests in flight are aborted at once, but a request still queued
 * in a throttled limiter only fails when its turn comes. It has sent nothing and every job checks
 * the stop before it writes, so the run saves its report and leaves instead of waiting. Returns how
 * many lives were still waiting.
 */
async function runAll(
  ctx: RunContext,
  gate: RunGate,
  lives: readonly Life[],
  ended: (id: string) => void,
): Promise<number> {
  let running = lives.length;
  const unexpected = (id: string) => (error: unknown) => {
    // A broken state or a lost coordinator stopped the run already, and said why.
    if (ctx.broken || ctx.halt.by === "unreachable") return;
    ctx.log.error({ job: id, event: "job-error", error: errorInfo(error) }, "unexpected error");
  };
  const startTurn = loopTurns();
  const all = Promise.all(
    lives.map(({ id, kind, life, ready }, i) =>
      // A life that waits for others (a shot for its narration) takes no slot while it waits.
      startTurn(Math.floor(i / STARTED_PER_TURN))
        .then(() => (ready ? ready() : true))
        .then((go) => (go ? gate[kind].tasks(life) : undefined))
        .catch(unexpected(id))
        .finally(() => {
          running -= 1;
          ended(id);
        }),
    ),
  );
  const signal = ctx.signal;
  let grace: (() => void) | undefined;
  const stoppedThenGrace = new Promise<void>((resolve) => {
    grace = () => setTimeout(resolve, ABORT_GRACE_MS).unref();
    if (signal.aborted) grace();
    else signal.addEventListener("abort", grace, { once: true });
  });
  await Promise.race([all, stoppedThenGrace]);
  if (grace) signal.removeEventListener("abort", grace);
  return running;
}
