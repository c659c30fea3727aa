// The run under the service's limits: a points balance that runs out mid-run, a rate limit the
// specs do not state (429 with Retry-After), and injected errors and dropped connections.
import { describe, expect, it } from "vitest";
import { created, job, ORG, posts, runIn, type Shot, setup } from "./helpers.js";

const many = (n: number, prefix = "s"): Shot[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `${prefix}${String(i + 1).padStart(2, "0")}`,
    prompt: `Shot ${i + 1}: the sea at night`,
  }));

describe("the service refusing for insufficient points", () => {
  it("stops new submissions, finishes what was created, says why, and exits 1", async () => {
    const { s, w } = await setup({ points: 1000 });
    const manifest = await w.manifest({ shots: many(8), budget: 100_000 });
    const org = s.world.org(ORG);
    let drained = false;
    const { outcome } = await runIn(s, manifest, {
      limits: { video: { rps: 50, inFlight: 2 }, speech: { rps: 50, inFlight: 2 } },
      onProgress: (p) => {
        // After the pre-flight passed (320 of 1000 needed), a colleague's work takes all but 80
        // points: enough for two 40-point shots.
        if (drained || p.phase === "planning" || p.phase === "pre-flight") return;
        drained = true;
        expect(org.ledger.reserve(920)).toBeDefined();
      },
    });
    expect(drained).toBe(true);
    expect(outcome.exitCode).toBe(1);
    const report = outcome.report!;
    expect(report.note).toMatch(/insufficient points/);
    expect(outcome.message).toMatch(/insufficient points/);
    expect(report.counts).toMatchObject({ total: 8, succeeded: 2, failed: 0, pending: 6 });
    expect(report.points.spent).toBe(80);
    const st = await s.stats();
    expect(created(st)).toBe(2);
    // The two jobs in flight when the service refused may have asked; no job started after it did.
    expect(posts(st)).toBeGreaterThanOrEqual(3);
    expect(posts(st)).toBeLessThanOrEqual(4);
    const refused = report.jobs.filter((j) => j.error !== null);
    expect(refused.length).toBe(posts(st) - 2);
    for (const j of refused) {
      expect(j).toMatchObject({ status: "pending", points: 0 });
      expect(j.error!.message).toMatch(/insufficient points/);
    }
    // Every intent was sent, except those taken back because their create had not left yet when
    // the service refused: those are withdrawn, never sent.
    const records = await w.journal();
    const intents = records.filter((r) => r.t === "intent");
    const withdrawn = records.filter((r) => r.t === "withdrawn");
    expect(intents.length - withdrawn.length).toBe(posts(st));
    // Nothing is left reserved by the run: the colleague's 920 are all that is held.
    expect(await s.available()).toBe((await s.total()) - 920);

    // With the points back, the next run does the rest (and only the rest).
    s.world.org(ORG).ledger.add({ total_points: 1000 });
    const rest = await runIn(s, manifest);
    expect(rest.outcome.exitCode).toBe(0);
    expect(rest.outcome.report!.counts).toMatchObject({ succeeded: 6, skipped: 2 });
    expect(created(await s.stats())).toBe(8);
    const retried = job(rest.outcome, refused[0]!.id);
    expect(retried).toMatchObject({ status: "succeeded", attempts: 1, points: 40 });
  });
});

describe("faults", () => {
  it("30% errors and 10% dropped connections: the run ends 0 with exactly one task per job", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: many(8),
      lines: Array.from({ length: 8 }, (_, i) => ({ id: `n${i + 1}`, text: `Line number ${i + 1}.` })),
    });
    const before = await s.total();
    // Seeded: the faults come in the same order every time (the first draws drop a connection and
    // answer 503s), so the checks below that they happened cannot fail by chance.
    await s.faults({ error_rate: 0.3, drop_rate: 0.1, seed: 7 });
    const { outcome, logs } = await runIn(s, manifest);
    await s.faults({ error_rate: 0, drop_rate: 0, seed: null });
    expect(outcome.exitCode).toBe(0);
    expect(outcome.report!.counts.succeeded).toBe(16);
    const st = await s.stats();
    expect(st.tasks_created).toEqual({ video: 8, speech: 8 });
    // The faults were real: the HTTP layer saw 503s and lost connections, and repeated creates.
    const attempts = logs.lines().filter((l) => l.msg === "http attempt");
    expect(attempts.some((l) => l.status === 503)).toBe(true);
    expect(attempts.some((l) => l.error !== undefined)).toBe(true);
    expect(posts(st)).toBeGreaterThan(16);
    expect(new Set(outcome.report!.jobs.map((j) => j.task_id)).size).toBe(16);
    expect(outcome.report!.points.spent).toBe(before - (await s.settledTotal()));
  });
});

describe("rate limiting", () => {
  // 20 jobs need about 45 API requests: some 9 s at 5 requests/s. clapper starts at its default of
  // 10/s per service, so it must find the limit from the 429s, and not collapse while doing so.
  it("against an unstated limit of 5 requests/s: backs off on 429, recovers, ends 0 with few 429s", async () => {
    const { s, w } = await setup({ rateLimit: 5 });
    const manifest = await w.manifest({
      shots: many(10),
      lines: Array.from({ length: 10 }, (_, i) => ({ id: `n${i + 1}`, text: `Line number ${i + 1}.` })),
    });
    const started = Date.now();
    const { outcome, logs } = await runIn(s, manifest, { signal: AbortSignal.timeout(15_000) });
    const seconds = (Date.now() - started) / 1000;
    const api = logs.lines().filter((l) => l.msg === "http attempt" && !l.path.startsWith("/_media/"));
    const limited = api.filter((l) => l.status === 429).length;
    const st = await s.stats();
    const summary = { seconds, requests: api.length, limited, created: created(st), exit: outcome.exitCode };
    // Interrupted by the 15 s deadline means the limiter throttled far below the service's limit.
    expect(summary).toMatchObject({ exit: 0, created: 20 });
    expect(limited).toBeGreaterThan(0);
    expect(limited).toBeLessThanOrEqual(10);
    expect(outcome.report!.counts.succeeded).toBe(20);
  });
});
