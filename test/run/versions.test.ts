// Earlier versions of a regenerated job (issue 25): a row edited, or made again with --fresh, keeps
// its stored output as NAME.vN.EXT beside the new one, listed in report.json's jobs[].versions
// (oldest first, with the sha256 the first run stored); a reuse or a failed regeneration adds none;
// a project copied whole, and a state repaired, keep them; status and plan count them; --only
// selects one take as `s01/take-2`. Processes from outside, against a sandbox process over HTTP.
// Speech lines tell versions apart: their text sets the WAV's length.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report, ReportJob } from "../../src/report/model.js";
import {
  cli,
  cliEnv,
  readReport,
  type SandboxProcess,
  sha256File,
  staleBuild,
  startSandbox,
  statsDelta,
  verifyOutputs,
  type Workspace,
  workspace,
} from "./harness.js";

let sb: SandboxProcess;
const spaces: Workspace[] = [];

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  sb = await startSandbox(0.002);
});

afterAll(async () => {
  await sb?.close();
  for (const ws of spaces) await ws.remove();
});

const LINES = (n02: string, n01 = "Every night, the light came on at seven.") =>
  [
    "name: ep",
    "output: ./output",
    "defaults:",
    '  line: { language: EN, voice: "preset:en_female_bright" }',
    "lines:",
    `  - { id: n01, text: "${n01}" }`,
    `  - { id: n02, text: "${n02}" }`,
    "",
  ].join("\n");

async function project(text: string): Promise<Workspace> {
  const ws = await workspace("ep", { text });
  spaces.push(ws);
  return ws;
}

async function run(ws: Workspace, args: string[] = [], cwd = ws.dir) {
  const r = await cli([...args, "--log-format", "json"], { cwd, env: cliEnv(sb) }).done;
  return r;
}

async function runOk(ws: Workspace, args: string[] = []): Promise<Report> {
  const r = await run(ws, ["run", ws.manifest, ...args]);
  expect(r.code, r.messages.join("\n")).toBe(0);
  return readReport(ws);
}

const jobOf = (report: Report, id: string) => report.jobs.find((j) => j.id === id) as ReportJob;

