// A project copied or moved keeps working (issue 23, item 1): `cp -a project project-v2`, a state
// volume mounted at another path. The copy's plan, status, report and run reuse what the copy holds
// and create nothing; two different manifests with one name sharing a state or an output folder
// are still refused, with nothing submitted. Processes from outside, against a sandbox process.
import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cli,
  cliEnv,
  manifestYaml,
  type SandboxProcess,
  staleBuild,
  startSandbox,
  statsDelta,
  verifyOutputs,
} from "./harness.js";

let sb: SandboxProcess;
let base: string;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  sb = await startSandbox(0.002);
  base = await mkdtemp(join(tmpdir(), "clapper-copy-"));
});

afterAll(async () => {
  await sb?.close();
  await rm(base, { recursive: true, force: true });
});

const run = (cwd: string, args: string[]) =>
  cli([...args, "--log-format", "json"], { cwd, env: cliEnv(sb) }).done;

async function project(folder: string, name: string, text = manifestYaml(name)): Promise<string> {
  spawnSync("mkdir", ["-p", folder]);
  const manifest = join(folder, `${name}.yaml`);
  await writeFile(manifest, text);
  return manifest;
}

describe("a project copied or moved", () => {
  it("cp -a: the copy plans, reports and runs on the state it holds, creating nothing", async () => {
    const original = await project(join(base, "project"), "demo");
    const first = await run(join(base, "project"), ["run", original]);
    expect(first.code, first.messages.join("\n")).toBe(0);

    expect(spawnSync("cp", ["-a", join(base, "project"), join(base, "project-v2")]).status).toBe(0);
    const copy = join(base, "project-v2", "demo.yaml");
    const cwd = join(base, "project-v2");
    const before = await sb.stats();
    for (const command of [["plan"], ["status"], ["report"]]) {
      const r = await run(cwd, [...command, copy, "--json"]);
      expect(r.code, `${command[0]}: ${r.messages.join("\n")}`).toBe(0);
    }
    const again = await run(cwd, ["run", copy, "--json"]);
    expect(again.code, again.messages.join("\n")).toBe(0);
    const report = JSON.parse(again.stdout);
    expect(report.counts).toMatchObject({ total: 6, skipped: 6 });
    expect(report.points.spent).toBe(0);
    // The copy's own files: its outputs, under its own folder.
    expect(report.jobs.every((j: { output: { uri: string } }) => j.output.uri.startsWith(cwd))).toBe(true);
    expect(await verifyOutputs(report)).toEqual([]);
    expect(statsDelta(before, await sb.stats()).createRequests).toBe(0);
    // The original goes on too.
    const original2 = await run(join(base, "project"), ["run", original, "--json"]);
    expect(original2.code, original2.messages.join("\n")).toBe(0);
    expect(statsDelta(before, await sb.stats()).createRequests).toBe(0);
  });

  it("a state and output on a volume mounted at another path, the project moved: adopted, nothing created", async () => {
    const manifest = await project(join(base, "app-a"), "night");
    const flags = (vol: string) => ["--state", join(vol, "state.jsonl"), "--output", join(vol, "out")];
    const first = await run(join(base, "app-a"), ["run", manifest, ...flags(join(base, "vol-a"))]);
    expect(first.code, first.messages.join("\n")).toBe(0);
    await rename(join(base, "app-a"), join(base, "app-b"));
    await rename(join(base, "vol-a"), join(base, "vol-b"));
    const before = await sb.stats();
    const moved = join(base, "app-b", "night.yaml");
    const r = await run(join(base, "app-b"), ["run", moved, "--json", ...flags(join(base, "vol-b"))]);
    expect(r.code, r.messages.join("\n")).toBe(0);
    expect(JSON.parse(r.stdout).counts).toMatchObject({ total: 6, skipped: 6 });
    expect(statsDelta(before, await sb.stats()).createRequests).toBe(0);
  });

  it("two different manifests with one name sharing a state or an output folder are refused, nothing submitted", async () => {
    // One folder, two files, one name: one default state.
    const a = await project(join(base, "pair"), "ep");
    const b = join(base, "pair", "ep-other.yaml");
    await writeFile(b, (await readFile(a, "utf8")).replace("a lighthouse on a cliff", "a castle on a hill"));
    expect((await run(join(base, "pair"), ["run", a])).code).toBe(0);
    const before = await sb.stats();
    const state = await run(join(base, "pair"), ["run", b, "--json"]);
    expect(state.code).toBe(2);
    expect(JSON.parse(state.stdout).error.message).toMatch(
      /belongs to .*ep\.yaml, another manifest named "ep"/,
    );

    // Two folders, one name, one output folder given to both.
    const shared = join(base, "shared-out");
    const c = await project(join(base, "show-c"), "ep2");
    const d = await project(
      join(base, "show-d"),
      "ep2",
      manifestYaml("ep2").replace("a lighthouse on a cliff", "a desert road"),
    );
    expect((await run(join(base, "show-c"), ["run", c, "--output", shared])).code).toBe(0);
    const mid = await sb.stats();
    const output = await run(join(base, "show-d"), ["run", d, "--json", "--output", shared]);
    expect(output.code, output.messages.join("\n")).toBe(2);
    expect(JSON.parse(output.stdout).error.message).toBe(
      `the output folder ${join(shared, "ep2")} holds the results of ${c}, another manifest named "ep2": give this one another name (name: ...) or its own --output; nothing was submitted`,
    );
    expect(statsDelta(mid, await sb.stats()).createRequests).toBe(0);
    expect(statsDelta(before, mid).createRequests).toBe(6);
    // Nothing of the other run was touched: its record of whose results these are stands.
    expect(JSON.parse(await readFile(join(shared, "ep2", ".clapper-owner.json"), "utf8")).manifest).toBe(c);
  });
});
