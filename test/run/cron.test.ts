// The run as cron and CI meet it: a dependency that is down (exit 6), a window that closes
// (--deadline, exit 4), a batch that goes bad (--max-failures, exit 1), and the run-level events
// and progress that a log collector or a terminal follows.
import { describe, expect, it, onTestFinished } from "vitest";
import type { Phase, Progress } from "../../src/run/run.js";
import { tooManyFailures } from "../../src/run/run.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { hostileProxy } from "../fixtures/hostile.js";
import { errorBody } from "../fixtures/servers.js";
import { created, runIn, type Shot, setup, workspace } from "./helpers.js";

const shots = (n: number, prompt = (i: number) => `Shot ${i}: the sea at night`): Shot[] =>
  Array.from({ length: n }, (_, i) => ({ id: `s${String(i + 1).padStart(2, "0")}`, prompt: prompt(i + 1) }));

const SERIAL = { video: { rps: 100, inFlight: 1 }, speech: { rps: 100, inFlight: 1 } };

describe("--max-failures", () => {
  it("counts: stops submitting once more than N jobs failed, lets the rest be, says why, exits 1", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: shots(8, (i) => `Shot ${i} [sandbox:fail]`) });
    const { outcome, logs } = await runIn(s, manifest, {
      limits: SERIAL,
      maxAttempts: 1,
      maxFailures: { count: 1 },
    });
    expect(outcome.exitCode).toBe(1);
    expect(outcome.stoppedBy).toBe("max-failures");
    expect(outcome.message).toMatch(/2 jobs failed, more than --max-failures 1/);
    const report = outcome.report!;
    expect(report.run).toMatchObject({ stopped_by: "max-failures" });
    expect(report.counts).toMatchObject({ failed: 2, pending: 6 });
    // Jobs never started stay pending, with nothing created for them.
    expect(created(await s.stats())).toBe(2);
    for (const j of report.jobs.filter((x) => x.status === "pending")) expect(j.task_id).toBeNull();
    expect(logs.lines().some((l) => l.event === "max-failures" && l.level === 40)).toBe(true);
  });

  it("a share: judged only after 5 jobs ended, then on the share of the ended ones", async () => {
    const { s, w } = await setup();
    // Jobs 1 and 2 fail, the rest succeed: 2 of 2 ended is 100%, but under 5 ended it does not count;
    // at 5 ended the share is 40%, over 30%.
    const manifest = await w.manifest({
      shots: shots(9, (i) => (i <= 2 ? `Shot ${i} [sandbox:fail]` : `Shot ${i}`)),
    });
    const { outcome } = await runIn(s, manifest, {
      limits: SERIAL,
      maxAttempts: 1,
      maxFailures: { percent: 30 },
    });
    expect(outcome.exitCode).toBe(1);
    expect(outcome.stoppedBy).toBe("max-failures");
    expect(outcome.report!.counts).toMatchObject({ failed: 2, succeeded: 3, pending: 4 });
    expect(created(await s.stats())).toBe(5);

    // Within the share, the run goes to its end.
    const again = await runIn(s, manifest, { limits: SERIAL, maxAttempts: 1, maxFailures: { percent: 50 } });
    expect(again.outcome.stoppedBy).toBeUndefined();
    expect(again.outcome.report!.counts).toMatchObject({ failed: 2, succeeded: 4, skipped: 3, pending: 0 });
  });

  it("tooManyFailures: over N, and a share only from 5 ended jobs", () => {
    expect(tooManyFailures({ count: 0 }, 0, 3)).toBeUndefined();
    expect(tooManyFailures({ count: 0 }, 1, 1)).toMatch(/1 jobs failed, more than --max-failures 0/);
    expect(tooManyFailures({ count: 3 }, 3, 10)).toBeUndefined();
    expect(tooManyFailures({ percent: 10 }, 4, 4)).toBeUndefined();
    expect(tooManyFailures({ percent: 10 }, 1, 5)).toMatch(/1 of the 5 jobs that ended failed \(20%\)/);
    expect(tooManyFailures({ percent: 20 }, 1, 5)).toBeUndefined();
    expect(tooManyFailures(undefined, 100, 100)).toBeUndefined();
  });
});

