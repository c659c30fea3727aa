// `clapper run` in process against a sandbox over real HTTP: every exit code, what each costs,
// upscale fallback, the service's own speech retry, and re-runs (skip, edit, delete, --only,
// --retry-failed, --fresh).
import { spawnSync } from "node:child_process";
import { mkdir, readFile, stat, unlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { acquireLock } from "../../src/locks/file-lock.js";
import { call } from "../helpers/sandbox.js";
import {
  cli,
  created,
  filesUnder,
  job,
  KEY,
  type Line,
  posts,
  runIn,
  type Shot,
  setup,
  sha256,
} from "./helpers.js";

const shots: Shot[] = [
  { id: "s01", prompt: "Wide shot: a lighthouse on a cliff at dusk" },
  { id: "s02", prompt: "Close-up: the lamp room, the lens starts to turn", duration: 5, resolution: "480P" },
];
const lines: Line[] = [
  { id: "n01", text: "Every night, the light came on at seven.", shot: "s01" },
  { id: "n02", text: "And every night, someone was watching.", voice: "preset:en_male_deep" },
];
// 768P 4 s = 40; 480P 5 s = 25; speech: ceil(letters and digits x 2 / 10) = 7 and 7.
const COST: Record<string, number> = { "shot/s01": 40, "shot/s02": 25, "line/n01": 7, "line/n02": 7 };
const TOTAL = 79;

describe("exit 0: every job stored", () => {
  it("creates one task per job, stores verified files and spends exactly the balance drop", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots, lines });
    const before = await s.total();
    const { outcome } = await runIn(s, manifest);
    expect(outcome.exitCode).toBe(0);
    const report = outcome.report!;
    expect(report.run.status).toBe("succeeded");
    expect(report.counts).toEqual({
      total: 4,
      succeeded: 4,
      failed: 0,
      cancelled: 0,
      skipped: 0,
      pending: 0,
    });
    for (const j of report.jobs) {
      expect(j.points, j.id).toBe(COST[j.id]);
      expect(j.attempts, j.id).toBe(1);
      expect(j.output!.bytes).toBe((await stat(j.output!.uri)).size);
      expect(j.output!.sha256).toBe(await sha256(j.output!.uri));
    }
    expect(job(outcome, "shot/s01").output!.uri).toBe(join(w.out(), "shots/s01.mp4"));
    expect(job(outcome, "line/n02").output!.uri).toBe(join(w.out(), "lines/n02.wav"));
    expect(report.points.spent).toBe(TOTAL);
    expect(before - (await s.settledTotal())).toBe(TOTAL);
    const st = await s.stats();
    expect(st.tasks_created).toEqual({ video: 2, speech: 2 });
    // No partial file is left behind in the output folder.
    expect((await filesUnder(w.out())).filter((f) => f.includes(".partial"))).toEqual([]);
  });
});

describe("skills the manifest does not define", () => {
  it("an official skill named by its name or its id is sent by its id, and the shot is made", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: [
        { id: "s01", prompt: "A pan across the harbour", use_context_ir: true, skill: "Camera language" },
        {
          id: "s02",
          prompt: "The keeper climbs the stairs",
          use_context_ir: true,
          skill: "skill_official_narrative_continuity",
        },
      ],
    });
    const { outcome } = await runIn(s, manifest);
    expect(outcome.exitCode, outcome.message).toBe(0);
    expect(outcome.report?.counts).toMatchObject({ total: 2, succeeded: 2 });
    expect(created(await s.stats())).toBe(2);
  });
});

describe("exit 1: some jobs failed", () => {
  it("reports a [sandbox:fail] job with its error and 0 points, and releases its reservation", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: [...shots, { id: "s03", prompt: "[sandbox:fail] the storm breaks the lamp" }],
      lines,
    });
    const before = await s.total();
    const { outcome } = await runIn(s, manifest);
    expect(outcome.exitCode).toBe(1);
    const report = outcome.report!;
    expect(report.run.status).toBe("partial");
    expect(report.counts).toMatchObject({ total: 5, succeeded: 4, failed: 1, pending: 0 });
    const failed = job(outcome, "shot/s03");
    expect(failed).toMatchObject({ status: "failed", points: 0, output: null, estimated_points: 40 });
    expect(failed.error).toEqual({ code: expect.any(String), message: expect.stringMatching(/fail/i) });
    expect(failed.task_id).toMatch(/^vtask_/);
    // Retried once with a new key (the default of 2 attempts), each attempt a real task.
    expect(failed.attempts).toBe(2);
    expect((await s.stats()).tasks_created.video).toBe(4);
    expect(report.points.spent).toBe(TOTAL);
    expect(before - (await s.settledTotal())).toBe(TOTAL);
    // The service holds nothing for the failed task any more, and so does the run's ledger.
    expect(await s.available()).toBe(await s.total());
  });
});

