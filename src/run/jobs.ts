// One job's life: reserve -> intent (write-ahead) -> create -> follow -> settle -> collect. Every
// transition is journalled before the next step can act on it, so a process killed at any instant
// resumes without paying twice:
// - an intent is durable before its create is sent; its Idempotency-Key makes a repeat return the
//   task created before, and an intent never sent is withdrawn rather than left to be re-sent;
// - a task id is durable as soon as the service answers; a created task is never forgotten: it is
//   followed to its end and settled, by this process or the next;
// - an attempt's end and the job's fate are one record (settled with its fate), so no kill splits
//   them; a result found broken after its attempt settled fails the job in one record too;
// - a result takes its name only once stored and checked, and is recorded after that.
import { createHash } from "node:crypto";
import { setMaxListeners } from "node:events";
import { setTimeout as sleep } from "node:timers/promises";
import pLimit, { type LimitFunction } from "p-limit";
import type { Logger } from "pino";
import {
  AbortedError,
  ClapperApiError,
  type Clients,
  InsufficientPointsError,
  isUnavailable,
  NotFoundError,
  RateLimitError,
  ResultUrlError,
  ServiceError,
  ValidationError,
} from "../api/index.js";
import {
  DownloadFailedError,
  DownloadTimeUpError,
  DownloadTrail,
  ResultTransferError,
  storeResult,
} from "../engine/collect.js";
import type { PointsLedger } from "../engine/ledger.js";
import { MediaCheckError, ResultTooLargeError, resultLimit } from "../engine/media-check.js";
import { PriceError, SpeechDisabledError, type SpeechPricer } from "../engine/pricing.js";
import { MaterialError, type MaterialStager } from "../engine/staging.js";
import { type Attempt, type JobState, openAttempt, paidNotStored, type RunState } from "../engine/state.js";
import { TaskUnreadableError } from "../engine/tracker.js";
import { type Job, unfitted } from "../manifest/index.js";
import { outputKey } from "../manifest/outputs.js";
import type { StateStore } from "../pipeline/types.js";
import {
  type BodyInputs,
  type ServiceTask,
  serviceFor,
  type TaskService,
  type Trackers,
  type VoiceRef,
  validCost,
} from "../services/index.js";
import { OutputError, type Sink, type Written } from "../sinks/sink.js";
import { traceStart } from "../trace.js";

/** Downloads of one result in one run: an expired URL or a broken transfer is tried again. */
const COLLECT_TRIES = 3;
/**
 * Time a result's tries may spend getting an answer (the HTTP layer's backoff included; never a
 * transfer under way). A result host that answers errors this long fails the job rather than
 * holding the run: its points are spent either way, and --retry-failed downloads it again.
 */
const COLLECT_BUDGET_MS = 20_000;
/** The pause after a result's first failed try; doubled after each. */
const COLLECT_PAUSE_MS = 500;

export interface JobContext {
  clients: Clients;
  sink: Sink;
  stager: MaterialStager;
  journal: StateStore;
  ledger: PointsLedger;
  pricer: SpeechPricer;
  /**
   * With a points cap, each speech create is priced by a pricing read made after the previous
   * create was answered, one at a time: only a price change between that read and the create can
   * then carry the run past its cap, and the task's own cost stops the run as soon as it shows.
   */
  exactSpeechPricing: boolean;
  trackers: Trackers;
  callback?: { url: string; token: string };
  name: string;
  maxAttempts: number;
  /** `--retry-failed`: a failed job gets a new task (once its paid result was fetched again, if any). */
  retryFailed?: boolean;
  /** Overrides the per-result size limit derived from each job (`--max-result-mb`). */
  maxResultBytes?: number;
  skillIds: Map<string, string>;
  voiceRefs: Map<string, VoiceRef>;
  /** Interrupt: stops everything, saves state. */
  signal: AbortSignal;
  log: Logger;
  progress: (job?: Job) => void;
  /** A journal write failed: the run cannot go on without losing track. */
  fail: (error: unknown) => void;
  /** A call failed after every retry: the run decides whether the service is gone (then exit 6). */
  unavailable?: (error: unknown) => void;
  /** The store cannot be reached: the run stops, state saved (exit 6). */
  unreachable?: (error: unknown) => void;
}

/** Deterministic per (run, epoch, job, fingerprint, attempt): a repeated create returns the first task. */
export function idempotencyKey(
  name: string,
  epoch: number | string,
  jobId: string,
  fingerprint: string,
  attempt: number,
): string {
  const digest = createHash("sha256")
    .update(`${name}\n${epoch}\n${jobId}\n${fingerprint}\n${attempt}`)
    .digest("hex");
  return `clapper-${digest.slice(0, 48)}`;
}

export function errorInfo(error: unknown): { code: string; message: string } {
  if (error instanceof ClapperApiError)
    return { code: String(error.code ?? error.name), message: error.message };
  return { code: (error as Error).name ?? "Error", message: (error as Error).message ?? String(error) };
}

type Outcome = "again" | "done";
/** A collection's end: stored; failed for good (broken, or refused by its host); left for a later run. */
type Collected = "stored" | "failed" | "left";

