// How fast to send. The specs publish no rate limit, so the rate is found rather than guessed: it
// starts at a safe rate (or at the one remembered from the last run), doubles while the service
// accepts everything and requests are waiting for their turn (slow start), and on a 429 settles at
// the rate the service actually sustained over the last few seconds instead of cutting blindly.
// Once settled it holds for a while and then probes upward slowly, so a settled run meets only a
// few 429s a minute. A long Retry-After (a quota) pauses every request of the scope.
//
// Time is passed in, so the behaviour is tested without waiting (test/engine/rate.test.ts).

export interface RateSettings {
  /** The highest rate ever used (`--rps N`). */
  ceiling: number;
  /** `--rps fixed:N`: the rate never moves (a 429 still pauses for its Retry-After). */
  fixed?: boolean;
  /** Where to start: the rate remembered from the last run on this account, if any. */
  initial?: RememberedRate | undefined;
}

/** What a run leaves for the next one: the rate it ended at, and whether a 429 set it. */
export interface RememberedRate {
  rps: number;
  /** A 429 set this rate (the service's limit); otherwise it is only as fast as the run needed. */
  settled: boolean;
}

/** Requests per second at the start when nothing is remembered: the old fixed default of one service. */
export const SAFE_START_RPS = 10;
/** The ceiling without `--rps`: far above any rate the sandbox's clients need, still finite. */
export const DEFAULT_CEILING_RPS = 1000;
const MIN_RPS = 0.2;
/** How far back "what the service sustained" looks. */
const WINDOW_MS = 3000;
/** Slow start doubles the rate at most this often, and only while requests wait their turn. */
const DOUBLING_MS = 250;
/** After a 429 the settled rate is held this long before probing upward again. */
const HOLD_MS = 20_000;
/** Probing: a small step up at most this often, while requests wait their turn. */
const PROBE_MS = 1000;
/** A probe goes this far above the rate that held, and waits there to see whether it holds too. */
const PROBE_SPAN = 1.1;
/**
 * How long a probe must hold before the rate that held moves up to it: longer than a service's
 * bucket of a second's worth takes to empty at that small excess (about 22 s).
 */
const CONFIRM_MS = 30_000;
/**
 * After a cut, the service's bucket is empty and refills only by the margin: 429s of requests sent
 * this soon after it are its echo, not news.
 */
const CUT_GRACE_MS = 1000;
/** Within the grace after a cut, a 429 cuts again when the service accepted less than this share of the rate. */
const RECUT_BELOW = 0.75;
/** Answers since the cut needed to cut again (fewer read too low: see recut). */
const RECUT_ANSWERS = 8;
/** A Retry-After longer than this pauses every request of the scope. */
const LONG_RETRY_AFTER_MS = 2000;
/**
 * The longest such pause, whatever the Retry-After says: no request waits longer for its own (the
 * retry policies' `maxRetryAfterMs`, src/api/retry.ts), so a longer pause would only hold back
 * requests that are then refused at once; and a service that asks for years (a quota, a broken or
 * hostile gateway) would hold the run for ever, its timer (over 2^31 ms) firing every millisecond.
 */
const MAX_PAUSE_MS = 30_000;
/**
 * The cut when everything was accepted until the 429 and the rate was not growing: what the service
 * sustains is not known. The coordinator's shared rate (src/coord/scripts.ts) uses it in slow start
 * too: a deeper cut there (0.5, with 4 answers to recut) made three coordinated processes under
 * load meet 21-26 429s in about 650 requests, where 0.7 meets 9-19.
 */
const PLAIN_CUT = 0.7;
/**
 * The cut of one process when everything was accepted until the first 429 of slow start: the
 * service's burst hid its rate, and the last doubling overshot, so back to the rate before it (as
 * TCP's slow start does on a loss). From the safe start of 10/s against 5/s, 0.7 left 5 to 12 429s
 * before the rate was found, half leaves 2 (bench:throughput, scenario 3).
 */
const SLOW_START_CUT = 0.5;
/** The settled rate keeps this margin below what was sustained, so the next 429 is far off. */
const MARGIN = 0.95;

/** The rules above, for the rate a coordinator shares (src/coord/scripts.ts applies them in Redis). */
export const RATE_RULES = {
  safeStartRps: SAFE_START_RPS,
  minRps: MIN_RPS,
  windowMs: WINDOW_MS,
  doublingMs: DOUBLING_MS,
  holdMs: HOLD_MS,
  probeMs: PROBE_MS,
  probeSpan: PROBE_SPAN,
  confirmMs: CONFIRM_MS,
  cutGraceMs: CUT_GRACE_MS,
  recutBelow: RECUT_BELOW,
  recutAnswers: RECUT_ANSWERS,
  plainCut: PLAIN_CUT,
  longRetryAfterMs: LONG_RETRY_AFTER_MS,
  maxPauseMs: MAX_PAUSE_MS,
  margin: MARGIN,
} as const;

