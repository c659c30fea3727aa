// `run`: the whole pipeline over a manifest. Locate the run (the manifest read offline, its name
// checked before any path is built), lock it, plan with the services, prove the output writable,
// admit the work against the budget (nothing is written before), pre-flight (skills, voices), then
// every job's life under its service's limits (src/pipeline/jobs.ts), and the reports.
import { createHash, randomUUID } from "node:crypto";
import { setMaxListeners } from "node:events";
import { copyFile, mkdir, readFile, stat } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import pLimit from "p-limit";
import type { Logger } from "pino";
import {
  AuthenticationError,
  type Clients,
  ConnectionError,
  isUnavailable,
  PermissionError,
} from "../api/index.js";
import { redactDeep } from "../api/redact.js";
import { CallbackListener } from "../engine/callbacks.js";
import { Journal } from "../engine/journal.js";
import { LocalLedger } from "../engine/ledger.js";
import { ServiceGate, type ServiceLimits } from "../engine/limiter.js";
import { acquireLock, type Lock, LockHeldError } from "../engine/lock.js";
import { SpeechPricer } from "../engine/pricing.js";
import { InlineStager, type MaterialStager, S3Stager } from "../engine/staging.js";
import { applyRecord, initialState, type RunRecord, type RunState } from "../engine/state.js";
import { DEFAULT_TRACK_OPTIONS, SpeechPoller, type TrackOptions, VideoPoller } from "../engine/tracker.js";
import type { Job, Problem } from "../manifest/index.js";
import { outputKey } from "../manifest/outputs.js";
import { LocalSink } from "../sinks/local.js";
import { createS3Client, parseS3Uri, type S3ClientOptions, type S3Location, S3Sink } from "../sinks/s3.js";
import { OutputError, type Sink } from "../sinks/sink.js";
import { admit, type BudgetRow } from "./admit.js";
import { ProgressFeed } from "./feed.js";
import { Halt } from "./halt.js";
import { errorInfo, JobRunner, type VoiceRef, voiceHash } from "./jobs.js";
import { checkOwner, type LocatedRun, locateRun } from "./locate.js";
import { type PlanResult, plan } from "./plan.js";
import { buildReport, type Report, writeReports } from "./report.js";

export type { BudgetRow } from "./admit.js";
export { idempotencyKey, videoCost } from "./jobs.js";
export { defaultStatePath } from "./locate.js";
export { outputKey };

export interface RunOptions {
  manifest: string;
  cwd?: string;
  clients: Clients;
  /** The run, located already by the caller (the CLI needs its state folder before connecting). */
  located?: LocatedRun;
  /** Output folder or s3://bucket/prefix overriding the manifest's `output`; a folder is relative to cwd. */
  output?: string;
  /** Where local materials are staged for the services to fetch (s3://...); default: beside an S3 output. */
  staging?: string;
  /** S3-compatible endpoint (`--s3-endpoint`); otherwise the AWS SDK's configuration. */
  s3?: S3ClientOptions;
  /** Journal file; default `.clapper/<name>/state.jsonl` beside the manifest. */
  statePath?: string;
  /** Take the run's lock even when another process seems to hold it (`--break-lock`). */
  breakLock?: boolean;
  /** The lock's lease and heartbeat (defaults: 30 s and 5 s); tests use short ones. */
  lease?: { leaseMs: number; heartbeatMs: number };
  maxPoints?: number;
  /** Job ids (or row ids, or id prefixes like `shot/s02`) to work on; the rest are left as they are. */
  only?: string[];
  retryFailed?: boolean;
  fresh?: boolean;
  /** Attempts per job in one run, the first included. */
  maxAttempts?: number;
  /** Per-result download limit in bytes, instead of the one derived from each job (`--max-result-mb`). */
  maxResultBytes?: number;
  limits?: { video: ServiceLimits; speech: ServiceLimits };
  track?: Partial<TrackOptions>;
  /**
   * Video status callbacks: the service posts to `url`, which must reach the listener started at
   * `listen` (directly, or through a tunnel or proxy). Polling goes on as a slow safety net.
   */
  callback?: { url: string; listen: { host: string; port: number } };
  /** Aborting stops submissions, saves state and ends the run as interrupted. */
  signal?: AbortSignal;
  logger: Logger;
  onProgress?: (progress: Progress) => void;
  env?: NodeJS.ProcessEnv;
  /** Gate shared with the clients' HTTP layer; created here when absent. */
  gate?: ServiceGate;
  /** Stop submitting once too many jobs failed; what is in flight ends; exit 1. */
  maxFailures?: MaxFailures;
  /** Stop submitting and waiting at this time; state saved; exit 4. */
  deadline?: Date;
}