export class JobRunner {
  /** Why new creates stopped (the cap, the service refusing for points, a price that moved). */
  stopped: string | undefined;
  /** Why some results are paid for and not stored yet. */
  collectionPending: string | undefined;
  /** Why some tasks are left open (could not be followed). */
  unfinished: string | undefined;
  private readonly submit = new AbortController();
  /** Work that may spend (pricing, staging) listens here: a stop ends it before it spends. */
  private readonly submitSignal: AbortSignal;
  private readonly speechTurn: LimitFunction = pLimit(1);
  /**
   * Keys of the intents this process wrote. Only these may be withdrawn when their create never
   * left: an intent found in the journal may have been sent by the process that wrote it.
   */
  private readonly opened = new Set<string>();
  /** Jobs whose paid result this run fetched again: once is enough, then --retry-failed may create. */
  private readonly fetchedAgain = new Set<string>();

  constructor(private readonly c: JobContext) {
    this.submitSignal = AbortSignal.any([c.signal, this.submit.signal]);
    // Every create of every job listens to it: thousands of listeners are expected.
    setMaxListeners(0, this.submitSignal);
  }

  private get state(): RunState {
    return this.c.journal.state;
  }

  private st(job: Job): JobState {
    return this.state.jobs[job.id] as JobState;
  }

  /**
   * Stops new creates. With `now`, creates still waiting for a request slot are taken back too:
   * after the service refused for points, or the cap would be crossed, not one more is sent.
   */
  stopSubmitting(why: string, now = false): void {
    this.stopped ??= why;
    if (now) this.submit.abort(new Error(why));
  }

  async run(job: Job): Promise<void> {
    // Invariant: a shot timed to its narration is created only once fitted (its request has no
    // duration before); the run's stage fits it when its lines have ended.
    if (unfitted(job))
      throw new Error(`${job.id}: a shot with duration auto reached creation before it was timed`);
    for (;;) {
      if (this.c.signal.aborted) return;
      if ((await this.step(job)) === "done") return;
    }
  }

  /** One pass of the job's life; "again" when a failed attempt is to be retried. */
  private async step(job: Job): Promise<Outcome> {
    const st = this.st(job);
    // Paid for and not yet stored (a kill during the download, or a result that an earlier run
    // could not get or got broken): fetched again, once a run, before anything is created.
    const again = paidNotStored(st) && !this.fetchedAgain.has(job.id);
    if (st.status === "collecting" || again) {
      this.fetchedAgain.add(job.id);
      const paid = st.attempts.at(-1);
      const outcome = paid?.taskId ? await this.collectPaid(job, paid) : "left";
      // Broken again (not merely out of reach this time): --retry-failed asked for a new task, and
      // only now is one paid for.
      return again && outcome === "failed" && this.c.retryFailed ? "again" : "done";
    }
    let attempt = openAttempt(st);
    if (!attempt) {
      if (this.stopped) return "done";
      if (this.tried(st) >= this.c.maxAttempts) return "done";
      if (serviceFor(job.kind).pricedAtCreate && this.c.exactSpeechPricing) {
        // Priced, reserved, written ahead and created one at a time (see exactSpeechPricing).
        return this.speechTurn(async () => {
          const opened = await this.open(job);
          if (!opened) return "done";
          return this.create(job, opened);
        }).then((outcome) => (outcome === "created" ? this.follow(job) : outcome));
      }
      attempt = await this.open(job);
      if (!attempt) return "done";
    }
    if (!attempt.taskId) {
      const outcome = await this.create(job, attempt);
      if (outcome !== "created") return outcome;
    }
    return this.follow(job);
  }

  /**
   * Follows to their end the tasks no job of the manifest will: attempts of an edited-away version
   * of a row (`previous`) and of rows removed from the manifest. They are settled, never collected,
   * so every created task is paid for in some report and its reservation ends.
   */
  async settleOrphans(st: JobState, removed: boolean): Promise<void> {
    const open = [
      ...(st.previous ?? []).filter((a) => a.spent === undefined).map((a) => ({ a, previous: true })),
      ...(removed
        ? st.attempts.filter((a) => a.spent === undefined).map((a) => ({ a, previous: false }))
        : []),
    ];
    for (const { a, previous } of open) {
      if (this.c.signal.aborted) return;
      const record = { t: "settled" as const, id: st.id, n: a.n, ...(previous ? { previous } : {}) };
      if (!a.taskId) {
        const learned = await this.learnTask(st, a, previous);
        if (learned === "left") continue;
        if (learned !== "found") {
          await this.c.journal.append({ ...record, spent: 0, error: learned }, { durable: true });
          await this.c.ledger.settle(a.reserved, 0, a.key);
          this.c.log.warn({ job: st.id, event: learned.code, attempt: a.n }, learned.message);
          continue;
        }
      }
      const taskId = a.taskId as string;
      const service = serviceFor(st.kind);
      let final: ServiceTask;
      try {
        final = await service.track(this.c.trackers, taskId, Math.floor(Date.now() / 1000));
      } catch (error) {
        if (this.c.signal.aborted) return;
        if (!(error instanceof NotFoundError)) {
          this.unfinished ??= `some tasks could not be followed (${errorInfo(error).message})`;
          continue;
        }
        const gone = {
          code: "task_not_found",
          message: `task ${taskId} is not known to the service any more`,
        };
        await this.c.journal.append({ ...record, spent: 0, error: gone }, { durable: true });
        await this.c.ledger.settle(a.reserved, 0, a.key);
        continue;
      }
      const status = service.status(final);
      const ok = status === "succeeded";
      const stated = service.statedCost(final);
      // A video's cost is its price as reserved; a speech task states its own.
      const cost = !ok ? 0 : stated !== undefined && validCost(stated) ? stated : a.reserved;
      const replayed = ok && this.isReplay(a, service.createdAt(final));
      await this.c.journal.append(
        {
          ...record,
          spent: cost,
          ...(replayed ? { replayed } : {}),
          ...(ok ? {} : { error: { code: status, message: `task ${taskId} ended ${status}` } }),
        },
        { durable: true },
      );
      await this.c.ledger.settle(a.reserved, cost, a.key);
      this.c.log.info(
        { job: st.id, event: "orphan-settled", task_id: taskId, status, cost },
        "a task of an earlier version was followed to its end",
      );
    }
  }

