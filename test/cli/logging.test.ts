// Issue 10: the log on stderr. --log-level (or CLAPPER_LOG_LEVEL) is honoured exactly in every
// command and format (a run's JSON log defaults to info, one event per state change, but an
// explicit warn gives warn); --log-format is global: json, or pretty readable lines (pino-pretty,
// synchronous: nothing lost at exit), the default on a terminal.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, staleBuild } from "../run/harness.js";
import { clapper, type Folder, folder, smallManifest } from "./cli-process.js";

const PRETTY = /^\[\d{2}:\d{2}:\d{2}\.\d{3}\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL)\b/;
const HAVE_SCRIPT = process.platform === "linux" && existsSync("/usr/bin/script");

let dir: Folder;
let manifest: string;
beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  dir = await folder("clapper-log-");
  manifest = await dir.file("log.yaml", smallManifest("log"));
});
afterAll(() => dir?.remove());

const levels = (stderr: string) =>
  stderr
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => (JSON.parse(l) as { level: number }).level);

describe("--log-level and --log-format", () => {
  it("a run's JSON log: info by default, exactly the level asked for otherwise (flag or variable)", async () => {
    const [byDefault, warn, fromEnv, state] = await Promise.all([
      clapper(["run", manifest, "--sandbox", "--state", ".a/state.jsonl"], { cwd: dir.path }),
      clapper(["run", manifest, "--sandbox", "--state", ".b/state.jsonl", "--log-level", "warn"], {
        cwd: dir.path,
      }),
      clapper(["run", manifest, "--sandbox", "--state", ".c/state.jsonl"], {
        cwd: dir.path,
        env: { CLAPPER_LOG_LEVEL: "warn" },
      }),
      clapper(["status", manifest, "--log-level", "debug"], { cwd: dir.path }),
    ]);
    for (const r of [byDefault, warn, fromEnv]) expect(r.code, r.stderr).toBe(0);
    expect(byDefault.stderr).toContain('"event":"run-started"');
    expect(levels(byDefault.stderr)).toContain(30);
    expect(levels(warn.stderr).filter((l) => l < 40)).toEqual([]);
    expect(warn.stderr).not.toContain('"event":"run-started"');
    expect(levels(fromEnv.stderr).filter((l) => l < 40)).toEqual([]);
    expect(state.code).toBe(0);
  });

  it("pretty lines say a failed attempt in one sentence with its reason and code, not an object", async () => {
    const failing = await dir.file(
      "fails.yaml",
      smallManifest("fails", { lines: false }).replace("take 1", "take 1 [sandbox:fail]"),
    );
    const r = await clapper(["run", failing, "--sandbox", "--log-format", "pretty"], { cwd: dir.path });
    expect(r.code).toBe(1);
    const lines = r.stderr.split("\n").filter((l) => PRETTY.test(l));
    expect(lines).toContainEqual(
      expect.stringMatching(
        /WARN: shot\/s01: task failed \(attempt 1\): video generation failed \(\[sandbox:fail\] marker\) \[\w+\]$/,
      ),
    );
    // No JSON object, nor one spread over lines below it.
    expect(r.stderr).not.toMatch(/[{}]/);
  });

  it("pretty lines without a terminal, for a run and for any other command", async () => {
    const [run, balance, debug] = await Promise.all([
      clapper(
        [
          "run",
          manifest,
          "--sandbox",
          "--state",
          ".d/state.jsonl",
          "--log-format",
          "pretty",
          "--log-level",
          "info",
        ],
        {
          cwd: dir.path,
        },
      ),
      clapper(["balance", "--sandbox", "--log-format", "pretty"], { cwd: dir.path }),
      clapper(
        [
          "balance",
          "--sandbox",
          "--sandbox-state",
          ".e/sandbox.json",
          "--log-level",
          "debug",
          "--log-format",
          "json",
        ],
        {
          cwd: dir.path,
        },
      ),
    ]);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stderr.split("\n").filter(Boolean);
    expect(lines.some((l) => l.startsWith("{"))).toBe(false);
    expect(lines.filter((l) => PRETTY.test(l)).length).toBeGreaterThan(2);
    expect(lines.find((l) => l.includes("run started"))).toMatch(PRETTY);
    // The last event of the run is there: written synchronously, not lost at exit.
    expect(lines.some((l) => /INFO.*run finished/.test(l))).toBe(true);
    expect(balance.code).toBe(0);
    expect(balance.stderr.trim()).toMatch(
      /^\[\d{2}:\d{2}:\d{2}\.\d{3}\] WARN: --sandbox without --sandbox-state/,
    );
    expect(debug.code).toBe(0);
    expect(levels(debug.stderr)).toContain(20);
  });

  it.skipIf(!HAVE_SCRIPT)(
    "on a terminal: pretty by default, log lines above the live status line",
    async () => {
      const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
      const command = [
        "stty cols 100 rows 24;",
        "exec",
        quote(process.execPath),
        quote(BIN),
        "run",
        quote(manifest),
        "--sandbox --state .f/state.jsonl --log-level info",
      ].join(" ");
      const raw = await new Promise<string>((resolve) => {
        const child = spawn("/usr/bin/script", ["-qfec", command, "/dev/null"], {
          cwd: dir.path,
          env: { PATH: process.env.PATH, HOME: process.env.HOME, TERM: "xterm-256color", NO_COLOR: "1" },
          stdio: ["ignore", "pipe", "pipe"],
        });
        let out = "";
        child.stdout.setEncoding("utf8").on("data", (d: string) => {
          out += d;
        });
        child.once("close", () => resolve(out));
      });
      const ESC = String.fromCharCode(27);
      const text = raw.replace(new RegExp(`${ESC}\\[[0-9;?]*[A-Za-z]`, "g"), "");
      expect(text).not.toContain('{"level"');
      expect(text).toMatch(/\[\d{2}:\d{2}:\d{2}\.\d{3}\] INFO.*run started/);
      expect(text).toContain("run log: succeeded");
    },
  );
});
