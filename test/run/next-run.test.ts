// What a person sees between runs (issue 23): `plan` says what the next run generates, reuses and
// reserves, and the run then spends exactly that (the sandbox's balance says so); `status` marks a
// row edited since its output; what a job cost survives a run that changes nothing; a failed job
// keeps its attempts; `--only` claims nothing it did not do; the live counts and the summary agree;
// the summary names report.html, --retry-failed and, after an interrupt, what still runs.
// The CLI in process (main) and as its own process (bin/clapper.js), a sandbox over real HTTP.
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { progressLine } from "../../src/cli/progress.js";
import type { Report } from "../../src/report/model.js";
import type { Progress } from "../../src/run/run.js";
import { clapper, folder, smallManifest } from "../cli/cli-process.js";
import { staleBuild } from "./harness.js";
import { cli, type Line, runIn, type Shot, setup } from "./helpers.js";

const shots: Shot[] = [
  { id: "s01", prompt: "Wide shot: a lighthouse on a cliff at dusk" },
  { id: "s02", prompt: "Close-up: the lamp room", duration: 5, resolution: "480P" },
  { id: "s03", prompt: "[sandbox:fail] the storm breaks the lamp" },
];
const lines: Line[] = [
  { id: "n01", text: "Every night, the light came on at seven.", shot: "s01" },
  { id: "n02", text: "And every night, someone was watching.", voice: "preset:en_male_deep" },
];
// 768P 4 s = 40, 480P 5 s = 25; the lines 7 each at the sandbox's 2 points per 10 characters.
const COST: Record<string, number> = { "shot/s01": 40, "shot/s02": 25, "line/n01": 7, "line/n02": 7 };

const RUN = ["--poll-interval", "0.02", "--max-attempts", "1", "--log-format", "json"];

interface PlanJson {
  jobs: Array<{
    id: string;
    points: number;
    fingerprint: string;
    action?: string;
    next_points?: number;
    follows?: { task_id: string | null; reserved_points: number };
    output_missing?: boolean;
  }>;
  points: { video: number; speech: number | null; total: number | null };
  next: {
    generate: number;
    reuse: number;
    retry: number;
    points: number;
    reserved_by_open_tasks: number;
    retry_failed: { new_tasks: number; downloads: number; points: number };
  } | null;
  state: { path: string; found: boolean };
  warnings: string[];
}

const actions = (p: PlanJson) => Object.fromEntries(p.jobs.map((j) => [j.id, j.action]));

beforeAll(() => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
});