  /**
   * The task of an orphan's create whose answer never reached the journal. Its request is of a
   * version the manifest no longer has, so it is sent again as it was recorded, with its key: the
   * service answers with the task that key made (and pays nothing twice). "found": recorded
   * (`created`), to be followed. "left": the answer is unknown again; the next run asks. Otherwise
   * the reason no task can be, or be learned, to settle the attempt with 0.
   */
  private async learnTask(
    st: JobState,
    a: Attempt,
    previous: boolean,
  ): Promise<"found" | "left" | { code: string; message: string }> {
    // Announced creates: without a `sending` record, none left, and nothing was made.
    if (a.announces && !a.sending) {
      return {
        code: "never_sent",
        message: `an earlier version's create (attempt ${a.n}) was never sent: no task was made`,
      };
    }
    if (a.body === undefined) {
      // A journal from before `sending` records, or a body too large to keep.
      return {
        code: "abandoned",
        message: `an earlier version's create (attempt ${a.n}) may have reached the service; it cannot be sent again to find out`,
      };
    }
    let taskId: string;
    try {
      const call = { idempotencyKey: a.key, signal: this.c.signal };
      taskId = await serviceFor(st.kind).create(this.c.clients, a.body, call);
    } catch (error) {
      if (this.c.signal.aborted || error instanceof AbortedError) return "left";
      // Refused: had the first create made a task, its key would have returned it.
      if (refused(error)) {
        return {
          code: "refused",
          message: `an earlier version's create (attempt ${a.n}), sent again to learn its task, was refused: no task was made (${errorInfo(error).message})`,
        };
      }
      if (isUnavailable(error)) this.c.unavailable?.(error);
      this.unfinished ??= `some tasks could not be learned (${errorInfo(error).message})`;
      return "left";
    }
    // Another attempt's task: this create made none it can know of (see `shareTask`).
    const holder = this.holderOf(taskId, a.key);
    if (holder) {
      const error = sharedError(st.id, taskId, holder.job);
      await this.markHolder(holder, taskId, error);
      return error;
    }
    await this.c.journal.append(
      { t: "created", id: st.id, n: a.n, task_id: taskId, ...(previous ? { previous } : {}) },
      { durable: true },
    );
    this.c.log.info(
      { job: st.id, event: "orphan-learned", task_id: taskId, attempt: a.n },
      "the task of an earlier version's unanswered create was learned by sending it again",
    );
    return "found";
  }

  /** Attempts of this campaign that count toward --max-attempts (a --fresh starts the count again). */
  private tried(st: JobState): number {
    return st.attempts.filter((a) => a.campaign === this.state.campaign && a.n >= (st.countFrom ?? 1)).length;
  }

  /** Reserves the job's price in the ledger and writes the intent: the attempt exists from here. */
  private async open(job: Job): Promise<Attempt | undefined> {
    const service = serviceFor(job.kind);
    let estimate = job.points ?? 0;
    if (service.pricedAtCreate) {
      try {
        const price = this.c.exactSpeechPricing
          ? await this.c.pricer.refresh(this.submitSignal)
          : this.c.pricer.current;
        if (price) estimate = service.estimate(job, price);
      } catch (error) {
        if (this.submitSignal.aborted) return undefined;
        if (isUnavailable(error)) this.c.unavailable?.(error);
        const why =
          error instanceof PriceError || error instanceof SpeechDisabledError
            ? error.message
            : `the speech price could not be read (${errorInfo(error).message})`;
        this.stopSubmitting(`${why}; new submissions stopped`, true);
        return undefined;
      }
    }
    if (this.stopped || this.c.signal.aborted) return undefined;
    const n = this.st(job).attempts.length + 1;
    const key = idempotencyKey(this.c.name, this.state.epoch, job.id, job.fingerprint, n);
    if (!(await this.c.ledger.tryReserve(estimate, key))) {
      // A shared ledger that could not be asked halted the run: no create without a reservation.
      if (this.c.signal.aborted) return undefined;
      const snap = this.c.ledger.snapshot();
      const why =
        this.c.ledger.refusal?.() ??
        `the run's points cap was reached (${snap.reserved + snap.spent} of ${snap.cap} committed`;
      this.stopSubmitting(`${why}; ${job.id} needs ${estimate})`);
      return undefined;
    }
    // Write-ahead: the intent is on disk before the request can reach the service.
    this.opened.add(key);
    await this.c.journal.append(
      { t: "intent", id: job.id, n, key, reserved: estimate, at: Date.now(), announces: true },
      { durable: true },
    );
    traceStart("first intent journalled");
    try {
      await this.c.ledger.markSent?.(key);
    } catch {
      // The coordinator is gone and the run halts (exit 6). The intent stays in the journal, never
      // sent: the next run sends it with its key, under the reservation it finds or makes again.
      return undefined;
    }
    this.c.log.info(
      { job: job.id, event: "submitting", attempt: n, reserved: estimate },
      "creating the task",
    );
    return openAttempt(this.st(job));
  }

