// Limits per service: requests per second (bottleneck) and tasks in flight (p-limit around each
// job's whole life). The request rate adapts to 429s: halve and pause for Retry-After, then creep
// back up after a run of successes, since the specs state no limits.
import { setTimeout as sleep } from "node:timers/promises";
import Bottleneck from "bottleneck";
import pLimit, { type LimitFunction } from "p-limit";
import type { RequestGate } from "../api/http.js";

export interface ServiceLimits {
  /** Highest request rate to use; the adaptive rate never goes above it. */
  rps: number;
  /** Tasks created and not yet ended, at most. */
  inFlight: number;
}

const MIN_RPS = 0.5;
const RECOVER_AFTER = 20;

export class ServiceLimiter {
  readonly tasks: LimitFunction;
  private readonly requests: Bottleneck;
  private rps: number;
  private blockedUntil = 0;
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

  async run<T>(attempt: () => Promise<T>): Promise<T> {
    const wait = this.blockedUntil - Date.now();
    if (wait > 0) await sleep(wait);
    const result = await this.requests.schedule(attempt);
    if (++this.successes >= RECOVER_AFTER && this.rps < this.limits.rps) {
      this.successes = 0;
      this.setRps(Math.min(this.limits.rps, this.rps * 1.25));
    }
    return result;
  }

  rateLimited(retryAfterMs: number | undefined): void {
    this.successes = 0;
    this.setRps(Math.max(MIN_RPS, this.rps / 2));
    this.blockedUntil = Math.max(this.blockedUntil, Date.now() + (retryAfterMs ?? 1000));
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

  run<T>(path: string, attempt: () => Promise<T>): Promise<T> {
    return this.pick(path).run(attempt);
  }

  rateLimited(path: string, retryAfterMs: number | undefined): void {
    this.pick(path).rateLimited(retryAfterMs);
  }

  async stop(): Promise<void> {
    await Promise.all([this.video.stop(), this.speech.stop()]);
  }
}
