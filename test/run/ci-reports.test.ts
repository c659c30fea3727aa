// The reports a CI reads (issue 10, "CI kit"): junit.xml parsed as XML and checked case by case
// (time, failure bodies, unfinished jobs as errors, reused jobs as passing with a property, counts
// that agree with the cases, no control character), the GitHub step summary (what failed first,
// then the totals; never twice for one run), and the upscale fallback made visible in report.json,
// report.md, junit.xml and the log. Real runs against the sandbox over HTTP, a hostile proxy for
// the messages a service should not send, and unit checks of the report functions.
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import { beforeAll, describe, expect, it } from "vitest";
import type { Job } from "../../src/manifest/index.js";
import { buildReport } from "../../src/report/build.js";
import { junitXml } from "../../src/report/junit.js";
import { reportMarkdown } from "../../src/report/markdown.js";
import type { Report } from "../../src/report/model.js";
import { summaryMarkdown } from "../../src/report/summary.js";
import { writeReports } from "../../src/report/writing.js";
import type { Sink } from "../../src/sinks/sink.js";
import { applyRecord, initialState, type RunRecord } from "../../src/state/run-state.js";
import { hostileProxy, taskJson } from "../fixtures/hostile.js";
import { errorBody } from "../fixtures/servers.js";
import {
  type CliResult,
  cli,
  type Line,
  runIn,
  type Sb,
  type Shot,
  sandbox,
  setup,
  type Workspace,
  workspace,
} from "./helpers.js";

// ---------------------------------------------------------------------------------------------
// junit.xml, read as a CI reads it
// ---------------------------------------------------------------------------------------------

interface Outcome {
  type?: string;
  message?: string;
  body: string;
}

interface Case {
  classname: string;
  name: string;
  time: string | undefined;
  failure?: Outcome;
  error?: Outcome;
  skipped?: Outcome;
  properties: Array<{ name: string; value: string }>;
}

interface Junit {
  suites: Record<string, string>;
  suite: Record<string, string>;
  suiteProperties: Record<string, string>;
  cases: Case[];
}

const ARRAYS = new Set(["testsuite", "testcase", "property", "failure", "error", "skipped"]);

/** Characters XML 1.0 forbids or discourages, outside tab, line feed and carriage return. */
function controls(text: string): string[] {
  return [...text].filter((ch) => {
    const c = ch.codePointAt(0) as number;
    if (c < 0x20) return c !== 0x09 && c !== 0x0a && c !== 0x0d;
    return (c >= 0x7f && c <= 0x9f) || (c >= 0xd800 && c <= 0xdfff) || c === 0xfffe || c === 0xffff;
  });
}

function outcome(raw: any): Outcome | undefined {
  if (raw === undefined) return undefined;
  const one = raw[0];
  if (typeof one === "string") return { body: one };
  return { type: one.type, message: one.message, body: one["#text"] ?? "" };
}

/** Parses junit.xml strictly (well-formed, no control character) into its suite and cases. */
function parseJunit(xml: string): Junit {
  expect(XMLValidator.validate(xml)).toBe(true);
  expect(controls(xml).map((c) => c.codePointAt(0))).toEqual([]);
  const doc = new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: "",
    htmlEntities: true,
    trimValues: false,
    parseTagValue: false,
    parseAttributeValue: false,
    isArray: (name, _path, _leaf, isAttribute) => !isAttribute && ARRAYS.has(name),
  }).parse(xml);
  const suites = doc.testsuites;
  expect(suites.testsuite).toHaveLength(1);
  const suite = suites.testsuite[0];
  const cases: Case[] = (suite.testcase ?? []).map((c: any) => ({
    classname: c.classname,
    name: c.name,
    time: c.time,
    failure: outcome(c.failure),
    error: outcome(c.error),
    skipped: outcome(c.skipped),
    properties: (c.properties?.property ?? []).map((p: any) => ({ name: p.name, value: p.value })),
  }));
  const attrs = (o: any) =>
    Object.fromEntries(Object.entries(o).filter(([, v]) => typeof v === "string")) as Record<string, string>;
  const suiteProperties = Object.fromEntries(
    (suite.properties?.property ?? []).map((p: any) => [p.name, p.value]),
  ) as Record<string, string>;
  return { suites: attrs(suites), suite: attrs(suite), suiteProperties, cases };
}

