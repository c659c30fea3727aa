// Follows tasks to their end with as few requests as possible. Each service has one poller: when
// several tasks are due at once, one list request answers for up to 100 of them, and whatever a
// page says of any task followed is used; a single task is asked about directly. Both predict a
// task's end from its nominal time (a video's stages, a line's text) and the pace observed here.
// Video tasks also say how long they still need (estimated_remaining_seconds, in whole seconds),
// which bounds the next look; once the pace is learnt a video is looked at once, at its end, by the
// single query that its URL needs anyway. Speech tasks say nothing of the kind.
import { setTimeout as sleep } from "node:timers/promises";
import { NotFoundError } from "../api/errors.js";
import { countBillableChars, type SpeechTask } from "../api/speech.js";
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

/**
 * What other processes on the account read of tasks (through a coordinator): the services list
 * every task of the account on each page, so a page one process reads answers for the others too.
 * Best effort both ways: a sighting that cannot be had costs only the look it would have saved.
 */
export interface Sightings<T> {
  /** The newest sighting of each task (same order), with when it was read (epoch ms). */
  recall(ids: readonly string[]): Promise<ReadonlyArray<{ task: T; at: number } | undefined>>;
  /** What a page or a look just showed. Never throws. */
  tell(tasks: readonly T[]): void;
}

/** Told of every failed look at a task (after the HTTP layer's own retries), so none is silent. */
export type TrackTrouble = (taskId: string, error: unknown, failures: number) => void;

/** What the caller knows of a task before the first look. */
export interface TrackHint {
  /**
   * How long the task should take at the service's nominal pace (see `expectedSpeechMs`): the
   * first look waits for it, scaled by the pace observed so far, instead of looking at once.
   */
  expectedMs?: number;
}

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);

/** Items asked for per list page: the most either service gives. */
const PAGE_SIZE = 100;
/** The longest a due video waits for others to come due with it while the pace is unknown. */
const VIDEO_GATHER_MS = 250;
/** Videos due together, with the pace learnt, that are asked about with a list rather than one by one. */
const LIST_WHEN_PREDICTED = 10;
/** Looks before a line's nominal end while the service's pace is not learnt yet. */
const EARLY_LOOKS = 2;

/** List reads are half the minimum interval apart, and never more than this. */
const LIST_SPACING_MS = 1000;
/** List pages read beyond those the followed tasks could fill, before single looks take over. */
const PAGE_MARGIN = 2;

/** How far below a prediction that held, toward the earliest possible end, the next one tries. */
const PACE_EXPLORE = 0.5;
/** The pace is this quantile of recent samples: high, as looking early costs more than a little late. */
const PACE_QUANTILE = 0.75;
/** Ended tasks that set the observed pace: recent ones, as the service's load changes. */
const PACE_SAMPLES = 25;
/** Past the predicted end, the next look waits this share of the task's time, growing each time. */
const BACKOFF_SHARE = 0.1;
const BACKOFF_GROWTH = 1.5;

/** A task's predicted end, kept between looks. */
interface Plan {
  /** When it should end (epoch ms). */
  endAt: number;
  /** The attempt seen last: a new one (a retry) moves the end. */
  attempt: number;
  /** Looks after `endAt` that found it still open: each waits a little longer. */
  late: number;
  /** Looks before `endAt` while the pace is not learnt yet. */
  early?: number;
}

interface Entry<T> {
  taskId: string;
  createdAt: number;
  /** When this process began to follow it (epoch ms). */
  since: number;
  /** The last time a look found it not ended (epoch ms): what bounds its duration from below. */
  openAt: number;
  /** The task's own estimate of the time it still needs, at the last look. */
  remaining?: { seconds: number; at: number };
  dueAt: number;
  /** Consecutive failed looks, and since when: reset by any readable answer. */
  failures: number;
  failingSince?: number;
  plan?: Plan;
  /** The caller's nominal time for the task (TrackHint.expectedMs): scaled by the pace learnt. */
  expectedMs?: number;
  onUpdate: (task: T) => void;
  resolve: (task: T) => void;
  reject: (error: unknown) => void;
}

abstract class Poller<T> {
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
  /** Observed over nominal duration of recent tasks that ended well (see `sample`). */
  protected readonly paces: number[] = [];
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
      const next = this.nextLookAt();
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

