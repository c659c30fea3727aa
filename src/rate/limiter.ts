// Limits per account and service: requests paced at a rate found as the run goes (rate.ts), and
// tasks in flight per service (p-limit around each job's whole life).
//
// Requests come in two lanes. Reads (a due poll, a list page, the balance) and writes (a create, an
// upload) share the rate; when both wait, a read goes after at most READ_EVERY - 1 writes, so a due
// poll is never starved by a queue of creates and creates keep nine slots in ten, while the looks
// a busy rate holds back come due together and one list page answers for them. A ranked read (the
// URL of a task that succeeded: paid for, only waiting to be collected) goes before any write.
// Writes wait by rank, the longest job's create first. When no write waits, reads take every turn.
// Hand-written rather than bottleneck: bottleneck has strict priorities (a busy tracker would
// starve creates), fixes a job's start time when it queues (a Retry-After that comes later cannot
// move it), and its queue cannot be left by an abort.
import pLimit, { type LimitFunction } from "p-limit";
import { AbortedError, RateLimitError } from "../api/errors.js";
import type { RequestGate } from "../api/http.js";
import { DEFAULT_CEILING_RPS, RateController, type RateSettings, type RememberedRate } from "./controller.js";

export interface ServiceLimits {
  /** Highest request rate to use (`--rps`); the rate found never goes above it. */
  rps: number;
  /** `--rps fixed:N`: the rate is `rps` and never moves. */
  fixed?: boolean;
  /** Tasks created and not yet ended, at most. */
  inFlight: number;
}

/**
 * Whether the service limits requests per API key (both services share one rate) or per service.
 * The specs do not say; the sandbox limits per key, as API gateways commonly do, and sharing is
 * the safe reading: see docs/request-rates.md for the measurements behind the default.
 */
type RateScope = "key" | "service";

export type Lane = "read" | "write";

/**
 * A request rate shared with the other processes on the account (a coordinator, src/coord): it
 * gives each send its moment and hears the answers, so a 429 one process meets slows all of them.
 */
interface SharedPace {
  /** Resolves at this process's next moment to send; rejects when the coordinator is lost. */
  turn(signal?: AbortSignal): Promise<void>;
  /** An answer that was not a 429. */
  accept(): void;
  /** A 429 for a request that left at `sentAt`. */
  limit(retryAfterMs: number | undefined, sentAt: number): Promise<void>;
  readonly current: number;
  /** For the next run: the shared rate as this process last heard it. */
  remember?(): RememberedRate;
}

/** Tasks in flight shared with the other processes on the account: one slot per job's life. */
interface SharedCap {
  acquire(signal?: AbortSignal): Promise<{ release(): Promise<void> }>;
}

/** The in-flight limit around each job's life, as the stages use it (p-limit's shape). */
export interface TaskLimit {
  <T>(fn: () => Promise<T>): Promise<T>;
  readonly concurrency: number;
}

/** What a coordinator shares: a rate per scope name, a cap per service, and where to say it is lost. */
export interface Sharing {
  pace(scope: string, settings: RateSettings): SharedPace;
  cap(service: "video" | "speech", inFlight: number): SharedCap;
  /** The coordinator failed a call: the run halts (exit 6) before the error reaches the caller. */
  lost(error: unknown): void;
}

/** setTimeout's longest delay: Node fires a longer one at once (with a TimeoutOverflowWarning). */
export const LONGEST_TIMER_MS = 2 ** 31 - 1;

/** One read in this many slots while writes wait. */
const READ_EVERY = 10;
/**
 * The questions a run asks before its first create (balance, pricing, voices, skills) go together
 * rather than 100 ms apart: four requests, well within any service's burst of a second's worth.
 */
const START_BURST = 4;

interface Waiter {
  lane: Lane;
  /** Writes wait highest rank first (the longest job's create first), then in arrival order. */
  rank: number;
  go: () => void;
  fail: (error: Error) => void;
}

/** Gives out turns to send, paced by its controller, in two lanes. */
export class PacedQueue {
  private readonly waiting: Record<Lane, Waiter[]> = { read: [], write: [] };
  private nextAt = 0;
  private writesSinceRead = 0;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Turns given at once at the start, before the pace applies. */
  private burst = START_BURST;
  /** A rate shared through a coordinator: it paces instead of `nextAt`. */
  private shared: { pace: SharedPace; lost: (error: unknown) => void } | undefined;
  /** A moment is being asked of the shared rate: one at a time, so lanes are chosen at send time. */
  private asking = false;
  private readonly stopping = new AbortController();