/** The suite's tests, failures, errors, skipped and time are those of its cases (both levels). */
function expectConsistent(j: Junit): void {
  for (const c of j.cases) {
    expect(c.time, c.name).toMatch(/^\d+\.\d{3}$/);
    // One outcome at most per case.
    expect([c.failure, c.error, c.skipped].filter(Boolean).length, c.name).toBeLessThanOrEqual(1);
  }
  const totalMs = j.cases.reduce((sum, c) => sum + Math.round(Number(c.time) * 1000), 0);
  for (const level of [j.suites, j.suite]) {
    expect(Number(level.tests)).toBe(j.cases.length);
    expect(Number(level.failures)).toBe(j.cases.filter((c) => c.failure).length);
    expect(Number(level.errors)).toBe(j.cases.filter((c) => c.error).length);
    expect(Number(level.skipped)).toBe(j.cases.filter((c) => c.skipped).length);
    expect(level.time).toBe((totalMs / 1000).toFixed(3));
  }
}

const byName = (j: Junit, name: string): Case => {
  const found = j.cases.find((c) => c.name === name);
  if (!found) throw new Error(`no test case ${name}`);
  return found;
};

const readJunit = async (w: Workspace, runName?: string) =>
  parseJunit(await readFile(join(w.out(runName), "reports/junit.xml"), "utf8"));
const readJson = async (w: Workspace, runName?: string) =>
  JSON.parse(await readFile(join(w.out(runName), "reports/report.json"), "utf8")) as Report;
const readMd = (w: Workspace, runName?: string) =>
  readFile(join(w.out(runName), "reports/report.md"), "utf8");

const RUN_FLAGS = ["--poll-interval", "0.02", "--max-attempts", "1", "--log-format", "json"];

// ---------------------------------------------------------------------------------------------
// one finished run: a failure, an upscale that fell back, one that did not
// ---------------------------------------------------------------------------------------------

