// What a run leaves for people, scripts and CI: report.json (the brief's contract, with values
// checked against the sandbox), report.md, junit.xml, the GitHub step summary, `status`,
// `report`, `--json`, the JSON event log, and the API key in none of them.
import { readFile, rm, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/model.js";
import {
  type CliResult,
  cli,
  created,
  filesUnder,
  KEY,
  type Line,
  type Sb,
  type Shot,
  sandbox,
  sha256,
  type Workspace,
  workspace,
} from "./helpers.js";

const shots: Shot[] = [
  { id: "s01", prompt: "Wide shot: a lighthouse on a cliff at dusk" },
  { id: "s02", prompt: "[sandbox:fail] the storm breaks the lamp", duration: 5, resolution: "480P" },
  { id: "s03", prompt: "[sandbox:upscale-fail] the beam over the sea", resolution: "1080P", takes: 2 },
];
const lines: Line[] = [
  { id: "n01", text: "Every night, the light came on at seven.", shot: "s01" },
  { id: "n02", text: "And every night, someone was watching.", voice: "preset:en_male_deep" },
];
const IDS = ["shot/s01", "shot/s02", "shot/s03/take-1", "shot/s03/take-2", "line/n01", "line/n02"];

/** One run through the CLI, shared by the report tests (they only read what it left). */
let s: Sb;
let w: Workspace;
let manifest: string;
let summaryFile: string;
let balanceBefore: number;
let run: CliResult;
let report: Report;
let planned: { jobs: Array<{ id: string; kind: string; points: number; fingerprint: string }> };

beforeAll(async () => {
  w = await workspace();
  s = await sandbox({ stateFile: join(w.dir, "sandbox-state.json") });
  manifest = await w.manifest({ shots, lines, budget: 5000 });
  summaryFile = await w.write("step-summary.md", "## Earlier step\n\n");
  const plan = await cli(s, ["plan", manifest, "--json"]);
  expect(plan.code).toBe(0);
  planned = JSON.parse(plan.out);
  balanceBefore = await s.available();
  run = await cli(
    s,
    ["run", manifest, "--json", "--poll-interval", "0.02", "--max-attempts", "1", "--log-format", "json"],
    { GITHUB_STEP_SUMMARY: summaryFile },
    "debug",
  );
  report = JSON.parse(await readFile(join(w.out(), "reports/report.json"), "utf8"));
  return async () => {
    await s.close();
    await w.remove();
  };
});

describe("report.json", () => {
  it("holds every field of the contract, with the values of the run", async () => {
    expect(run.code).toBe(1);
    expect(report.run).toMatchObject({ name: "ep01", status: "partial" });
    expect(report.run.manifest).toMatch(/manifest\.yaml$/);
    expect(Date.parse(report.run.started_at)).toBeGreaterThan(Date.now() - 60_000);
    expect(Date.parse(report.run.finished_at!)).toBeGreaterThanOrEqual(Date.parse(report.run.started_at));
    expect(Object.keys(report.points).sort()).toEqual([
      "balance_after",
      "balance_before",
      "estimated",
      "spent",
    ]);
    expect(report.counts).toEqual({
      total: 6,
      succeeded: 5,
      failed: 1,
      cancelled: 0,
      skipped: 0,
      pending: 0,
    });
    expect(report.jobs.map((j) => j.id)).toEqual(IDS);

    for (const j of report.jobs) {
      for (const field of [
        "id",
        "kind",
        "status",
        "task_id",
        "attempts",
        "points",
        "fingerprint",
        "output",
        "error",
      ])
        expect(j, `${j.id}.${field}`).toHaveProperty(field);
      const plan = planned.jobs.find((p) => p.id === j.id)!;
      expect(j.kind).toBe(plan.kind);
      expect(j.fingerprint).toBe(plan.fingerprint);
      expect(j.estimated_points).toBe(plan.points);
      expect(j.attempts).toBe(1);
      expect(j.task_id).toMatch(j.kind === "video" ? /^vtask_/ : /^stask_/);
      if (j.status === "succeeded") {
        expect(j.error).toBeNull();
        expect(Object.keys(j.output!).sort()).toEqual(
          j.kind === "video" ? ["bytes", "resolution", "sha256", "uri"] : ["bytes", "sha256", "uri"],
        );
        // Output of a local run lies under the manifest's output, in the run's folder.
        expect(relative(w.out(), j.output!.uri)).toMatch(/^(shots|lines)\/[\w-]+\.(mp4|wav)$/);
        expect(j.output!.sha256).toBe(await sha256(j.output!.uri));
        expect(j.output!.bytes).toBe((await readFile(j.output!.uri)).length);
      }
    }
    const failed = report.jobs.find((j) => j.id === "shot/s02")!;
    expect(failed).toMatchObject({ kind: "video", status: "failed", points: 0, output: null });
    expect(failed.error).toEqual({ code: expect.any(String), message: expect.stringContaining("fail") });
    // Upscale fallback: the base price (10 x 4 s), not the 1080P price (19 x 4 s), for both takes.
    expect(report.jobs.filter((j) => j.id.startsWith("shot/s03/")).map((j) => j.points)).toEqual([40, 40]);
  });

  it("points: spent is the sum of the jobs and the balance drop; estimated is the plan's", async () => {
    const sum = report.jobs.reduce((a, j) => a + j.points, 0);
    expect(report.points.spent).toBe(sum);
    expect(report.points.spent).toBe(40 + 40 + 40 + 7 + 7);
    expect(report.points.estimated).toBe(planned.jobs.reduce((a, j) => a + j.points, 0));
    expect(report.points.balance_before).toBe(balanceBefore);
    expect(report.points.balance_after).toBe(balanceBefore - sum);
    expect(await s.available()).toBe(balanceBefore - sum);
    expect(created(await s.stats())).toBe(6);
  });

  it("--json prints the same report on stdout, and nothing else", () => {
    const printed = JSON.parse(run.out) as Report;
    expect(printed).toEqual(report);
  });
});

describe("junit.xml, report.md and the step summary", () => {
  it("junit.xml has one test case per job, a failure for the failed one", async () => {
    const xml = await readFile(join(w.out(), "reports/junit.xml"), "utf8");
    expect(xml).toMatch(/^<\?xml version="1\.0" encoding="UTF-8"\?>/);
    const cases = [
      ...xml.matchAll(
        /<testcase classname="([^"]+)" name="([^"]+)" time="[\d.]+"(?:\/>|>([\s\S]*?)<\/testcase>)/g,
      ),
    ];
    expect(cases.map((c) => c[2])).toEqual(IDS);
    const failures = cases.filter((c) => (c[3] ?? "").includes("<failure"));
    expect(failures.map((c) => c[2])).toEqual(["shot/s02"]);
    expect(failures[0]![3]).toMatch(/<failure type="[^"]+" message="[^"]*fail[^"]*">[^<]*<\/failure>/);
    expect(xml).toMatch(/<testsuite name="ep01" tests="6" failures="1" skipped="0"/);
    expect(cases.find((c) => c[2] === "line/n01")![1]).toBe("ep01.speech");
  });

  it("report.md lists every job with its status and points", async () => {
    const md = await readFile(join(w.out(), "reports/report.md"), "utf8");
    expect(md).toContain("# clapper report: ep01");
    for (const j of report.jobs) {
      expect(md).toMatch(new RegExp(`^\\| ${j.id} \\| ${j.kind} \\| ${j.status} \\| ${j.points} \\|`, "m"));
    }
    expect(md).toMatch(/partial/);
  });

  it("$GITHUB_STEP_SUMMARY gets a summary appended, the earlier content kept", async () => {
    const text = await readFile(summaryFile, "utf8");
    expect(text.startsWith("## Earlier step\n\n")).toBe(true);
    expect(text).toContain("clapper run ep01: partial");
    expect(text).toMatch(/6 jobs: 5 generated, 0 reused, 1 failed/);
    expect(text).toContain(`Points: ${report.points.spent} spent`);
  });
});

describe("status and report read the state", () => {
  it("clapper status shows every job where it stands; --json gives the report", async () => {
    const r = await cli(undefined, ["status", manifest]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^run ep01: partial \(6 jobs: 5 succeeded, 0 skipped, 1 failed/);
    for (const j of report.jobs)
      expect(r.out).toMatch(new RegExp(`^${j.id}\\s+${j.kind}\\s+${j.status}\\s`, "m"));
    const json = await cli(undefined, ["status", manifest, "--json"]);
    const status = JSON.parse(json.out) as Report;
    expect(status.counts).toEqual(report.counts);
    expect(status.jobs).toEqual(report.jobs);
    expect(status.points.spent).toBe(report.points.spent);
    expect(status.run.finished_at).toBe(report.run.finished_at);
  });

  it("clapper report writes the four reports again from the state", async () => {
    await rm(join(w.out(), "reports"), { recursive: true });
    const r = await cli(undefined, ["report", manifest]);
    expect(r.code).toBe(0);
    expect(r.out.split("\n").map((p) => relative(w.out(), p))).toEqual([
      "reports/report.json",
      "reports/report.md",
      "reports/junit.xml",
      "reports/report.html",
    ]);
    const again = JSON.parse(await readFile(join(w.out(), "reports/report.json"), "utf8")) as Report;
    expect(again.jobs).toEqual(report.jobs);
    expect(again.counts).toEqual(report.counts);
    expect(again.run).toEqual(report.run);
    expect(again.points.spent).toBe(report.points.spent);
    expect(await readFile(join(w.out(), "reports/junit.xml"), "utf8")).toMatch(/failures="1"/);
  });

  it("clapper report keeps the balance before the run", async () => {
    const again = await cli(undefined, ["report", manifest, "--json"]);
    expect((JSON.parse(again.out) as Report).points.balance_before).toBe(report.points.balance_before);
  });
});

describe("the JSON event log", () => {
  it("has one line per state change, each with the run and the job", () => {
    const events = run.logs.lines().filter((l) => l.job !== undefined && l.event !== undefined);
    for (const e of events) expect(e).toMatchObject({ run: "ep01", run_id: report.run.id });
    const byJob = (id: string) => events.filter((e) => e.job === id).map((e) => e.event);
    for (const id of IDS) {
      const seq = byJob(id);
      expect(seq[0], id).toBe("submitting");
      expect(seq[1], id).toBe("created");
      expect(seq, id).toContain("status");
      expect(seq.at(-1), id).toBe(id === "shot/s02" ? "failed" : "stored");
    }
    const stored = events.find((e) => e.job === "line/n01" && e.event === "stored")!;
    expect(stored.uri).toBe(join(w.out(), "lines/n01.wav"));
  });

  it("a re-run logs each reused job as skipped", async () => {
    const again = await cli(s, ["run", manifest, "--poll-interval", "0.02", "--log-format", "json"]);
    expect(again.code).toBe(1);
    const skipped = again.logs
      .lines()
      .filter((l) => l.event === "skipped")
      .map((l) => l.job);
    expect(skipped.sort()).toEqual(IDS.filter((id) => id !== "shot/s02").sort());
  });
});

describe("the API key", () => {
  const secret = KEY.slice("sk-ml-".length);

  it("appears in no log line, report, state file, sandbox state, output or console text", async () => {
    // A wrong key must not be echoed either.
    const wrong = "sk-ml-wrong-2c6b0a9e51";
    const refused = await cli(s, ["run", manifest], { CLAPPER_API_KEY: wrong }, "debug");
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(/the API key was refused/);

    // And a run under faults, so the retry and error paths log too.
    // Every result is made again (one replaced by junk, the rest deleted) so that many requests meet the faults.
    await writeFile(join(w.out(), "shots/s01.mp4"), "not a video any more");
    for (const f of await filesUnder(w.out()))
      if (/\.(wav|mp4)$/.test(f) && !f.endsWith("s01.mp4")) await rm(f);
    // Every third API request fails: the error paths run for certain, not by chance.
    await s.faults({ error_every: 3 });
    const faulty = await cli(s, ["run", manifest, "--poll-interval", "0.02"], {}, "trace");
    await s.faults({ error_every: 0 });
    expect(faulty.code).toBe(1);
    expect(faulty.logs.lines().some((l) => l.status === 503)).toBe(true);

    const texts: Array<[string, string]> = [
      ["logs", run.logs.text() + faulty.logs.text() + refused.logs.text()],
      ["console", [run.out, run.err, faulty.out, faulty.err, refused.out, refused.err].join("\n")],
    ];
    const files = await filesUnder(w.dir);
    expect(files.map((f) => relative(w.dir, f))).toEqual(
      expect.arrayContaining([
        "sandbox-state.json",
        ".clapper/ep01/state.jsonl",
        "out/ep01/reports/report.json",
        "out/ep01/reports/report.md",
        "out/ep01/reports/junit.xml",
        "step-summary.md",
      ]),
    );
    for (const f of files) texts.push([relative(w.dir, f), (await readFile(f)).toString("latin1")]);
    for (const [where, text] of texts) {
      expect(text.includes(secret), where).toBe(false);
      expect(text.includes(wrong.slice(6)), where).toBe(false);
    }
    // The search looked at the real things: every HTTP attempt was logged, the sandbox's state holds the tasks.
    expect(faulty.logs.lines().filter((l) => l.msg === "http attempt").length).toBeGreaterThan(10);
    expect(await readFile(join(w.dir, "sandbox-state.json"), "utf8")).toContain(report.jobs[0]!.task_id!);
  });
});