  constructor(readonly rate: RateController) {}

  /** From now on the shared rate gives the moments to send (before the first request). */
  share(pace: SharedPace, lost: (error: unknown) => void): void {
    this.shared = { pace, lost };
  }

  /** The rate in use: the shared one when there is one. */
  get current(): number {
    return this.shared ? this.shared.pace.current : this.rate.current;
  }

  /** The rate to remember for the next run: the shared one when there is one. */
  remember(): RememberedRate {
    return this.shared?.pace.remember?.() ?? this.rate.remember();
  }

  /** Waits for a turn; an abort while waiting leaves the queue without sending. */
  turn(lane: Lane, signal?: AbortSignal, rank = 0): Promise<void> {
    if (this.stopped) return Promise.reject(new AbortedError("the run's requests were stopped"));
    if (signal?.aborted) return Promise.reject(new AbortedError("aborted while waiting for a request slot"));
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const queue = this.waiting[lane];
        const at = queue.indexOf(waiter);
        if (at >= 0) queue.splice(at, 1);
        reject(new AbortedError("aborted while waiting for a request slot"));
      };
      const waiter: Waiter = {
        lane,
        rank,
        go: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        fail: (error) => {
          signal?.removeEventListener("abort", onAbort);
          reject(error);
        },
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      insertByRank(this.waiting[lane], waiter);
      this.pump();
    });
  }

  /** Requests waiting for their turn, by lane. */
  backlog(): Record<Lane, number> {
    return { read: this.waiting.read.length, write: this.waiting.write.length };
  }

  /** The service said "later": the queue waits until then (the controller knows until when). */
  paused(): void {
    this.pump();
  }

  stop(): void {
    this.stopped = true;
    this.stopping.abort();
    if (this.timer) clearTimeout(this.timer);
    for (const w of [...this.waiting.read, ...this.waiting.write]) {
      w.fail(new AbortedError("the run's requests were stopped"));
    }
    this.waiting.read = [];
    this.waiting.write = [];
  }

  private pump(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.shared) {
      this.pumpShared(this.shared);
      return;
    }
    for (;;) {
      if (this.waiting.read.length + this.waiting.write.length === 0) return;
      const now = Date.now();
      const at = Math.max(this.nextAt, this.rate.pausedUntil);
      if (at > now) {
        // Node fires a timer of more than 2^31 ms at once; the pump looks again when it fires.
        this.timer = setTimeout(() => this.pump(), Math.min(at - now, LONGEST_TIMER_MS));
        return;
      }
      const waiter = this.pick();
      // No credit for idle time: after a quiet spell the next slot is now, not a burst. Only the
      // run's first few requests (balance, pricing, voices, skills: asked together) go at once.
      if (this.burst > 0) this.burst -= 1;
      else this.nextAt = Math.max(this.nextAt, now - 1) + 1000 / this.rate.current;
      this.rate.send(now);
      if (this.waiting.read.length + this.waiting.write.length > 0) this.rate.busy(now);
      waiter.go();
    }
  }

  /**
   * Under a shared rate: the first few turns go at once (the questions before the first create),
   * then one moment at a time is asked of the coordinator, and the waiter chosen when it comes.
   * A moment that finds nobody waiting (they were aborted) is simply not used.
   */
  private pumpShared(shared: { pace: SharedPace; lost: (error: unknown) => void }): void {
    while (this.burst > 0 && this.waiting.read.length + this.waiting.write.length > 0) {
      this.burst -= 1;
      this.rate.send(Date.now());
      this.pick().go();
    }
    if (this.asking || this.stopped || this.waiting.read.length + this.waiting.write.length === 0) return;
    this.asking = true;
    shared.pace.turn(this.stopping.signal).then(
      () => {
        this.asking = false;
        if (this.stopped) return;
        if (this.waiting.read.length + this.waiting.write.length > 0) {
          this.rate.send(Date.now());
          this.pick().go();
        }
        this.pump();
      },
      (error: unknown) => {
        this.asking = false;
        if (this.stopped) return;
        // The run halts first, so that callers see a stop rather than an error of their own.
        shared.lost(error);
        for (const w of [...this.waiting.read, ...this.waiting.write]) w.fail(error as Error);
        this.waiting.read = [];
        this.waiting.write = [];
      },
    );
  }

  private pick(): Waiter {
    const { read, write } = this.waiting;
    // A finished result's fetch goes first: there is one per video that succeeded, no more.
    const collect = (read[0]?.rank ?? 0) > 0;
    const readTurn =
      read.length > 0 && (collect || write.length === 0 || this.writesSinceRead >= READ_EVERY - 1);
    if (readTurn) {
      this.writesSinceRead = 0;
      return read.shift() as Waiter;
    }
    this.writesSinceRead += 1;
    return write.shift() as Waiter;
  }
}