describe("plan, then the run it describes", () => {
  it("prices the next run after an edit, and the run spends exactly that; status marks the edited row", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots, lines });

    // No run yet: everything is to be generated.
    const first = JSON.parse((await cli(s, ["plan", manifest, "--json"])).out) as PlanJson;
    expect(first.state).toMatchObject({ found: false });
    expect(first.next).toMatchObject({ generate: 5, reuse: 0, retry: 0, points: first.points.total });
    expect(new Set(Object.values(actions(first)))).toEqual(new Set(["generate"]));

    const ran = await cli(s, ["run", manifest, ...RUN]);
    expect(ran.code).toBe(1);
    // The summary: one vocabulary, the page people open, and what --retry-failed would do.
    expect(ran.out).toContain("  5 jobs: 4 generated, 0 reused, 1 failed, 0 cancelled, 0 pending");
    expect(ran.out).toContain(`  report: ${join(w.out(), "reports/report.html")}`);
    expect(ran.out).toContain(
      `  next: clapper run ${manifest} --retry-failed makes a new task for 1 job (shot/s03, about 40 points)`,
    );

    // One line edited: the next run generates it alone.
    const edited = lines.map((l) =>
      l.id === "n02" ? { ...l, text: "And every night, somebody watched." } : l,
    );
    await w.manifest({ shots, lines: edited });
    const planned = await cli(s, ["plan", manifest, "--json"]);
    expect(planned.code).toBe(0);
    const plan = JSON.parse(planned.out) as PlanJson;
    expect(plan.state.found).toBe(true);
    expect(actions(plan)).toEqual({
      "shot/s01": "reuse",
      "shot/s02": "reuse",
      "shot/s03": "retry",
      "line/n01": "reuse",
      "line/n02": "generate",
    });
    const n02 = plan.jobs.find((j) => j.id === "line/n02")!;
    expect(plan.next).toMatchObject({ generate: 1, reuse: 3, retry: 1, points: n02.points });
    expect(plan.next!.retry_failed).toEqual({ new_tasks: 1, downloads: 0, points: 40 });
    // The contract's fields stay: the whole manifest's points are still there.
    expect(plan.points.total).toBe(first.points.total! - COST["line/n02"]! + n02.points);
    const text = (await cli(s, ["plan", manifest])).out;
    expect(text).toContain(`next run: generates 1 job (${n02.points} points) and reuses 3`);
    expect(text).toMatch(
      /^ {2}retry {5}shot\/s03 {2}failed: .*--retry-failed makes a new task \(about 40 points\)$/m,
    );
    expect(text).toMatch(/^ {2}generate {2}line\/n02 {2}\d+ points, edited since its output$/m);
    expect(text).toContain(
      `clapper run ${manifest} --retry-failed makes a new task for it (about 40 points more)`,
    );

    // Before the run: status keeps the word the run gave, and marks the row edited since.
    const status = await cli(undefined, ["status", manifest]);
    expect(status.out).toMatch(/^line\/n02\s+speech\s+succeeded\s+edited\s+7\s+7\s+1\s/m);
    expect(status.out).toMatch(/^line\/n01\s+speech\s+succeeded\s+7\s+7\s+1\s/m);
    expect(status.out).toContain("1 row edited in the manifest since its output was made");
    const statusJson = JSON.parse((await cli(undefined, ["status", manifest, "--json"])).out) as Report;
    expect(statusJson.jobs.filter((j) => j.edited).map((j) => j.id)).toEqual(["line/n02"]);

    const before = await s.settledTotal();
    const again = await cli(s, ["run", manifest, ...RUN]);
    expect(again.code).toBe(1);
    const report = JSON.parse(await readFile(join(w.out(), "reports/report.json"), "utf8")) as Report;
    // Exactly what the plan said: the balance fell by it, and the report spent it.
    expect(before - (await s.settledTotal())).toBe(plan.next!.points);
    expect(report.points.spent).toBe(plan.next!.points);
    expect(Object.fromEntries(report.jobs.map((j) => [j.id, j.status]))).toEqual({
      "shot/s01": "skipped",
      "shot/s02": "skipped",
      "shot/s03": "failed",
      "line/n01": "skipped",
      "line/n02": "succeeded",
    });
    expect(again.out).toContain("  5 jobs: 1 generated, 3 reused, 1 failed, 0 cancelled, 0 pending");
    expect(again.out).toContain("  3 skipped (reused, in report.json's words)");
    // The failed shot was not tried again: it keeps the attempt that failed.
    expect(report.jobs.find((j) => j.id === "shot/s03")).toMatchObject({ attempts: 1, points: 0 });
    expect(report.jobs.every((j) => !j.edited)).toBe(true);
  }, 60_000);

  it("keeps what each job cost through a run that changes nothing: report.json, status and the page", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: shots.slice(0, 2), lines });
    const first = await cli(s, ["run", manifest, ...RUN]);
    expect(first.code).toBe(0);
    expect(first.out).not.toContain("skipped");
    const same = await cli(s, ["run", manifest, ...RUN]);
    expect(same.code).toBe(0);
    expect(same.out).toContain("  4 jobs: 0 generated, 4 reused, 0 failed, 0 cancelled, 0 pending");
    // report.json's word too, as scripts grep it (the Docker smoke's "run again": `4 skipped`).
    expect(same.out).toContain("  4 skipped (reused, in report.json's words)");
    const report = JSON.parse(await readFile(join(w.out(), "reports/report.json"), "utf8")) as Report;
    for (const j of report.jobs) {
      expect(j, j.id).toMatchObject({ status: "skipped", points: 0, spent_total: COST[j.id] });
    }
    const status = await cli(undefined, ["status", manifest]);
    for (const j of report.jobs)
      expect(status.out).toMatch(
        new RegExp(`^${j.id}\\s+${j.kind}\\s+skipped\\s+0\\s+${COST[j.id]}\\s`, "m"),
      );
    expect(status.out).toContain("0 points spent in the last run, 79 in all runs");
    const page = await readFile(join(w.out(), "reports/report.html"), "utf8");
    expect(page).toContain("<b>points</b> 40 in all, 0 this run (40 est.)");
    expect(page).toMatch(/<b>79<\/b> points in all runs/);
    // The plan agrees: nothing to generate, nothing to spend.
    const plan = JSON.parse((await cli(s, ["plan", manifest, "--json"])).out) as PlanJson;
    expect(plan.next).toMatchObject({ generate: 0, reuse: 4, retry: 0, points: 0 });
    expect((await cli(s, ["plan", manifest])).out).toContain("next run: generates nothing and reuses 4");

    // A result deleted from the output folder: the plan sees it gone, and the run makes that one alone.
    await rm(join(w.out(), "shots/s02.mp4"));
    const gone = JSON.parse((await cli(s, ["plan", manifest, "--json"])).out) as PlanJson;
    expect(gone.next).toMatchObject({ generate: 1, reuse: 3, points: COST["shot/s02"] });
    expect(gone.jobs.find((j) => j.id === "shot/s02")).toMatchObject({
      action: "generate",
      output_missing: true,
    });
    expect((await cli(s, ["plan", manifest])).out).toMatch(
      /^ {2}generate {2}shot\/s02 {2}25 points, its stored output is gone$/m,
    );
    const before = await s.settledTotal();
    expect((await cli(s, ["run", manifest, ...RUN])).code).toBe(0);
    expect(before - (await s.settledTotal())).toBe(gone.next!.points);
  }, 60_000);

  it("a state that cannot be read is a warning: the plan is made, the next run not told", async () => {
    const { w } = await setup();
    const manifest = await w.manifest({ shots: shots.slice(0, 1) });
    await mkdir(join(w.dir, ".clapper", "ep01"), { recursive: true });
    await writeFile(w.statePath(), '{"t":"run","id":"x"\nnot json at all\n{"t":"job"}\n');
    const r = await cli(undefined, ["plan", manifest, "--json"]);
    expect(r.code).toBe(0);
    const plan = JSON.parse(r.out) as PlanJson;
    expect(plan.next).toBeNull();
    expect(plan.jobs.map((j) => j.id)).toEqual(["shot/s01"]);
    expect(plan.warnings.join("\n")).toMatch(
      /the run's state cannot be read .*the plan does not say what the next run does/,
    );
    const text = await cli(undefined, ["plan", manifest]);
    expect(text.code).toBe(0);
    expect(text.out).toContain("next run: not told (the run's state cannot be used: see the warning)");
  });
});