/** What the run is doing now, for the live display. */
export type Phase = "planning" | "pre-flight" | "submitting" | "waiting" | "collecting" | "reporting";

export interface Progress {
  phase: Phase;
  /** When the run started (epoch ms), before planning. */
  startedAt: number;
  counts: Record<
    "pending" | "submitting" | "running" | "collecting" | "stored" | "failed" | "cancelled",
    number
  >;
  /** Jobs reused from an earlier run (counted in `stored` too): not work of this run. */
  reused: number;
  total: number;
  reserved: number;
  spent: number;
  /** The run's points cap, when it has one. */
  cap?: number;
  /**
   * Tasks of this run in flight now: their kind, when they were created (epoch ms) and, for video,
   * the service's own `estimated_remaining_seconds` at the last look (and when that look was).
   */
  inFlight: ReadonlyArray<{
    kind: "video" | "speech";
    createdAt: number;
    remaining?: { seconds: number; at: number };
  }>;
  /** Tasks of this run that ended, per kind: how long each took from create to end (ms). */
  durations: { video: readonly number[]; speech: readonly number[] };
  /** Jobs of this run not created yet, per kind (waiting for a slot or not started). */
  queued: { video: number; speech: number };
  /** Tasks in flight allowed per service. */
  inFlightLimit: { video: number; speech: number };
}

/** `--max-failures N|P%`: stop submitting once more than this many jobs (or this share of ended jobs) failed. */
export type MaxFailures = { count: number } | { percent: number };

/** Why a run stopped submitting before it had done all its work. */
export type StoppedBy = "max-failures" | "deadline" | "unreachable" | "budget" | "signal";

export interface RunOutcome {
  exitCode: 0 | 1 | 2 | 3 | 4 | 5 | 6;
  message?: string;
  /** Why the run stopped before doing all its work (also in the report's `run.stopped_by`). */
  stoppedBy?: StoppedBy;
  errors?: Problem[];
  warnings?: Problem[];
  budget?: BudgetRow[];
  report?: Report;
  reportUris?: string[];
  statePath?: string;
  /** Requests made by the trackers (the run's polling cost). */
  pollRequests?: number;
}

export const DEFAULT_LIMITS = {
  video: { rps: 10, inFlight: 32 },
  speech: { rps: 10, inFlight: 32 },
} as const satisfies { video: ServiceLimits; speech: ServiceLimits };

/** How long a service may answer nothing but 5xx and 429 before the run stops for it (exit 6). */
const REFUSING_MS = 60_000;

/** After an interrupt, how long jobs get to reach a clean stop before the run saves and leaves. */
const ABORT_GRACE_MS = 1500;

function matchesOnly(job: Job, only: readonly string[]): boolean {
  return only.some(
    (o) =>
      job.id === o ||
      job.rowId === o ||
      job.id.startsWith(`${o}/`) ||
      `${job.kind === "video" ? "shot" : "line"}/${job.rowId}` === o,
  );
}