/** One service's in-flight limit and the queue its requests wait in (shared under the key scope). */
class ServiceLimiter {
  tasks: TaskLimit;
  private readonly local: LimitFunction;
  private readonly stopping = new AbortController();
  /** A rate shared with other processes (see PacedQueue.share): told of every answer. */
  private shared: { pace: SharedPace; lost: (error: unknown) => void } | undefined;

  constructor(
    readonly name: string,
    readonly queue: PacedQueue,
    inFlight: number,
  ) {
    this.local = pLimit(inFlight);
    this.tasks = this.local;
  }

  get currentRps(): number {
    return this.queue.current;
  }

  /**
   * Each job's life also holds a slot of the cap every process on the account shares. A slot that
   * cannot be had because the coordinator is lost halts the run (the life never starts).
   */
  shareCap(cap: SharedCap, lost: (error: unknown) => void): void {
    const { local, stopping } = this;
    const limited = <T>(fn: () => Promise<T>): Promise<T> =>
      local(async () => {
        let slot: { release(): Promise<void> };
        try {
          slot = await cap.acquire(stopping.signal);
        } catch (error) {
          if (!stopping.signal.aborted) lost(error);
          throw error;
        }
        try {
          return await fn();
        } finally {
          // A release that fails is a lost coordinator too; the slot's lease returns it anyway.
          await slot.release().catch((error: unknown) => lost(error));
        }
      });
    this.tasks = Object.assign(limited, {
      get concurrency() {
        return local.concurrency;
      },
    });
  }

  /** Requests go at the moments a rate shared with other processes gives (see PacedQueue.share). */
  sharePace(pace: SharedPace, lost: (error: unknown) => void): void {
    this.shared = { pace, lost };
    this.queue.share(pace, lost);
  }

  private accepted(): void {
    this.queue.rate.accept(Date.now());
    this.shared?.pace.accept();
  }

  stop(): void {
    this.stopping.abort();
  }

  /** Runs one attempt in its turn; an abort while waiting gives the turn up without sending. */
  async run<T>(attempt: () => Promise<T>, signal?: AbortSignal, lane: Lane = "write", rank = 0): Promise<T> {
    await this.queue.turn(lane, signal, rank);
    const sentAt = Date.now();
    try {
      const value = await attempt();
      this.accepted();
      return value;
    } catch (error) {
      if (error instanceof RateLimitError) {
        this.queue.rate.limit(Date.now(), error.retryAfterMs, sentAt);
        this.shared?.pace.limit(error.retryAfterMs, sentAt).catch((e: unknown) => this.shared?.lost(e));
        this.queue.paused();
      } else if (hasStatus(error)) {
        // An answer that is not a 429 was counted by the service all the same; no answer was not.
        this.accepted();
      }
      throw error;
    }
  }
}

/**
 * Keeps a lane highest rank first and, within a rank, first come first served: a waiter goes after
 * every one of its rank or higher (a binary search, as thousands of creates may wait).
 */
function insertByRank(queue: Waiter[], waiter: Waiter): void {
  let lo = 0;
  let hi = queue.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((queue[mid] as Waiter).rank >= waiter.rank) lo = mid + 1;
    else hi = mid;
  }
  queue.splice(lo, 0, waiter);
}

function hasStatus(error: unknown): boolean {
  return typeof (error as { status?: unknown })?.status === "number";
}

interface GateOptions {
  scope?: RateScope;
  /** Rates remembered from the last run on this account, by scope name (`key`, `video`, `speech`). */
  remembered?: Partial<Record<string, RememberedRate>>;
}

