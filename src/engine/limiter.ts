// Limits per service: requests per second (bottleneck) and tasks in flight (p-limit around each
// job's whole life). The specs state no rate limits, so the rate adapts: a burst of 429s slows it
// once (x0.6) and pauses the queue for Retry-After; about a second of successes speeds it up again
// (x1.25), never above the configured rate.
import { setTimeout as sleep } from "node:timers/promises";
import Bottleneck from "bottleneck";
import pLimit, { type LimitFunction } from "p-limit";
import { AbortedError } from "../api/errors.js";
import type { RequestGate } from "../api/http.js";

export interface ServiceLimits {
  /** Highest request rate to use; the adaptive rate never goes above it. */
  rps: number;
  /** Tasks created and not yet ended, at most. */
  inFlight: number;
}

const MIN_RPS = 0.5;
const BLOCKED = Symbol("blocked");

async function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleep(ms, undefined, signal ? { signal } : undefined);
  } catch {
    throw new AbortedError("aborted while waiting for a request slot");
  }
}

export class ServiceLimiter {
  readonly tasks: LimitFunction;
  private readonly requests: Bottleneck;
  private rps: number;
  private blockedUntil = 0;
  private last429 = 0;
  private successes = 0;

  constructor(
    readonly name: string,
    private readonly limits: ServiceLimits,
  ) {
    this.rps = limits.rps;
    this.requests = new Bottleneck({ minTime: Math.ceil(1000 / limits.rps) });
    this.tasks = pLimit(limits.inFlight);
  }

  get currentRps(): number {
    return this.rps;
  }

  /** Runs one attempt in its turn; an abort while waiting gives the turn up without sending. */
  async run<T>(attempt: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    for (;;) {
      const wait = this.blockedUntil - Date.now();
      if (wait > 0) await pause(wait, signal);
      // Bottleneck fixes each job's start time when it queues, so a job that comes up while the
      // service has said "wait" gives its turn back and queues again after the wait.
      const outcome = await this.requests.schedule(async () => {
        if (signal?.aborted) throw new AbortedError("aborted while waiting for a request slot");
        if (this.blockedUntil > Date.now()) return BLOCKED;
        return { value: await attempt() };
      });
      if (outcome === BLOCKED) continue;
      // Speed up only after a second's worth of successes and two quiet seconds: no see-saw.
      const quiet = Date.now() - this.last429 > 2000;
      if (++this.successes >= Math.max(5, Math.ceil(this.rps)) && quiet && this.rps < this.limits.rps) {
        this.successes = 0;
        this.setRps(Math.min(this.limits.rps, this.rps * 1.25));
      }
      return outcome.value;
    }
  }

  rateLimited(retryAfterMs: number | undefined): void {
    this.successes = 0;
    const now = Date.now();
    this.last429 = now;
    // The 429s of requests sent before the first one came back are one signal, not many.
    if (now >= this.blockedUntil) this.setRps(Math.max(MIN_RPS, this.rps * 0.6));
    this.blockedUntil = Math.max(this.blockedUntil, now + (retryAfterMs ?? 1000));
  }

  private setRps(rps: number): void {
    this.rps = rps;
    this.requests.updateSettings({ minTime: Math.ceil(1000 / rps) });
  }

  async stop(): Promise<void> {
    await this.requests.stop({ dropWaitingJobs: true }).catch(() => undefined);
  }
}

/** One limiter per service, chosen by path: `/vid/` for video, `/audio/` for speech. */
export class ServiceGate implements RequestGate {
  readonly video: ServiceLimiter;
  readonly speech: ServiceLimiter;

  constructor(limits: { video: ServiceLimits; speech: ServiceLimits }) {
    this.video = new ServiceLimiter("video", limits.video);
    this.speech = new ServiceLimiter("speech", limits.speech);
  }

  private pick(path: string): ServiceLimiter {
    return path.startsWith("/audio/") ? this.speech : this.video;
  }

  run<T>(path: string, attempt: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return this.pick(path).run(attempt, signal);
  }

  /**
   * The specs do not say whether limits are per key or per service; one API key serves both, so a
   * 429 from either slows and pauses both.
   */
  rateLimited(_path: string, retryAfterMs: number | undefined): void {
    this.video.rateLimited(retryAfterMs);
    this.speech.rateLimited(retryAfterMs);
  }

  async stop(): Promise<void> {
    await Promise.all([this.video.stop(), this.speech.stop()]);
  }
}