export class RateController {
  private rps: number;
  private slowStart: boolean;
  private settled: boolean;
  /** When each recent answer that was not a 429 came (epoch ms), oldest first. */
  private readonly accepted: number[] = [];
  /** Recent pauses for Retry-After: time the scope could not send is not held against the service. */
  private readonly pauses: Array<{ from: number; to: number }> = [];
  private firstSentAt: number | undefined;
  /** The rate a 429 last settled at: known to hold, where a failed probe returns. */
  private held: number | undefined;
  /** The rate before slow start's last doubling: it held. */
  private doubledFrom: number | undefined;
  private changedAt: number;
  private limitedAt = Number.NEGATIVE_INFINITY;
  /** No request of the scope leaves before this (epoch ms): the service's Retry-After. */
  pausedUntil = 0;
  /** 429s seen, and requests let go, for the run's statistics. */
  limited = 0;
  sent = 0;

  constructor(
    private readonly settings: RateSettings,
    now = Date.now(),
  ) {
    this.rps = clamp(settings.fixed ? settings.ceiling : SAFE_START_RPS, MIN_RPS, settings.ceiling);
    this.settled = false;
    this.slowStart = !settings.fixed;
    this.changedAt = now;
    if (settings.initial) this.resume(settings.initial, now);
  }

  /** Starts from what the last run on this account found (before the first request only). */
  resume(r: RememberedRate, now = Date.now()): void {
    if (this.settings.fixed || this.firstSentAt !== undefined) return;
    this.rps = clamp(r.rps, MIN_RPS, this.settings.ceiling);
    this.changedAt = now;
    // A remembered limit is where the last run found the service's edge: held, not doubled past.
    this.settled = r.settled;
    this.slowStart = !r.settled;
    if (r.settled) {
      this.limitedAt = now;
      this.held = this.rps;
    }
  }

  get current(): number {
    return this.rps;
  }

  /** For the next run: the rate now, and whether the service's limit set it. */
  remember(): RememberedRate {
    // Mid-probe, the rate that held is what the next run can trust.
    const rps = this.settled && this.held !== undefined ? Math.min(this.rps, this.held) : this.rps;
    return { rps: round(rps), settled: this.settled };
  }

  /** A request was let go. */
  send(now: number): void {
    // Slow start doubles from the first request, not from when the run was set up: the time spent
    // reading the manifest is no evidence that the service takes more.
    if (this.firstSentAt === undefined && this.slowStart) this.changedAt = now;
    this.firstSentAt ??= now;
    this.sent += 1;
  }

  /** An answer that was not a 429 (any status: the service counted the request all the same). */
  accept(now: number): void {
    this.accepted.push(now);
    while (this.accepted.length > 0 && (this.accepted[0] as number) < now - WINDOW_MS) this.accepted.shift();
  }

  /**
   * A slot was just given while more requests wait: the rate binds, so it may grow. Slow start
   * doubles; a settled rate waits out its hold and then probes upward in small steps.
   */
  busy(now: number): void {
    if (this.settings.fixed || this.rps >= this.settings.ceiling || now < this.pausedUntil) return;
    if (this.slowStart) {
      if (now - this.changedAt >= DOUBLING_MS) {
        this.doubledFrom = this.rps;
        this.set(this.rps * 2, now);
      }
      return;
    }
    if (now - this.limitedAt < HOLD_MS) return;
    // Probes go at most a tenth above the rate that held, so a failed one overshoots little (the
    // service's bucket hides an excess for a while); a probe that holds that long moves it up.
    const cap = (this.held ?? this.rps) * PROBE_SPAN;
    if (this.rps < cap && now - this.changedAt >= PROBE_MS) {
      this.set(Math.min(cap, this.rps + Math.max(0.1, this.rps * 0.05)), now);
    } else if (this.rps >= cap && now - this.changedAt >= CONFIRM_MS) {
      this.held = this.rps;
      this.set(this.rps, now);
    }
  }