describe("a finished run with a failed job and an upscale fallback", () => {
  const shots: Shot[] = [
    { id: "s01", prompt: "Wide shot: a lighthouse on a cliff at dusk" },
    { id: "s02", prompt: "[sandbox:fail] the storm breaks the lamp" },
    { id: "s03", prompt: "[sandbox:upscale-fail] the beam over the sea", resolution: "1080P" },
    { id: "s04", prompt: "The keeper climbs the stairs", resolution: "1080P" },
  ];
  const lines: Line[] = [{ id: "n01", text: "Every night, the light came on at seven." }];
  let s: Sb;
  let w: Workspace;
  let manifest: string;
  let summaryFile: string;
  let run: CliResult;
  let report: Report;
  let junit: Junit;

  beforeAll(async () => {
    w = await workspace();
    s = await sandbox();
    manifest = await w.manifest({ shots, lines });
    summaryFile = await w.write("step-summary.md", "## Earlier step\n\n");
    run = await cli(s, ["run", manifest, ...RUN_FLAGS], { GITHUB_STEP_SUMMARY: summaryFile }, "debug");
    report = await readJson(w);
    junit = await readJunit(w);
    return async () => {
      await s.close();
      await w.remove();
    };
  });

  it("junit.xml: one case per job with its time, counts that agree with the cases", () => {
    expect(run.code).toBe(1);
    expect(junit.cases.map((c) => c.name)).toEqual(report.jobs.map((j) => j.id));
    expectConsistent(junit);
    expect(junit.suite).toMatchObject({ name: "ep01", tests: "5", failures: "1", errors: "0", skipped: "0" });
    for (const j of report.jobs) {
      const c = byName(junit, j.id);
      expect(c.classname).toBe(`ep01.${j.kind}`);
      // The seconds the job took in this run: each ran for real, so more than nothing.
      expect(Number(c.time), j.id).toBeGreaterThan(0);
      expect(Number(c.time)).toBeCloseTo(j.elapsed_seconds, 3);
      expect(j.elapsed_seconds).toBeLessThan(60);
    }
    expect(Number(junit.suite.time)).toBeGreaterThan(0);
    expect(junit.suiteProperties).toMatchObject({ run_id: report.run.id, status: "partial" });
  });

  it("junit.xml: the failed job is a failure whose body tells the task, attempts and error", () => {
    const failed = report.jobs.find((j) => j.id === "shot/s02")!;
    expect(failed.status).toBe("failed");
    const c = byName(junit, "shot/s02");
    expect(c.failure).toBeDefined();
    expect(c.failure!.type).toBe(failed.error!.code);
    expect(c.failure!.message).toBe(failed.error!.message);
    const body = c.failure!.body;
    expect(body).toContain("job: shot/s02 (");
    expect(body).toContain(`task: ${failed.task_id}`);
    expect(failed.task_id).toMatch(/^vtask_/);
    expect(body).toContain("attempts: 1");
    expect(body).toContain(`error: ${failed.error!.code}: ${failed.error!.message}`);
    for (const id of ["shot/s01", "shot/s03", "shot/s04", "line/n01"]) {
      const ok = byName(junit, id);
      expect(ok.failure ?? ok.error ?? ok.skipped, id).toBeUndefined();
    }
  });

  it("report.json gives each video job the delivered resolution, and a warning when it differs", () => {
    const job = (id: string) => report.jobs.find((j) => j.id === id)!;
    expect(job("shot/s03")).toMatchObject({ status: "succeeded", requested_resolution: "1080P", points: 40 });
    expect(job("shot/s03").output!.resolution).toBe("768P");
    expect(job("shot/s03").warnings).toEqual([expect.stringMatching(/upscale to 1080P failed.*768P/)]);
    expect(job("shot/s04")).toMatchObject({ status: "succeeded", requested_resolution: "1080P", points: 76 });
    expect(job("shot/s04").output!.resolution).toBe("1080P");
    expect(job("shot/s04").warnings).toBeUndefined();
    expect(job("shot/s01").output!.resolution).toBe("768P");
    expect(job("shot/s01").warnings).toBeUndefined();
    expect(job("line/n01").output).not.toHaveProperty("resolution");
    expect(job("line/n01")).not.toHaveProperty("requested_resolution");
    // The contract's fields are all still there.
    expect(job("shot/s03").output).toMatchObject({
      uri: expect.any(String),
      bytes: expect.any(Number),
      sha256: expect.any(String),
    });
  });

  it("the fallback shows in report.md, junit.xml and the run's log", async () => {
    const md = await readMd(w);
    expect(md).toMatch(/## Warnings \(1\)/);
    expect(md).toMatch(/^- shot\/s03: the upscale to 1080P failed/m);
    expect(md).toMatch(/^\| shot\/s03 \| video \| succeeded \| 40 \|.*\| 1080P asked, 768P delivered \|/m);
    expect(md).toMatch(/^\| shot\/s04 \| video \| succeeded \| 76 \|.*\| 1080P \|/m);
    const c = byName(junit, "shot/s03");
    expect(c.failure ?? c.error ?? c.skipped).toBeUndefined();
    expect(c.properties).toEqual([
      { name: "warning", value: expect.stringMatching(/upscale to 1080P failed/) },
    ]);
    const warned = run.logs.lines().filter((l) => l.event === "resolution-fallback");
    expect(warned).toEqual([
      expect.objectContaining({ job: "shot/s03", requested: "1080P", delivered: "768P", level: 40 }),
    ]);
  });

  it("report.md and the step summary list what failed first, then the totals", async () => {
    const md = await readMd(w);
    const failedAt = md.indexOf("## Did not succeed (1)");
    expect(failedAt).toBeGreaterThan(0);
    expect(md.indexOf("| shot/s02 | failed | 1 |")).toBeGreaterThan(failedAt);
    expect(md.indexOf("## Totals")).toBeGreaterThan(md.indexOf("| shot/s02 | failed | 1 |"));
    expect(md.indexOf("## Jobs")).toBeGreaterThan(md.indexOf("## Totals"));

    const text = await readFile(summaryFile, "utf8");
    expect(text.startsWith("## Earlier step\n\n")).toBe(true);
    const head = text.indexOf("### clapper run ep01: partial");
    const failedRow = text.indexOf("| shot/s02 | failed |");
    const totals = text.indexOf("5 jobs: 4 generated, 0 reused, 1 failed");
    expect(head).toBeGreaterThan(0);
    expect(failedRow).toBeGreaterThan(head);
    expect(totals).toBeGreaterThan(failedRow);
    expect(text.indexOf("Points: ")).toBeGreaterThan(totals);
    // The failed row carries the error; no succeeded job is listed before the totals.
    const error = report.jobs.find((j) => j.id === "shot/s02")!.error!;
    expect(text.slice(failedRow, totals)).toContain(error.code);
    expect(text.slice(head, totals)).not.toContain("shot/s01");
    // The warning comes after the totals.
    expect(text.indexOf("shot/s03: the upscale to 1080P failed")).toBeGreaterThan(totals);
  });

  it("clapper report does not append the run's summary a second time", async () => {
    const before = await readFile(summaryFile, "utf8");
    expect(before.split("### clapper run ep01").length - 1).toBe(1);
    const again = await cli(undefined, ["report", manifest], { GITHUB_STEP_SUMMARY: summaryFile });
    expect(again.code).toBe(0);
    const twice = await cli(undefined, ["report", manifest], { GITHUB_STEP_SUMMARY: summaryFile });
    expect(twice.code).toBe(0);
    expect(await readFile(summaryFile, "utf8")).toBe(before);
    // The reports themselves are written again, the same.
    expect(await readJunit(w)).toEqual(junit);
  });
});

// ---------------------------------------------------------------------------------------------
// an interrupted run: what did not finish is an error, never skipped
// ---------------------------------------------------------------------------------------------

describe("an interrupted run", () => {
  it("lists every unfinished job as an error with where it stood, and nothing as skipped", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: [
        { id: "s01", prompt: "[sandbox:slow] the keeper climbs the stairs" },
        { id: "s02", prompt: "The lamp room" },
        { id: "s03", prompt: "Waves on the rocks" },
      ],
    });
    const summaryFile = await w.write("summary.md", "");
    const controller = new AbortController();
    const { outcome } = await runIn(s, manifest, {
      signal: controller.signal,
      env: { GITHUB_STEP_SUMMARY: summaryFile },
      limits: { video: { rps: 20, inFlight: 1 }, speech: { rps: 20, inFlight: 1 } },
      onProgress: (p) => {
        if (p.counts.running >= 1) controller.abort(new Error("SIGINT"));
      },
    });
    expect(outcome.exitCode).toBe(4);
    const report = await readJson(w);
    expect(report.run.status).toBe("interrupted");
    const unfinished = report.jobs.filter((j) => j.status === "pending");
    expect(unfinished.length).toBeGreaterThanOrEqual(2);
    const junit = await readJunit(w);
    expectConsistent(junit);
    expect(junit.cases.filter((c) => c.skipped)).toEqual([]);
    expect(Number(junit.suite.errors)).toBe(unfinished.length);
    for (const j of unfinished) {
      const c = byName(junit, j.id);
      expect(c.error, j.id).toBeDefined();
      expect(c.error!.type).toBe("unfinished");
      expect(c.error!.message).toMatch(/^not finished in this run/);
      expect(c.error!.body).toContain(`job: ${j.id}`);
      expect(c.error!.body).toContain("run interrupted");
    }
    // The task in flight: where it stood, its task id, and the seconds it ran until the interrupt.
    const running = unfinished.find((j) => j.stage === "running")!;
    expect(running).toBeDefined();
    const c = byName(junit, running.id);
    expect(c.error!.message).toBe("not finished in this run (running)");
    expect(c.error!.body).toContain("status: pending (running)");
    expect(c.error!.body).toContain(`task: ${running.task_id}`);
    expect(running.task_id).toMatch(/^vtask_/);
    expect(Number(c.time)).toBeGreaterThan(0);
    // Jobs never started took no time.
    for (const j of unfinished.filter((u) => u.task_id === null)) {
      expect(j.stage).toBe("pending");
      expect(byName(junit, j.id).time).toBe("0.000");
    }
    // The summary lists them before the totals.
    const text = await readFile(summaryFile, "utf8");
    expect(text).toContain("### clapper run ep01: interrupted");
    const row = text.indexOf(`| ${running.id} | pending (running) |`);
    expect(row).toBeGreaterThan(0);
    expect(row).toBeLessThan(text.indexOf(" jobs: "));
  });
});

