// When looks come, as pure rules: the pollers' timing without a service or a clock to wait on.
import { describe, expect, it } from "vitest";
import type { Entry, Plan } from "../../src/tracking/entry.js";
import { Pace } from "../../src/tracking/pace.js";
import { VideoPages } from "../../src/tracking/pages.js";
import { clamp, failureWait, firstAt, lateWait, nextLookAt } from "../../src/tracking/scheduler.js";
import { DEFAULT_TRACK_OPTIONS } from "../../src/tracking/track.js";

const options = { ...DEFAULT_TRACK_OPTIONS, minIntervalMs: 1000, maxIntervalMs: 30_000, batchThreshold: 3 };

function entry(dueAt: number, extra: Partial<Entry<unknown>> = {}): Entry<unknown> {
  const none = () => {};
  return {
    taskId: `t${dueAt}`,
    createdAt: 0,
    since: 0,
    openAt: 0,
    dueAt,
    failures: 0,
    onUpdate: none,
    resolve: none,
    reject: none,
    ...extra,
  };
}

describe("scheduler", () => {
  it("holds waits between the shortest and the longest interval", () => {
    expect(clamp(options, 10)).toBe(1000);
    expect(clamp(options, 5000)).toBe(5000);
    expect(clamp(options, 90_000)).toBe(30_000);
  });

  it("doubles the wait after each failed look, up to the longest interval", () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => failureWait(options, n))).toEqual([
      1000, 2000, 4000, 8000, 16_000, 30_000,
    ]);
    // A shortest interval under 250 ms is not a reason to hammer a task that cannot be read.
    expect(failureWait({ ...options, minIntervalMs: 10 }, 1)).toBe(250);
  });

  it("places a first look at the predicted end, below the shortest interval if need be", () => {
    expect(firstAt(options, 0.5, 600)).toBe(300);
    expect(firstAt(options, 2, 60_000)).toBe(30_000);
  });

  it("waits longer at each late look: a growing share of the task's time", () => {
    const plan: Plan = { endAt: 0, attempt: 0, late: 0 };
    expect([lateWait(plan, 10_000), lateWait(plan, 10_000), lateWait(plan, 10_000)]).toEqual([
      1000, 1500, 2250,
    ]);
    expect(plan.late).toBe(3);
  });

  it("looks when the first task is due, or waits to gather enough for one list", () => {
    expect(nextLookAt([entry(100), entry(5000), entry(9000)], 3, 250)).toBe(100);
    expect(nextLookAt([entry(100), entry(200), entry(300)], 3, 250)).toBe(300);
    expect(nextLookAt([entry(100), entry(200)], 3, 250)).toBe(100);
  });
});

describe("pace", () => {
  it("is 1 until a task ended, then a high quantile of what tasks took over nominal", () => {
    const pace = new Pace();
    expect(pace.learnt).toBe(false);
    expect(pace.value()).toBe(1);
    const now = Date.now();
    // Without a prediction, the end of the span the task's own timestamps give is taken.
    for (const seconds of [1, 2, 3, 4]) {
      pace.sample(entry(0, { since: now - 60_000, openAt: now - 60_000 }), 10_000, {
        from: 100,
        to: 100 + seconds,
      });
    }
    expect(pace.learnt).toBe(true);
    expect(pace.value()).toBeCloseTo(0.4);
  });
});

describe("video pages", () => {
  const item = (created_at: number) => ({ created_at });

  it("learns a shorter page length and a newest-last order, and reads pages from the end", () => {
    const pages = new VideoPages();
    expect(pages.first()).toBe(1);
    pages.learn(
      1,
      Array.from({ length: 50 }, (_, i) => item(i)),
      200,
    );
    expect(pages.pageLength).toBe(50);
    expect(pages.lastPage()).toBe(4);
    expect(pages.first()).toBe(4);
    expect(pages.next(new Set([4]))).toBe(3);
    expect(pages.next(new Set([1, 2, 3, 4]))).toBeUndefined();
  });
});