describe("--deadline", () => {
  it("stops submitting and waiting at the deadline, exits 4; the next run resumes and pays nothing twice", async () => {
    const { s, w } = await setup({ timeScale: 0.005 });
    const manifest = await w.manifest({ shots: shots(6, (i) => `Shot ${i} [sandbox:slow]`) });
    const before = await s.total();
    const started = Date.now();
    const { outcome } = await runIn(s, manifest, {
      limits: { video: { rps: 100, inFlight: 3 }, speech: { rps: 100, inFlight: 3 } },
      deadline: new Date(Date.now() + 400),
    });
    expect(outcome.exitCode).toBe(4);
    expect(outcome.stoppedBy).toBe("deadline");
    expect(outcome.message).toMatch(/the deadline .* was reached/);
    // It left at the deadline (plus the grace for queued requests), not when the tasks ended.
    expect(Date.now() - started).toBeLessThan(5_000);
    const report = outcome.report!;
    expect(report.run).toMatchObject({ status: "interrupted", stopped_by: "deadline" });
    const first = created(await s.stats());
    expect(first).toBeGreaterThan(0);
    expect(first).toBeLessThanOrEqual(6);

    const rest = await runIn(s, manifest, {
      limits: { video: { rps: 100, inFlight: 6 }, speech: { rps: 100, inFlight: 6 } },
    });
    expect(rest.outcome.exitCode).toBe(0);
    expect(created(await s.stats())).toBe(6);
    const drop = before - (await s.settledTotal());
    expect(report.points.spent + rest.outcome.report!.points.spent).toBe(drop);
  });

  it("a deadline already past stops before anything is submitted", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: shots(2) });
    const { outcome } = await runIn(s, manifest, { deadline: new Date(Date.now() - 1000) });
    expect(outcome.exitCode).toBe(4);
    expect(outcome.stoppedBy).toBe("deadline");
    expect(outcome.message).toMatch(/nothing was submitted/);
    expect(created(await s.stats())).toBe(0);
  });
});

describe("exit 6: a service that cannot be reached", () => {
  it("at the start: exits 6 naming the address, nothing submitted, each retry logged at warn", async () => {
    const w = await workspace();
    try {
      const manifest = await w.manifest({ shots: shots(2) });
      const closed = { url: "http://127.0.0.1:1" } as Sandbox;
      const { outcome, logs } = await runIn(closed, manifest);
      expect(outcome.exitCode).toBe(6);
      expect(outcome.message).toMatch(/http:\/\/127\.0\.0\.1:1 failed \(ECONNREFUSED\)/);
      expect(outcome.message).toMatch(/run again/);
      const retries = logs.lines().filter((l) => l.event === "retry");
      // Reads made side by side (balance, pricing) each count their own attempts. The first to give
      // up ends the run: it logged all 8 retries; a read beside it may be a retry short when the
      // outcome is taken (its last retry is logged after the run returned).
      const paths = [...new Set(retries.map((r) => `${r.method} ${r.path}`))];
      expect(paths.length).toBeGreaterThan(0);
      const counts: number[] = [];
      for (const path of paths) {
        const mine = retries.filter((r) => `${r.method} ${r.path}` === path);
        counts.push(mine.length);
        expect(mine.map((r) => r.attempt)).toEqual(Array.from({ length: mine.length }, (_, i) => i + 1));
        expect(mine.length).toBeGreaterThanOrEqual(7);
        for (const r of mine) {
          expect(r).toMatchObject({ level: 40, of: 9, origin: "http://127.0.0.1:1" });
          expect(r.next_delay_ms).toBeGreaterThanOrEqual(0);
          expect(r.msg).toMatch(/failed \(attempt \d of 9\); trying again in \d+\.\d s$/);
        }
      }
      expect(Math.max(...counts)).toBe(8);
      const finished = logs.lines().find((l) => l.event === "run-finished");
      expect(finished).toMatchObject({ exit_code: 6, status: "not-started" });
    } finally {
      await w.remove();
    }
  });

  it("mid-run: stops with its state saved, exits 6; the next run resumes and creates nothing twice", async () => {
    const { s, w } = await setup({ timeScale: 0.02 });
    const manifest = await w.manifest({ shots: shots(4) });
    let cut = false;
    const { outcome } = await runIn(s, manifest, {
      onProgress: (p) => {
        if (!cut && p.counts.running > 0) {
          cut = true;
          void s.faults({ drop_rate: 1 });
        }
      },
    });
    expect(cut).toBe(true);
    expect(outcome.exitCode).toBe(6);
    expect(outcome.stoppedBy).toBe("unreachable");
    expect(outcome.message).toMatch(/run again once it is reachable/);
    expect(outcome.report!.run).toMatchObject({ status: "interrupted", stopped_by: "unreachable" });
    const first = created(await s.stats());

    await s.faults({ drop_rate: 0 });
    const rest = await runIn(s, manifest);
    expect(rest.outcome.exitCode).toBe(0);
    expect(rest.outcome.report!.counts).toMatchObject({ succeeded: 4 });
    expect(created(await s.stats())).toBe(4);
    expect(first).toBeLessThanOrEqual(4);
  });
});