  /**
   * Sends the create. An intent found in the journal (a killed run's) is sent again with its key
   * whatever else happened, since only its answer tells whether its task exists; one this process
   * opened can still be taken back while it waits for its turn, and then nothing was sent.
   */
  private async create(job: Job, attempt: Attempt): Promise<"created" | Outcome> {
    const n = attempt.n;
    const ours = this.opened.has(attempt.key);
    let body: unknown;
    try {
      body = await this.body(job, ours ? this.submitSignal : this.c.signal);
    } catch (error) {
      // Nothing was sent. Ours: taken back when stopped, failed when its materials cannot be
      // staged. A killed run's intent stays open: it may have been sent with what was staged then.
      if (ours && this.submitSignal.aborted) return this.withdraw(job, attempt);
      if (this.c.signal.aborted || !ours) {
        if (!this.c.signal.aborted)
          this.c.log.warn(
            { job: job.id, event: "create-unknown", error: errorInfo(error) },
            "could not re-send the create; will resume",
          );
        return "done";
      }
      await this.settle(job, attempt, 0, { error: errorInfo(error), fate: "failed" });
      this.c.log.error(
        { job: job.id, event: "refused", error: errorInfo(error) },
        "the materials could not be staged",
      );
      this.c.progress(job);
      return "done";
    }
    // Written ahead of the create, with what it sends: should the answer never reach the journal
    // and the row then change, the next run can still send it again with its key to learn its task.
    await this.c.journal.append({ t: "sending", id: job.id, n, ...keptBody(body) }, { durable: true });
    let taskId: string;
    traceStart("first create handed to the client");
    try {
      taskId = await this.post(job, body, attempt.key, ours);
      traceStart("first create answered");
    } catch (error) {
      if (error instanceof AbortedError && !error.maybeSent && ours) return this.withdraw(job, attempt);
      if (this.c.signal.aborted || error instanceof AbortedError) return "done";
      if (error instanceof InsufficientPointsError) {
        this.stopSubmitting(`the service refused for insufficient points: ${error.message}`, true);
        await this.settle(job, attempt, 0, { error: errorInfo(error) });
        this.c.log.warn({ job: job.id, event: "insufficient-points" }, error.message);
        return "done";
      }
      if (error instanceof MaterialError || refused(error)) {
        await this.settle(job, attempt, 0, { error: errorInfo(error), fate: "failed" });
        this.c.log.error(
          { job: job.id, event: "refused", error: errorInfo(error) },
          "the service refused the create",
        );
        this.c.progress(job);
        return "done";
      }
      // Unknown outcome (connection lost, 5xx after retries): keep the intent; the next run re-sends it.
      // A 429 too: it says this try was not made, but an earlier try of the same create, unanswered,
      // may have been; only the same key, sent again, can tell.
      if (isUnavailable(error)) this.c.unavailable?.(error);
      this.unfinished ??= `some creates were left without a sure answer (${errorInfo(error).message}): the next run sends them again with the same keys, and a task already made is not paid for twice`;
      this.c.log.warn(
        { job: job.id, event: "create-unknown", error: errorInfo(error) },
        "create outcome unknown; will resume",
      );
      return "done";
    }
    // Invariant: one task id, one attempt. A service (or a proxy, or a colliding key) that answers
    // two creates with one id leaves this one without a task of its own, and the other's result
    // cannot be told to be its job's: both fail, loudly; the task is still followed and paid.
    const holder = this.holderOf(taskId, attempt.key);
    if (holder) {
      await this.shareTask(job, attempt, taskId, holder);
      return "done";
    }
    await this.c.journal.append({ t: "created", id: job.id, n, task_id: taskId }, { durable: true });
    this.c.log.info({ job: job.id, event: "created", task_id: taskId, attempt: n }, "task created");
    this.c.progress(job);
    return "created";
  }

  /**
   * The holder first, so that a kill anywhere here leaves it marked, or this attempt open (its
   * create is sent again with its key, answered the same, and this is done again). A holder of an
   * earlier run keeps what it stored then: its task was its own when it was made. One stored, or
   * being stored, fails now; one still running fails when its task is settled (`follow`).
   */
  private async markHolder(
    holder: { job: string; attempt: Attempt },
    taskId: string,
    error: { code: string; message: string },
  ): Promise<void> {
    const other = this.state.jobs[holder.job];
    if (!other || holder.attempt.campaign !== this.state.campaign) return;
    await this.c.journal.append(
      { t: "shared", id: holder.job, n: holder.attempt.n, task_id: taskId, error },
      { durable: true },
    );
    if (other.status === "stored" || other.status === "collecting")
      await this.c.journal.append({ t: "failed", id: holder.job, error }, { durable: true });
    this.c.log.error({ job: holder.job, event: "task-id-shared", task_id: taskId }, error.message);
  }

  /** The job and attempt that already hold `taskId`, if any. */
  private holderOf(taskId: string, key: string): { job: string; attempt: Attempt } | undefined {
    for (const st of Object.values(this.state.jobs)) {
      for (const a of [...st.attempts, ...(st.previous ?? [])]) {
        // The same key is the same request (an edit reverted while its first task still ran): the
        // service answered it with the task it made, a replay, not another create's task.
        if (a.taskId === taskId && a.key !== key) return { job: st.id, attempt: a };
      }
    }
    return undefined;
  }