describe("exit 2: usage or manifest error", () => {
  it("lists every error with file, line and field, and creates nothing", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: [...shots, { id: "s03", prompt: "too long", duration: 31 }],
      lines: [...lines, { id: "n03", text: "" }],
    });
    const { outcome } = await runIn(s, manifest);
    expect(outcome.exitCode).toBe(2);
    expect(outcome.errors!.length).toBeGreaterThanOrEqual(2);
    expect(outcome.errors!.map((e) => e.field)).toEqual(expect.arrayContaining(["duration", "text"]));
    for (const e of outcome.errors!) expect(e.line).toBeGreaterThan(0);
    expect(posts(await s.stats())).toBe(0);
    expect(await filesUnder(w.out())).toEqual([]);

    const r = await cli(s, ["run", manifest]);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/manifest\.yaml:\d+: .*duration/);
    expect(posts(await s.stats())).toBe(0);
  });

  it("refuses an --only that matches no job", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots, lines });
    const { outcome } = await runIn(s, manifest, { only: ["shot/s09"] });
    expect(outcome.exitCode).toBe(2);
    expect(outcome.message).toContain("shot/s09");
    expect(posts(await s.stats())).toBe(0);
  });
});

describe("exit 3: budget or balance too small", () => {
  const refused = async (s: Awaited<ReturnType<typeof setup>>["s"]) => {
    const st = await s.stats();
    expect(created(st)).toBe(0);
    expect(posts(st)).toBe(0);
  };

  it("budget.max_points below the estimate: a table, nothing created", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots, lines, budget: TOTAL - 1 });
    const { outcome } = await runIn(s, manifest);
    expect(outcome.exitCode).toBe(3);
    expect(outcome.budget).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ points: TOTAL }),
        expect.objectContaining({ what: expect.stringContaining("max_points"), points: TOTAL - 1 }),
        expect.objectContaining({ what: "short by", points: 1 }),
      ]),
    );
    await refused(s);

    const r = await cli(s, ["run", manifest]);
    expect(r.code).toBe(3);
    expect(r.out).toBe("");
    expect(r.err).toMatch(/nothing was submitted/);
    expect(r.err).toMatch(/short by\s+1\b/);
    await refused(s);
    expect(await filesUnder(w.out())).toEqual([]);
  });

  it("--max-points below the estimate wins over a larger manifest budget", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots, lines, budget: 10_000 });
    const r = await cli(s, ["run", manifest, "--max-points", "50"]);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/max_points\)?\s+50\b/);
    expect(r.err).toMatch(new RegExp(`\\b${TOTAL}\\b`));
    await refused(s);
    // With exactly enough, it runs.
    const ok = await cli(s, ["run", manifest, "--max-points", String(TOTAL), "--poll-interval", "0.02"]);
    expect(ok.code).toBe(0);
  });

  it("a resumed run counts what its earlier process spent against the budget", async () => {
    const { s, w } = await setup();
    const three = [shots[0]!, { id: "s02", prompt: "the lens turns" }, { id: "s03", prompt: "the sea" }];
    const manifest = await w.manifest({ shots: three, budget: 120 });
    const controller = new AbortController();
    const first = await runIn(s, manifest, {
      signal: controller.signal,
      limits: { video: { rps: 20, inFlight: 1 }, speech: { rps: 20, inFlight: 1 } },
      onProgress: (p) => {
        if (p.counts.stored >= 1) controller.abort(new Error("SIGINT"));
      },
    });
    expect(first.outcome.exitCode).toBe(4);
    expect(first.outcome.report!.points.spent).toBe(40);
    expect(created(await s.stats())).toBe(1);
    // While interrupted, a row not yet started is edited to cost more: 40 + 40 + 76 > 120.
    await w.manifest({ shots: [three[0]!, three[1]!, { ...three[2]!, resolution: "1080P" }], budget: 120 });
    const resumed = await runIn(s, manifest);
    expect(resumed.outcome.exitCode).toBe(3);
    expect(resumed.outcome.budget).toEqual(
      expect.arrayContaining([
        { what: "already spent in this run", points: 40 },
        { what: "short by", points: 36 },
      ]),
    );
    expect(created(await s.stats())).toBe(1);
    await w.manifest({ shots: [three[0]!, three[1]!, { ...three[2]!, resolution: "1080P" }], budget: 156 });
    const done = await runIn(s, manifest);
    expect(done.outcome.exitCode).toBe(0);
    expect(done.outcome.report!.points.spent).toBe(156);
  });

  it("a balance too small for the estimate, with no budget set", async () => {
    const { s, w } = await setup({ points: TOTAL - 5 });
    const manifest = await w.manifest({ shots, lines });
    const r = await cli(s, ["run", manifest]);
    expect(r.code).toBe(3);
    expect(r.err).toMatch(/available points.*\s74\b/);
    expect(r.err).toMatch(/short by\s+5\b/);
    await refused(s);
  });
});

