// Issue 10: with --json, every exit of every command prints exactly one JSON object on stdout (the
// answer, or `{error: {code, message, problems?}}` beside the data there is) and nothing else; the
// exit code is the one the README promises. Every case is the built CLI as its own process.

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, staleBuild } from "../run/harness.js";
import { clapper, type Folder, folder, oneJson, type Ran, smallManifest } from "./cli-process.js";

const DOWN = "http://127.0.0.1:1";
/** A service that does not answer, with fast retries: exit 6 in a fraction of a second. */
const UNREACHABLE = { CLAPPER_BASE_URL: DOWN, CLAPPER_API_KEY: "sk-ml-test", CLAPPER_RETRY_BASE_MS: "1" };

let dir: Folder;
let good: string;
let bad: string;
let skill: string;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  dir = await folder();
  good = await dir.file("good.yaml", smallManifest("good"));
  bad = await dir.file("bad.yaml", "name: bad\nshots:\n  - { id: s01, prompt: x, duration: 99 }\n");
  skill = await dir.file("noir.md", "High contrast, hard shadows.\n");
  await mkdir(join(dir.path, "skills"));
});
afterAll(() => dir?.remove());

/** Checks the one-object rule and returns the object. */
function answer(r: Ran, code: number): Record<string, any> {
  const out = oneJson(r);
  expect(typeof out === "object" && out !== null, r.stdout).toBe(true);
  expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(code);
  // A run that wrote its report answers with it, exactly as report.json: no `error` beside it.
  const isReport = out.run !== undefined && Array.isArray(out.jobs) && out.counts !== undefined;
  if (isReport) expect(out.error).toBeUndefined();
  if (code !== 0 && !isReport) {
    expect(out.error.code).toBe(code);
    expect(out.error.message).toMatch(/\S/);
    // A person reads the same failure on stderr, as one line starting with clapper:.
    expect(r.stderr).toMatch(/^clapper: \S/m);
  }
  return out;
}

