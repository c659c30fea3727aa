// `run`: the whole pipeline over a manifest. Plan, pre-flight (balance, budget, skills, voices),
// then every job under its service's limits: reserve in the run's ledger, write the intent,
// create, follow, collect, settle. Every state change goes through the journal first, so a
// process killed at any instant resumes without paying twice.
import { createHash, randomUUID } from "node:crypto";
import { setMaxListeners } from "node:events";
import { mkdir, readFile, rename } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import pLimit from "p-limit";
import type { Logger } from "pino";
import {
  AuthenticationError,
  ClapperApiError,
  type Clients,
  InsufficientPointsError,
  NotFoundError,
  PermissionError,
  RateLimitError,
  ValidationError,
} from "../api/index.js";
import type { SpeechTask } from "../api/speech.js";
import { basePoints, UPSCALE_TIERS, type VideoTask } from "../api/video.js";
import { CallbackListener } from "../engine/callbacks.js";
import { Journal } from "../engine/journal.js";
import { LocalLedger } from "../engine/ledger.js";
import { ServiceGate, type ServiceLimits } from "../engine/limiter.js";
import { acquireLock, type Lock, LockHeldError } from "../engine/lock.js";
import { InlineStager, MaterialError, type MaterialStager, S3Stager } from "../engine/staging.js";
import {
  applyRecord,
  initialState,
  type JobState,
  openAttempt,
  type RunRecord,
  type RunState,
} from "../engine/state.js";
import { DEFAULT_TRACK_OPTIONS, SpeechPoller, type TrackOptions, VideoPoller } from "../engine/tracker.js";
import { headCapture, MediaCheckError, verifyHead, verifyMedia } from "../engine/verify.js";
import type { Job, Problem, SpeechJob, VideoJob } from "../manifest/index.js";
import { peekManifest } from "../manifest/name.js";
import { LocalSink } from "../sinks/local.js";
import { createS3Client, parseS3Uri, type S3ClientOptions, type S3Location, S3Sink } from "../sinks/s3.js";
import type { Sink } from "../sinks/sink.js";
import { type PlanResult, plan } from "./plan.js";
import { buildReport, type Report, writeReports } from "./report.js";

export interface RunOptions {
  manifest: string;
  cwd?: string;
  clients: Clients;
  /** Output folder or s3://bucket/prefix overriding the manifest's `output`; a folder is relative to cwd. */
  output?: string;
  /** Where local materials are staged for the services to fetch (s3://...); default: beside an S3 output. */
  staging?: string;
  /** S3-compatible endpoint (`--s3-endpoint`); otherwise the AWS SDK's configuration. */
  s3?: S3ClientOptions;
  /** Journal file; default `.clapper/<name>/state.jsonl` beside the manifest. */
  statePath?: string;
  maxPoints?: number;
  /** Job ids (or row ids, or id prefixes like `shot/s02`) to work on; the rest are left as they are. */
  only?: string[];
  retryFailed?: boolean;
  fresh?: boolean;
  /** Attempts per job in one run, the first included. */
  maxAttempts?: number;
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
}

export interface Progress {
  counts: Record<
    "pending" | "submitting" | "running" | "collecting" | "stored" | "failed" | "cancelled",
    number
  >;
  total: number;
  reserved: number;
  spent: number;
  etaSeconds?: number;
}

export interface BudgetRow {
  what: string;
  points: number;
}