  /**
   * `taskId` came back for this attempt though `holder` holds it: this attempt made no task it can
   * know of (settled at 0, failed), and the holder's result is not to be trusted as its own (it
   * fails too, once its task is settled at its cost; at once when it was stored already).
   */
  private async shareTask(
    job: Job,
    attempt: Attempt,
    taskId: string,
    holder: { job: string; attempt: Attempt },
  ): Promise<void> {
    const error = sharedError(job.id, taskId, holder.job);
    await this.markHolder(holder, taskId, error);
    await this.settle(job, attempt, 0, { error, fate: "failed" });
    this.c.log.error(
      { job: job.id, event: "task-id-shared", task_id: taskId, holder: holder.job },
      error.message,
    );
    this.c.progress(job);
  }

  /** Never sent: nothing exists at the service, so the attempt is taken back. */
  private async withdraw(job: Job, attempt: Attempt): Promise<Outcome> {
    await this.c.journal.append({ t: "withdrawn", id: job.id, n: attempt.n }, { durable: true });
    await this.c.ledger.settle(attempt.reserved, 0, attempt.key);
    this.c.progress(job);
    return "done";
  }

  /** The create body, its materials staged where the service can fetch them. */
  private body(job: Job, signal: AbortSignal): Promise<unknown> {
    const { stager, skillIds, voiceRefs, callback } = this.c;
    const inputs: BodyInputs = { stager, skillIds, voiceRefs, callback };
    return serviceFor(job.kind).body(job, inputs, signal);
  }

  /**
   * `withdrawable`: a stop may still take the create back while it waits for its first turn (the
   * queue signal); once an attempt has left, only an interrupt ends it, and its answer is read.
   */
  private post(job: Job, body: unknown, key: string, withdrawable: boolean): Promise<string> {
    const call = {
      idempotencyKey: key,
      signal: this.c.signal,
      // The longest go first across both services, whatever order their lives reached the gate in.
      rank: nominalMs(job),
      ...(withdrawable ? { queueSignal: this.submit.signal } : {}),
    };
    return serviceFor(job.kind).create(this.c.clients, body, call);
  }

  /** Follows the open attempt's task to its end, then settles (and collects) it. */
  private async follow(job: Job): Promise<Outcome> {
    const attempt = openAttempt(this.st(job));
    if (!attempt?.taskId) return "done";
    const service = serviceFor(job.kind);
    let final: ServiceTask;
    try {
      final = await this.track(job, attempt, attempt.taskId);
    } catch (error) {
      if (this.c.signal.aborted) return "done";
      await this.untracked(job, attempt, attempt.taskId, error);
      this.c.progress(job);
      return "done";
    }
    const shared = openAttempt(this.st(job))?.shared;
    if (shared) {
      // Paid for (if it succeeded), never collected: whose request it ran cannot be told, so its
      // cost is read from the task itself, not from this job's price.
      const cost =
        service.status(final) !== "succeeded"
          ? 0
          : this.paidCost(job, attempt, service, final, service.taskCost(final));
      await this.settle(job, attempt, cost, { error: shared, fate: "failed" });
      this.c.log.error({ job: job.id, event: "task-id-shared", task_id: attempt.taskId }, shared.message);
      this.c.progress(job);
      return "done";
    }
    const status = service.status(final);
    if (status === "succeeded") {
      await this.succeeded(job, attempt, final);
      this.c.progress(job);
      return "done";
    }
    if (status === "cancelled") {
      await this.settle(job, attempt, 0, {
        error: { code: "cancelled", message: `task ${attempt.taskId} was cancelled` },
        fate: "cancelled",
      });
      this.c.log.warn({ job: job.id, event: "cancelled", task_id: attempt.taskId }, "task cancelled");
      this.c.progress(job);
      return "done";
    }
    return this.failed(job, attempt, final);
  }

  /** The task could not be followed: unknown to the service (the job fails), or left for the next run. */
  private async untracked(job: Job, attempt: Attempt, taskId: string, error: unknown): Promise<void> {
    if (error instanceof NotFoundError) {
      // Never recreated silently: it may have run and been paid for.
      await this.settle(job, attempt, 0, {
        error: {
          code: "task_not_found",
          message: `task ${taskId} is not known to the service any more; run with --retry-failed to create a new one`,
        },
        fate: "failed",
      });
      return;
    }
    const problem =
      error instanceof TaskUnreadableError
        ? {
            code: "task_unreadable",
            message: `${error.message}; the task is left open: run again to follow it`,
          }
        : { code: "track_failed", message: `${errorInfo(error).message}; run again to follow the task` };
    await this.c.journal.append({ t: "problem", id: job.id, error: problem });
    this.unfinished ??= `some tasks could not be followed (${problem.message})`;
    this.c.log.warn(
      { job: job.id, event: "track-error", task_id: taskId, error: problem },
      "could not follow the task; will resume",
    );
  }