describe("--json: exactly one JSON object on stdout, whatever the exit", () => {
  it("usage errors, help, version and completion", async () => {
    const cases: Array<[string[], number]> = [
      [["frobnicate"], 2],
      [["balanc"], 2],
      [["run"], 2],
      [["run", good, "--no-such-flag"], 2],
      [["run", good, "--log-format", "fancy"], 2],
      [["run", good, "--max-points", "abc"], 2],
      [["run", good, "--max-failures", "0%"], 2],
      [["run", good, "--deadline", "2001-01-01T00:00:00Z"], 2],
      [["tasks", "list", "--kind", "vhs"], 2],
      [["skills"], 2],
      [["voices", "explode"], 2],
      [["sandbox", "--port", "http"], 2],
      [["--help"], 0],
      [["run", "--help"], 0],
      [["--version"], 0],
      [["completion"], 0],
    ];
    const results = await Promise.all(cases.map(([argv]) => clapper([...argv, "--json"], { cwd: dir.path })));
    results.forEach((r, i) => {
      const [argv, code] = cases[i] as [string[], number];
      const out = answer(r, code);
      if (argv[0] === "--help") expect(out.help).toContain("clapper run <manifest>");
      if (argv[1] === "--help") expect(out.help).toContain("--max-failures");
      if (argv[0] === "--version") expect(out.version).toMatch(/^\d+\.\d+\.\d+/);
      if (argv[0] === "completion") expect(out.completion).toContain("_clapper_yargs_completions");
    });
    expect(answer(results[1] as Ran, 2).error.message).toContain("did you mean balance?");
    expect(answer(results[5] as Ran, 2).error.message).toBe(
      '--max-points: expected a whole number of points >= 0, got "abc"',
    );
  });

  it("manifest errors (exit 2) for plan, run, status, report, cancel and assemble, with their problems as fields", async () => {
    const commands = ["plan", "run", "status", "report", "cancel", "assemble"];
    const results = await Promise.all(
      commands.map((c) => clapper([c, bad, "--json"], { cwd: dir.path, env: { GITHUB_ACTIONS: "true" } })),
    );
    results.forEach((r, i) => {
      const out = answer(r, 2);
      expect(out.error.problems, commands[i]).toEqual([
        {
          severity: "error",
          file: "bad.yaml",
          line: 3,
          field: "duration",
          message: "expected an integer from 4 to 30, got 99",
        },
      ]);
      // In a GitHub Actions job, the problem is also a workflow command, on stderr (stdout stays JSON).
      expect(r.stderr).toContain(
        "::error file=bad.yaml,line=3,title=clapper%3A duration::expected an integer from 4 to 30, got 99",
      );
    });
    // plan keeps its own fields (the plan), problems apart, and adds `error`.
    const plan = oneJson(results[0] as Ran);
    expect(plan.errors).toEqual(["bad.yaml:3: duration: expected an integer from 4 to 30, got 99"]);
    expect(plan.problems).toHaveLength(1);
    expect(plan.points).toEqual({ video: 0, speech: 0, total: 0 });
  });

  it("every command whose service is unreachable: exit 6, naming what and where", async () => {
    const cases: string[][] = [
      ["balance"],
      ["skills", "list"],
      ["skills", "show", "noir"],
      ["skills", "create", skill],
      ["skills", "update", "noir", skill],
      ["skills", "delete", "noir"],
      ["skills", "push", join(dir.path, "skills")],
      ["voices", "list"],
      ["voices", "delete", "voice_x"],
      ["tasks", "list"],
      ["tasks", "get", "vtask_x"],
      ["tasks", "cancel", "vtask_x", "--kind", "video"],
      ["plan", good],
      ["run", good],
    ];
    const results = await Promise.all(
      cases.map((argv) =>
        clapper([...argv, "--json", "--log-level", "silent"], { cwd: dir.path, env: UNREACHABLE }),
      ),
    );
    results.forEach((r, i) => {
      const out = answer(r, 6);
      if (cases[i]?.[0] === "run") {
        // The run's own message (src/run/run.ts) names the address too.
        expect(out.error.message).toContain("http://127.0.0.1:1");
        return;
      }
      expect(out.error.message, cases[i]?.join(" ")).toMatch(
        /^the (video |speech )?service at http:\/\/127\.0\.0\.1:1 is unreachable \(ECONNREFUSED\)/,
      );
      expect(out.error.message).toMatch(/run again$/);
    });
    // The service a command talks to is named.
    expect(oneJson(results[0] as Ran).error.message).toMatch(/^the (video|speech) service at/);
    expect(oneJson(results[7] as Ran).error.message).toMatch(/^the speech service at/);
  });

  it("other failing paths: a file that is not there, a run never made, a refused value, a sandbox that cannot listen", async () => {
    const cases: Array<[string[], number, RegExp]> = [
      [
        ["voices", "create", "Narrator", join(dir.path, "absent.wav")],
        2,
        /^cannot read the reference audio file .*absent\.wav: no such file or folder \(ENOENT\)$/,
      ],
      [
        ["skills", "create", join(dir.path, "absent.md")],
        2,
        /cannot read the skill file .*absent\.md: no such file or folder \(ENOENT\)/,
      ],
      [["report", good], 2, /^no run of good yet: nothing to report; run clapper run good\.yaml first$/],
      [["assemble", good], 1, /^no run of good yet: no shot is stored; run clapper run good\.yaml first$/],
      [["plan", join(dir.path, "absent.yaml")], 2, /absent\.yaml/],
      [
        ["run", good, "--state", join(good, "sub", "state.jsonl")],
        2,
        /^cannot create the state folder .*good\.yaml\/sub: a part of the path is a file, not a folder \(ENOTDIR\); pass --state FILE in a writable place/,
      ],
      [
        ["run", good, "--state", join(good, "state.jsonl")],
        2,
        /^cannot create the state folder .*good\.yaml: a file is there, not a folder \(EEXIST\)/,
      ],
      [["sandbox", "--port", "99999"], 2, /--port/],
    ];
    const results = await Promise.all(
      cases.map(([argv]) =>
        clapper([...argv, "--json"], { cwd: dir.path, env: { CLAPPER_LOG_LEVEL: "silent" } }),
      ),
    );
    results.forEach((r, i) => {
      const [, code, message] = cases[i] as [string[], number, RegExp];
      expect(answer(r, code).error.message).toMatch(message);
    });
  });

  it("status of a manifest never run: exit 0, run.status not-run, its jobs pending; cancel: nothing to cancel", async () => {
    const [status, text, cancel] = await Promise.all([
      clapper(["status", good, "--json"], { cwd: dir.path }),
      clapper(["status", good], { cwd: dir.path }),
      clapper(["cancel", good, "--json"], { cwd: dir.path, env: UNREACHABLE }),
    ]);
    const out = answer(status, 0);
    expect(out.run).toMatchObject({ name: "good", status: "not-run", started_at: null, finished_at: null });
    expect(out.counts).toMatchObject({ total: 2, pending: 2, succeeded: 0 });
    expect(out.jobs.map((j: { id: string; status: string }) => `${j.id} ${j.status}`)).toEqual([
      "shot/s01 pending",
      "line/n01 pending",
    ]);
    expect(text.code).toBe(0);
    expect(text.stdout.split("\n")[0]).toBe(
      "run good: not run yet (2 jobs planned; clapper run good.yaml starts it)",
    );
    // Nothing in flight: the (unreachable) services are not even asked.
    expect(answer(cancel, 0)).toEqual({ cancelled: [] });
  });

  it("budget refusal (3) with the table as data, lock held (5), internal error (70)", async () => {
    const locked = await folder();
    try {
      const manifest = await locked.file("held.yaml", smallManifest("held"));
      await mkdir(join(locked.path, ".clapper", "held"), { recursive: true });
      const owner = { pid: process.pid, host: hostname(), started_at: new Date().toISOString() };
      await writeFile(join(locked.path, ".clapper", "held", "state.jsonl.lock"), JSON.stringify(owner));
      const [budget, lock, internal, internalOther] = await Promise.all([
        clapper(["run", good, "--sandbox", "--max-points", "1", "--json"], { cwd: dir.path }),
        clapper(["run", manifest, "--sandbox", "--json"], { cwd: locked.path }),
        clapper(["run", good, "--sandbox", "--json", "--state", join(dir.path, "fault", "state.jsonl")], {
          cwd: dir.path,
          env: { CLAPPER_TEST_FAULT: "internal" },
        }),
        clapper(["balance", "--sandbox", "--json", "--log-level", "silent"], {
          env: { CLAPPER_TEST_FAULT: "internal" },
        }),
      ]);
      const refused = answer(budget, 3);
      expect(refused.budget.length).toBeGreaterThan(0);
      expect(refused.budget[0]).toHaveProperty("what");
      expect(refused.budget[0]).toHaveProperty("points");
      expect(answer(lock, 5).error.message).toContain(`(pid ${process.pid} on ${hostname()}`);
      for (const r of [internal, internalOther]) {
        const out = answer(r, 70);
        expect(out.error.message).toMatch(
          /^internal error \(a bug in clapper\): injected internal fault \(CLAPPER_TEST_FAULT=internal\); please report it at .+ with the command and this message/,
        );
        // One line on stderr, no stack unless asked for.
        expect(r.stderr.split("\n").filter((l) => l.startsWith("clapper: "))).toHaveLength(1);
        expect(r.stderr).not.toMatch(/^\s+at /m);
      }
      // The run's fault came inside the run, after its state was opened: the state is saved (its
      // opening records are on disk) and the lock let go, so the same run goes on at once.
      const faultState = join(dir.path, "fault", "state.jsonl");
      const records = (await readFile(faultState, "utf8"))
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(records.some((r) => r.t === "run")).toBe(true);
      expect(existsSync(`${faultState}.lock`)).toBe(false);
      const again = await clapper(["run", good, "--sandbox", "--json", "--state", faultState], {
        cwd: dir.path,
      });
      expect(again.code, again.stderr).toBe(0);
    } finally {
      await locked.remove();
    }
  });

  it("an internal error shows its stack with --log-level debug; without --json it is one line on stderr", async () => {
    const [debug, human] = await Promise.all([
      clapper(["balance", "--sandbox", "--log-level", "debug"], { env: { CLAPPER_TEST_FAULT: "internal" } }),
      clapper(["balance", "--sandbox", "--log-level", "silent"], { env: { CLAPPER_TEST_FAULT: "internal" } }),
    ]);
    expect(debug.code).toBe(70);
    expect(debug.stderr).toMatch(/^\s+at /m);
    expect(human.code).toBe(70);
    expect(human.stdout).toBe("");
    expect(human.stderr.trim().split("\n")).toEqual([
      expect.stringMatching(/^clapper: internal error \(a bug in clapper\): /),
    ]);
  });

  it("interrupted (4): the report, as report.json holds it", async () => {
    const slow = await folder();
    try {
      const manifest = await slow.file("slow.yaml", smallManifest("slow", { slow: true }));
      // One SIGINT (at the first create): a second, on the next create's line, would be the
      // forced exit, whose answer is an error rather than the report.
      let sent = false;
      const r = await clapper(
        ["run", manifest, "--sandbox", "--json", "--log-format", "json", "--poll-interval", "0.05"],
        {
          cwd: slow.path,
          onLine: (line) => {
            if (sent || !line.includes('"event":"created"')) return undefined;
            sent = true;
            return "SIGINT";
          },
        },
      );
      const out = answer(r, 4);
      expect(out.run.status).toBe("interrupted");
      expect(out.counts.total).toBe(2);
    } finally {
      await slow.remove();
    }
  });

  it("bin/clapper.js's last net: what escapes main(), or a build that cannot load, is exit 70, never 1", async () => {
    const fake = await folder("clapper-bin-");
    try {
      await mkdir(join(fake.path, "bin"));
      await writeFile(join(fake.path, "package.json"), '{ "type": "module" }\n');
      await copyFile(BIN, join(fake.path, "bin", "clapper.js"));
      await copyFile(join(dirname(BIN), "load.js"), join(fake.path, "bin", "load.js"));
      const run = (args: string[]) => {
        const r = spawnSync(process.execPath, [join(fake.path, "bin", "clapper.js"), ...args], {
          encoding: "utf8",
        });
        return { code: r.status, stdout: r.stdout, stderr: r.stderr, signal: null } as Ran;
      };
      const missing = run(["--json"]);
      expect(missing.code).toBe(70);
      expect(missing.stderr).toMatch(
        /^clapper: internal error \(a bug in clapper\): cannot load the compiled CLI/,
      );
      expect(oneJson(missing).error.code).toBe(70);
      await mkdir(join(fake.path, "dist", "cli"), { recursive: true });
      await writeFile(
        join(fake.path, "dist", "cli", "main.js"),
        'export async function main() { throw new Error("escaped"); }\n',
      );
      const escaped = run([]);
      expect(escaped.code).toBe(70);
      expect(escaped.stderr.trim()).toBe(
        "clapper: internal error (a bug in clapper): escaped; please report it to the clapper repository's issues",
      );
      expect(run(["--log-level", "debug"]).stderr).toMatch(/^\s+at /m);
      // The same through the bundle: one that throws as it loads, then one whose main() throws. A
      // bundle is its module's function (scripts/bundle.mjs), on the line after its name.
      const bundle = join(fake.path, "dist", "cli", "clapper.cjs");
      const asBundle = (code: string) =>
        `// clapper bundle 0\n(function (exports, require, module, __filename, __dirname) { ${code}\n});\n`;
      await writeFile(bundle, asBundle('throw new Error("broken bundle");'));
      const broken = run(["--json"]);
      expect(broken.code).toBe(70);
      expect(broken.stderr).toMatch(
        /^clapper: internal error \(a bug in clapper\): cannot load the compiled CLI \(dist\/\): broken bundle/,
      );
      expect(oneJson(broken).error.code).toBe(70);
      // Text after the function (a damaged file) makes the script end in something else.
      await writeFile(bundle, `${asBundle("exports.main = async () => 0;")}0;\n`);
      const damaged = run([]);
      expect(damaged.code).toBe(70);
      expect(damaged.stderr).toMatch(
        /^clapper: internal error \(a bug in clapper\): cannot load the compiled CLI \(dist\/\): \S+clapper\.cjs is damaged \(not one function\)/,
      );
      await writeFile(
        bundle,
        asBundle('exports.main = async () => { throw new Error("escaped the bundle"); };'),
      );
      const fromBundle = run([]);
      expect(fromBundle.code).toBe(70);
      expect(fromBundle.stderr.trim()).toBe(
        "clapper: internal error (a bug in clapper): escaped the bundle; please report it to the clapper repository's issues",
      );
    } finally {
      await fake.remove();
    }
  });
});
