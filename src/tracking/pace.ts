// The pace learnt here: how much longer than nominal (durations.ts) tasks take at the service, from
// the tasks that ended well. It places each task's predicted end, where its looks go.
import type { Entry } from "./entry.js";

/** How far below a prediction that held, toward the earliest possible end, the next one tries. */
const PACE_EXPLORE = 0.5;
/** The pace is this quantile of recent samples: high, as looking early costs more than a little late. */
const PACE_QUANTILE = 0.75;
/** Ended tasks that set the observed pace: recent ones, as the service's load changes. */
const PACE_SAMPLES = 25;

export class Pace {
  /** Observed over nominal duration of recent tasks that ended well (see `sample`). */
  private readonly samples: number[] = [];

  /** Whether any task ended well yet: until then the pace is a guess. */
  get learnt(): boolean {
    return this.samples.length > 0;
  }

  /**
   * How much longer than nominal tasks take here (below 1: shorter): a high quantile of recent
   * samples, 1 before any ended.
   */
  value(): number {
    if (this.samples.length === 0) return 1;
    const sorted = [...this.samples].sort((a, b) => a - b);
    return sorted[Math.floor((sorted.length - 1) * PACE_QUANTILE)] as number;
  }

  /**
   * Learns the pace from a task that ended well. It ended after the last look that found it open
   * and before the look that found it ended, and within a second of what its own timestamps (whole
   * seconds, `span`) say. When that span holds the predicted end, the prediction was not early:
   * the sample is the prediction, moved a share of the way to the earliest possible end, so a
   * service faster than predicted is found out; otherwise the span's end is taken.
   */
  sample<T>(entry: Entry<T>, nominalMs: number, span?: { from: number; to: number }): void {
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
    if (this.samples.push(sample) > PACE_SAMPLES) this.samples.shift();
  }
}