  /** Paid for (unless a replay): settled at its real cost, then collected. */
  private async succeeded(job: Job, attempt: Attempt, final: ServiceTask): Promise<void> {
    const service = serviceFor(job.kind);
    const cost = this.paidCost(job, attempt, service, final, service.cost(job, final));
    const replayed = this.isReplay(attempt, service.createdAt(final));
    if (replayed) {
      this.c.log.warn(
        { job: job.id, event: "replayed", task_id: attempt.taskId },
        "the Idempotency-Key returned a task created before this run: its points were paid then, not counted now",
      );
    }
    await this.settle(job, attempt, cost, replayed ? { replayed } : {});
    await this.collect(job, final, attempt.n);
  }

  /** A failed task: tried again with a new attempt, or the job fails once its attempts are spent. */
  private async failed(job: Job, attempt: Attempt, final: ServiceTask): Promise<Outcome> {
    const error = serviceFor(job.kind).failure(final);
    const tried = this.st(job).attempts.filter((a) => a.campaign === this.state.campaign).length;
    const last = tried >= this.c.maxAttempts || this.stopped !== undefined;
    await this.settle(job, attempt, 0, { error, ...(last ? { fate: "failed" as const } : {}) });
    this.c.log.warn({ job: job.id, event: "task-failed", attempt: attempt.n, error }, "task failed");
    if (!last) return "again";
    this.c.log.error({ job: job.id, event: "failed", attempts: tried, error }, "job failed");
    this.c.progress(job);
    return "done";
  }

  private track(job: Job, attempt: Attempt, taskId: string): Promise<ServiceTask> {
    const service = serviceFor(job.kind);
    let last: string | undefined;
    const onUpdate = (task: ServiceTask) => {
      const stated = service.statedCost(task);
      if (stated !== undefined) void this.reprice(job, attempt.n, stated).catch(this.c.fail);
      const status = service.status(task);
      if (status !== last) {
        last = status;
        void this.c.journal.append({ t: "task", id: job.id, n: attempt.n, status }).catch(this.c.fail);
        this.c.log.info({ job: job.id, event: "status", task_id: taskId, status }, "task status");
        this.c.progress(job);
      }
    };
    const createdAt = Math.floor(Date.now() / 1000);
    return service.track(this.c.trackers, taskId, createdAt, onUpdate, service.trackHint(job));
  }

  /**
   * A speech task states its own cost from the start. When it differs from what was reserved, the
   * price moved: the reservation becomes the real cost, the price is read again for the lines still
   * to come, and if the cap would now be crossed no further create is sent.
   */
  private async reprice(job: Job, n: number, cost: number): Promise<void> {
    const attempt = this.st(job).attempts.find((a) => a.n === n);
    if (!attempt || attempt.spent !== undefined || attempt.reserved === cost) return;
    if (!validCost(cost)) {
      this.c.log.warn(
        { job: job.id, event: "absurd-cost", cost },
        "the service states an impossible task cost; ignored",
      );
      return;
    }
    const from = attempt.reserved;
    await this.c.journal.append({ t: "reserve", id: job.id, n, reserved: cost });
    const within = await this.c.ledger.adjust(from, cost, attempt.key);
    this.c.log.warn(
      { job: job.id, event: "repriced", reserved: from, cost },
      "the task costs other than estimated: the speech price changed",
    );
    // With exact pricing each create reads the price itself; a read started here could be joined
    // by a later create and be older than the create before it.
    if (cost > from && !this.c.exactSpeechPricing) void this.c.pricer.refresh().catch(() => undefined);
    if (!within) {
      const snap = this.c.ledger.snapshot();
      this.stopSubmitting(
        `the speech price rose while tasks were being created (${job.id} costs ${cost}, ${from} were reserved): ${snap.reserved + snap.spent} points are committed against a cap of ${snap.cap}; new submissions stopped`,
        true,
      );
    }
  }

  /** What a succeeded task cost, as its service tells it, unless it states an impossible cost. */
  private paidCost(
    job: Job,
    attempt: Attempt,
    service: TaskService,
    task: ServiceTask,
    cost: number | undefined,
  ): number {
    if (cost !== undefined) return cost;
    this.c.log.warn(
      { job: job.id, event: "absurd-cost", cost: service.statedCost(task) },
      "the service states an impossible task cost; the reservation is counted instead",
    );
    return attempt.reserved;
  }

  /**
   * Whether the task was created before this attempt's intent was written: then the key returned
   * a task of an earlier state or another machine, not one this attempt paid for. Both clocks are
   * read in whole seconds, so anything within three seconds counts as this attempt's own. A
   * service clock more than five minutes from ours is not trusted for this: nothing is a replay.
   */
  private isReplay(attempt: Attempt, createdAt: number): boolean {
    if (attempt.at === undefined || !Number.isFinite(createdAt) || createdAt <= 0) return false;
    const offset = this.c.clients.http.clockOffsetMs;
    if (Math.abs(offset) > 5 * 60 * 1000) return false;
    return createdAt * 1000 < attempt.at + offset - 3000;
  }

  private async settle(
    job: Job,
    attempt: Attempt,
    spent: number,
    how: { error?: { code: string; message: string }; fate?: "failed" | "cancelled"; replayed?: boolean },
  ): Promise<void> {
    await this.c.journal.append(
      {
        t: "settled",
        id: job.id,
        n: attempt.n,
        spent,
        ...(how.error ? { error: how.error } : {}),
        ...(how.fate ? { fate: how.fate } : {}),
        ...(how.replayed ? { replayed: true } : {}),
        // When it ended: a failed job's time in junit.xml runs to here, not to the end of the run.
        at: Date.now(),
      },
      { durable: true },
    );
    // A replay is reported where it was paid, but the cap still counts it: the replay is judged by
    // a clock the service states, and the cap must hold even if that clock lies.
    await this.c.ledger.settle(attempt.reserved, spent, attempt.key);
  }

