// Issue 10: the log on stderr. --log-level (or CLAPPER_LOG_LEVEL) is honoured exactly in every
// command and format (a run's JSON log defaults to info, one event per state change, but an
// explicit warn gives warn); --log-format is global: json, or pretty readable lines (pino-pretty,
// synchronous: nothing lost at exit), the default on a terminal.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLogger } from "../../src/cli/logger.js";
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

  it("every JSON line carries severity beside its level, and its time in ISO 8601", async () => {
    const failing = await dir.file(
      "severity.yaml",
      smallManifest("severity").replace("take 1", "take 1 [sandbox:fail]"),
    );
    const r = await clapper(
      ["run", failing, "--sandbox", "--log-format", "json", "--log-level", "debug", "--max-attempts", "1"],
      { cwd: dir.path },
    );
    expect(r.code, r.stderr).toBe(1);
    const lines = r.stderr
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { level: number; severity: string; time: string });
    const seen = new Set(lines.map((l) => l.level));
    // The run logs debug lines, its events, and a warning for the failed task.
    expect([...seen].sort()).toEqual(expect.arrayContaining([20, 30, 40]));
    for (const line of lines) {
      expect(line.severity, JSON.stringify(line)).toBe(SEVERITY[line.level]);
      expect(line.time).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(Math.abs(Date.parse(line.time) - Date.now())).toBeLessThan(120_000);
    }
  });

  it("each of pino's levels has its severity (trace and debug are DEBUG, fatal is CRITICAL)", () => {
    const written: string[] = [];
    const logger = createLogger("trace", { write: (line: string) => void written.push(line) }, true);
    logger.trace("t");
    logger.debug("d");
    logger.info("i");
    logger.warn("w");
    logger.error("e");
    logger.fatal("f");
    const got = written.map((l) => JSON.parse(l) as { level: number; severity: string; msg: string });
    expect(got.map((l) => [l.msg, l.level, l.severity])).toEqual([
      ["t", 10, "DEBUG"],
      ["d", 20, "DEBUG"],
      ["i", 30, "INFO"],
      ["w", 40, "WARNING"],
      ["e", 50, "ERROR"],
      ["f", 60, "CRITICAL"],
    ]);
  });
});

/** What a JSON line's `severity` must be for each of pino's numeric levels. */
const SEVERITY: Record<number, string> = {
  10: "DEBUG",
  20: "DEBUG",
  30: "INFO",
  40: "WARNING",
  50: "ERROR",
  60: "CRITICAL",
};
