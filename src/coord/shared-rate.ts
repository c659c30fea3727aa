// One adaptive request rate per account and scope, shared by every process: RateController's rules
// (src/rate/controller.ts) applied in Redis to one state, so a 429 that one process meets slows all of
// them. Sending is GCRA-like: each turn reserves the next free moment in one script call
// (`tat = max(tat, now, pausedUntil) + 1000 / rps`) and the caller sleeps until it. Accepted answers
// are counted here and ride along with the next call (or a flush at most every 25 ms), so an
// answer costs no round trip of its own.
import { AbortedError } from "../api/errors.js";
import { type RateSettings, type RememberedRate, SAFE_START_RPS } from "../rate/controller.js";
import { type Link, SHARED_KEY_TTL_MS } from "./link.js";
import { RATE_RULES } from "./scripts.js";
import { sleep } from "./sleep.js";

export interface SharedRate {
  /** Resolves at this process's next moment to send; rejects when aborted or the coordinator is lost. */
  turn(signal?: AbortSignal): Promise<void>;
  /** An answer that was not a 429. */
  accept(): void;
  /** A 429 for a request that left at `sentAt` (this process's clock, epoch ms). */
  limit(retryAfterMs: number | undefined, sentAt: number): Promise<void>;
  /** The rate as of the last answer from the coordinator. */
  readonly current: number;
  /** For the next run: the rate now, and whether the service's limit set it. */
  remember(): RememberedRate;
}

/**
 * Accepted answers wait at most this long for a call to ride along with: the shared estimate of
 * what the service sustained leaves out the last RATE_RULES.reportLagMs, which must cover it.
 */
const FLUSH_MS = 25;

export class RedisSharedRate implements SharedRate {
  private rps: number;
  private settled: boolean;
  private held = 0;
  /** This process's clock at each answer not yet told to the coordinator. */
  private accepted: number[] = [];
  private flushTimer: NodeJS.Timeout | undefined;
  private readonly keys: [string, string];

  constructor(
    private readonly link: Link,
    readonly scope: string,
    private readonly settings: RateSettings,
  ) {
    if (!(settings.ceiling > 0)) {
      throw new RangeError(
        `Expected the rate's ceiling to be above 0 requests per second, got ${settings.ceiling}`,
      );
    }
    this.keys = [link.keys.rate(scope), link.keys.rateAccepted(scope)];
    const start = settings.fixed ? settings.ceiling : (settings.initial?.rps ?? SAFE_START_RPS);
    this.rps = Math.min(settings.ceiling, Math.max(RATE_RULES.minRps, start));
    this.settled = !settings.fixed && (settings.initial?.settled ?? false);
    for (const key of this.keys) link.keep(key);
  }

  get current(): number {
    return this.rps;
  }

  async turn(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) throw new AbortedError("aborted while waiting for a request slot", false);
    const answer = await this.call("clapperRateTurn", ["1"]);
    // On abort the reserved moment is simply not used: the shared pace stays correct, only slower.
    await sleep(Number(answer[0]), "a request slot", signal, this.link.gone);
  }

  accept(): void {
    this.accepted.push(Date.now());
    this.flushTimer ??= setTimeout(() => {
      this.flushTimer = undefined;
      if (this.accepted.length === 0) return;
      // A failed flush is a lost coordinator; the run hears of it through onLost.
      this.call("clapperRateTurn", ["0"]).catch(() => undefined);
    }, FLUSH_MS);
    this.flushTimer.unref();
  }

  async limit(retryAfterMs: number | undefined, sentAt: number): Promise<void> {
    // An endless Retry-After (hundreds of digits parse to Infinity) pauses as long as any does.
    const retry = retryAfterMs === undefined ? "" : String(Math.min(retryAfterMs, RATE_RULES.maxPauseMs));
    await this.call("clapperRateLimit", [retry, String(Math.max(0, Date.now() - sentAt))]);
  }

  remember(): RememberedRate {
    // Mid-probe, the rate that held is what the next run can trust.
    const rps = this.settled && this.held > 0 ? Math.min(this.rps, this.held) : this.rps;
    return { rps: Math.round(rps * 100) / 100, settled: this.settled };
  }

  /** One script call, carrying the answers accepted since the last one. */
  private async call(name: "clapperRateTurn" | "clapperRateLimit", tail: string[]): Promise<string[]> {
    const now = Date.now();
    const ages = new Map<number, number>();
    for (const at of this.accepted) {
      // Grouped by 10 ms: a few pairs per call however many answers came.
      const age = Math.max(0, Math.round((now - at) / 10) * 10);
      ages.set(age, (ages.get(age) ?? 0) + 1);
    }
    this.accepted = [];
    if (this.flushTimer) {
      clearTimeout(this.flushTimer);
      this.flushTimer = undefined;
    }
    const initial = this.settings.initial;
    const answer = (await this.link.script(name, this.keys, [
      this.link.now(),
      this.settings.ceiling,
      this.settings.fixed ? "1" : "0",
      // Where the state starts when no process has one yet.
      initial?.rps ?? "",
      initial?.settled ? 1 : 0,
      SHARED_KEY_TTL_MS,
      [...ages].map(([age, n]) => `${age}:${n}`).join(","),
      ...tail,
    ])) as string[];
    this.rps = Number(answer[1]);
    this.settled = Number(answer[2]) === 1;
    this.held = Number(answer[3]);
    return answer;
  }
}
