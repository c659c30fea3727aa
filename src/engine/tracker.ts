// Follows tasks to their end with as few requests as possible. Each service has one poller: when
// several tasks are due at once, one list request answers for up to 100 of them; a single task is
// asked about directly. Video tasks say how long they still need (estimated_remaining_seconds),
// which decides when to look again.
import { setTimeout as sleep } from "node:timers/promises";
import { NotFoundError } from "../api/errors.js";
import type { SpeechTask } from "../api/speech.js";
import type { SpeechClient } from "../api/speech-client.js";
import type { VideoTask } from "../api/video.js";
import type { VideoClient } from "../api/video-client.js";

export interface TrackOptions {
  /** Shortest wait between two looks at one task. */
  minIntervalMs: number;
  /** Longest wait between two looks at one task (the safety net when callbacks are on). */
  maxIntervalMs: number;
  /** A list request is used when at least this many tasks are due together. */
  batchThreshold: number;
  /**
   * How long a task may stay unreadable (invalid answers, an unknown status, errors after the HTTP
   * layer's retries) before it is given up on for this run: the task is left open, resumable.
   */
  giveUpMs: number;
}

export const DEFAULT_TRACK_OPTIONS: TrackOptions = {
  minIntervalMs: 1000,
  maxIntervalMs: 30_000,
  batchThreshold: 3,
  giveUpMs: 10 * 60 * 1000,
};