  /**
   * A 429 for a request let go at `sentAt`. The 429s of requests sent before the last cut (or just
   * after it) are the same news and change nothing; a later one says the cut was not enough.
   * The refused request waits its Retry-After in the retry loop; a long one (a quota, not a rate)
   * pauses the whole scope too. A short one does not: a pause lets the service's bucket fill, and
   * the burst that follows would be taken for the sustained rate.
   */
  limit(now: number, retryAfterMs: number | undefined, sentAt = now): void {
    this.limited += 1;
    const wait = Math.min(retryAfterMs ?? 1000, MAX_PAUSE_MS);
    if (wait > LONG_RETRY_AFTER_MS && now + wait > this.pausedUntil) {
      this.pauses.push({ from: Math.max(now, this.pausedUntil), to: now + wait });
      this.pausedUntil = now + wait;
    }
    while (this.pauses.length > 0 && (this.pauses[0] as { to: number }).to < now - WINDOW_MS) {
      this.pauses.shift();
    }
    if (sentAt < this.limitedAt + CUT_GRACE_MS) {
      if (sentAt >= this.limitedAt) this.recut(now);
      return;
    }
    const target = this.settleAt(now);
    this.limitedAt = now;
    this.slowStart = false;
    if (this.settings.fixed) return;
    this.set(target, now);
    this.settled = true;
    this.held = this.rps;
  }

  /**
   * A 429 soon after a cut, for a request sent after it. Right after a cut the service's bucket is
   * empty, so what it accepts since is its own rate: when that is clearly below the rate now, the
   * cut was not enough (the first estimate counted the bucket's burst as rate), and waiting out the
   * grace would cost a 429 for every request above the limit meanwhile. Within a quarter, the 429 is
   * the jitter of a rate just under the limit, and changes nothing.
   */
  private recut(now: number): void {
    if (this.settings.fixed) return;
    // Answers to sends spaced at the rate now, accepted as the bucket refills: a few read low by up
    // to a send's spacing, so the estimate waits for enough of them.
    const since = this.sustained(now, RECUT_ANSWERS);
    if (since === undefined || since >= this.rps * RECUT_BELOW) return;
    // No margin: the estimate is a short one, as likely high as low. High, the 429s after the grace
    // settle it again from a longer measure (with the margin); low, the probes raise it later.
    this.limitedAt = now;
    this.set(since, now);
    this.held = this.rps;
  }

  /** Where a 429 settles the rate. */
  private settleAt(now: number): number {
    const sustained = this.sustained(now);
    // A probe above the rate that held failed: the limit lies between the two, so back to it
    // (lower, if the service now sustains less: another process took a share).
    if (this.settled && this.held !== undefined && this.rps > this.held) {
      return sustained !== undefined ? Math.min(this.held, sustained * MARGIN) : this.held;
    }
    // Sending faster than was accepted: the accepted rate is the service's.
    if (sustained !== undefined && sustained < this.rps) return sustained * MARGIN;
    // All accepted until now. In slow start a burst the service allowed hid its rate.
    if (this.slowStart) {
      // Back to the rate before the last doubling. Not doubled yet: half the safe start; at a
      // ceiling at or below it (`--rps 8`), slow start never doubled, so a plain cut.
      if (this.doubledFrom !== undefined) return this.doubledFrom;
      return this.rps * (this.rps >= this.settings.ceiling ? PLAIN_CUT : SLOW_START_CUT);
    }
    // At a rate an earlier 429 set (a recut, say), the service's bucket stayed near empty: the rate
    // it accepted is what it sustains, just over its limit, not a reason for a blind cut.
    // Only after a 429 of this run: a rate remembered from the last one meets a bucket that filled
    // meanwhile, whose burst reads as rate.
    const limitedHere = this.firstSentAt !== undefined && this.limitedAt > this.firstSentAt;
    if (this.settled && limitedHere && sustained !== undefined) return this.rps * MARGIN;
    return this.rps * PLAIN_CUT;
  }

  /** Accepted answers per second over the last window, leaving out the time spent paused. */
  private sustained(now: number, least = 4): number | undefined {
    // Since the last cut at most: before it the rate was another (slower while it grew).
    const from = Math.max(now - WINDOW_MS, this.firstSentAt ?? now, this.limitedAt);
    const times = this.accepted.filter((t) => t >= from);
    const first = times[0];
    const last = times.at(-1);
    // A few answers say little about a rate (the caller cuts plainly instead).
    if (times.length < least || first === undefined || last === undefined) return undefined;
    // From the spacing of the answers, not their count over the window: five answers in a second
    // counted over 1.08 s read as 4.6/s, spaced they read as 5/s.
    const span = last - first - this.pausedBetween(first, last);
    return span > 0 ? (times.length - 1) / (span / 1000) : undefined;
  }

  private pausedBetween(from: number, to: number): number {
    let paused = 0;
    for (const p of this.pauses) paused += Math.max(0, Math.min(p.to, to) - Math.max(p.from, from));
    return paused;
  }

  private set(rps: number, now: number): void {
    this.rps = clamp(rps, MIN_RPS, this.settings.ceiling);
    this.changedAt = now;
  }
}

function clamp(value: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, value));
}

function round(rps: number): number {
  return Math.round(rps * 100) / 100;
}