  /** What became of a result's collection: stored, failed for good, or left for a later run. */
  private async collectPaid(job: Job, paid: Attempt): Promise<Collected> {
    let outcome: Collected;
    try {
      const call = { signal: this.c.signal };
      const task = await serviceFor(job.kind).get(this.c.clients, paid.taskId as string, call);
      outcome = await this.collect(job, task, paid.n);
    } catch (error) {
      if (this.c.signal.aborted) return "left";
      outcome = await this.collectFailed(job, error);
    }
    this.c.progress(job);
    return outcome;
  }

  /** Stores a succeeded task's result; a failure leaves the job paid for and waiting, or failed. */
  private async collect(job: Job, task: ServiceTask, n: number): Promise<Collected> {
    try {
      await this.download(job, task, n);
      return this.st(job).status === "stored" ? "stored" : "failed";
    } catch (error) {
      if (this.c.signal.aborted) return "left";
      return this.collectFailed(job, error);
    }
  }

  private async download(job: Job, task: ServiceTask, n: number): Promise<void> {
    const service = serviceFor(job.kind);
    const taskId = service.id(task);
    let url = service.resultUrl(task);
    const expectedSeconds = service.expectedSeconds(job);
    const spec = {
      id: job.id,
      kind: job.kind,
      key: outputKey(job),
      maxBytes: this.c.maxResultBytes ?? resultLimit(service.resultLimit(job)),
      metadata: { job: job.id, task: taskId, fingerprint: job.fingerprint },
      ...(expectedSeconds !== undefined ? { expectedSeconds } : {}),
    };
    const trail = new DownloadTrail(COLLECT_BUDGET_MS);
    for (let tries = 1; ; tries++) {
      try {
        if (!url) url = await freshUrl(this.c.clients, job, taskId, this.c.signal);
        const http = this.c.clients.http;
        const written = await storeResult(http, this.c.sink, url, spec, this.c.signal, trail);
        await this.stored(job, task, written, n);
        return;
      } catch (error) {
        // Too large is not cured by asking again; neither is an interrupt, nor a task that cannot
        // be read (the HTTP layer has retried that already).
        if (this.c.signal.aborted || error instanceof ResultTooLargeError) throw error;
        if (url === undefined && !(error instanceof ResultUrlMissingError)) throw error;
        if (error instanceof ResultUrlMissingError && tries >= COLLECT_TRIES)
          throw new ResultUrlMissingError(`${error.message} (read ${tries} times)`);
        if (tries >= COLLECT_TRIES || trail.spent || error instanceof DownloadTimeUpError)
          throw givenUp(taskId, trail, error);
        // An expired or refused URL is fetched again through the task; a broken file is downloaded again.
        const expired =
          error instanceof ClapperApiError &&
          (error.status === 403 || error.status === 404 || error.status === 410);
        if (expired || error instanceof MediaCheckError || error instanceof ResultUrlError) url = undefined;
        const waitMs = COLLECT_PAUSE_MS * 2 ** (tries - 1);
        this.c.log.warn(
          {
            job: job.id,
            event: "download-retry",
            try: tries,
            next_delay_ms: waitMs,
            error: errorInfo(error),
          },
          `the result of ${job.id} could not be stored (try ${tries} of ${COLLECT_TRIES}); trying again in ${waitMs / 1000} s`,
        );
        // Spaced: a result host or a proxy that broke one transfer is given time to recover.
        await sleep(waitMs, undefined, { signal: this.c.signal }).catch(() => undefined);
        if (this.c.signal.aborted) throw this.c.signal.reason;
      }
    }
  }

  /** Records a result stored and checked: the job's success. */
  private async stored(
    job: Job,
    task: ServiceTask,
    written: Written & { seconds?: number },
    n: number,
  ): Promise<void> {
    // Its task id given to another create meanwhile: whose request the file is cannot be told.
    const shared = this.st(job).attempts.find((a) => a.n === n)?.shared;
    if (shared) {
      await this.c.journal.append({ t: "failed", id: job.id, error: shared }, { durable: true });
      return;
    }
    const service = serviceFor(job.kind);
    const delivered = service.delivered(task);
    await this.c.journal.append(
      {
        t: "stored",
        id: job.id,
        output: {
          uri: written.uri,
          bytes: written.bytes,
          sha256: written.sha256,
          fingerprint: job.fingerprint,
          ...(delivered !== undefined ? { resolution: delivered } : {}),
          ...(written.seconds ? { seconds: Math.round(written.seconds * 1000) / 1000 } : {}),
          at: Date.now(),
        },
      },
      { durable: true },
    );
    const requested = service.requested(job);
    if (requested !== undefined && delivered !== requested)
      this.c.log.warn(
        { job: job.id, event: "resolution-fallback", requested, delivered },
        `delivered at ${delivered}, not the ${requested} asked for (a failed upscale delivers the native 768P)`,
      );
    this.c.log.info(
      { job: job.id, event: "stored", uri: written.uri, bytes: written.bytes, attempt: n },
      "result stored",
    );
  }