export interface RunOutcome {
  exitCode: 0 | 1 | 2 | 3 | 4 | 5;
  message?: string;
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

const MAX_CREATE_BODY = 72 * 1024 * 1024;
/** After an interrupt, how long jobs get to reach a clean stop before the run saves and leaves. */
const ABORT_GRACE_MS = 1500;

/** Deterministic per (run, epoch, job, fingerprint, attempt): a repeated create returns the first task. */
export function idempotencyKey(
  name: string,
  epoch: number,
  jobId: string,
  fingerprint: string,
  attempt: number,
): string {
  const digest = createHash("sha256")
    .update(`${name}\n${epoch}\n${jobId}\n${fingerprint}\n${attempt}`)
    .digest("hex");
  return `clapper-${digest.slice(0, 48)}`;
}

/** Where a job's result goes inside the run's output. */
export function outputKey(job: Job): string {
  if (job.kind === "video")
    return `shots/${job.rowId}${job.take !== undefined ? `-take-${job.take}` : ""}.mp4`;
  return `lines/${job.rowId}.wav`;
}

function matchesOnly(job: Job, only: readonly string[]): boolean {
  return only.some(
    (o) =>
      job.id === o ||
      job.rowId === o ||
      job.id.startsWith(`${o}/`) ||
      `${job.kind === "video" ? "shot" : "line"}/${job.rowId}` === o,
  );
}

function errorInfo(error: unknown): { code: string; message: string } {
  if (error instanceof ClapperApiError)
    return { code: String(error.code ?? error.name), message: error.message };
  return { code: (error as Error).name ?? "Error", message: (error as Error).message ?? String(error) };
}

export async function run(options: RunOptions): Promise<RunOutcome> {
  const cwd = options.cwd ?? process.cwd();
  let log = options.logger;
  const signal = options.signal ?? new AbortController().signal;

  // The lock comes first: a second run on the same state must stop before it talks to anyone.
  const peek = await peekManifest(options.manifest, cwd);
  const statePath = options.statePath
    ? resolve(cwd, options.statePath)
    : defaultStatePath(peek.dir, peek.name);
  await mkdir(dirname(statePath), { recursive: true });
  let lock: Lock;
  try {
    lock = await acquireLock(`${statePath}.lock`);
  } catch (error) {
    if (error instanceof LockHeldError) return { exitCode: 5, message: error.message, statePath };
    throw error;
  }
  /** Ends the run before its state was opened: the lock is all there is to give back. */
  const early = async (outcome: RunOutcome): Promise<RunOutcome> => {
    await lock.release();
    return outcome;
  };

  let planned: PlanResult;
  try {
    planned = await plan({ manifest: options.manifest, cwd, clients: options.clients, signal });
  } catch (error) {
    // Ctrl-C while the balance or the voices are read: nothing was submitted, nothing to save.
    if (signal.aborted) return early({ exitCode: 4, message: "interrupted before anything was submitted" });
    // A missing, wrong or revoked key is a usage error: nothing was submitted.
    if (error instanceof AuthenticationError || error instanceof PermissionError) {
      return early({ exitCode: 2, message: error.message });
    }
    await lock.release();
    throw error;
  }
  if (planned.errors.length > 0 || !planned.manifest) {
    return early({ exitCode: 2, errors: planned.errors, warnings: planned.warnings });
  }
  const manifest = planned.manifest;
  const only = options.only;
  if (only) {
    const unknown = only.filter((o) => !planned.jobs.some((job) => matchesOnly(job, [o])));
    if (unknown.length > 0 || only.length === 0) {
      return early({
        exitCode: 2,
        message: `--only: no job matches ${unknown.join(", ") || "an empty list"} (ids look like shot/s01, shot/s02/take-2, line/n01)`,
        warnings: planned.warnings,
      });
    }
  }
  let sink: Sink;
  let stager: MaterialStager;
  try {
    ({ sink, stager } = outputs(options, manifest, cwd));
  } catch (error) {
    return early({ exitCode: 2, message: (error as Error).message });
  }
  const journalOptions = { path: statePath, initial: initialState, apply: applyRecord };
  let journal: Journal<RunState, RunRecord> | undefined;
  const gate = options.gate ?? new ServiceGate(options.limits ?? DEFAULT_LIMITS);
  const stopController = new AbortController();
  // Every request of every job listens to this signal: thousands of listeners are expected.
  setMaxListeners(0, stopController.signal);
  const onAbort = () => stopController.abort(signal.reason);
  signal.addEventListener("abort", onAbort, { once: true });
  const track = { ...DEFAULT_TRACK_OPTIONS, ...options.track };
  // With callbacks, a video task is looked at only now and then: the callbacks bring the news.
  const videoTrack = options.callback ? { ...track, minIntervalMs: track.minIntervalMs * 10 } : track;
  const video = new VideoPoller(options.clients.video, videoTrack, stopController.signal);
  const listener = options.callback
    ? new CallbackListener({ ...options.callback.listen, onTask: (task) => video.offer(task) })
    : undefined;
  const speech = new SpeechPoller(options.clients.speech, track, stopController.signal);
  try {
    if (listener) {
      const { port } = await listener.start();
      log.info({ event: "callbacks", url: options.callback?.url, port }, "listening for video callbacks");
    }
    journal = await Journal.open<RunState, RunRecord>(journalOptions);
    if (options.fresh) {
      const epoch = journal.state.epoch + 1;
      await journal.close();
      await rename(statePath, `${statePath}.before-fresh`).catch(() => undefined);
      journal = await Journal.open<RunState, RunRecord>(journalOptions);
      await journal.append(
        {
          t: "run",
          id: randomUUID(),
          name: manifest.name,
          manifest: manifest.display,
          started_at: new Date().toISOString(),
          epoch,
        },
        { durable: true },
      );
    }
    const j = journal;
    const state = () => j.state;
    await j.append({
      t: "run",
      id: randomUUID(),
      name: manifest.name,
      manifest: manifest.display,
      started_at: new Date().toISOString(),
    });
    // Every event of this run carries the run's name and id, so interleaved runs stay apart.
    log = options.logger.child({ run: manifest.name, run_id: state().run?.id });
    for (const job of planned.jobs) {
      await j.append({
        t: "job",
        id: job.id,
        kind: job.kind,
        fingerprint: job.fingerprint,
        estimate: job.points ?? 0,
      });
    }

    // ---- what is there to do ----
    const maxAttempts = options.maxAttempts ?? 2;
    const work: Job[] = [];
    let newCost = 0;
    // What the store holds, asked for every job at once (a HEAD each on S3), 32 at a time.
    const looking = pLimit(32);
    const stored = await Promise.all(
      planned.jobs.map((job) =>
        only && !matchesOnly(job, only) ? undefined : looking(() => sink.stat(outputKey(job))),
      ),
    );
    for (const [index, job] of planned.jobs.entries()) {
      if (only && !matchesOnly(job, only)) continue;
      const st = state().jobs[job.id] as JobState;
      const found = stored[index];
      // The store is the truth where it can say what it holds (S3 metadata): an object made for
      // this very request is reused even when this machine's state never saw it.
      const meta = found?.metadata;
      if (
        found &&
        meta?.fingerprint === job.fingerprint &&
        meta.sha256 &&
        st.output?.fingerprint !== job.fingerprint
      ) {
        await j.append({
          t: "stored",
          id: job.id,
          output: {
            uri: sink.uri(outputKey(job)),
            bytes: found.bytes,
            sha256: meta.sha256,
            fingerprint: job.fingerprint,
          },
        });
        await j.append({ t: "skip", id: job.id });
        log.info(
          { job: job.id, event: "skipped", uri: sink.uri(outputKey(job)) },
          "unchanged: the store holds this result",
        );
        continue;
      }
      if (st.status === "stored" && st.output?.fingerprint === job.fingerprint) {
        const same =
          found &&
          found.bytes === st.output.bytes &&
          (meta?.fingerprint ?? job.fingerprint) === job.fingerprint;
        if (same) {
          const earlier = !st.attempts.some((a) => a.campaign === state().campaign);
          if (earlier && !st.skipped) {
            await j.append({ t: "skip", id: job.id });
            log.info(
              { job: job.id, event: "skipped", uri: st.output.uri },
              "unchanged: reusing the stored result",
            );
          }
          continue;
        }
        log.info({ job: job.id, event: "output-missing" }, "stored output is gone; producing it again");
      }
      if ((st.status === "failed" || st.status === "cancelled") && !options.retryFailed) continue;
      work.push(job);
      // A job being collected was paid for already; an open attempt holds its reservation.
      if (!openAttempt(st) && st.status !== "collecting") newCost += job.points ?? 0;
    }

    // ---- budget ----
    // A resumed run is the same run: what an earlier process of it spent counts against the
    // budget, and the attempts it left open keep their reservations (the service holds them too).
    let spentBefore = 0;
    let openReserved = 0;
    for (const st of Object.values(state().jobs)) {
      for (const a of st.attempts) {
        if (a.spent === undefined) openReserved += a.reserved;
        else if (a.campaign === state().campaign) spentBefore += a.spent;
      }
    }
    const available = planned.balance?.available_points ?? 0;
    await j.append({ t: "balance", available });
    const maxPoints = options.maxPoints ?? manifest.maxPoints;
    const cap = Math.min(
      maxPoints === undefined ? Number.POSITIVE_INFINITY : Math.max(0, maxPoints - spentBefore),
      available + openReserved,
    );
    if (newCost + openReserved > cap) {
      const table: BudgetRow[] = [{ what: `estimated cost of ${work.length} job(s) to do`, points: newCost }];
      if (openReserved > 0) table.push({ what: "reserved by tasks still running", points: openReserved });
      table.push({ what: "available points (service balance)", points: available });
      if (maxPoints !== undefined) table.push({ what: "budget (max_points)", points: maxPoints });
      if (maxPoints !== undefined && spentBefore > 0)
        table.push({ what: "already spent in this run", points: spentBefore });
      table.push({ what: "short by", points: newCost + openReserved - cap });
      return {
        exitCode: 3,
        budget: table,
        warnings: planned.warnings,
        statePath,
        message: "the budget or the balance is too small: nothing was submitted",
      };
    }
    const ledger = new LocalLedger(cap, openReserved);

    // ---- pre-flight: skills and voices ----
    const skillIds = await syncSkills(options.clients, j, planned.jobs, manifest.skills, signal);
    const voiceRefs = await prepareVoices(options.clients, j, planned.jobs, signal, log);

    // ---- run the jobs ----
    let stopSubmitting: string | undefined;
    let collectionPending: string | undefined;
    const started = Date.now();
    // Counts kept up to date job by job: a progress report costs O(1), not a pass over every job.
    const counts: Progress["counts"] = {
      pending: 0,
      submitting: 0,
      running: 0,
      collecting: 0,
      stored: 0,
      failed: 0,
      cancelled: 0,
    };
    const counted = new Map<string, JobState["status"]>();
    for (const job of planned.jobs) {
      const status = state().jobs[job.id]?.status ?? "pending";
      counted.set(job.id, status);
      counts[status] += 1;
    }
    /** Reports progress; `job` is the one whose state just changed. */
    const progress = (job?: Job): void => {
      if (!options.onProgress) return;
      if (job) {
        const was = counted.get(job.id) ?? "pending";
        const now = state().jobs[job.id]?.status ?? "pending";
        if (was !== now) {
          counts[was] -= 1;
          counts[now] += 1;
          counted.set(job.id, now);
        }
      }
      const snap = ledger.snapshot();
      const done = counts.stored + counts.failed + counts.cancelled;
      const rate = done > 0 ? (Date.now() - started) / 1000 / done : undefined;
      const left = planned.jobs.length - done;
      options.onProgress({
        counts: { ...counts },
        total: planned.jobs.length,
        reserved: snap.reserved,
        spent: snap.spent,
        ...(rate !== undefined ? { etaSeconds: Math.round(rate * left) } : {}),
      });
    };
    progress();

    /**
     * A result that is broken (its headers say it is not what was asked) fails the job. Anything
     * else, the download or the sink failing, leaves the job paid for and waiting to be collected:
     * the next run fetches it again through its task, nothing is created twice.
     */
    const collectFailed = async (job: Job, error: unknown): Promise<void> => {
      if (error instanceof MediaCheckError) {
        await j.append({ t: "failed", id: job.id, error: errorInfo(error) });
        log.error({ job: job.id, event: "failed", error: errorInfo(error) }, "the result is not usable");
        return;
      }
      collectionPending ??= `some results could not be stored (${errorInfo(error).message}); run again to collect them`;
      log.warn(
        { job: job.id, event: "collect-failed", error: errorInfo(error) },
        "the result could not be stored; the next run collects it",
      );
    };

    const runJob = async (job: Job): Promise<void> => {
      const st = () => state().jobs[job.id] as JobState;
      for (;;) {
        if (stopController.signal.aborted) return;
        // Paid for and not yet stored (a kill during the download): fetch it again, never re-create.
        const paid = st().status === "collecting" ? st().attempts.at(-1) : undefined;
        if (paid?.taskId) {
          try {
            const call = { signal: stopController.signal };
            const task =
              job.kind === "video"
                ? await options.clients.video.getTask(paid.taskId, call)
                : await options.clients.speech.getTask(paid.taskId, call);
            await collect(job, task, paid.n);
          } catch (error) {
            if (stopController.signal.aborted) return;
            await collectFailed(job, error);
          }
          progress(job);
          return;
        }
        let attempt = openAttempt(st());
        if (!attempt) {
          if (stopSubmitting) return;
          const done = st().attempts.filter((a) => a.campaign === state().campaign).length;
          if (done >= maxAttempts) return;
          const estimate = job.points ?? 0;
          if (!(await ledger.tryReserve(estimate))) {
            stopSubmitting ??= "the run's points cap was reached";
            return;
          }
          const n = st().attempts.length + 1;
          const key = idempotencyKey(manifest.name, state().epoch, job.id, job.fingerprint, n);
          // Write-ahead: the intent is on disk before the request can reach the service.
          await j.append({ t: "intent", id: job.id, n, key, reserved: estimate }, { durable: true });
          log.info({ job: job.id, event: "submitting", attempt: n, reserved: estimate }, "creating the task");
          attempt = openAttempt(st());
          if (!attempt) return;
        }
        const n = attempt.n;
        if (!attempt.taskId) {
          if (stopSubmitting) return;
          let taskId: string;
          try {
            taskId = await createTask(
              options.clients,
              stager,
              options.callback && listener ? { url: options.callback.url, token: listener.token } : undefined,
              job,
              attempt.key,
              skillIds,
              voiceRefs,
              stopController.signal,
            );
          } catch (error) {
            if (stopController.signal.aborted) return;
            if (error instanceof InsufficientPointsError) {
              stopSubmitting ??= `the service refused for insufficient points: ${error.message}`;
              await settle(job, n, attempt.reserved, 0, errorInfo(error));
              log.warn({ job: job.id, event: "insufficient-points" }, error.message);
              return;
            }
            if (
              error instanceof ValidationError ||
              error instanceof MaterialError ||
              (error instanceof ClapperApiError &&
                error.status !== undefined &&
                error.status < 500 &&
                !(error instanceof RateLimitError))
            ) {
              await settle(job, n, attempt.reserved, 0, errorInfo(error));
              await j.append({ t: "failed", id: job.id, error: errorInfo(error) });
              log.error(
                { job: job.id, event: "refused", error: errorInfo(error) },
                "the service refused the create",
              );
              progress(job);
              return;
            }
            // Unknown outcome (connection lost, 5xx after retries): keep the intent; the next run re-sends it.
            log.warn(
              { job: job.id, event: "create-unknown", error: errorInfo(error) },
              "create outcome unknown; will resume",
            );
            return;
          }
          await j.append({ t: "created", id: job.id, n, task_id: taskId }, { durable: true });
          log.info({ job: job.id, event: "created", task_id: taskId, attempt: n }, "task created");
          progress(job);
        }
        const taskId = st().attempts.find((a) => a.n === n)?.taskId as string;

        let final: VideoTask | SpeechTask;
        try {
          final = await follow(job, taskId, n);
        } catch (error) {
          if (stopController.signal.aborted) return;
          if (error instanceof NotFoundError) {
            // Never recreated silently: it may have run and been paid for.
            await settle(job, n, attempt.reserved, 0, {
              code: "task_not_found",
              message: `task ${taskId} is not known to the service any more`,
            });
            await j.append({
              t: "failed",
              id: job.id,
              error: {
                code: "task_not_found",
                message: `task ${taskId} is not known to the service any more; run with --retry-failed to create a new one`,
              },
            });
            progress(job);
            return;
          }
          log.warn(
            { job: job.id, event: "track-error", error: errorInfo(error) },
            "could not follow the task; will resume",
          );
          return;
        }

        if (final.status === "succeeded") {
          const spent =
            job.kind === "video" ? videoCost(job, final as VideoTask) : (final as SpeechTask).point_cost;
          await settle(job, n, attempt.reserved, spent);
          try {
            await collect(job, final, n);
          } catch (error) {
            if (stopController.signal.aborted) return;
            await collectFailed(job, error);
          }
          progress(job);
          return;
        }
        if (final.status === "cancelled") {
          await settle(job, n, attempt.reserved, 0, {
            code: "cancelled",
            message: `task ${taskId} was cancelled`,
          });
          await j.append({ t: "cancelled", id: job.id });
          log.warn({ job: job.id, event: "cancelled", task_id: taskId }, "task cancelled");
          progress(job);
          return;
        }
        const error =
          job.kind === "video"
            ? {
                code: String((final as VideoTask).error?.code ?? "task_failed"),
                message: String((final as VideoTask).error?.message ?? "the task failed"),
              }
            : { code: "task_failed", message: (final as SpeechTask).error_message || "the task failed" };
        await settle(job, n, attempt.reserved, 0, error);
        log.warn({ job: job.id, event: "task-failed", attempt: n, error }, "task failed");
        const tried = st().attempts.filter((a) => a.campaign === state().campaign).length;
        if (tried >= maxAttempts || stopSubmitting) {
          await j.append({ t: "failed", id: job.id, error });
          log.error({ job: job.id, event: "failed", attempts: tried, error }, "job failed");
          progress(job);
          return;
        }
      }
    };

    const settle = async (
      job: Job,
      n: number,
      reserved: number,
      spent: number,
      error?: { code: string; message: string },
    ) => {
      await j.append({ t: "settled", id: job.id, n, spent, ...(error ? { error } : {}) }, { durable: true });
      await ledger.settle(reserved, spent);
    };

    const follow = (job: Job, taskId: string, n: number): Promise<VideoTask | SpeechTask> => {
      let last: string | undefined;
      const onUpdate = (task: VideoTask | SpeechTask) => {
        if (task.status !== last) {
          last = task.status;
          void j.append({ t: "task", id: job.id, n, status: task.status });
          log.info({ job: job.id, event: "status", task_id: taskId, status: task.status }, "task status");
          progress(job);
        }
      };
      const createdAt = Math.floor(Date.now() / 1000);
      return job.kind === "video"
        ? video.track(taskId, createdAt, onUpdate as (t: VideoTask) => void)
        : speech.track(taskId, createdAt, onUpdate as (t: SpeechTask) => void);
    };

    const collect = async (job: Job, task: VideoTask | SpeechTask, n: number): Promise<void> => {
      const key = outputKey(job);
      const taskId = job.kind === "video" ? (task as VideoTask).id : (task as SpeechTask).task_id;
      let url = job.kind === "video" ? (task as VideoTask).content?.url : (task as SpeechTask).output_url;
      for (let tries = 1; ; tries++) {
        if (!url) url = await freshUrl(options.clients, job, taskId);
        try {
          const res = await options.clients.http.download(url, {
            signal: stopController.signal,
            what: `download ${job.id}`,
          });
          // The headers are checked from the first bytes as they stream by: no second read.
          const capture = headCapture();
          res.body.on("error", (error) => capture.stream.destroy(error));
          const expected = job.kind === "video" ? job.duration : undefined;
          const written = await sink.write(key, res.body.pipe(capture.stream), {
            ...(res.contentLength !== undefined ? { expectedBytes: res.contentLength } : {}),
            contentType: job.kind === "video" ? "video/mp4" : "audio/wav",
            metadata: { job: job.id, task: taskId, fingerprint: job.fingerprint },
            signal: stopController.signal,
            check: async (localPath) => {
              const seconds = await verifyHead(capture.head(), job.kind, expected);
              // A movie header at the end of the file is read from the file itself.
              if (seconds === undefined && localPath) await verifyMedia(localPath, job.kind, expected);
            },
          });
          await j.append(
            {
              t: "stored",
              id: job.id,
              output: {
                uri: written.uri,
                bytes: written.bytes,
                sha256: written.sha256,
                fingerprint: job.fingerprint,
              },
            },
            { durable: true },
          );
          log.info(
            { job: job.id, event: "stored", uri: written.uri, bytes: written.bytes, attempt: n },
            "result stored",
          );
          return;
        } catch (error) {
          if (stopController.signal.aborted || tries >= 3) throw error;
          // An expired or refused URL is fetched again through the task; a broken file is downloaded again.
          const expired =
            error instanceof ClapperApiError &&
            (error.status === 403 || error.status === 404 || error.status === 410);
          if (expired || error instanceof MediaCheckError) url = undefined;
          log.warn(
            { job: job.id, event: "download-retry", error: errorInfo(error) },
            "download failed; trying again",
          );
        }
      }
    };

    // Video and speech each run under their own in-flight limit; all jobs start together.
    let running = work.length;
    const all = Promise.all(
      work.map((job) => {
        const limiter = job.kind === "video" ? gate.video : gate.speech;
        return limiter
          .tasks(() => runJob(job))
          .catch((error) => {
            log.error({ job: job.id, event: "job-error", error: errorInfo(error) }, "unexpected error");
          })
          .finally(() => {
            running -= 1;
          });
      }),
    );
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

    // ---- report ----
    const interrupted = signal.aborted;
    // With --only, the run is about the jobs it was asked to do; the others are listed as they stand.
    const selected = only
      ? planned.jobs.filter((job) => matchesOnly(job, only)).map((job) => job.id)
      : undefined;
    const report = buildReport({
      state: state(),
      jobs: planned.jobs,
      manifest: manifest.display,
      name: manifest.name,
      interrupted,
      ...(selected ? { selected } : {}),
      balanceAfter: interrupted
        ? undefined
        : (await options.clients.video.pointsSummary().catch(() => undefined))?.available_points,
      ...(stopSubmitting || collectionPending
        ? { note: [stopSubmitting, collectionPending].filter(Boolean).join("; ") }
        : {}),
    });
    let reportUris: string[] | undefined;
    let reportFailed: string | undefined;
    try {
      reportUris = await writeReports(sink, report, options.env ?? process.env);
    } catch (error) {
      // The outcome still reaches the caller and the journal; the reports can be written again.
      reportFailed = `the reports could not be written to ${sink.uri("reports")}: ${errorInfo(error).message}; the state is saved: run again (or clapper report) to write them`;
      log.error({ event: "report-failed", error: errorInfo(error) }, "the reports could not be written");
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
    const exitCode = interrupted ? 4 : report.run.status === "succeeded" && !reportFailed ? 0 : 1;
    const notes = [stopSubmitting, collectionPending, reportFailed].filter(Boolean);
    return {
      exitCode,
      report,
      ...(reportUris ? { reportUris } : {}),
      statePath,
      warnings: planned.warnings,
      pollRequests: video.requests + speech.requests,
      ...(notes.length > 0 ? { message: notes.join("; ") } : {}),
    };
  } catch (error) {
    // Interrupted during the pre-flight (skills, voices): nothing was submitted; the journal holds what was done.
    if (signal.aborted)
      return { exitCode: 4, message: "interrupted: state saved; run again to resume", statePath };
    throw error;
  } finally {
    signal.removeEventListener("abort", onAbort);
    stopController.abort();
    await listener?.close();
    if (!options.gate) await gate.stop();
    await journal?.close();
    await lock.release();
  }
}

/** What a succeeded video actually cost: the base price when an upscale fell back to 768P. */
export function videoCost(job: VideoJob, task: VideoTask): number {
  const fellBack = UPSCALE_TIERS.includes(job.tier) && task.resolution === "768P";
  return fellBack ? basePoints(job.duration) : (job.points ?? 0);
}

/**
 * The create body with every material at an address the service can fetch: staged in S3 and
 * presigned, or inline as a Data URL (then the 72 MiB body limit is checked before sending).
 */
async function videoBody(
  job: VideoJob,
  skillIds: Map<string, string>,
  stager: MaterialStager,
  signal: AbortSignal,
) {
  const content = [...job.request.content];
  let inline = 0;
  for (const { contentIndex, ref } of job.materials) {
    const item = content[contentIndex];
    if (!item || item.type === "text") continue;
    const url = await stager.url(ref, signal);
    if (url.startsWith("data:")) inline += url.length;
    const field = item.type;
    content[contentIndex] = { ...item, [field]: { url } } as typeof item;
  }
  if (inline > MAX_CREATE_BODY - 64 * 1024) {
    throw new MaterialError(
      `${job.id}: the materials make the request ${Math.ceil(inline / 1024 / 1024)} MiB as Data URLs, over the service's 72 MiB body limit; configure S3 (--output s3://... or --staging s3://...) so they can be staged`,
    );
  }
  const skillId = job.skill ? (skillIds.get(job.skill.name) ?? job.skill.name) : undefined;
  return { ...job.request, content, ...(skillId ? { skill_id: skillId } : {}) };
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

function speechBody(
  job: SpeechJob,
  voices: Map<string, { source: "custom"; voice_id: string } | { source: "asset"; asset_id: string }>,
) {
  const voice =
    job.voice.source === "file"
      ? voices.get(voiceHash(job))
      : { source: job.voice.source, voice_id: job.voice.voiceId };
  if (!voice) throw new MaterialError(`${job.id}: the reference voice was not uploaded`);
  // save_voice_as made the custom voice before the run: the task uses it and saves nothing more.
  const {
    save_voice: _save,
    voice_name: _name,
    ...request
  } = job.request as typeof job.request & {
    save_voice?: boolean;
    voice_name?: string;
  };
  return { ...request, voice };
}

async function createTask(
  clients: Clients,
  stager: MaterialStager,
  callback: { url: string; token: string } | undefined,
  job: Job,
  key: string,
  skillIds: Map<string, string>,
  voices: Map<string, { source: "custom"; voice_id: string } | { source: "asset"; asset_id: string }>,
  signal: AbortSignal,
): Promise<string> {
  if (job.kind === "video") {
    const body = await videoBody(job, skillIds, stager, signal);
    const hooks = callback ? { callback_url: callback.url, callback_token: callback.token } : {};
    return clients.video.createTask({ ...body, ...hooks } as never, {
      idempotencyKey: key,
      signal,
    });
  }
  return clients.speech.createTask(speechBody(job, voices) as never, { idempotencyKey: key, signal });
}

async function freshUrl(clients: Clients, job: Job, taskId: string): Promise<string> {
  if (job.kind === "video") {
    const task = await clients.video.getTask(taskId);
    if (!task.content?.url)
      throw new MediaCheckError(`task ${taskId} has no result URL (status ${task.status})`);
    return task.content.url;
  }
  const task = await clients.speech.getTask(taskId);
  if (!task.output_url)
    throw new MediaCheckError(
      `task ${taskId} has no result URL (status ${task.status}); results are kept 7 days`,
    );
  return task.output_url;
}

function voiceHash(job: SpeechJob): string {
  return job.voice.source === "file"
    ? `${job.voice.sha256}${job.voice.saveAs ? `:${job.voice.saveAs}` : ""}`
    : "";
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
): Promise<Map<string, { source: "custom"; voice_id: string } | { source: "asset"; asset_id: string }>> {
  const { uploadReferenceAudio } = await import("../api/index.js");
  const refs = new Map<
    string,
    { source: "custom"; voice_id: string } | { source: "asset"; asset_id: string }
  >();
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

export function defaultStatePath(manifestDir: string, name: string): string {
  return join(manifestDir, ".clapper", name, "state.jsonl");
}