describe("--only and the live counts", () => {
  it("--only on a finished run claims nothing it did not do", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: shots.slice(0, 2), lines });
    expect((await cli(s, ["run", manifest, ...RUN])).code).toBe(0);
    let last: Progress | undefined;
    const { outcome } = await runIn(s, manifest, { only: ["s01"], onProgress: (p) => (last = p) });
    expect(outcome.exitCode).toBe(0);
    const r = outcome.report!;
    // s01 unchanged and reused; the others untouched: reused too, never "succeeded" by this run.
    expect(r.counts).toMatchObject({ total: 4, succeeded: 0, skipped: 4 });
    expect(r.points.spent).toBe(0);
    const final = progressLine(last!, last!.startedAt, { final: true });
    expect(final).toContain("0 generated · 4 reused");
    expect(final).toContain("points 0 spent");
    const text = await cli(s, ["run", manifest, "--only", "s01", ...RUN]);
    expect(text.out).toContain("  4 jobs: 0 generated, 4 reused, 0 failed, 0 cancelled, 0 pending");
    expect(text.out).toContain("  --only: 1 job selected;");
  }, 60_000);

  it("a resumed run's live counts and points are the summary's: what its first process made is generated", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: [...shots.slice(0, 2), { id: "s04", prompt: "[sandbox:slow] the keeper climbs the stairs" }],
      lines,
    });
    const controller = new AbortController();
    const first = await runIn(s, manifest, {
      signal: controller.signal,
      onProgress: (p) => {
        if (p.counts.stored >= 2) controller.abort(new Error("SIGINT"));
      },
    });
    expect(first.outcome.exitCode).toBe(4);
    expect(first.outcome.report!.points.spent).toBeGreaterThan(0);
    let last: (Progress & { work?: number }) | undefined;
    const second = await runIn(s, manifest, { onProgress: (p) => (last = p) });
    expect(second.outcome.exitCode).toBe(0);
    const r = second.outcome.report!;
    expect(r.counts).toMatchObject({ total: 5, succeeded: 5, skipped: 0 });
    // The live feed: every job generated by this run (both processes), nothing reused, the run's spending.
    expect(last!.reused).toBe(0);
    expect(last!.counts.stored).toBe(5);
    expect(last!.work).toBe(5);
    expect(last!.spent).toBe(r.points.spent);
    expect(progressLine(last!, last!.startedAt, { final: true })).toContain(
      `5 generated · 0 reused · points ${r.points.spent} spent`,
    );
  }, 60_000);
});