  /**
   * A result that is broken (its container or duration is not what was asked for), or that its
   * host keeps refusing with an error status, fails the job. Anything else (a connection lost, the
   * store down) leaves the job paid for and waiting to be collected, with the reason: the next run
   * fetches it again through its task, nothing is created twice.
   */
  private async collectFailed(job: Job, error: unknown): Promise<Collected> {
    const failure = collectionFailure(error);
    if (failure) {
      await this.c.journal.append({ t: "failed", id: job.id, error: failure }, { durable: true });
      this.c.log.error({ job: job.id, event: "failed", error: failure }, "the result could not be collected");
      return "failed";
    }
    const code =
      error instanceof ResultTooLargeError
        ? "result_too_large"
        : error instanceof ResultUrlError
          ? "result_url_refused"
          : error instanceof ResultUrlMissingError
            ? "result_url_missing"
            : "collect_failed";
    const info = { code, message: errorInfo(error).message };
    // The result host or the store is down: every other result would fail the same way.
    if (unreachableStore(error)) this.c.unreachable?.(error);
    else if (isUnavailable(error)) this.c.unavailable?.(error);
    await this.c.journal.append({ t: "problem", id: job.id, error: info });
    this.collectionPending ??= `some results could not be stored (${info.message}); run again to collect them`;
    this.c.log.warn(
      { job: job.id, event: "collect-failed", error: info },
      "the result could not be stored; the next run collects it",
    );
    return "left";
  }
}

/**
 * What the tries of a result end in: a DownloadFailedError when the host answered them with an
 * error status (the time for tries may have run out after such answers), else the error as it came.
 */
/**
 * How long a job's task should take at the services' nominal pace: what orders the creates
 * (longest first) and tells the trackers when to look first, once they have learnt the pace.
 */
export function nominalMs(job: Job): number {
  return serviceFor(job.kind).nominalMs(job);
}

/**
 * The service said no to a create: nothing was made, so nothing is owed (a 429 is "later", not
 * "no"; a 5xx or a lost answer may have made the task).
 */
function refused(error: unknown): boolean {
  return (
    error instanceof ValidationError ||
    error instanceof InsufficientPointsError ||
    (error instanceof ClapperApiError &&
      error.status !== undefined &&
      error.status < 500 &&
      // A 429 or a "busy" answer is "later"; a 2xx that cannot be read may have made the task.
      !(error instanceof RateLimitError) &&
      !(error instanceof ServiceError))
  );
}

function givenUp(taskId: string, trail: DownloadTrail, error: unknown): unknown {
  const answered =
    error instanceof DownloadTimeUpError || (error instanceof ClapperApiError && error.status !== undefined);
  return answered && trail.status !== undefined && trail.status >= 400
    ? new DownloadFailedError(taskId, trail)
    : error;
}

/** The error a collection failure fails its job with; undefined when the job is to wait instead. */
function collectionFailure(error: unknown): { code: string; message: string } | undefined {
  if (error instanceof DownloadFailedError) {
    return {
      code: "download_failed",
      message: `${error.message}; its points were spent: the next run downloads it again, at no cost`,
    };
  }
  if (error instanceof MediaCheckError && !(error instanceof ResultTooLargeError))
    return { code: "result_invalid", message: error.message };
  return undefined;
}

/** Network failures of the store's client (the AWS SDK passes Node's codes through). */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
]);

/** The store could not be reached (as opposed to refusing this one object). */
function unreachableStore(error: unknown): boolean {
  if (error instanceof OutputError) return error.unreachable;
  // A result host that broke one transfer off is not the store, and not down.
  if (error instanceof ResultTransferError) return false;
  for (let e = error as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; depth++) {
    if (typeof e.code === "string" && NETWORK_CODES.has(e.code)) return true;
    e = e.cause as typeof e;
  }
  return false;
}

/** Why two jobs whose creates the service answered with one task id both fail. */
function sharedError(jobId: string, taskId: string, holder: string): { code: string; message: string } {
  return {
    code: "task_id_shared",
    message: `the service answered the create of ${jobId} with task ${taskId}, which it had given to ${holder} already: neither can tell whose request it ran, so both fail; run with --retry-failed to create new tasks`,
  };
}

/** A create body kept in the journal up to this size (serialized); a larger one is not kept. */
const MAX_KEPT_BODY = 256 * 1024;

/**
 * The body a `sending` record keeps: without the callback (a secret; an orphan is polled) and
 * only when small (materials inline as Data URLs can make it megabytes).
 */
function keptBody(body: unknown): { body?: unknown } {
  if (body === null || typeof body !== "object") return {};
  const { callback_url: _url, callback_token: _token, ...rest } = body as Record<string, unknown>;
  return JSON.stringify(rest).length <= MAX_KEPT_BODY ? { body: rest } : {};
}

/**
 * A succeeded task read without its result URL: a service between stages (the URL comes a moment
 * later) or a result past its retention. Paid for either way: looked at again, never failed for it.
 */
export class ResultUrlMissingError extends Error {
  override name = "ResultUrlMissingError";
}

async function freshUrl(clients: Clients, job: Job, taskId: string, signal: AbortSignal): Promise<string> {
  const service = serviceFor(job.kind);
  const task = await service.getPaid(clients, taskId, signal);
  const url = service.resultUrl(task);
  if (!url)
    throw new ResultUrlMissingError(
      `task ${taskId} (${job.id}) is ${service.status(task)} but gave no result URL${service.retention}; its points are spent: the next run reads it again`,
    );
  return url;
}