// ---------------------------------------------------------------------------------------------
// a re-run that reuses everything
// ---------------------------------------------------------------------------------------------

describe("a re-run with nothing changed", () => {
  it("reports each reused job as a passing case with the property reused, never skipped", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: [
        { id: "s01", prompt: "Wide shot: a lighthouse" },
        { id: "s02", prompt: "[sandbox:upscale-fail] the beam", resolution: "2K" },
      ],
      lines: [{ id: "n01", text: "The sea was calm." }],
    });
    const first = await cli(s, ["run", manifest, ...RUN_FLAGS]);
    expect(first.code).toBe(0);
    const again = await cli(s, ["run", manifest, ...RUN_FLAGS]);
    expect(again.code).toBe(0);
    const report = await readJson(w);
    expect(report.counts).toMatchObject({ total: 3, skipped: 3 });
    const junit = await readJunit(w);
    expectConsistent(junit);
    expect(junit.suite).toMatchObject({ tests: "3", failures: "0", errors: "0", skipped: "0" });
    for (const c of junit.cases) {
      expect(c.failure ?? c.error ?? c.skipped, c.name).toBeUndefined();
      expect(c.properties, c.name).toContainEqual({ name: "reused", value: "true" });
      // Nothing was done for it in this run.
      expect(c.time).toBe("0.000");
    }
    // The reused fallback keeps its delivered resolution and warning.
    const s02 = report.jobs.find((j) => j.id === "shot/s02")!;
    expect(s02.output!.resolution).toBe("768P");
    expect(s02.warnings).toEqual([expect.stringMatching(/upscale to 2K failed/)]);
    expect(byName(junit, "shot/s02").properties).toEqual([
      { name: "reused", value: "true" },
      { name: "warning", value: expect.stringMatching(/upscale to 2K failed/) },
    ]);
  });
});