describe("the end of a run says what to do next", () => {
  it("after an interrupt with tasks running: how many, their reserved points, and clapper cancel", async () => {
    const dir = await folder();
    try {
      const manifest = await dir.file("slow.yaml", smallManifest("slow", { slow: true, shots: 2 }));
      let created = 0;
      const ran = await clapper(["run", manifest, "--sandbox", "--log-format", "json"], {
        cwd: dir.path,
        // Interrupted once the three tasks exist at the (slow) service.
        onLine: (line) => (line.includes('"event":"created"') && ++created === 3 ? "SIGINT" : undefined),
        timeoutMs: 60_000,
      });
      expect(ran.code, ran.stderr).toBe(4);
      const report = JSON.parse(
        await readFile(join(dir.path, "output", "slow", "reports", "report.json"), "utf8"),
      ) as Report;
      const reserved = report.jobs.reduce((sum, j) => sum + (j.in_flight?.reserved_points ?? 0), 0);
      expect(report.jobs.map((j) => j.in_flight?.tasks)).toEqual([1, 1, 1]);
      // 480P 4 s = 20 each, and the line's price.
      expect(reserved).toBe(20 + 20 + (report.jobs[2]?.estimated_points ?? 0));
      // On stdout, as any run's summary: stderr holds only the log's JSON lines.
      const text = ran.stdout;
      expect(ran.stderr.split("\n").filter((l) => l.trim() !== "" && !l.startsWith("{"))).toEqual([]);
      expect(text).toContain(
        `  interrupted: state saved; 3 tasks are still running at the service, holding ${reserved} reserved points`,
      );
      // The manifest as it was given (relative to the folder the run was started in).
      expect(text).toContain("or clapper cancel slow.yaml to stop them");
      expect(text).toContain(`  report: ${join(dir.path, "output", "slow", "reports", "report.html")}`);

      // The plan knows: the next run follows those tasks, reserving what they hold.
      const plan = await clapper(["plan", manifest, "--sandbox", "--json"], { cwd: dir.path });
      expect(plan.code, plan.stderr).toBe(0);
      const p = JSON.parse(plan.stdout) as PlanJson;
      expect(p.next).toMatchObject({
        generate: 3,
        reuse: 0,
        points: reserved,
        reserved_by_open_tasks: reserved,
      });
      expect(p.jobs.map((j) => j.follows?.reserved_points)).toEqual(
        report.jobs.map((j) => j.in_flight?.reserved_points),
      );
    } finally {
      await dir.remove();
    }
  }, 90_000);

  it("assemble after a failed shot names --retry-failed", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: [shots[0]!, shots[2]!] });
    expect((await cli(s, ["run", manifest, ...RUN])).code).toBe(1);
    const r = await cli(undefined, ["assemble", manifest], {}, "silent");
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /cannot assemble ep01: shot s03 \(shot\/s03\) is not stored yet \(failed\); clapper run \S+manifest\.yaml --retry-failed makes the failed ones again \(1 input missing\)/,
    );
    expect(r.err).not.toContain("first");
  }, 60_000);
});