describe("exit 4: interrupted", () => {
  it("stops on abort, saves state, and a resumed run finishes with no duplicate task", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: [...shots, { id: "s03", prompt: "[sandbox:slow] the keeper climbs the stairs" }],
      lines,
    });
    const before = await s.total();
    const controller = new AbortController();
    const first = await runIn(s, manifest, {
      signal: controller.signal,
      limits: { video: { rps: 20, inFlight: 2 }, speech: { rps: 20, inFlight: 1 } },
      onProgress: (p) => {
        if (p.counts.running >= 1) controller.abort(new Error("SIGINT"));
      },
    });
    expect(first.outcome.exitCode).toBe(4);
    const r1 = first.outcome.report!;
    expect(r1.run.status).toBe("interrupted");
    expect(r1.run.finished_at).toBeNull();
    expect(r1.counts.pending).toBeGreaterThan(0);
    const journal = await w.journal();
    expect(journal.some((r) => r.t === "created")).toBe(true);
    expect(journal.some((r) => r.t === "finish")).toBe(false);
    const createdBefore = created(await s.stats());
    expect(createdBefore).toBeGreaterThan(0);
    expect(createdBefore).toBeLessThan(5);

    const second = await runIn(s, manifest);
    expect(second.outcome.exitCode).toBe(0);
    const r2 = second.outcome.report!;
    // One campaign across both processes: everything counts as done in this run, nothing reused.
    expect(r2.counts).toMatchObject({ total: 5, succeeded: 5, skipped: 0 });
    expect(r2.run.started_at).toBe(r1.run.started_at);
    expect(created(await s.stats())).toBe(5);
    const tasks = r2.jobs.map((j) => j.task_id);
    expect(new Set(tasks).size).toBe(5);
    expect(r2.points.spent).toBe(TOTAL + 40);
    expect(before - (await s.settledTotal())).toBe(TOTAL + 40);
  });

  it("returns promptly with requests queued behind a slow rate, and the resumed run duplicates nothing", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: Array.from({ length: 12 }, (_, i) => ({ id: `q${i + 1}`, prompt: `Shot ${i + 1}: the sea` })),
    });
    const controller = new AbortController();
    let abortedAt = 0;
    setTimeout(() => {
      abortedAt = Date.now();
      controller.abort(new Error("SIGINT"));
    }, 600);
    const slow = { rps: 1, inFlight: 32 };
    const { outcome } = await runIn(s, manifest, {
      signal: controller.signal,
      limits: { video: slow, speech: slow },
    });
    const sinceAbort = Date.now() - abortedAt;
    expect(outcome.exitCode).toBe(4);
    expect(abortedAt).toBeGreaterThan(0);
    // About ten creates were still waiting for their turn at 1 request/s.
    expect(sinceAbort).toBeLessThan(3000);
    expect(created(await s.stats())).toBeLessThan(12);
    const resumed = await runIn(s, manifest);
    expect(resumed.outcome.exitCode).toBe(0);
    expect(created(await s.stats())).toBe(12);
    expect(new Set(resumed.outcome.report!.jobs.map((j) => j.task_id)).size).toBe(12);
  });

  it("an abort before the run starts exits 4 and creates nothing", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots, lines });
    const { outcome } = await runIn(s, manifest, { signal: AbortSignal.abort(new Error("SIGTERM")) });
    expect(outcome.exitCode).toBe(4);
    expect(posts(await s.stats())).toBe(0);
  });
});