describe("a service that answers, though badly, is not unreachable", () => {
  it("one task's looks answered 503 through every retry do not stop the others: the run ends 0", async () => {
    const { s, w } = await setup({ timeScale: 0.01 });
    const manifest = await w.manifest({
      shots: [{ id: "s01", prompt: "The one the service keeps failing to read" }],
      lines: [{ id: "n01", text: "Every night, the light came on." }],
    });
    const proxy = await hostileProxy(s.url, {
      // Nine attempts of the first look and three of the second: more than the HTTP layer's retries.
      request: (ctx) =>
        ctx.kind === "poll" && ctx.service === "video" && ctx.count <= 12
          ? { reply: { status: 503, json: errorBody(503, "api_error", "busy"), headers: {} } }
          : undefined,
    });
    onTestFinished(() => proxy.close());
    const { outcome, logs } = await runIn({ ...s, url: proxy.url } as Sandbox, manifest, {
      allowPrivateUrls: true,
    });
    expect(logs.lines().some((l) => l.event === "poll-failed")).toBe(true);
    expect(outcome.stoppedBy).toBeUndefined();
    expect(outcome.exitCode).toBe(0);
    expect(created(await s.stats())).toBe(2);
  });
});

describe("run-level events and progress", () => {
  it("logs run-started, admitted and run-finished; progress goes through the phases", async () => {
    const { s, w } = await setup({ timeScale: 0.01 });
    const manifest = await w.manifest({
      shots: shots(3),
      lines: [{ id: "n01", text: "Hello there." }],
      budget: 5000,
    });
    const seen: Progress[] = [];
    const { outcome, logs } = await runIn(s, manifest, { onProgress: (p) => seen.push(structuredClone(p)) });
    expect(outcome.exitCode).toBe(0);
    const events = logs.lines();
    const started = events.find((l) => l.event === "run-started");
    expect(started).toMatchObject({ name: "ep01", jobs: 4, todo: 4, skipped: 0, level: 30 });
    expect(started!.manifest).toMatch(/manifest\.yaml$/);
    const admitted = events.find((l) => l.event === "admitted");
    expect(admitted).toMatchObject({ cap: 5000, level: 30 });
    expect(admitted!.estimate).toBeGreaterThan(120);
    expect(admitted!.balance).toBeGreaterThan(0);
    const finished = events.find((l) => l.event === "run-finished");
    expect(finished).toMatchObject({ status: "succeeded", exit_code: 0, counts: { total: 4, succeeded: 4 } });
    expect(finished!.duration_ms).toBeGreaterThan(0);
    expect(finished!.points.spent).toBe(outcome.report!.points.spent);
    expect(events.indexOf(started!)).toBeLessThan(events.indexOf(finished!));

    const phases = seen.map((p) => p.phase).filter((p, i, all) => p !== all[i - 1]);
    expect(phases[0]).toBe("planning");
    expect(phases).toContain("pre-flight");
    expect(phases.some((p: Phase) => p === "submitting" || p === "waiting")).toBe(true);
    expect(phases.at(-1)).toBe("reporting");
    // Video tasks say how long they still need; the display gets it with each task in flight.
    expect(seen.some((p) => p.inFlight.some((t) => t.kind === "video" && t.remaining !== undefined))).toBe(
      true,
    );
    expect(seen.at(-1)!.durations.video.length).toBe(3);
    expect(seen.at(-1)!.inFlightLimit.video).toBeGreaterThan(0);

    // A second run reuses everything: the progress says so, and nothing is left to do.
    const again: Progress[] = [];
    const second = await runIn(s, manifest, { onProgress: (p) => again.push(structuredClone(p)) });
    expect(second.outcome.exitCode).toBe(0);
    expect(again.at(-1)).toMatchObject({ reused: 4, total: 4 });
    expect(second.logs.lines().find((l) => l.event === "run-started")).toMatchObject({ todo: 0, skipped: 4 });
  });
});