// ---------------------------------------------------------------------------------------------
// a hostile service: control characters and markup in what it says
// ---------------------------------------------------------------------------------------------

describe("messages from a hostile service", () => {
  const FAILED = "boom\u0001\u0007\u001b[2J <b>&amp;</b> \"quoted\" 'single' ]]>\u007f\u0085 end\u0000";
  const REFUSED = "refused\u0008\u000b\u000c prompt\ttab\nline <x/>";

  it("reach junit.xml, report.md and the summary stripped of control characters, escaped", async () => {
    const s = await sandbox();
    const w = await workspace();
    const proxy = await hostileProxy(s.url, {
      request: (ctx) =>
        ctx.kind === "create" && ctx.text?.includes("refuse me")
          ? {
              reply: { status: 400, json: errorBody(400, "invalid_request_error", REFUSED, "req_hostile_7") },
            }
          : undefined,
      task: (t, ctx) =>
        ctx.task?.text.includes("fail me") ? taskJson.failed(t, "video", FAILED) : undefined,
    });
    try {
      const manifest = await w.manifest({
        shots: [
          { id: "s01", prompt: "A calm shot" },
          { id: "s02", prompt: "fail me, the storm" },
          { id: "s03", prompt: "refuse me, the rocks" },
        ],
      });
      const summaryFile = await w.write("summary.md", "");
      const r = await cli(s, ["run", manifest, ...RUN_FLAGS], {
        CLAPPER_BASE_URL: proxy.url,
        GITHUB_STEP_SUMMARY: summaryFile,
      });
      expect(r.code).toBe(1);
      const report = await readJson(w);
      const failed = report.jobs.find((j) => j.id === "shot/s02")!;
      const refused = report.jobs.find((j) => j.id === "shot/s03")!;
      expect(failed.status).toBe("failed");
      expect(refused.status).toBe("failed");
      // report.json keeps what the service said (JSON escapes it).
      expect(failed.error!.message).toContain("\u001b[2J");

      const xml = await readFile(join(w.out(), "reports/junit.xml"), "utf8");
      const junit = parseJunit(xml);
      expectConsistent(junit);
      expect(junit.suite).toMatchObject({ tests: "3", failures: "2", errors: "0" });
      const f = byName(junit, "shot/s02").failure!;
      expect(f.message).toBe(failed.error!.message.replace(/[^\t\n\r\u0020-\u007e\u00a0-\uffff]/g, ""));
      expect(f.message).toContain("boom[2J <b>&amp;</b> \"quoted\" 'single' ]]> end");
      expect(f.body).toContain("error: ");
      expect(f.body).toContain("boom[2J <b>&amp;</b>");
      // A refused create: the service's request id is in the body.
      const g = byName(junit, "shot/s03").failure!;
      expect(g.message).toContain("refused prompt\ttab\nline <x/>");
      expect(g.body).toContain("request: req_hostile_7");
      expect(g.body).toContain("attempts: 1");

      for (const text of [await readMd(w), await readFile(summaryFile, "utf8")]) {
        expect(controls(text).map((c) => c.codePointAt(0))).toEqual([]);
        expect(text).toContain("boom[2J \\<b>&amp;\\</b>");
        // One table row per job: a message's line breaks do not break the table.
        expect(text).toMatch(
          /^\| shot\/s03 \| failed \| 1 \| [^\n]*refused prompt tab line \\<x\/> [^\n]*\|$/m,
        );
      }
    } finally {
      await proxy.close();
      await s.close();
      await w.remove();
    }
  });
});