/** The run, and its last word in the log whatever the way out. */
export async function run(options: RunOptions): Promise<RunOutcome> {
  const startedAt = Date.now();
  const halt = new Halt(options.signal, options.deadline);
  const feed = new ProgressFeed(options.onProgress, startedAt);
  try {
    feed.setPhase("planning");
    const outcome = await runOnce(options, halt, feed);
    const r = outcome.report;
    options.logger.info(
      {
        event: "run-finished",
        status: r?.run.status ?? "not-started",
        exit_code: outcome.exitCode,
        duration_ms: Date.now() - startedAt,
        ...(r ? { counts: r.counts, points: r.points } : {}),
        ...(outcome.stoppedBy ? { stopped_by: outcome.stoppedBy } : {}),
        ...(outcome.message ? { note: outcome.message } : {}),
      },
      `run finished: exit ${outcome.exitCode}`,
    );
    return outcome;
  } catch (error) {
    // A bug: the CLI exits 70; the log still says how the run ended.
    options.logger.error(
      { event: "run-finished", status: "crashed", exit_code: 70, duration_ms: Date.now() - startedAt },
      `run finished by an internal error: ${errorInfo(error).message}`,
    );
    throw error;
  } finally {
    halt.dispose();
  }
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

async function runOnce(options: RunOptions, halt: Halt, feed: ProgressFeed): Promise<RunOutcome> {
  const cwd = options.cwd ?? process.cwd();
  // The user's stop, the deadline and an unreachable service all end the run here.
  const signal = halt.signal;
  /** How a run that stopped early says so, when it stopped before submitting anything. */
  const stoppedEarly = (): RunOutcome => ({
    exitCode: halt.exitCode,
    ...(halt.by && halt.by !== "signal" ? { stoppedBy: halt.by } : {}),
    message:
      halt.by === "signal"
        ? "interrupted before anything was submitted"
        : `${halt.message ?? "stopped"}; nothing was submitted`,
  });

  // ---- the run's manifest and state, offline: nothing is built from the name before it is checked ----
  let located = options.located;
  if (!located) {
    const found = await locateRun({
      manifest: options.manifest,
      cwd,
      ...(options.statePath ? { state: options.statePath } : {}),
    });
    if (!found.ok) return { exitCode: 2, errors: found.errors, warnings: found.warnings };
    located = found.run;
  }
  const { statePath, manifest } = located;
  const only = options.only;
  if (only) {
    const unknown = only.filter((o) => !located.loaded.jobs.some((job) => matchesOnly(job, [o])));
    if (unknown.length > 0 || only.length === 0) {
      return {
        exitCode: 2,
        message: `--only: no job matches ${unknown.join(", ") || "an empty list"} (ids look like shot/s01, shot/s02/take-2, line/n01)`,
        warnings: located.loaded.warnings,
      };
    }
  }
  let sink: Sink;
  let stager: MaterialStager;
  try {
    ({ sink, stager } = outputs(options, manifest, cwd));
  } catch (error) {
    return { exitCode: 2, message: (error as Error).message };
  }
  try {
    await mkdir(dirname(statePath), { recursive: true });
  } catch (error) {
    return {
      exitCode: 2,
      message: `cannot create the state folder ${dirname(statePath)}: ${errorInfo(error).message}`,
    };
  }

  // ---- the lock: a second run on the same state stops before it talks to anyone ----
  // Losing it mid-run (this process stalled past the lease, or --break-lock elsewhere) stops the run
  // at once: another process now writes this state.
  const lockLost = new AbortController();
  let lock: Lock;
  try {
    lock = await acquireLock(`${statePath}.lock`, {
      breakLock: options.breakLock === true,
      ...options.lease,
      onLost: (error) => lockLost.abort(error),
      // A killed container's lock cannot be judged by its pid: it is watched for the rest of its lease.
      wait: {
        signal,
        onWait: (message, waitMs) => options.logger.warn({ event: "lock-wait", wait_ms: waitMs }, message),
      },
      onRefreshError: (error) =>
        options.logger.warn(
          { event: "lock-refresh-failed", error: errorInfo(error) },
          "could not refresh the run's lock",
        ),
    });
  } catch (error) {
    if (error instanceof LockHeldError) return { exitCode: 5, message: error.message, statePath };
    if (signal.aborted) return stoppedEarly();
    throw error;
  }
  if (lock.replaced) options.logger.warn({ event: "lock-replaced" }, lock.replaced.message);
  const lockedAt = new Date();
  /** Ends the run before its state was opened: the lock is all there is to give back. */
  const early = async (outcome: RunOutcome): Promise<RunOutcome> => {
    await lock.release();
    return outcome;
  };

  let planned: PlanResult;
  try {
    planned = await plan({
      manifest: options.manifest,
      cwd,
      clients: options.clients,
      signal,
      loaded: located.loaded,
    });
  } catch (error) {
    // Ctrl-C while the balance or the voices are read: nothing was submitted, nothing to save.
    if (signal.aborted) return early(stoppedEarly());
    if (isUnavailable(error)) {
      halt.unreachable(error);
      return early({ ...stoppedEarly(), warnings: located.loaded.warnings });
    }
    // A missing, wrong or revoked key is a usage error: nothing was submitted.
    if (error instanceof AuthenticationError || error instanceof PermissionError) {
      return early({ exitCode: 2, message: error.message });
    }
    await lock.release();
    throw error;
  }
  if (planned.errors.length > 0) {
    return early({ exitCode: 2, errors: planned.errors, warnings: planned.warnings });
  }
  // Before anything is paid for: a result that cannot be stored would be paid for and lost.
  try {
    await sink.probe();
  } catch (error) {
    if (!(error instanceof OutputError)) {
      await lock.release();
      throw error;
    }
    return early({
      exitCode: error.unreachable ? 6 : 2,
      message: `${error.message}; nothing was submitted`,
      warnings: planned.warnings,
    });
  }

  let journal: Journal<RunState, RunRecord> | undefined;
  const gate = options.gate ?? new ServiceGate(options.limits ?? DEFAULT_LIMITS);
  const stopController = new AbortController();
  // Every request of every job listens to this signal: thousands of listeners are expected.
  setMaxListeners(0, stopController.signal);
  const onAbort = () => stopController.abort(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  // A stop that came during the plan or the probe, before this listener: passed on now.
  if (signal.aborted) onAbort();
  const onLockLost = () => {
    options.logger.error(
      { event: "lock-lost", error: errorInfo(lockLost.signal.reason) },
      "the run's lock was lost; stopping",
    );
    // Not one more line into a state another process now writes.
    journal?.freeze();
    stopController.abort(lockLost.signal.reason);
  };
  /** A journal write failed (a full disk): going on would lose track of what was paid for. */
  let broken: Error | undefined;
  const fail = (error: unknown): void => {
    if (broken) return;
    broken = error as Error;
    options.logger.error(
      { event: "state-write-failed", error: errorInfo(error) },
      "the run's state could not be written; stopping",
    );
    stopController.abort(error);
  };
  lockLost.signal.addEventListener("abort", onLockLost, { once: true });
  const track = { ...DEFAULT_TRACK_OPTIONS, ...options.track };
  // With callbacks, a video task is looked at only now and then: the callbacks bring the news.
  const videoTrack = options.callback ? { ...track, minIntervalMs: track.minIntervalMs * 10 } : track;
  let log = options.logger;
  /**
   * A call failed after every retry of the HTTP layer. No connection at all for that long: the
   * service (or the store, or a result host) is gone, and the run stops (exit 6). A 5xx or a 429 is
   * a service that answers: one bad task or one long Retry-After is not a reason to stop the others,
   * so only a service that has served nothing for REFUSING_MS stops the run.
   */
  const unavailable = (error: unknown): void => {
    if (error instanceof ConnectionError) return halt.unreachable(error);
    if (isUnavailable(error) && Date.now() - options.clients.http.lastServedAt > REFUSING_MS)
      halt.unreachable(error);
  };
  const trouble = (taskId: string, error: unknown, failures: number) => {
    log.warn(
      { event: "poll-failed", task_id: taskId, failures, error: errorInfo(error) },
      "a look at a task failed; trying again",
    );
    // A list that fails falls back to looks at single tasks, which decide.
    if (taskId !== "(list)") unavailable(error);
  };
  const video = new VideoPoller(options.clients.video, videoTrack, stopController.signal, trouble);
  const listener = options.callback
    ? new CallbackListener({ ...options.callback.listen, onTask: (task) => video.offer(task) })
    : undefined;
  const speech = new SpeechPoller(options.clients.speech, track, stopController.signal, trouble);
  try {
    if (listener) {
      let port: number;
      try {
        ({ port } = await listener.start());
      } catch (error) {
        const at = options.callback?.listen;
        const why = (error as NodeJS.ErrnoException).code ?? errorInfo(error).message;
        return {
          exitCode: 2,
          message: `the callback listener cannot listen on ${at?.host}:${at?.port} (${why}): pass --callback-listen [HOST:]PORT with a free port; nothing was submitted`,
          statePath,
        };
      }
      log.info({ event: "callbacks", url: options.callback?.url, port }, "listening for video callbacks");
    }
    journal = await Journal.open<RunState, RunRecord>({
      path: statePath,
      initial: initialState,
      apply: applyRecord,
      // Records quote the services (error messages): whatever they echo, no secret reaches the disk.
      sanitize: redactDeep,
    });
    const j = journal;
    if (lockLost.signal.aborted) j.freeze();
    const state = () => j.state;
    const ownership = checkOwner(state(), located);
    if (ownership.refuse) return { exitCode: 2, message: ownership.refuse, statePath };
    if (ownership.warning) log.warn({ event: "state-adopted" }, ownership.warning);

    // ---- admission: decided on a copy; the journal is written only once the run is admitted ----
    const opening: RunRecord[] = [
      {
        t: "run",
        id: randomUUID(),
        name: manifest.name,
        manifest: manifest.display,
        started_at: new Date().toISOString(),
        manifest_path: located.realPath,
      },
      ...planned.jobs.map(
        (job): RunRecord => ({
          t: "job",
          id: job.id,
          kind: job.kind,
          fingerprint: job.fingerprint,
          estimate: job.points ?? 0,
        }),
      ),
    ];
    const selected = (job: Job) => !only || matchesOnly(job, only);
    // What the store holds, asked for every job at once (a HEAD each on S3), 32 at a time.
    const looking = pLimit(32);
    let stored: Awaited<ReturnType<Sink["stat"]>>[];
    try {
      stored = await Promise.all(
        planned.jobs.map((job) => (selected(job) ? looking(() => sink.stat(outputKey(job))) : undefined)),
      );
    } catch (error) {
      // The probe passed a moment ago, so this is the store's state (or its permissions for reads).
      const status = (error as { cause?: { $metadata?: { httpStatusCode?: number } } }).cause?.$metadata
        ?.httpStatusCode;
      const setting = status === 403 || status === 404 || status === 400 || status === 301;
      const message = `${errorInfo(error).message}; nothing was submitted`;
      if (setting) return { exitCode: 2, message, statePath };
      halt.unreachable(error);
      return {
        exitCode: 6,
        stoppedBy: "unreachable",
        message: `${message}: run again once it is reachable`,
        statePath,
      };
    }
    const available = planned.balance?.available_points ?? 0;
    const maxPoints = options.maxPoints ?? manifest.maxPoints;
    const admission = admit({
      state: state(),
      opening,
      ...(options.fresh ? { fresh: { epoch: randomUUID() } } : {}),
      jobs: planned.jobs,
      stored,
      selected,
      retryFailed: options.retryFailed === true,
      maxPoints,
      available,
      uri: (key) => sink.uri(key),
    });
    if (admission.refused) {
      return {
        exitCode: 3,
        budget: admission.refused,
        warnings: planned.warnings,
        statePath,
        message: "the budget or the balance is too small: nothing was submitted",
      };
    }
    if (admission.records.some((r) => r.t === "fresh")) await keepCopy(statePath);
    for (const r of admission.records) void j.append(r).catch(fail);
    await j.append({ t: "balance", available }, { durable: true });
    // Every event of this run carries the run's name and id, so interleaved runs stay apart.
    log = options.logger.child({ run: manifest.name, run_id: state().run?.id });
    for (const { job, uri, skipped } of admission.found) {
      log.info(
        { job: job.id, event: skipped ? "skipped" : "stored", uri },
        skipped ? "unchanged: the store holds this result" : "the store holds the result this run paid for",
      );
    }
    const work = admission.work;
    const ledger = new LocalLedger(admission.cap, admission.openReserved);
    log.info(
      {
        event: "run-started",
        manifest: manifest.display,
        name: manifest.name,
        jobs: planned.jobs.length,
        todo: work.length,
        skipped: planned.jobs.length - work.length,
        ...(options.fresh ? { fresh: true } : {}),
        ...(options.retryFailed ? { retry_failed: true } : {}),
        ...(only ? { only } : {}),
      },
      `run started: ${work.length} of ${planned.jobs.length} jobs to do`,
    );
    const estimate = work.reduce((sum, job) => sum + (job.points ?? 0), 0);
    log.info(
      {
        event: "admitted",
        estimate,
        ...(maxPoints !== undefined ? { cap: maxPoints } : {}),
        balance: available,
        ...(admission.openReserved > 0 ? { reserved_by_open_tasks: admission.openReserved } : {}),
      },
      `admitted: ${estimate} points estimated, balance ${available}${maxPoints !== undefined ? `, cap ${maxPoints}` : ""}`,
    );
    let stoppedBy: StoppedBy | undefined;

    // ---- pre-flight: skills, voices, what dead writers left in the store ----
    feed.setPhase("pre-flight");
    const skillIds = await syncSkills(options.clients, j, planned.jobs, manifest.skills, signal);
    const voiceRefs = await prepareVoices(options.clients, j, planned.jobs, signal, log);
    if (sink.cleanup) {
      // Only uploads begun before this process held the lock: no live writer of this run owns them.
      const cleaned = await sink.cleanup(lockedAt).catch((error: unknown) => {
        log.warn(
          { event: "cleanup-failed", error: errorInfo(error) },
          "could not clean up abandoned uploads",
        );
        return { aborted: 0 };
      });
      if (cleaned.aborted > 0)
        log.info(
          { event: "uploads-aborted", count: cleaned.aborted },
          "aborted uploads left by a stopped run",
        );
    }

    // Test-only (documented in the README): a bug inside a run that holds its lock and its journal,
    // to check exit 70 and that the state is saved and the lock let go.
    if (options.env?.CLAPPER_TEST_FAULT === "internal") {
      throw new Error("injected internal fault (CLAPPER_TEST_FAULT=internal)");
    }

    // ---- run the jobs ----
    const workIds = new Set(work.map((job) => job.id));
    const statusOf = (id: string) => state().jobs[id]?.status ?? "pending";
    feed.start(
      {
        total: planned.jobs.length,
        reused: planned.jobs.filter((job) => !workIds.has(job.id) && statusOf(job.id) === "stored").length,
        ...(maxPoints !== undefined ? { cap: maxPoints } : {}),
        ledger: () => ledger.snapshot(),
        inFlight: (kind) => (kind === "video" ? video : speech).inFlight(),
        durations: (kind) => (kind === "video" ? video : speech).durations,
        inFlightLimit: { video: gate.video.tasks.concurrency, speech: gate.speech.tasks.concurrency },
      },
      planned.jobs.map((job) => ({ id: job.id, kind: job.kind, status: statusOf(job.id) })),
    );
    // --max-failures counts the jobs of this run that ended, and those of them that failed.
    let ended = 0;
    let failedNow = 0;
    /** `job` just changed: the display hears of it, and too many failures stop new submissions. */
    const progress = (job?: Job): void => {
      if (!job) {
        feed.flush();
        return;
      }
      const now = statusOf(job.id);
      const was = feed.job(job.id, job.kind, now);
      if (was === now || !workIds.has(job.id)) return;
      if (now === "stored" || now === "failed" || now === "cancelled") ended += 1;
      if (now === "failed") failedNow += 1;
      const why = tooManyFailures(options.maxFailures, failedNow, ended);
      if (why && !runner.stopped) {
        stoppedBy = "max-failures";
        runner.stopSubmitting(`${why}: new submissions stopped; the tasks in flight were let finish`, true);
        log.warn({ event: "max-failures", failed: failedNow, ended }, why);
      }
    };
    feed.setPhase("submitting");

    const price = planned.speechPrice.value;
    const runner = new JobRunner({
      clients: options.clients,
      sink,
      stager,
      journal: j,
      ledger,
      pricer: new SpeechPricer(
        (s) => options.clients.speech.pricing(s ? { signal: s } : {}),
        price !== null ? { perTen: price, version: 0 } : undefined,
      ),
      exactSpeechPricing: maxPoints !== undefined,
      video,
      speech,
      ...(options.callback && listener
        ? { callback: { url: options.callback.url, token: listener.token } }
        : {}),
      name: manifest.name,
      maxAttempts: options.maxAttempts ?? 2,
      ...(options.maxResultBytes !== undefined ? { maxResultBytes: options.maxResultBytes } : {}),
      skillIds,
      voiceRefs,
      signal: stopController.signal,
      unavailable,
      unreachable: (error) => halt.unreachable(error),
      log,
      progress,
      fail,
    });

    // Tasks no job of the manifest follows any more: edited-away versions, removed rows.
    const planIds = new Set(planned.jobs.map((job) => job.id));
    const orphans = Object.values(state().jobs).filter(
      (st) =>
        (st.previous ?? []).some((a) => a.spent === undefined) ||
        (!planIds.has(st.id) && st.attempts.some((a) => a.spent === undefined)),
    );
    // Video and speech each run under their own in-flight limit; all jobs start together.
    let running = work.length + orphans.length;
    const done = () => {
      running -= 1;
    };
    const unexpected = (id: string) => (error: unknown) => {
      if (broken) return;
      log.error({ job: id, event: "job-error", error: errorInfo(error) }, "unexpected error");
    };
    const all = Promise.all([
      ...work.map((job) =>
        (job.kind === "video" ? gate.video : gate.speech)
          .tasks(() => runner.run(job))
          .catch(unexpected(job.id))
          .finally(done),
      ),
      ...orphans.map((st) =>
        (st.kind === "video" ? gate.video : gate.speech)
          .tasks(() => runner.settleOrphans(st, !planIds.has(st.id)))
          .catch(unexpected(st.id))
          .finally(done),
      ),
    ]);
    // Interrupted: requests in flight are aborted at once, but a request still queued in a throttled
    // limiter only fails when its turn comes. It has sent nothing and every job checks the abort before
    // it writes, so after a short grace the run saves its report and leaves instead of waiting.
    let grace: (() => void) | undefined;
    const interruptedThenGrace = new Promise<void>((resolve) => {
      grace = () => setTimeout(resolve, ABORT_GRACE_MS).unref();
      if (signal.aborted) grace();
      else signal.addEventListener("abort", grace, { once: true });
    });
    await Promise.race([all, interruptedThenGrace]);
    if (grace) signal.removeEventListener("abort", grace);
    if (running > 0) {
      log.warn({ event: "interrupted", waiting: running }, "leaving jobs still queued for a request");
    }

    if (broken) {
      return {
        exitCode: 1,
        message: `the run's state could not be written (${errorInfo(broken).message}); it stopped: run again once the disk is fixed (creates in flight are sent again with their keys)`,
        statePath,
      };
    }
    // Another process holds the state now: nothing more is written to it, or to the reports.
    if (lockLost.signal.aborted) {
      return {
        exitCode: 5,
        message: `${(lockLost.signal.reason as Error).message}; this run stopped`,
        statePath,
      };
    }

    // ---- report ----
    feed.setPhase("reporting");
    const interrupted = signal.aborted;
    if (halt.by) stoppedBy = halt.by;
    else if (runner.stopped && !stoppedBy) stoppedBy = "budget";
    const stopMessage = halt.by && halt.by !== "signal" ? halt.message : runner.stopped;
    const notes = [
      halt.by && halt.by !== "signal" ? halt.message : undefined,
      runner.stopped,
      runner.collectionPending,
      runner.unfinished,
    ].filter((n): n is string => n !== undefined);
    // With --only, the run is about the jobs it was asked to do; the others are listed as they stand.
    const chosen = only ? planned.jobs.filter(selected).map((job) => job.id) : undefined;
    const report = buildReport({
      state: state(),
      jobs: planned.jobs,
      manifest: manifest.display,
      name: manifest.name,
      interrupted,
      ...(chosen ? { selected: chosen } : {}),
      balanceAfter: interrupted
        ? undefined
        : (await options.clients.video.pointsSummary().catch(() => undefined))?.available_points,
      ...(notes.length > 0 ? { note: notes.join("; ") } : {}),
      ...(stoppedBy ? { stoppedBy } : {}),
      ...(stopMessage ? { stopMessage } : {}),
    });
    let reportUris: string[] | undefined;
    try {
      reportUris = await writeReports(sink, report, options.env ?? process.env);
    } catch (error) {
      // The outcome still reaches the caller and the journal; the reports can be written again.
      notes.push(
        `the reports could not be written to ${sink.uri("reports")}: ${errorInfo(error).message}; the state is saved: run again (or clapper report) to write them`,
      );
      log.error({ event: "report-failed", error: errorInfo(error) }, "the reports could not be written");
    }
    if (sink.cleanup && !interrupted) {
      // Uploads this run could not abort when they failed (the store was unreachable then).
      await sink.cleanup(new Date()).catch(() => undefined);
    }
    if (!interrupted)
      await j.append(
        {
          t: "finish",
          finished_at: report.run.finished_at ?? new Date().toISOString(),
          ...(report.points.balance_after !== null ? { balance_after: report.points.balance_after } : {}),
        },
        { durable: true },
      );
    const exitCode = interrupted ? halt.exitCode : report.run.status === "succeeded" && reportUris ? 0 : 1;
    return {
      exitCode,
      report,
      ...(stoppedBy ? { stoppedBy } : {}),
      ...(reportUris ? { reportUris } : {}),
      statePath,
      warnings: planned.warnings,
      pollRequests: video.requests + speech.requests,
      ...(notes.length > 0 ? { message: notes.join("; ") } : {}),
    };
  } catch (error) {
    // Interrupted during the pre-flight (skills, voices): nothing was submitted; the journal holds what was done.
    if (signal.aborted) return { ...stoppedEarly(), message: halt.message ?? "interrupted", statePath };
    if (isUnavailable(error)) {
      halt.unreachable(error);
      return { ...stoppedEarly(), message: halt.message ?? "unreachable", statePath };
    }
    throw error;
  } finally {
    signal.removeEventListener("abort", onAbort);
    lockLost.signal.removeEventListener("abort", onLockLost);
    stopController.abort();
    await listener?.close();
    if (!options.gate) await gate.stop();
    await journal?.close();
    await lock.release();
  }
}

/**
 * Before `--fresh` changes the state, a copy of it as it was, timestamped: every earlier state is
 * kept (the journal also keeps every attempt, so nothing a task cost is forgotten).
 */
async function keepCopy(statePath: string): Promise<void> {
  const info = await stat(statePath).catch(() => undefined);
  if (!info || info.size === 0) return;
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  await copyFile(statePath, `${statePath}.before-fresh-${stamp}`);
}

/** The run's output (a folder or S3) and where its local materials are staged. */
export function outputs(
  options: Pick<RunOptions, "output" | "staging" | "s3">,
  manifest: { dir: string; name: string; output?: string },
  cwd: string,
) {
  const target = options.output ?? manifest.output ?? "./output";
  const fromFlag = options.output !== undefined;
  const staging = options.staging ?? (isS3(target) ? `${target.replace(/\/+$/, "")}/_staging` : undefined);
  const client = isS3(target) || staging ? createS3Client(options.s3) : undefined;
  const sink: Sink =
    isS3(target) && client
      ? new S3Sink(client, withName(parseS3Uri(target), manifest.name))
      : new LocalSink(join(resolve(fromFlag ? cwd : manifest.dir, target), manifest.name));
  const stager: MaterialStager =
    staging && client ? new S3Stager(client, new S3Sink(client, parseS3Uri(staging))) : new InlineStager();
  return { sink, stager };
}

function isS3(value: string | undefined): value is string {
  return value !== undefined && /^s3:\/\//i.test(value);
}

function withName(location: S3Location, name: string): S3Location {
  return { bucket: location.bucket, prefix: location.prefix ? `${location.prefix}/${name}` : name };
}

/** Manifest skills become custom skills by name before the run (created or updated once). */
async function syncSkills(
  clients: Clients,
  j: Journal<RunState, RunRecord>,
  jobs: readonly Job[],
  skills: ReadonlyArray<{ name: string; file?: string; sha256?: string }>,
  signal: AbortSignal,
): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  const used = new Set(jobs.flatMap((job) => (job.kind === "video" && job.skill ? [job.skill.name] : [])));
  const wanted = skills.filter((s) => s.file && used.has(s.name));
  let existing: Array<{ id: string; name: string; official: boolean; content: string }> | undefined;
  for (const skill of wanted) {
    const known = j.state.skills[skill.name];
    if (known && known.sha256 === skill.sha256) {
      ids.set(skill.name, known.id);
      continue;
    }
    const text = await readFile(skill.file as string, "utf8");
    const content = text.replace(/^---\r?\n[\s\S]*?\r?\n---\r?\n?/, "");
    if (!existing) {
      existing = [];
      for await (const s of clients.video.listSkills({}, { signal })) existing.push(s);
    }
    const same = existing.find((s) => !s.official && s.name === skill.name);
    const result = same
      ? await clients.video.updateSkill(same.id, { name: skill.name, content }, { signal })
      : await clients.video.createSkill({ name: skill.name, content }, { signal });
    await j.append(
      { t: "skill", name: skill.name, id: result.id, sha256: skill.sha256 as string },
      { durable: true },
    );
    ids.set(skill.name, result.id);
  }
  return ids;
}

/** Reference audio files become assets (or custom voices when saved), once per content hash. */
async function prepareVoices(
  clients: Clients,
  j: Journal<RunState, RunRecord>,
  jobs: readonly Job[],
  signal: AbortSignal,
  log: Logger,
): Promise<Map<string, VoiceRef>> {
  const { uploadReferenceAudio } = await import("../api/index.js");
  const refs = new Map<string, VoiceRef>();
  for (const job of jobs) {
    if (job.kind !== "speech" || job.voice.source !== "file") continue;
    const hash = voiceHash(job);
    if (refs.has(hash)) continue;
    const known = j.state.voices[hash];
    if (job.voice.saveAs) {
      if (known?.voice_id) {
        refs.set(hash, { source: "custom", voice_id: known.voice_id });
        continue;
      }
      const asset = await uploadReferenceAudio(clients.http, clients.speech, job.voice.path, { signal });
      const key = `clapper-voice-${createHash("sha256").update(hash).digest("hex").slice(0, 48)}`;
      const voice = await clients.speech.createVoice(
        { asset_id: asset.asset_id, name: job.voice.saveAs },
        { idempotencyKey: key, signal },
      );
      await j.append(
        { t: "voice", hash, asset_id: asset.asset_id, voice_id: voice.voice_id },
        { durable: true },
      );
      log.info(
        { event: "voice-created", voice_id: voice.voice_id, name: job.voice.saveAs },
        "custom voice created",
      );
      refs.set(hash, { source: "custom", voice_id: voice.voice_id });
      continue;
    }
    // Unused assets expire after 7 days: one uploaded by an earlier run is uploaded again.
    const asset = await uploadReferenceAudio(clients.http, clients.speech, job.voice.path, { signal });
    await j.append({ t: "voice", hash, asset_id: asset.asset_id }, { durable: true });
    refs.set(hash, { source: "asset", asset_id: asset.asset_id });
  }
  return refs;
}
