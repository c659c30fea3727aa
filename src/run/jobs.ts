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
import { setMaxListeners } from "node:events";
import pLimit, { type LimitFunction } from "p-limit";
import { AbortedError, InsufficientPointsError, isUnavailable, NotFoundError } from "../api/index.js";
import { PriceError, SpeechDisabledError } from "../budget/pricing.js";
import { type Job, unfitted } from "../manifest/index.js";
import {
  type BodyInputs,
  type ServiceTask,
  serviceFor,
  type TaskService,
  validCost,
} from "../services/index.js";
import { MaterialError } from "../services/staging.js";
import { type Attempt, type JobState, openAttempt, type RunState } from "../state/run-state.js";
import { startStep } from "../trace.js";
import { TaskUnreadableError } from "../tracking/track.js";
import { Collection } from "./collection.js";
import { errorInfo, refused, sharedError } from "./errors.js";
import { idempotencyKey, keptBody } from "./idempotency.js";
import type { JobContext } from "./job-context.js";
import { nextStep, phaseOf } from "./lifecycle.js";
import { Orphans } from "./orphans.js";
import { holderOf, isReplay, markHolder } from "./task-ids.js";

type Outcome = "again" | "done";

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

  private readonly orphans: Orphans;
  private readonly collection: Collection;

  constructor(private readonly c: JobContext) {
    this.orphans = new Orphans(c, (why) => {
      this.unfinished ??= why;
    });
    this.collection = new Collection(c, (why) => {
      this.collectionPending ??= why;
    });
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
    const next = nextStep({
      phase: phaseOf(st),
      fetchedAgain: this.fetchedAgain.has(job.id),
      stopped: Boolean(this.stopped),
      exhausted: this.tried(st) >= this.c.maxAttempts,
      oneAtATime: serviceFor(job.kind).pricedAtCreate && this.c.exactSpeechPricing,
    });
    switch (next.do) {
      case "collect": {
        // Paid for and not yet stored (a kill during the download, or a result that an earlier run
        // could not get or got broken): fetched again, once a run, before anything is created.
        this.fetchedAgain.add(job.id);
        const paid = st.attempts.at(-1);
        const outcome = paid?.taskId ? await this.collection.paid(job, paid) : "left";
        // Broken again (not merely out of reach this time): --retry-failed asked for a new task, and
        // only now is one paid for.
        return next.again && outcome === "failed" && this.c.retryFailed ? "again" : "done";
      }
      case "nothing":
        return "done";
      case "open": {
        if (next.inTurn) {
          // Priced, reserved, written ahead and created one at a time (see exactSpeechPricing).
          return this.speechTurn(async () => {
            const opened = await this.open(job);
            if (!opened) return "done";
            return this.create(job, opened);
          }).then((outcome) => (outcome === "created" ? this.follow(job) : outcome));
        }
        const opened = await this.open(job);
        if (!opened) return "done";
        const outcome = await this.create(job, opened);
        return outcome === "created" ? this.follow(job) : outcome;
      }
      case "create": {
        // The phase is `intent`: an attempt is open, its task not known.
        const outcome = await this.create(job, openAttempt(st) as Attempt);
        return outcome === "created" ? this.follow(job) : outcome;
      }
      case "follow":
        return this.follow(job);
    }
  }

  /** Follows to their end the tasks no job of the manifest will (see Orphans). */
  settleOrphans(st: JobState, removed: boolean): Promise<void> {
    return this.orphans.settle(st, removed);
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
    startStep("first intent journalled");
    try {
      await this.c.ledger.markSent?.(key);
    } catch {
      // The coordinator is gone and the run halts (it ends `unreachable`). The intent stays in the journal, never
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
    startStep("first create handed to the client");
    try {
      taskId = await this.post(job, body, attempt.key, ours);
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
    const holder = holderOf(this.state, taskId, attempt.key);
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
    await markHolder(this.c, holder, taskId, error);
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
    const replayed = isReplay(this.c.clients.http.clockOffsetMs, attempt, service.createdAt(final));
    if (replayed) {
      this.c.log.warn(
        { job: job.id, event: "replayed", task_id: attempt.taskId },
        "the Idempotency-Key returned a task created before this run: its points were paid then, not counted now",
      );
    }
    await this.settle(job, attempt, cost, replayed ? { replayed } : {});
    await this.collection.collect(job, final, attempt.n);
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
}

/**
 * How long a job's task should take at the services' nominal pace: what orders the creates
 * (longest first) and tells the trackers when to look first, once they have learnt the pace.
 */
export function nominalMs(job: Job): number {
  return serviceFor(job.kind).nominalMs(job);
}