// ---------------------------------------------------------------------------------------------
// the report functions on a state made of journal records
// ---------------------------------------------------------------------------------------------

function videoJob(id: string, line: number): Job {
  return {
    id,
    kind: "video",
    tier: "1080P",
    duration: 4,
    points: 76,
    fingerprint: `fp-${id}`,
    file: "manifest.yaml",
    line,
  } as unknown as Job;
}

/** A run of three video jobs from records: one stored, one failed, one never started. */
function recordedState() {
  const state = initialState();
  const records: RunRecord[] = [
    {
      t: "run",
      id: "run-1",
      name: "ep01",
      manifest: "manifest.yaml",
      started_at: "2025-01-01T00:00:00.000Z",
    },
    ...["shot/a", "shot/b", "shot/c"].map(
      (id) => ({ t: "job", id, kind: "video", fingerprint: `fp-${id}`, estimate: 76 }) as RunRecord,
    ),
    { t: "intent", id: "shot/a", n: 1, key: "k-a", reserved: 76, at: 1_000 },
    { t: "created", id: "shot/a", n: 1, task_id: "vtask_a" },
    { t: "task", id: "shot/a", n: 1, status: "succeeded" },
    { t: "settled", id: "shot/a", n: 1, spent: 40, at: 3_000 },
    {
      t: "stored",
      id: "shot/a",
      output: {
        uri: "/out/a.mp4",
        bytes: 10,
        sha256: "aa",
        fingerprint: "fp-shot/a",
        resolution: "768P",
        at: 3_250,
      },
    },
    { t: "intent", id: "shot/b", n: 1, key: "k-b", reserved: 76, at: 2_000 },
    { t: "created", id: "shot/b", n: 1, task_id: "vtask_b" },
    {
      t: "settled",
      id: "shot/b",
      n: 1,
      spent: 0,
      at: 5_500,
      fate: "failed",
      error: { code: "ValidationError", message: "bad \u0001input (request req_42)" },
    },
  ];
  for (const r of records) applyRecord(state, r);
  return state;
}

const JOBS = [videoJob("shot/a", 3), videoJob("shot/b", 4), videoJob("shot/c", 5)];