describe("earlier versions of a regenerated job", () => {
  it("an edited line keeps v1 then v2 with the hashes first stored; a reuse adds none", async () => {
    const ws = await project(LINES("The sea was calm."));
    const first = await runOk(ws);
    const original = jobOf(first, "line/n02").output as NonNullable<ReportJob["output"]>;
    expect(jobOf(first, "line/n02").versions).toBeUndefined();

    await writeFile(ws.manifest, LINES("The sea was calm and grey that night."));
    const before = await sb.stats();
    const second = await runOk(ws);
    expect(statsDelta(before, await sb.stats()).createRequests).toBe(1);
    const n02 = jobOf(second, "line/n02");
    const v1 = join(ws.outputDir, "lines", "n02.v1.wav");
    expect(n02.versions).toEqual([
      { uri: v1, sha256: original.sha256, bytes: original.bytes, at: expect.any(String) },
    ]);
    // The kept file is the first run's output, byte for byte; the new one is another.
    expect(await sha256File(v1)).toBe(original.sha256);
    expect(n02.output?.sha256).not.toBe(original.sha256);
    expect(jobOf(second, "line/n01").versions).toBeUndefined();
    expect(await verifyOutputs(second)).toEqual([]);
    expect(await readFile(join(ws.outputDir, "reports", "report.md"), "utf8")).toMatch(
      /\| line\/n02 \|.*n02\.wav \(1 earlier version kept\) \|/,
    );

    await writeFile(ws.manifest, LINES("The sea was calm, grey and quiet that long night."));
    const third = await runOk(ws);
    const kept = jobOf(third, "line/n02").versions ?? [];
    expect(kept.map((v) => v.uri)).toEqual([v1, join(ws.outputDir, "lines", "n02.v2.wav")]);
    expect(kept[1]?.sha256).toBe(n02.output?.sha256);
    expect(await sha256File(kept[1]?.uri as string)).toBe(n02.output?.sha256);
    expect(Date.parse(kept[0]?.at as string)).toBeLessThanOrEqual(Date.parse(kept[1]?.at as string));

    // Nothing changed: reused, and no version added.
    const fourth = await runOk(ws);
    expect(jobOf(fourth, "line/n02").status).toBe("skipped");
    expect(jobOf(fourth, "line/n02").versions).toEqual(kept);
    expect(existsSync(join(ws.outputDir, "lines", "n02.v3.wav"))).toBe(false);

    // status counts them; plan says what an edit would keep.
    const status = await run(ws, ["status", ws.manifest]);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/KEPT/);
    expect(status.stdout).toMatch(/line\/n02 .*stask_\w+ +2 +\//);
    await writeFile(ws.manifest, LINES("Calm."));
    const plan = await run(ws, ["plan", ws.manifest]);
    expect(plan.code, plan.messages.join("\n")).toBe(0);
    expect(plan.stdout).toMatch(/generate +line\/n02 .*edited since its output \(2 earlier versions kept\)/);
  });

  it("--fresh keeps the output it no longer trusts; a failed regeneration keeps the current file and adds none", async () => {
    const ws = await project(LINES("The sea was calm."));
    const first = await runOk(ws);
    const n01 = jobOf(first, "line/n01").output as NonNullable<ReportJob["output"]>;
    const fresh = await runOk(ws, ["--fresh", "--only", "line/n01"]);
    expect(jobOf(fresh, "line/n01").versions).toEqual([
      {
        uri: join(ws.outputDir, "lines", "n01.v1.wav"),
        sha256: n01.sha256,
        bytes: n01.bytes,
        at: expect.any(String),
      },
    ]);
    expect(await verifyOutputs(fresh)).toEqual([]);

    const n02 = jobOf(first, "line/n02").output as NonNullable<ReportJob["output"]>;
    await writeFile(ws.manifest, LINES("The sea was calm. [sandbox:fail]"));
    const failed = await run(ws, ["run", ws.manifest]);
    expect(failed.code).toBe(1);
    const report = await readReport(ws);
    expect(jobOf(report, "line/n02").status).toBe("failed");
    expect(jobOf(report, "line/n02").versions).toBeUndefined();
    expect(await sha256File(join(ws.outputDir, "lines", "n02.wav"))).toBe(n02.sha256);
    expect(existsSync(join(ws.outputDir, "lines", "n02.v1.wav"))).toBe(false);
  });

  it("a project copied whole names its versions in the copy; a repaired state keeps them", async () => {
    const ws = await project(LINES("The sea was calm."));
    await runOk(ws);
    await writeFile(ws.manifest, LINES("The sea was calm and grey."));
    const edited = await runOk(ws);
    const sha = jobOf(edited, "line/n02").versions?.[0]?.sha256;
    expect(sha).toMatch(/^[0-9a-f]{64}$/);

    const copyDir = `${ws.dir}-copy`;
    expect(spawnSync("cp", ["-a", ws.dir, copyDir]).status).toBe(0);
    spaces.push({ ...ws, remove: () => rm(copyDir, { recursive: true, force: true }) });
    const copyManifest = join(copyDir, "ep.yaml");
    const status = await run(ws, ["status", copyManifest, "--json"], copyDir);
    expect(status.code, status.messages.join("\n")).toBe(0);
    const copied = join(copyDir, "output", "ep", "lines", "n02.v1.wav");
    expect(jobOf(JSON.parse(status.stdout), "line/n02").versions?.[0]).toMatchObject({
      uri: copied,
      sha256: sha,
    });
    const again = await run(ws, ["run", copyManifest, "--json"], copyDir);
    expect(again.code, again.messages.join("\n")).toBe(0);
    expect(jobOf(JSON.parse(again.stdout), "line/n02").versions?.[0]).toMatchObject({
      uri: copied,
      sha256: sha,
    });
    // Recorded so: the copy's state names the copy's file.
    const copyState = await readFile(join(copyDir, ".clapper", "ep", "state.jsonl"), "utf8");
    expect(copyState).toContain(copied);

    // A line in the middle damaged (not the version's): the repair keeps the version.
    const lines = (await readFile(ws.statePath, "utf8")).split("\n");
    const at = lines.findIndex((l) => l.includes('"t":"intent"'));
    expect(at).toBeGreaterThan(0);
    lines[at] = "<<<<<<< HEAD";
    await writeFile(ws.statePath, lines.join("\n"));
    expect((await run(ws, ["run", ws.manifest])).code).toBe(2);
    const repaired = await runOk(ws, ["--repair-state"]);
    expect(jobOf(repaired, "line/n02").versions).toEqual(jobOf(edited, "line/n02").versions);
  });

  it("--only s01/take-2 selects one take; s01 every take; a miss is refused with a did-you-mean", async () => {
    const ws = await project(
      [
        "name: ep",
        "output: ./output",
        "shots:",
        '  - { id: s01, prompt: "A lighthouse at dusk", model: Vid-H3, resolution: 480P, duration: 4, ratio: "16:9", takes: 3 }',
        "",
      ].join("\n"),
    );
    const before = await sb.stats();
    const one = await runOk(ws, ["--only", "s01/take-2"]);
    expect(statsDelta(before, await sb.stats()).createRequests).toBe(1);
    expect(one.jobs.filter((j) => j.status === "succeeded").map((j) => j.id)).toEqual(["shot/s01/take-2"]);
    const prefixed = await runOk(ws, ["--only", "shot/s01/take-3"]);
    expect(prefixed.jobs.filter((j) => j.status === "succeeded").map((j) => j.id)).toEqual([
      "shot/s01/take-3",
    ]);
    const all = await runOk(ws, ["--only", "s01"]);
    expect(all.jobs.map((j) => j.status).sort()).toEqual(["skipped", "skipped", "succeeded"]);

    const miss = await run(ws, ["run", ws.manifest, "--only", "s01/tak-2"]);
    expect(miss.code).toBe(2);
    expect(miss.messages.join("\n")).toMatch(/no job matches s01\/tak-2 \(did you mean "s01\/take-2"\?\)/);
  });
});