/** One limiter per service, chosen by path: `/vid/` for video, `/audio/` for speech. */
export class ServiceGate implements RequestGate {
  readonly video: ServiceLimiter;
  readonly speech: ServiceLimiter;
  readonly scope: RateScope;
  /** Each rate by its scope name (`key`, or `video` and `speech`): its limits and who paces by it. */
  private readonly rates: ReadonlyArray<{ name: string; limits: ServiceLimits; limiters: ServiceLimiter[] }>;
  /** The rates `resume` was given: a shared rate that nobody has set yet starts from them. */
  private remembered: Partial<Record<string, RememberedRate>> = {};

  constructor(
    private readonly limits: { video: ServiceLimits; speech: ServiceLimits },
    options: GateOptions = {},
  ) {
    this.scope = options.scope ?? "key";
    const queue = (l: ServiceLimits, name: string) =>
      new PacedQueue(new RateController(rateSettings(l, options.remembered?.[name])));
    if (this.scope === "key") {
      // One rate for the key: the larger of the two ceilings (the CLI gives both the same).
      const key = { ...limits.video, rps: Math.max(limits.video.rps, limits.speech.rps) };
      const shared = queue(key, "key");
      this.video = new ServiceLimiter("video", shared, limits.video.inFlight);
      this.speech = new ServiceLimiter("speech", shared, limits.speech.inFlight);
      this.rates = [{ name: "key", limits: key, limiters: [this.video, this.speech] }];
    } else {
      this.video = new ServiceLimiter("video", queue(limits.video, "video"), limits.video.inFlight);
      this.speech = new ServiceLimiter("speech", queue(limits.speech, "speech"), limits.speech.inFlight);
      this.rates = [
        { name: "video", limits: limits.video, limiters: [this.video] },
        { name: "speech", limits: limits.speech, limiters: [this.speech] },
      ];
    }
  }

  private pick(path: string): ServiceLimiter {
    return path.startsWith("/audio/") ? this.speech : this.video;
  }

  run<T>(
    path: string,
    attempt: () => Promise<T>,
    signal?: AbortSignal,
    method = "POST",
    rank = 0,
  ): Promise<T> {
    return this.pick(path).run(attempt, signal, method === "GET" ? "read" : "write", rank);
  }

  /** Nothing to do: each limiter sees its 429s itself, with the moment the request left. */
  rateLimited(_path: string, _retryAfterMs: number | undefined): void {}

  /** Starts from the rates the last run on this account found, by scope name (before any request). */
  resume(remembered: Partial<Record<string, RememberedRate>>): void {
    this.remembered = { ...remembered };
    for (const { name, limiters } of this.rates) {
      const r = remembered[name];
      if (r) limiters[0]?.queue.rate.resume(r);
    }
  }

  /** The rates to remember for the next run on this account, by scope name. */
  remember(): Record<string, RememberedRate> {
    if (this.scope === "key") return { key: this.video.queue.remember() };
    return { video: this.video.queue.remember(), speech: this.speech.queue.remember() };
  }

  /** Requests let go, over both services. */
  requests(): number {
    const rates = new Set([this.video.queue.rate, this.speech.queue.rate]);
    return [...rates].reduce((n, r) => n + r.sent, 0);
  }

  /** 429s met, over both services. */
  limitedCount(): number {
    const rates = new Set([this.video.queue.rate, this.speech.queue.rate]);
    return [...rates].reduce((n, r) => n + r.limited, 0);
  }

  /**
   * Shares the rate and the in-flight caps with every process on the account through a
   * coordinator (before the first request). The rate starts from the remembered one, if any.
   */
  share(sharing: Sharing): void {
    const lost = (error: unknown) => sharing.lost(error);
    for (const { name, limits, limiters } of this.rates) {
      const pace = sharing.pace(name, rateSettings(limits, this.remembered[name]));
      for (const limiter of limiters) limiter.sharePace(pace, lost);
    }
    this.video.shareCap(sharing.cap("video", this.limits.video.inFlight), lost);
    this.speech.shareCap(sharing.cap("speech", this.limits.speech.inFlight), lost);
  }

  async stop(): Promise<void> {
    this.video.stop();
    this.speech.stop();
    this.video.queue.stop();
    this.speech.queue.stop();
  }
}

function rateSettings(l: ServiceLimits, remembered: RememberedRate | undefined): RateSettings {
  return {
    ceiling: Number.isFinite(l.rps) && l.rps > 0 ? l.rps : DEFAULT_CEILING_RPS,
    ...(l.fixed ? { fixed: true } : {}),
    ...(remembered ? { initial: remembered } : {}),
  };
}
