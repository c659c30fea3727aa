// The package's entry as a program imports it: run(), plan(), status() and startSandbox() in this
// process, against the sandbox over real HTTP, with real files. Nothing may reach stdout or the
// process's exit code; an abort leaves a state the next run() finishes without paying twice.
import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ClapperError, plan, type RunEvent, run, startSandbox, status } from "../../src/index.js";
import { call } from "../helpers/sandbox.js";

const KEY = "sk-ml-library-7c1d0e";
const ROOT = join(import.meta.dirname, "../..");

const MANIFEST = [
  "name: lib",
  "output: ./out",
  "defaults:",
  '  shot: { model: Vid-H3, resolution: 480P, duration: 5, ratio: "16:9" }',
  '  line: { language: EN, voice: "preset:en_female_bright" }',
  "shots:",
  '  - { id: s01, prompt: "A lighthouse at dusk" }',
  '  - { id: s02, prompt: "The lamp room, the lens turning" }',
  "lines:",
  '  - { id: n01, text: "Every night, the light came on." }',
  '  - { id: n02, text: "And every night, someone was watching." }',
  "",
].join("\n");

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "clapper-library-"));
  await writeFile(join(dir, "lib.yaml"), MANIFEST);
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Every write to stdout and stderr while `work` runs, and the exit code it leaves. */
async function quietly<T>(
  work: () => Promise<T>,
): Promise<{ value: T; writes: string[]; exitCode: unknown }> {
  const before = process.exitCode;
  const writes: string[] = [];
  const out = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => {
    writes.push(`stdout: ${String(chunk)}`);
    return true;
  });
  const err = vi.spyOn(process.stderr, "write").mockImplementation((chunk) => {
    writes.push(`stderr: ${String(chunk)}`);
    return true;
  });
  try {
    const value = await work();
    return { value, writes, exitCode: process.exitCode === before ? "untouched" : process.exitCode };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

/** The CLI's `--json` answer for the same manifest, from the built CLI. */
function cli(args: string[]): unknown {
  const r = spawnSync(process.execPath, [join(ROOT, "bin/clapper.js"), ...args, "--json"], {
    cwd: dir,
    encoding: "utf8",
    env: { PATH: process.env.PATH, HOME: process.env.HOME },
    timeout: 20_000,
  });
  return JSON.parse(r.stdout);
}

describe("the library", () => {
  it("run() with sandbox: true resolves to the report on disk, printing nothing and leaving the exit code alone", async () => {
    const events: RunEvent[] = [];
    const {
      value: report,
      writes,
      exitCode,
    } = await quietly(() =>
      run({
        manifest: "lib.yaml",
        cwd: dir,
        sandbox: true,
        sandboxTimeScale: 0.002,
        pollInterval: 0.02,
        output: join(dir, "renders"),
        onEvent: (e) => events.push(e),
      }),
    );
    expect(writes).toEqual([]);
    expect(exitCode).toBe("untouched");
    expect(report.run.status).toBe("succeeded");
    expect(report.counts).toMatchObject({ total: 4, succeeded: 4, failed: 0, pending: 0 });
    expect(report.jobs.map((j) => j.id).sort()).toEqual(["line/n01", "line/n02", "shot/s01", "shot/s02"]);
    const onDisk = JSON.parse(await readFile(join(dir, "renders/lib/reports/report.json"), "utf8"));
    expect(JSON.parse(JSON.stringify(report))).toEqual(onDisk);
    expect(events.length).toBeGreaterThan(0);
    expect(events.every((e) => e.type === "progress")).toBe(true);
    expect(events.some((e) => e.progress.total === 4 && e.progress.counts.running > 0)).toBe(true);
    // status() is what `clapper status --json` prints for the same run.
    const now = await status({ manifest: "lib.yaml", cwd: dir });
    expect(now.run.status).toBe("succeeded");
    expect(JSON.parse(JSON.stringify(now))).toEqual(cli(["status", "lib.yaml"]));
  });

  it("an abort mid-run resolves promptly as interrupted; the next run() finishes it without a second task for any job", async () => {
    // Slow enough that the tasks are still running when the abort comes (the run takes ~3 s).
    const sandbox = await startSandbox({ timeScale: 0.05, keys: [KEY] });
    try {
      const stop = new AbortController();
      const options = {
        manifest: "lib.yaml",
        cwd: dir,
        baseUrl: sandbox.url,
        apiKey: KEY,
        allowPrivateUrls: true,
        pollInterval: 0.05,
      };
      let abortedAt = 0;
      const first = await quietly(() =>
        run({
          ...options,
          signal: stop.signal,
          onEvent(e) {
            if (abortedAt === 0 && e.progress.counts.running >= 2) {
              abortedAt = performance.now();
              stop.abort(new Error("the caller stopped"));
            }
          },
        }),
      );
      const took = performance.now() - abortedAt;
      expect(abortedAt).toBeGreaterThan(0);
      expect(first.writes).toEqual([]);
      expect(first.exitCode).toBe("untouched");
      expect(first.value.run.status).toBe("interrupted");
      expect(first.value.counts.succeeded).toBeLessThan(4);
      expect(took).toBeLessThan(3000);
      const created = (await stats(sandbox.url)).tasks_created;
      expect(created.video + created.speech).toBeGreaterThan(0);

      const second = await run(options);
      expect(second.run.status).toBe("succeeded");
      expect(second.counts.succeeded).toBe(4);
      const after = (await stats(sandbox.url)).tasks_created;
      // Each of the four jobs had exactly one task, over both runs: nothing was paid twice.
      expect(after).toEqual({ video: 2, speech: 2 });
    } finally {
      await sandbox.close();
    }
  });

  it("a manifest with errors rejects with its problems by file, line and field; plan() resolves with them", async () => {
    await writeFile(
      join(dir, "bad.yaml"),
      MANIFEST.replace("duration: 5", "duration: 99").replace("s02, prompt", "s02, promt"),
    );
    const rejected = await run({ manifest: "bad.yaml", cwd: dir, sandbox: true }).catch((e: unknown) => e);
    expect(rejected).toBeInstanceOf(ClapperError);
    const error = rejected as ClapperError;
    expect(error.code).toBe(2);
    expect(error.message).toMatch(/^bad\.yaml: 3 errors; nothing was submitted/);
    const problems = error.problems.map(({ file, line, field, severity }) => ({
      file,
      line,
      field,
      severity,
    }));
    expect(problems).toEqual(
      expect.arrayContaining([
        { file: "bad.yaml", line: 4, field: "duration", severity: "error" },
        { file: "bad.yaml", line: 8, field: "promt", severity: "error" },
        { file: "bad.yaml", line: 8, field: "prompt", severity: "error" },
      ]),
    );
    for (const p of error.problems) expect(p.message).toEqual(expect.any(String));
    // Nothing was made: no state folder beside the manifest.
    await expect(readFile(join(dir, ".clapper/lib/state.jsonl"))).rejects.toThrow();

    const planned = await plan({ manifest: "bad.yaml", cwd: dir, speechPrice: 1 });
    expect(planned.error_count).toBe(3);
    expect(planned.problems).toEqual(expect.arrayContaining(error.problems.map((p) => ({ ...p }))));
  });

  it("a run that does not fit its budget rejects before anything is created, with the budget table and exit code 3", async () => {
    const sandbox = await startSandbox({ timeScale: 0.01, keys: [KEY] });
    try {
      const refused = await run({
        manifest: "lib.yaml",
        cwd: dir,
        baseUrl: sandbox.url,
        apiKey: KEY,
        maxPoints: 10,
      }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ClapperError);
      expect((refused as ClapperError).code).toBe(3);
      expect((refused as ClapperError).budget?.length).toBeGreaterThan(0);
      expect((await stats(sandbox.url)).tasks_created).toEqual({ video: 0, speech: 0 });
    } finally {
      await sandbox.close();
    }
  });

  it("plan() is what `clapper plan --json` prints", async () => {
    const planned = await plan({ manifest: "lib.yaml", cwd: dir, speechPrice: 2 });
    expect(planned.counts).toEqual({ video: 2, speech: 2, total: 4 });
    expect(JSON.parse(JSON.stringify(planned))).toEqual(cli(["plan", "lib.yaml", "--speech-price", "2"]));
  });
});

async function stats(url: string): Promise<{ tasks_created: { video: number; speech: number } }> {
  return (await call(url, "GET", "/_sandbox/stats", { key: null })).body;
}