/** The task could not be read for `giveUpMs`: it is left as it is, for a later run to follow. */
export class TaskUnreadableError extends Error {
  override name = "TaskUnreadableError";
  constructor(
    message: string,
    readonly failures: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Told of every failed look at a task (after the HTTP layer's own retries), so none is silent. */
export type TrackTrouble = (taskId: string, error: unknown, failures: number) => void;

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);

interface Entry<T> {
  taskId: string;
  createdAt: number;
  /** When this process began to follow it (epoch ms). */
  since: number;
  /** The task's own estimate of the time it still needs, at the last look. */
  remaining?: { seconds: number; at: number };
  dueAt: number;
  /** Consecutive failed looks, and since when: reset by any readable answer. */
  failures: number;
  failingSince?: number;
  onUpdate: (task: T) => void;
  resolve: (task: T) => void;
  reject: (error: unknown) => void;
}

abstract class Poller<T> {
  protected readonly entries = new Map<string, Entry<T>>();
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  /** Requests this poller made, for the run's statistics. */
  requests = 0;
  /** How long the tasks that ended took from when they were followed (ms), newest last; for the ETA. */
  readonly durations: number[] = [];

  constructor(
    protected readonly options: TrackOptions,
    protected readonly signal: AbortSignal,
    private readonly trouble: TrackTrouble = () => {},
  ) {}

  /** Resolves with the task once it is terminal; `onUpdate` sees every status read on the way. */
  track(taskId: string, createdAt: number, onUpdate: (task: T) => void = () => {}): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.entries.set(taskId, {
        taskId,
        createdAt,
        since: Date.now(),
        dueAt: Date.now(),
        failures: 0,
        onUpdate,
        resolve,
        reject,
      });
      this.wake?.();
      this.loop ??= this.run().finally(() => {
        this.loop = undefined;
      });
    });
  }

  /** Called with news from elsewhere (a callback): settles the task without a request. */
  offer(task: T): void {
    const entry = this.entries.get(this.idOf(task));
    if (entry) this.deliver(entry, task);
  }

  protected deliver(entry: Entry<T>, task: T): void {
    // Once stopped, an answer that arrives late changes nothing: the task is left as last recorded,
    // for the next run to follow (a run that is being interrupted must not start a download).
    if (this.signal.aborted) return;
    entry.failures = 0;
    delete entry.failingSince;
    entry.onUpdate(task);
    const remaining = this.remainingOf(task);
    if (remaining !== undefined) entry.remaining = { seconds: remaining, at: Date.now() };
    if (TERMINAL.has(this.statusOf(task))) {
      this.entries.delete(entry.taskId);
      // Bounded: a long run keeps the recent past, which is what predicts the near future.
      if (this.durations.push(Date.now() - entry.since) > 500) this.durations.shift();
      entry.resolve(task);
    } else {
      entry.dueAt = Date.now() + this.nextInterval(task);
    }
  }

  private async run(): Promise<void> {
    while (this.entries.size > 0) {
      if (this.signal.aborted) {
        for (const entry of this.entries.values()) entry.reject(this.signal.reason);
        this.entries.clear();
        return;
      }
      const now = Date.now();
      const due = [...this.entries.values()].filter((e) => e.dueAt <= now);
      if (due.length === 0) {
        const next = Math.min(...[...this.entries.values()].map((e) => e.dueAt));
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          sleep(Math.max(5, next - now), undefined, { signal: this.signal }).then(resolve, resolve);
        });
        this.wake = undefined;
        continue;
      }
      if (due.length >= this.options.batchThreshold) {
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
      // Tried again a little later, never later than the give-up moment.
      const wait = Math.min(this.options.maxIntervalMs / 4, Math.max(this.options.minIntervalMs, 250));
      entry.dueAt = now + Math.min(wait, entry.failingSince + this.options.giveUpMs - now);
    }
  }

  private async pollOne(entry: Entry<T>): Promise<void> {
    try {
      this.requests += 1;
      const task = await this.get(entry.taskId);
      if (this.entries.has(entry.taskId)) this.deliver(entry, task);
    } catch (error) {
      if (error instanceof NotFoundError) {
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

  protected abstract get(taskId: string): Promise<T>;
  protected abstract pollMany(due: Entry<T>[]): Promise<void>;
  protected abstract idOf(task: T): string;
  protected abstract statusOf(task: T): string;
  protected abstract nextInterval(task: T): number;

  protected clamp(ms: number): number {
    return Math.min(this.options.maxIntervalMs, Math.max(this.options.minIntervalMs, ms));
  }

  /** Tasks a list did not mention are asked about one by one. */
  protected async fallback(due: Entry<T>[], seen: Set<string>): Promise<void> {
    await Promise.all(
      due.filter((e) => !seen.has(e.taskId) && this.entries.has(e.taskId)).map((e) => this.pollOneSafely(e)),
    );
  }
}

export class VideoPoller extends Poller<VideoTask> {
  constructor(
    private readonly client: VideoClient,
    options: TrackOptions,
    signal: AbortSignal,
    trouble?: TrackTrouble,
  ) {
    super(options, signal, trouble);
  }

  protected get(taskId: string) {
    return this.client.getTask(taskId, { signal: this.signal });
  }

  protected idOf(task: VideoTask) {
    return task.id;
  }

  protected statusOf(task: VideoTask) {
    return task.status;
  }

  protected override remainingOf(task: VideoTask): number | undefined {
    return task.estimated_remaining_seconds;
  }

  /** Look again when the task expects to be done, a little early; never busier than the minimum. */
  protected nextInterval(task: VideoTask): number {
    return this.clamp((task.estimated_remaining_seconds ?? 0) * 1000 * 0.8);
  }

  /**
   * The list is newest first with no id filter: read pages until every due task was seen or the
   * page reaches tasks older than the oldest one due.
   */
  protected async pollMany(due: Entry<VideoTask>[]): Promise<void> {
    const wanted = new Map(due.map((e) => [e.taskId, e]));
    const oldest = Math.min(...due.map((e) => e.createdAt));
    const seen = new Set<string>();
    const maxPages = Math.ceil(this.entries.size / 100) + 2;
    for (let page = 1; page <= maxPages && seen.size < wanted.size; page++) {
      this.requests += 1;
      const list = await this.client.listPage(page, { pageSize: 100 }, { signal: this.signal });
      for (const task of list.items) {
        const entry = wanted.get(task.id);
        if (entry && this.entries.has(task.id)) {
          seen.add(task.id);
          this.deliver(entry, task);
        }
      }
      const last = list.items.at(-1);
      if (!last || list.items.length < 100 || last.created_at < oldest - 60) break;
    }
    await this.fallback(due, seen);
  }
}

export class SpeechPoller extends Poller<SpeechTask> {
  constructor(
    private readonly client: SpeechClient,
    options: TrackOptions,
    signal: AbortSignal,
    trouble?: TrackTrouble,
  ) {
    super(options, signal, trouble);
  }

  protected get(taskId: string) {
    return this.client.getTask(taskId, { signal: this.signal });
  }

  protected idOf(task: SpeechTask) {
    return task.task_id;
  }

  protected statusOf(task: SpeechTask) {
    return task.status;
  }

  /** The spec suggests every 3 seconds; a task with a long text takes longer. */
  protected nextInterval(_task: SpeechTask): number {
    return this.clamp(3000);
  }

  /** Unended tasks created since the oldest due one, by status: few pages however large the organization. */
  protected async pollMany(due: Entry<SpeechTask>[]): Promise<void> {
    const wanted = new Map(due.map((e) => [e.taskId, e]));
    const oldest = Math.min(...due.map((e) => e.createdAt));
    const seen = new Set<string>();
    let offset = 0;
    const maxPages = Math.ceil(this.entries.size / 100) + 2;
    for (let page = 0; page < maxPages && seen.size < wanted.size; page++) {
      this.requests += 1;
      const list = await this.client.listPage(
        offset,
        { startTime: Math.max(1, oldest - 60), limit: 100 },
        { signal: this.signal },
      );
      for (const task of list.items) {
        const entry = wanted.get(task.task_id);
        if (entry && this.entries.has(task.task_id)) {
          seen.add(task.task_id);
          this.deliver(entry, task);
        }
      }
      offset += list.items.length;
      if (list.items.length < 100 || offset >= list.total) break;
    }
    await this.fallback(due, seen);
  }
}