describe("exit 5: the lock", () => {
  it("a second run on held state exits 5 at once and touches nothing", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots, lines });
    await mkdir(dirname(w.statePath()), { recursive: true });
    const lock = await acquireLock(`${w.statePath()}.lock`);
    try {
      const started = Date.now();
      const { outcome } = await runIn(s, manifest);
      expect(outcome.exitCode).toBe(5);
      expect(outcome.message).toMatch(/another run holds .*state\.jsonl\.lock \(pid \d+/);
      expect(Date.now() - started).toBeLessThan(2000);
      const r = await cli(s, ["run", manifest]);
      expect(r.code).toBe(5);
      expect(r.err).toMatch(/another run holds/);
      expect(posts(await s.stats())).toBe(0);
    } finally {
      await lock.release();
    }
  });

  it("a lock left by a dead process is taken over", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: shots.slice(0, 1) });
    await mkdir(dirname(w.statePath()), { recursive: true });
    const dead = spawnSync(process.execPath, ["-e", ""]).pid;
    const { hostname } = await import("node:os");
    await writeFile(
      `${w.statePath()}.lock`,
      JSON.stringify({ pid: dead, host: hostname(), started_at: new Date(0).toISOString() }),
    );
    const { outcome } = await runIn(s, manifest);
    expect(outcome.exitCode).toBe(0);
    await expect(stat(`${w.statePath()}.lock`)).rejects.toThrow();
  });
});

describe("what things cost", () => {
  it("an upscale that fell back to 768P is charged at the base price, in the report and the balance", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: [
        { id: "s01", prompt: "[sandbox:upscale-fail] the beam sweeps the fog", resolution: "1080P" },
        { id: "s02", prompt: "the beam sweeps the fog", resolution: "1080P" },
      ],
    });
    const before = await s.total();
    const { outcome } = await runIn(s, manifest);
    expect(outcome.exitCode).toBe(0);
    expect(job(outcome, "shot/s01")).toMatchObject({ status: "succeeded", points: 40, estimated_points: 76 });
    expect(job(outcome, "shot/s02")).toMatchObject({ status: "succeeded", points: 76, estimated_points: 76 });
    expect(outcome.report!.points).toMatchObject({ estimated: 152, spent: 116 });
    expect(before - (await s.settledTotal())).toBe(116);
  });

  it("[sandbox:fail-once] on a speech line succeeds through the service's own retry: one clapper attempt", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      lines: [{ id: "n01", text: "[sandbox:fail-once] The lamp flickers." }],
    });
    const before = await s.total();
    const { outcome } = await runIn(s, manifest);
    expect(outcome.exitCode).toBe(0);
    const line = job(outcome, "line/n01");
    expect(line).toMatchObject({ status: "succeeded", attempts: 1 });
    expect((await s.stats()).tasks_created.speech).toBe(1);
    const task = await call(s.url, "GET", `/audio/v1/speech/jobs/${line.task_id}`, { key: KEY });
    expect(task.body.task).toMatchObject({ status: "succeeded", attempt: 2, max_attempts: 3 });
    expect(line.points).toBe(task.body.task.point_cost);
    expect(before - (await s.settledTotal())).toBe(line.points);
  });
});

