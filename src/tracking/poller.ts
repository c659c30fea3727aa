// Follows tasks to their end with as few requests as possible. Each service has one poller
// (video-poller.ts, speech-poller.ts): when several tasks are due at once, one list request answers
// for up to 100 of them, and whatever a page says of any task followed is used; a single task is
// asked about directly. Both predict a task's end from its nominal time (durations.ts) and the
// pace observed here (pace.ts); when each look comes is scheduler.ts's.
import { setTimeout as sleep } from "node:timers/promises";
import { NotFoundError } from "../api/errors.js";
import { type Entry, TERMINAL } from "./entry.js";
import { Pace } from "./pace.js";
import { failureWait, nextLookAt } from "./scheduler.js";
import {
  type Sightings,
  TaskUnreadableError,
  type TrackHint,
  type TrackOptions,
  type TrackTrouble,
} from "./track.js";

/** List reads are half the minimum interval apart, and never more than this. */
const LIST_SPACING_MS = 1000;
/**
 * How long a task this process has not seen yet may be "not found" before that is believed. The
 * specs promise no read-after-create: a service may answer for a task id it has just handed out
 * before its queries know it, and failing such a job (then paying for it again) costs money.
 * Short all the same: a task that is really gone fails its job after this, not after --give-up-after.
 */
const NOT_FOUND_GRACE_MS = 10_000;

export abstract class Poller<T> {
  protected readonly entries = new Map<string, Entry<T>>();
  private wake: (() => void) | undefined;
  /** When this poller last read a list (epoch ms). */
  private listedAt = 0;
  private loop: Promise<void> | undefined;
  /** Requests this poller made, for the run's statistics. */
  requests = 0;
  /** How long the tasks that ended took from when they were followed (ms), newest last; for the ETA. */
  readonly durations: number[] = [];
  /** Tasks settled by what another process read, without a request of this one. */
  sighted = 0;
  /** How much longer than nominal tasks take here, learnt from those that ended well. */
  protected readonly observed = new Pace();
  private sightings: Sightings<T> | undefined;

  constructor(
    protected readonly options: TrackOptions,
    protected readonly signal: AbortSignal,
    private readonly trouble: TrackTrouble = () => {},
  ) {}

  /** Shares what this poller reads with other processes, and uses what they read. */
  share(sightings: Sightings<T>): void {
    this.sightings = sightings;
  }