  /**
   * When to look next: when the first task is due, or a little later (`gatherMs`) when enough
   * others come due by then for one list request to answer for all of them.
   */
  private nextLookAt(): number {
    const times = [...this.entries.values()].map((e) => e.dueAt).sort((a, b) => a - b);
    const first = times[0] ?? Date.now();
    const batch = times[Math.max(0, this.options.batchThreshold - 1)];
    return batch !== undefined && batch <= first + this.gatherMs() ? Math.max(first, batch) : first;
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
        now + Math.min(this.failureWait(entry.failures), entry.failingSince + this.options.giveUpMs - now);
    }
  }

  /** The wait after the nth failed look in a row: doubling from the shortest interval. */
  protected failureWait(failures: number): number {
    const first = Math.max(this.options.minIntervalMs, 250);
    return Math.min(this.options.maxIntervalMs, first * 2 ** Math.min(20, Math.max(0, failures - 1)));
  }

  private async pollOne(entry: Entry<T>): Promise<void> {
    try {
      this.requests += 1;
      const task = await this.get(entry.taskId, entry.plan !== undefined && Date.now() >= entry.plan.endAt);
      this.sightings?.tell([task]);
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
    if (this.paces.length === 0) return 1;
    const sorted = [...this.paces].sort((a, b) => a - b);
    return sorted[Math.floor((sorted.length - 1) * PACE_QUANTILE)] as number;
  }

  /**
   * Learns the pace from a task that ended well. It ended after the last look that found it open
   * and before the look that found it ended, and within a second of what its own timestamps (whole
   * seconds, `span`) say. When that span holds the predicted end, the prediction was not early:
   * the sample is the prediction, moved a share of the way to the earliest possible end, so a
   * service faster than predicted is found out; otherwise the span's end is taken.
   */
  protected sample(entry: Entry<T>, nominalMs: number, span?: { from: number; to: number }): void {
    if (!(nominalMs > 0)) return;
    let low = entry.openAt - entry.since;
    let high = Date.now() - entry.since;
    if (span && span.from > 0 && span.to >= span.from) {
      const seconds = span.to - span.from;
      low = Math.max(low, (seconds - 1) * 1000);
      high = Math.min(high, (seconds + 1) * 1000);
    }
    if (high < low) return;
    const planned = entry.plan ? entry.plan.endAt - entry.since : Number.POSITIVE_INFINITY;
    const end = planned >= low ? Math.min(planned, high) : high;
    // The wider the doubt, the further down it tries: a narrow span barely moves a prediction that
    // held (an early look costs a whole minimum interval), a span reaching back to the start halves it.
    // Without a prediction there is nothing that held: the span's end is taken as it is, as the
    // first samples set the looks of every task after them (an early look is a request wasted).
    const doubt = end > 0 && entry.plan ? (end - low) / end : 0;
    const sample = (end - PACE_EXPLORE * doubt * (end - low)) / nominalMs;
    if (this.paces.push(sample) > PACE_SAMPLES) this.paces.shift();
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
   * The first look at a task, at its predicted end: not held to the minimum interval, which spaces
   * the looks at one task (a service faster than a second is no reason to look late).
   */
  protected firstAt(expectedMs: number): number {
    return Math.min(this.options.maxIntervalMs, Math.max(0, expectedMs * this.pace()));
  }

  protected clamp(ms: number): number {
    return Math.min(this.options.maxIntervalMs, Math.max(this.options.minIntervalMs, ms));
  }

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

export class VideoPoller extends Poller<VideoTask> {
  /**
   * Whether pages were seen to list newer tasks after older ones. The spec states no order, so
   * this only chooses which page to read first (the end, where new tasks then are); every page
   * may still be read within the budget, and single looks cover what none showed.
   */
  private newestLast = false;
  /** `total` at the last list, and the page length the service actually gives. */
  private listed = { total: 0, pageLength: PAGE_SIZE };

  constructor(
    private readonly client: VideoClient,
    options: TrackOptions,
    signal: AbortSignal,
    trouble?: TrackTrouble,
  ) {
    super(options, signal, trouble);
  }

  /**
   * A look at a video that should have ended is ranked: it is most likely the fetch of a finished
   * result's URL, which the gate lets go before queued creates (see src/engine/limiter.ts).
   */
  protected get(taskId: string, ended: boolean) {
    return this.client.getTask(taskId, { signal: this.signal, ...(ended ? { rank: 1 } : {}) });
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

  /**
   * Before any video ended here, the first look is one interval in (by a list, with the others
   * created meanwhile): the service's estimate of what is left decides the next. Once the pace is
   * learnt, the first look is at the predicted end, and for a video that ends there it is the one
   * look its download needs anyway (lists carry no URL).
   */
  protected override firstWait(hint: TrackHint): number {
    if (hint.expectedMs === undefined) return 0;
    // A look at once would find it queued: one interval later it has the service's estimate too.
    if (this.paces.length === 0) return Math.min(hint.expectedMs, this.options.minIntervalMs);
    return this.firstAt(hint.expectedMs);
  }

  /**
   * Look again when the task should be done. The service's estimate is in whole seconds, rounded
   * up, and at least 1 while open, so it bounds what is left from below only by a second less; the
   * pace learnt from the videos that ended here places the end within that. Past the predicted end
   * and still open, short looks that grow a little each time. Never busier than the minimum.
   */
  protected nextInterval(task: VideoTask, entry: Entry<VideoTask>): number {
    const remaining = (task.estimated_remaining_seconds ?? 0) * 1000;
    if (this.paces.length === 0 || entry.expectedMs === undefined) return this.clamp(remaining * 0.8);
    const now = Date.now();
    const expected = entry.expectedMs * this.pace();
    entry.plan ??= { endAt: entry.since + expected, attempt: 0, late: 0 };
    const atLeast = Math.max(0, remaining - 1000) * 0.8;
    if (now < entry.plan.endAt) return this.clamp(Math.max(atLeast, entry.plan.endAt - now));
    const wait = expected * BACKOFF_SHARE * BACKOFF_GROWTH ** entry.plan.late;
    entry.plan.late += 1;
    return this.clamp(Math.max(atLeast, wait));
  }

  override track(
    taskId: string,
    createdAt: number,
    onUpdate: (task: VideoTask) => void = () => {},
    hint: TrackHint = {},
  ): Promise<VideoTask> {
    const tracked = super.track(taskId, createdAt, onUpdate, hint);
    const entry = this.entries.get(taskId);
    if (entry?.expectedMs !== undefined && this.paces.length > 0) {
      entry.plan = { endAt: entry.since + entry.expectedMs * this.pace(), attempt: 0, late: 0 };
    }
    return tracked;
  }

  /** Learns the pace from a video that succeeded (created_at and updated_at bound its time). */
  protected override ended(entry: Entry<VideoTask>, task: VideoTask): void {
    if (task.status !== "succeeded" || entry.expectedMs === undefined) return;
    this.sample(entry, entry.expectedMs, { from: task.created_at, to: task.updated_at });
  }

  /**
   * Until the pace is learnt the first looks are at once, so the videos created in the same moment
   * (a rate that is still growing lets them go a few at a time) wait briefly to share one list.
   */
  protected override gatherMs(): number {
    return this.paces.length === 0 ? Math.min(VIDEO_GATHER_MS, this.options.minIntervalMs / 2) : 0;
  }

  /**
   * Every video that succeeded needs one look of its own for its URL, so single looks are the
   * cheapest once predictions place them at the end. While the pace is unknown the looks mostly
   * find tasks still running, and a list page costs what a single look does and tells of every
   * video followed; so does it when many come due together.
   */
  protected override useList(due: readonly Entry<VideoTask>[]): boolean {
    if (this.paces.length === 0) return due.length > 0 && this.entries.size > 1;
    return due.length >= LIST_WHEN_PREDICTED;
  }

  /**
   * Reads pages until every due task was seen, the pages run out, or the budget is spent: as
   * many pages as the followed tasks could fill, plus a margin, and never more than `total` has.
   */
  protected async pollMany(due: Entry<VideoTask>[]): Promise<void> {
    const waiting = new Set(due.map((e) => e.taskId));
    const followed = this.entries.size;
    // Open tasks of other processes on the account (shards, other runs) share the pages with this
    // one's: each page of them is a page more that this one's tasks may be spread over.
    let othersOpen = 0;
    const read = new Set<number>();
    let page: number | undefined = this.newestLast ? this.lastPage() : 1;
    while (page !== undefined && waiting.size > 0) {
      read.add(page);
      this.requests += 1;
      // Asked at the length learnt: after a short page, where pages are placed by either size.
      const pageSize = Math.min(PAGE_SIZE, this.listed.pageLength);
      const list = await this.client.listPage(page, { pageSize }, { signal: this.signal });
      this.learn(page, list.items, list.total);
      othersOpen += this.takePage(list.items, waiting);
      const budget = Math.min(
        this.lastPage(),
        Math.ceil((followed + othersOpen) / this.listed.pageLength) + PAGE_MARGIN,
      );
      page = read.size < budget ? this.nextPage(read) : undefined;
    }
    await this.fallback(due, waiting);
  }

  private lastPage(): number {
    return Math.max(1, Math.ceil(this.listed.total / this.listed.pageLength));
  }

  /** The page length and order the service shows: they choose pages, never the answer. */
  private learn(page: number, items: readonly VideoTask[], total: number): void {
    const length = this.listed.pageLength;
    // A page short of a full one before the last: the service gives fewer a page than asked.
    const capped = items.length > 0 && items.length < length && page * length < total;
    if (items.length > length || capped) this.listed.pageLength = items.length;
    this.listed.total = total;
    const first = items[0]?.created_at;
    const last = items.at(-1)?.created_at;
    if (first !== undefined && last !== undefined && first !== last) this.newestLast = first < last;
  }

  /** The unread page nearest to where new tasks were last seen listed. */
  private nextPage(read: ReadonlySet<number>): number | undefined {
    const last = this.lastPage();
    for (let i = 0; i < last; i++) {
      const page = this.newestLast ? last - i : i + 1;
      if (!read.has(page)) return page;
    }
    return undefined;
  }
}

/** Nominal queue wait of a speech task (the emulator's), before its first attempt. */
const SPEECH_QUEUE_MS = 1000;
/** Nominal time of one attempt: a fixed part, and a part per counted character at speed 1. */
const SPEECH_ATTEMPT_MS = 2000;
const SPEECH_CHAR_MS = 15;
/** The longest a due line waits for others to come due with it (see `gatherMs`). */
const SPEECH_GATHER_MS = 250;

function attemptMs(text: string, speed: number): number {
  // Faster speech makes less audio to generate. Slower speech is not assumed to take longer: a
  // prediction far too long holds a finished line back for all of the excess, while one too short
  // costs a look and at most a minimum interval.
  const pace = speed > 1 ? speed : 1;
  return SPEECH_ATTEMPT_MS + (SPEECH_CHAR_MS * countBillableChars(text)) / pace;
}

/**
 * How long a speech task with this text should take from creation to end at the service's
 * nominal pace: its queue wait and one attempt. A `track()` hint; the poller scales it by the pace
 * it observes, so a slower or faster service (or the sandbox's time scale) is learned.
 */
export function expectedSpeechMs(text: string, speed = 1): number {
  return SPEECH_QUEUE_MS + attemptMs(text, speed || 1);
}

/** Nominal stage times of a video task (the emulator's; the spec names the stages, not their times). */
const VIDEO_QUEUE_MS = 5000;
const VIDEO_OPTIMIZE_MS = 8000;
const VIDEO_BASE_MS = 32_000;
const VIDEO_PER_SECOND_MS = 5100;
const VIDEO_UPSCALE_MS = 10_000;
const VIDEO_UPSCALE_PER_SECOND_MS = 2000;
const VIDEO_LITE_SHARE = 0.6;
const UPSCALED = new Set(["1080P", "2K", "4K"]);

/**
 * How long a video task of this request should take from creation to end at a nominal pace: the
 * stages the spec names (queue, prompt optimization, generation, upload, upscale). Used to order
 * creates across both services, longest first; only the order of these figures matters.
 */
export function expectedVideoMs(request: {
  model?: string;
  resolution?: string;
  duration?: number;
  use_context_ir?: boolean;
}): number {
  const seconds = request.duration ?? 5;
  let work = VIDEO_BASE_MS + VIDEO_PER_SECOND_MS * seconds;
  if (request.use_context_ir === true) work += VIDEO_OPTIMIZE_MS;
  if (UPSCALED.has(String(request.resolution ?? "").toUpperCase())) {
    work += VIDEO_UPSCALE_MS + VIDEO_UPSCALE_PER_SECOND_MS * seconds;
  }
  return VIDEO_QUEUE_MS + work * (request.model === "vid-h3-lite" ? VIDEO_LITE_SHARE : 1);
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

  /** Lines end close together in a busy run: a short wait lets one list see several of them. */
  protected override gatherMs(): number {
    return Math.min(SPEECH_GATHER_MS, this.options.minIntervalMs / 2);
  }

  override track(
    taskId: string,
    createdAt: number,
    onUpdate: (task: SpeechTask) => void = () => {},
    hint: TrackHint = {},
  ): Promise<SpeechTask> {
    const tracked = super.track(taskId, createdAt, onUpdate, hint);
    const entry = this.entries.get(taskId);
    if (entry && hint.expectedMs !== undefined) {
      entry.plan = { endAt: entry.since + hint.expectedMs * this.pace(), attempt: 0, late: 0 };
    }
    return tracked;
  }

  protected override firstWait(hint: TrackHint): number {
    return hint.expectedMs === undefined ? 0 : this.clamp(hint.expectedMs * this.pace());
  }

  /**
   * Looks when the task should end (the spec's fixed 3 s looks finish lines late on average by
   * half of that); once past it and still open, short looks that grow a little each time.
   */
  protected nextInterval(task: SpeechTask, entry: Entry<SpeechTask>): number {
    const now = Date.now();
    const run = attemptMs(task.input.text, task.input.speed) * this.pace();
    let plan = entry.plan;
    if (!plan) {
      plan = { endAt: entry.since + SPEECH_QUEUE_MS * this.pace() + run, attempt: task.attempt, late: 0 };
      entry.plan = plan;
    } else if (task.attempt > plan.attempt) {
      // A retry began since the last look: one more attempt from about now.
      if (task.attempt > 1) Object.assign(plan, { endAt: now + run, late: 0 });
      plan.attempt = task.attempt;
    }
    if (now < plan.endAt) {
      // Until a line here has ended, the nominal end may be far too late (a faster service, a
      // sandbox at a small time scale: seconds late for every line of the first wave). Two looks
      // come first, after the shortest interval and twice it, never past the nominal end: two list
      // requests for the whole wave.
      if (this.paces.length === 0 && (plan.early ?? 0) < EARLY_LOOKS) {
        const probe = this.options.minIntervalMs * 2 ** (plan.early ?? 0);
        plan.early = (plan.early ?? 0) + 1;
        return this.clamp(Math.min(plan.endAt - now, probe));
      }
      return this.clamp(plan.endAt - now);
    }
    const wait = run * BACKOFF_SHARE * BACKOFF_GROWTH ** plan.late;
    plan.late += 1;
    return this.clamp(wait);
  }

  /** Learns the pace from a line that ended on its first attempt (a retry's time is not its own). */
  protected override ended(entry: Entry<SpeechTask>, task: SpeechTask): void {
    if (task.status !== "succeeded" || task.attempt !== 1) return;
    this.sample(entry, expectedSpeechMs(task.input.text, task.input.speed), {
      from: task.created_at,
      to: task.finished_at,
    });
  }

  /**
   * A list page costs what a single look does and tells of every line followed, and of the lines
   * created a moment later (a single look at the first of a wave would be followed by a list).
   */
  protected override useList(due: readonly Entry<SpeechTask>[]): boolean {
    return due.length > 0;
  }

  /**
   * The list is newest first by the spec and filtered from the oldest due task on. Pages are
   * walked by the items received (a page may come back short), until every due task was seen,
   * `total` is reached, or as many pages as the followed tasks could fill plus a margin were read.
   */
  protected async pollMany(due: Entry<SpeechTask>[]): Promise<void> {
    const waiting = new Set(due.map((e) => e.taskId));
    const oldest = Math.min(...due.map((e) => e.createdAt));
    const followed = this.entries.size;
    let othersOpen = 0;
    let pageLength = PAGE_SIZE;
    let offset = 0;
    for (let pages = 1; waiting.size > 0; pages++) {
      this.requests += 1;
      const list = await this.client.listPage(
        offset,
        { startTime: Math.max(1, oldest - 60), limit: PAGE_SIZE },
        { signal: this.signal },
      );
      othersOpen += this.takePage(list.items, waiting);
      offset += list.items.length;
      if (list.items.length === 0 || offset >= list.total) break;
      pageLength = Math.min(pageLength, list.items.length);
      if (pages >= Math.ceil((followed + othersOpen) / pageLength) + PAGE_MARGIN) break;
    }
    await this.fallback(due, waiting);
  }
}