describe("re-runs", () => {
  it("skip what is unchanged; regenerate only an edited row and only a deleted output", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots, lines });
    expect((await runIn(s, manifest)).outcome.exitCode).toBe(0);
    const firstSums = Object.fromEntries(
      await Promise.all(
        ["shots/s01.mp4", "shots/s02.mp4", "lines/n01.wav", "lines/n02.wav"].map(
          async (f) => [f, await sha256(join(w.out(), f))] as const,
        ),
      ),
    );

    // Unchanged: every job skipped, nothing spent, no new task.
    const again = (await runIn(s, manifest)).outcome;
    expect(again.exitCode).toBe(0);
    expect(again.report!.run.status).toBe("succeeded");
    expect(again.report!.counts).toMatchObject({ total: 4, succeeded: 0, skipped: 4 });
    expect(again.report!.points).toMatchObject({ estimated: 0, spent: 0 });
    for (const j of again.report!.jobs)
      expect(j).toMatchObject({ status: "skipped", points: 0, attempts: 0 });
    expect(job(again, "shot/s01").output!.sha256).toBe(firstSums["shots/s01.mp4"]);
    expect(created(await s.stats())).toBe(4);

    // One row edited: exactly one new task, for that job.
    await w.manifest({
      shots,
      lines: [{ ...lines[0]!, text: "Every night, the light came on at eight." }, lines[1]!],
    });
    const edited = (await runIn(s, manifest)).outcome;
    expect(edited.exitCode).toBe(0);
    expect(edited.report!.counts).toMatchObject({ succeeded: 1, skipped: 3 });
    expect(job(edited, "line/n01").status).toBe("succeeded");
    expect(created(await s.stats())).toBe(5);
    expect(edited.report!.points.spent).toBe(job(edited, "line/n01").points);
    expect(await sha256(join(w.out(), "shots/s01.mp4"))).toBe(firstSums["shots/s01.mp4"]);

    // One output deleted: only that job is produced again.
    await unlink(join(w.out(), "shots/s02.mp4"));
    const restored = (await runIn(s, manifest)).outcome;
    expect(restored.exitCode).toBe(0);
    expect(restored.report!.counts).toMatchObject({ succeeded: 1, skipped: 3 });
    expect(job(restored, "shot/s02")).toMatchObject({ status: "succeeded", points: 25 });
    expect(created(await s.stats())).toBe(6);
    expect((await stat(join(w.out(), "shots/s02.mp4"))).size).toBe(job(restored, "shot/s02").output!.bytes);
  });

  it("--only limits the work to the jobs named; the rest follow in a later run", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots, lines });
    const { outcome } = await runIn(s, manifest, { only: ["shot/s02", "n01"] });
    expect(outcome.exitCode).toBe(0);
    expect((await s.stats()).tasks_created).toEqual({ video: 1, speech: 1 });
    expect(job(outcome, "shot/s02").status).toBe("succeeded");
    expect(job(outcome, "line/n01").status).toBe("succeeded");
    expect(job(outcome, "shot/s01").status).toBe("pending");
    expect(job(outcome, "line/n02").status).toBe("pending");
    expect(outcome.report!.run.only).toEqual(["shot/s02", "line/n01"]);
    expect(outcome.report!.points.spent).toBe(32);
    await expect(stat(join(w.out(), "shots/s01.mp4"))).rejects.toThrow();

    const rest = (await runIn(s, manifest)).outcome;
    expect(rest.exitCode).toBe(0);
    expect(rest.report!.counts).toMatchObject({ succeeded: 2, skipped: 2 });
    expect(created(await s.stats())).toBe(4);
  });

  it("--retry-failed tries a failed job again with a new key; without it the failure stands", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: [shots[0]!, { id: "s03", prompt: "[sandbox:fail] storm" }] });
    const first = (await runIn(s, manifest, { maxAttempts: 1 })).outcome;
    expect(first.exitCode).toBe(1);
    expect(job(first, "shot/s03")).toMatchObject({ status: "failed", attempts: 1, points: 0 });
    expect(created(await s.stats())).toBe(2);

    const plain = (await runIn(s, manifest, { maxAttempts: 1 })).outcome;
    expect(plain.exitCode).toBe(1);
    // Not tried again in this run: its attempts are those that failed, never 0.
    expect(job(plain, "shot/s03")).toMatchObject({ status: "failed", attempts: 1 });
    expect(job(plain, "shot/s01").status).toBe("skipped");
    expect(created(await s.stats())).toBe(2);

    const retried = (await runIn(s, manifest, { maxAttempts: 1, retryFailed: true })).outcome;
    expect(retried.exitCode).toBe(1);
    expect(created(await s.stats())).toBe(3);
    const failed = job(retried, "shot/s03");
    expect(failed).toMatchObject({ status: "failed", attempts: 1, points: 0 });
    expect(failed.task_id).not.toBe(job(first, "shot/s03").task_id);
    const intents = (await w.journal()).filter((r) => r.t === "intent" && r.id === "shot/s03");
    expect(intents.map((r) => r.n)).toEqual([1, 2]);
    expect(intents[1]!.key).not.toBe(intents[0]!.key);
  });

  it("--fresh regenerates everything with new tasks", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: shots.slice(0, 1), lines: lines.slice(0, 1) });
    const first = (await runIn(s, manifest)).outcome;
    expect(first.exitCode).toBe(0);
    const fresh = (await runIn(s, manifest, { fresh: true })).outcome;
    expect(fresh.exitCode).toBe(0);
    expect(fresh.report!.counts).toMatchObject({ total: 2, succeeded: 2, skipped: 0 });
    expect(created(await s.stats())).toBe(4);
    expect((await s.stats()).idempotent_replays).toBe(0);
    for (const id of ["shot/s01", "line/n01"]) {
      expect(job(fresh, id).task_id).not.toBe(job(first, id).task_id);
    }
    expect(fresh.report!.points.spent).toBe(47);
    // And a plain run after it reuses the fresh results.
    const after = (await runIn(s, manifest)).outcome;
    expect(after.report!.counts.skipped).toBe(2);
    expect(JSON.parse(await readFile(join(w.out(), "reports/report.json"), "utf8")).counts.skipped).toBe(2);
  });
});