describe("the report functions", () => {
  it("run.stopped_by and run.stop_message, only when set, shown in report.md, the summary and junit.xml", () => {
    const base = {
      state: recordedState(),
      jobs: JOBS,
      manifest: "manifest.yaml",
      name: "ep01",
      interrupted: false,
    };
    const plain = buildReport(base);
    expect(plain.run).not.toHaveProperty("stopped_by");
    expect(plain.run).not.toHaveProperty("stop_message");
    const stopped = buildReport({
      ...base,
      stoppedBy: "max-failures",
      stopMessage: "1 job failed, more than --max-failures 0; new submissions stopped",
    });
    expect(stopped.run).toMatchObject({
      stopped_by: "max-failures",
      stop_message: "1 job failed, more than --max-failures 0; new submissions stopped",
    });
    // The contract's fields are untouched.
    expect(Object.keys(stopped.run)).toEqual(expect.arrayContaining(Object.keys(plain.run)));
    expect(stopped.counts).toEqual(plain.counts);
    const line =
      "Stopped by **max-failures**: 1 job failed, more than --max-failures 0; new submissions stopped";
    expect(reportMarkdown(stopped)).toContain(line);
    expect(reportMarkdown(plain)).not.toContain("Stopped by");
    expect(summaryMarkdown(stopped)).toContain(line);
    const junit = parseJunit(junitXml(stopped));
    expect(junit.suiteProperties).toMatchObject({ stopped_by: "max-failures" });
  });

  it("a job a stopped run never started is an error; times come from the journal's own clock", () => {
    const report = buildReport({
      state: recordedState(),
      jobs: JOBS,
      manifest: "manifest.yaml",
      name: "ep01",
      interrupted: false,
      stoppedBy: "max-failures",
    });
    expect(report.jobs.map((j) => [j.id, j.status, j.elapsed_seconds])).toEqual([
      ["shot/a", "succeeded", 2.25],
      ["shot/b", "failed", 3.5],
      ["shot/c", "pending", 0],
    ]);
    const junit = parseJunit(junitXml(report));
    expectConsistent(junit);
    expect(junit.cases.map((c) => [c.name, c.time])).toEqual([
      ["shot/a", "2.250"],
      ["shot/b", "3.500"],
      ["shot/c", "0.000"],
    ]);
    expect(junit.suite.time).toBe("5.750");
    expect(byName(junit, "shot/c").error).toMatchObject({ type: "unfinished" });
    expect(byName(junit, "shot/c").error!.body).toContain("(stopped by max-failures)");
    const b = byName(junit, "shot/b").failure!;
    expect(b.type).toBe("ValidationError");
    expect(b.message).toBe("bad input (request req_42)");
    expect(b.body.split("\n")).toEqual([
      "job: shot/b (manifest.yaml:4)",
      "status: failed",
      "task: vtask_b",
      "attempts: 1",
      "error: ValidationError: bad input (request req_42)",
      "request: req_42",
    ]);
    // The delivered resolution of a 1080P job that fell back.
    expect(report.jobs[0]!.output!.resolution).toBe("768P");
    expect(report.jobs[0]!.warnings).toEqual([expect.stringMatching(/upscale to 1080P failed/)]);
  });

  it("junit.xml strips every control character from names, attributes and bodies", () => {
    const report = buildReport({
      state: recordedState(),
      jobs: JOBS,
      manifest: "manifest.yaml",
      name: "ep\u000101",
      interrupted: false,
    });
    const hostile =
      "x\u0000\u0001\u0002\u0003\u0008\u000b\u000c\u000e\u001f\u007f\u0080\u009f\ufffe\uffff\ud800y\tz\r\nw";
    report.jobs[1]!.error = { code: `code\u0001<&"'>`, message: hostile };
    report.jobs[1]!.id = `shot/b\u0007"<x>`;
    const xml = junitXml(report);
    const junit = parseJunit(xml);
    expectConsistent(junit);
    expect(junit.suite.name).toBe("ep01");
    const b = junit.cases[1]!;
    expect(b.name).toBe('shot/b"<x>');
    expect(b.classname).toBe("ep01.video");
    expect(b.failure!.type).toBe(`code<&"'>`);
    // Tab, line feed and carriage return survive, as references, even in an attribute.
    expect(b.failure!.message).toBe("xy\tz\r\nw");
    expect(b.failure!.body).toContain("error: code<&\"'>: xy\tz\r\nw");
    for (const text of [reportMarkdown(report), summaryMarkdown(report)])
      expect(controls(text).map((c) => c.codePointAt(0))).toEqual([]);
  });

  it("writeReports with stepSummary false leaves $GITHUB_STEP_SUMMARY alone; the run's default writes it once", async () => {
    const w = await workspace();
    try {
      const written: string[] = [];
      const sink = {
        uri: (key: string) => key,
        writeText: async (key: string) => {
          written.push(key);
          return key;
        },
        // report.html is streamed (it may be tens of MB), not handed over as one string.
        write: async (key: string, body: Readable) => {
          written.push(key);
          for await (const _ of body);
          return { uri: key, bytes: 0, sha256: "" };
        },
      } as unknown as Sink;
      const report = buildReport({
        state: recordedState(),
        jobs: JOBS,
        manifest: "manifest.yaml",
        name: "ep01",
        interrupted: false,
      });
      const later = join(w.dir, "later-step.md");
      await writeReports(sink, report, { GITHUB_STEP_SUMMARY: later }, { stepSummary: false });
      expect(written).toEqual([
        "reports/report.json",
        "reports/report.md",
        "reports/junit.xml",
        "reports/report.html",
      ]);
      await expect(readFile(later, "utf8")).rejects.toThrow(/ENOENT/);

      const step = join(w.dir, "step.md");
      await writeFile(step, "before\n");
      await writeReports(sink, report, { GITHUB_STEP_SUMMARY: step });
      await writeReports(sink, report, { GITHUB_STEP_SUMMARY: step });
      const text = await readFile(step, "utf8");
      expect(text.startsWith("before\n")).toBe(true);
      expect(text.split("### clapper run ep01: partial").length - 1).toBe(1);
    } finally {
      await w.remove();
    }
  });
});