  /** Resolves with the task once it is terminal; `onUpdate` sees every status read on the way. */
  track(
    taskId: string,
    createdAt: number,
    onUpdate: (task: T) => void = () => {},
    hint: TrackHint = {},
  ): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const followed = this.entries.get(taskId);
      if (followed) {
        // One task followed twice (a service that gave one id to two creates): both hear its
        // news and its end; neither waits for ever on an entry the other replaced.
        const first = { resolve: followed.resolve, reject: followed.reject, onUpdate: followed.onUpdate };
        followed.resolve = (task) => {
          first.resolve(task);
          resolve(task);
        };
        followed.reject = (error) => {
          first.reject(error);
          reject(error);
        };
        followed.onUpdate = (task) => {
          first.onUpdate(task);
          onUpdate(task);
        };
        return;
      }
      const now = Date.now();
      this.entries.set(taskId, {
        taskId,
        createdAt,
        since: now,
        openAt: now,
        dueAt: now + this.firstWait(hint),
        failures: 0,
        ...(hint.expectedMs !== undefined && hint.expectedMs > 0 ? { expectedMs: hint.expectedMs } : {}),
        onUpdate,
        resolve,
        reject,
      });
      this.start();
    });
  }

  /** Called with news from elsewhere (a callback): settles the task without a request. */
  offer(task: T): void {
    const entry = this.entries.get(this.idOf(task));
    if (entry) this.deliver(entry, task);
  }

  /** `bonus`: read on a list page while the task was not due; it then never delays its next look. */
  protected deliver(entry: Entry<T>, task: T, bonus = false): void {
    // Once stopped, an answer that arrives late changes nothing: the task is left as last recorded,
    // for the next run to follow (a run that is being interrupted must not start a download).
    if (this.signal.aborted) return;
    entry.failures = 0;
    delete entry.failingSince;
    entry.seen = true;
    entry.onUpdate(task);
    const remaining = this.remainingOf(task);
    if (remaining !== undefined) entry.remaining = { seconds: remaining, at: Date.now() };
    if (TERMINAL.has(this.statusOf(task))) {
      this.entries.delete(entry.taskId);
      this.ended(entry, task);
      // Bounded: a long run keeps the recent past, which is what predicts the near future.
      if (this.durations.push(Date.now() - entry.since) > 500) this.durations.shift();
      entry.resolve(task);
    } else {
      const now = Date.now();
      const next = now + this.nextInterval(task, entry);
      entry.openAt = now;
      // The minimum interval spaces the requests made for a task; a page asked for others cost it
      // none, and must not push back a look planned for when the task should end.
      entry.dueAt = bonus && entry.dueAt > now ? Math.min(entry.dueAt, next) : next;
    }
  }

  private start(): void {
    this.wake?.();
    if (this.loop) return;
    // A turn later: the tasks tracked together come due together, and one list answers for them.
    this.loop = Promise.resolve()
      .then(() => this.run())
      .catch((error: unknown) => {
        for (const entry of this.entries.values()) entry.reject(error);
        this.entries.clear();
      })
      .finally(() => {
        this.loop = undefined;
        // A task tracked while the loop was ending would otherwise wait for a loop that is gone.
        if (this.entries.size > 0) this.start();
      });
  }

  private async run(): Promise<void> {
    while (this.entries.size > 0) {
      if (this.signal.aborted) {
        for (const entry of this.entries.values()) entry.reject(this.signal.reason);
        this.entries.clear();
        return;
      }
      const now = Date.now();
      const next = nextLookAt(this.entries.values(), this.options.batchThreshold, this.gatherMs());
      if (next > now) {
        await this.pause(next - now);
        continue;
      }
      let due = [...this.entries.values()].filter((e) => e.dueAt <= now);
      if (this.sightings) {
        await this.recall(due);
        due = due.filter((e) => this.entries.has(e.taskId) && e.dueAt <= now);
        if (due.length === 0) continue;
      }
      if (this.useList(due)) {
        // A page tells of every task followed; read again sooner, it would mostly repeat the last
        // one, while the tasks coming due meanwhile gather for the next.
        const spaced = this.listedAt + Math.min(this.options.minIntervalMs / 2, LIST_SPACING_MS);
        if (spaced > now) {
          await this.pause(spaced - now);
          continue;
        }
        this.listedAt = now;
        try {
          await this.pollMany(due);
          continue;
        } catch (error) {
          if (this.signal.aborted) continue;
          // A list that cannot be read (one bad item spoils a page) must not hold back the healthy
          // tasks on it: each due task is asked about on its own, and only its own failures count.
          this.trouble("(list)", error, 0);
        }
      }
      await Promise.all(due.filter((e) => this.entries.has(e.taskId)).map((e) => this.pollOneSafely(e)));
    }
  }

  /** Sleeps until `ms` passed or a task is tracked (`wake`), or the run stops. */
  private async pause(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      this.wake = resolve;
      sleep(Math.max(5, ms), undefined, { signal: this.signal }).then(resolve, resolve);
    });
    this.wake = undefined;
  }

  /**
   * What other processes read of the due tasks since this one last looked: an end is taken as it
   * is (the end of a task does not change); a status still open only when it is fresher than the
   * shortest interval, as a look of this process would be.
   */
  private async recall(due: readonly Entry<T>[]): Promise<void> {
    const sightings = this.sightings;
    if (!sightings || due.length === 0) return;
    let seen: ReadonlyArray<{ task: T; at: number } | undefined>;
    try {
      seen = await sightings.recall(due.map((e) => e.taskId));
    } catch {
      return;
    }
    const now = Date.now();
    for (const [i, entry] of due.entries()) {
      const s = seen[i];
      if (!s || !this.entries.has(entry.taskId) || this.idOf(s.task) !== entry.taskId) continue;
      const ended = TERMINAL.has(this.statusOf(s.task));
      if (s.at <= entry.openAt || (!ended && now - s.at > this.options.minIntervalMs)) continue;
      if (ended) this.sighted += 1;
      this.deliver(entry, s.task);
    }
  }

  /** One look; a failure is counted against the task, and after `giveUpMs` of them it is given up. */
  protected async pollOneSafely(entry: Entry<T>): Promise<void> {
    try {
      await this.pollOne(entry);
    } catch (error) {
      if (this.signal.aborted) return;
      const now = Date.now();
      entry.failures += 1;
      entry.failingSince ??= now;
      this.trouble(entry.taskId, error, entry.failures);
      if (now - entry.failingSince >= this.options.giveUpMs) {
        this.entries.delete(entry.taskId);
        const seconds = Math.round((now - entry.failingSince) / 1000);
        entry.reject(
          new TaskUnreadableError(
            `task ${entry.taskId} could not be read for ${seconds} s (${entry.failures} tries; last: ${(error as Error).message})`,
            entry.failures,
            { cause: error },
          ),
        );
        return;
      }
      // Tried again later each time (an answer that cannot be read now is rarely readable a moment
      // later), up to the longest interval, and never later than the give-up moment.
      entry.dueAt =
        now +
        Math.min(failureWait(this.options, entry.failures), entry.failingSince + this.options.giveUpMs - now);
    }
  }

  private async pollOne(entry: Entry<T>): Promise<void> {
    try {
      this.requests += 1;
      const task = await this.get(entry.taskId, entry.plan !== undefined && Date.now() >= entry.plan.endAt);
      this.sightings?.tell([task]);
      if (this.entries.has(entry.taskId)) this.deliver(entry, task);
    } catch (error) {
      // Believed once the task was seen, or after the grace; before, a failed look like any other.
      if (error instanceof NotFoundError && (entry.seen || Date.now() - entry.since >= NOT_FOUND_GRACE_MS)) {
        this.entries.delete(entry.taskId);
        entry.reject(error);
        return;
      }
      throw error;
    }
  }

  /** The tasks followed now: since when, and their own estimate of what is left when they gave one. */
  inFlight(): Array<{ since: number; remaining?: { seconds: number; at: number } }> {
    return [...this.entries.values()].map((e) => ({
      since: e.since,
      ...(e.remaining ? { remaining: e.remaining } : {}),
    }));
  }

  /** Seconds the task says it still needs, when it says. */
  protected remainingOf(_task: T): number | undefined {
    return undefined;
  }

  /** How long to wait before the first look; at once unless a poller knows better. */
  protected firstWait(_hint: TrackHint): number {
    return 0;
  }

  /** How long the first due task may wait for others to come due, so that one list serves them. */
  protected gatherMs(): number {
    return 0;
  }

  /** Told of every task that ended, before its promise settles. */
  protected ended(_entry: Entry<T>, _task: T): void {}

  /**
   * How much longer than nominal tasks take here (below 1: shorter): a high quantile of recent
   * samples, 1 before any ended.
   */
  pace(): number {
    return this.observed.value();
  }

  /** Whether the due tasks are asked about with list pages rather than one by one. */
  protected useList(due: readonly Entry<T>[]): boolean {
    return due.length >= this.options.batchThreshold;
  }

  /** `ended`: the task should have ended by now (a look that collects it rather than asks). */
  protected abstract get(taskId: string, ended: boolean): Promise<T>;
  protected abstract pollMany(due: Entry<T>[]): Promise<void>;
  protected abstract idOf(task: T): string;
  protected abstract statusOf(task: T): string;
  protected abstract nextInterval(task: T, entry: Entry<T>): number;

  /**
   * Delivers what a list page says of every task followed, due or not: a status read is news
   * whoever asked. The tasks seen are struck from `waiting`.
   */
  protected takePage(items: readonly T[], waiting: Set<string>): number {
    this.sightings?.tell(items);
    let othersOpen = 0;
    for (const task of items) {
      const id = this.idOf(task);
      waiting.delete(id);
      const entry = this.entries.get(id);
      if (entry) this.deliver(entry, task, true);
      else if (!TERMINAL.has(this.statusOf(task))) othersOpen += 1;
    }
    return othersOpen;
  }

  /** Due tasks no list page showed are asked about one by one. */
  protected async fallback(due: Entry<T>[], waiting: ReadonlySet<string>): Promise<void> {
    await Promise.all(
      due
        .filter((e) => waiting.has(e.taskId) && this.entries.has(e.taskId))
        .map((e) => this.pollOneSafely(e)),
    );
  }
}
