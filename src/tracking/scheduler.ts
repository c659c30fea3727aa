// When to look at a task: the rules both pollers share for placing a look in time. The pollers
// (poller.ts and its two services') decide what a look is; these decide when it comes.
import type { Entry, Plan } from "./entry.js";
import type { TrackOptions } from "./track.js";

/** Past the predicted end, the next look waits this share of the task's time, growing each time. */
const BACKOFF_SHARE = 0.1;
const BACKOFF_GROWTH = 1.5;

/** A wait held between the shortest and the longest interval. */
export function clamp(options: TrackOptions, ms: number): number {
  return Math.min(options.maxIntervalMs, Math.max(options.minIntervalMs, ms));
}

/** The wait after the nth failed look in a row: doubling from the shortest interval. */
export function failureWait(options: TrackOptions, failures: number): number {
  const first = Math.max(options.minIntervalMs, 250);
  return Math.min(options.maxIntervalMs, first * 2 ** Math.min(20, Math.max(0, failures - 1)));
}

/**
 * The first look at a task, at its predicted end: not held to the minimum interval, which spaces
 * the looks at one task (a service faster than a second is no reason to look late).
 */
export function firstAt(options: TrackOptions, pace: number, expectedMs: number): number {
  return Math.min(options.maxIntervalMs, Math.max(0, expectedMs * pace));
}

/**
 * The wait of a look past the predicted end, for a task that takes `taskMs`: a share of it that
 * grows with each look that found the task still open (counted in `plan.late`).
 */
export function lateWait(plan: Plan, taskMs: number): number {
  const wait = taskMs * BACKOFF_SHARE * BACKOFF_GROWTH ** plan.late;
  plan.late += 1;
  return wait;
}

/**
 * When to look next: when the first task is due, or a little later (`gatherMs`) when enough
 * others come due by then for one list request to answer for all of them.
 */
export function nextLookAt<T>(entries: Iterable<Entry<T>>, batchThreshold: number, gatherMs: number): number {
  const times = [...entries].map((e) => e.dueAt).sort((a, b) => a - b);
  const first = times[0] ?? Date.now();
  const batch = times[Math.max(0, batchThreshold - 1)];
  return batch !== undefined && batch <= first + gatherMs ? Math.max(first, batch) : first;
}
