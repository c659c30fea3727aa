// Stops as containers and pipes deliver them: a SIGTERM while the CLI is still loading, a second
// signal that forces the exit, and a reader of stderr that goes away. The built CLI, as its own process.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { BIN, staleBuild } from "../run/harness.js";
import { folder, smallManifest } from "./cli-process.js";

beforeAll(() => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
});

/** The journal's records, or none when the run never opened it. */
async function records(path: string): Promise<Array<Record<string, unknown>>> {
  if (!existsSync(path)) return [];
  return (await readFile(path, "utf8"))
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l));
}

describe("stop signals", () => {
  it("a SIGTERM while the CLI loads is kept: the run stops before it spends (never exit 0)", async () => {
    const dir = await folder();
    try {
      const manifest = await dir.file("early.yaml", smallManifest("early", { shots: 3 }));
      // Spread over the start-up: before node runs bin/ (killed by the signal: nothing ran), while
      // the compiled CLI loads (the signal must be kept), and once main() listens.
      const delays = [40, 70, 100, 130, 160, 200, 260];
      const outcomes: string[] = [];
      for (const delay of delays) {
        const state = join(dir.path, `s${delay}`, "state.jsonl");
        const child = spawn(
          process.execPath,
          [BIN, "run", manifest, "--sandbox", "--json", "--state", state, "--sandbox-time-scale", "0.3"],
          { cwd: dir.path, env: { PATH: process.env.PATH, HOME: process.env.HOME }, stdio: "ignore" },
        );
        const timer = setTimeout(() => child.kill("SIGTERM"), delay);
        const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) =>
          child.once("close", (c, s) => resolve([c, s])),
        );
        clearTimeout(timer);
        const created = (await records(state)).filter((r) => r.t === "created").length;
        outcomes.push(`${delay} ms: ${signal ?? code}, ${created} created`);
        // Killed before any handler existed (nothing ran), or stopped as interrupted: never a whole run.
        expect(signal === "SIGTERM" || code === 4, outcomes.join("; ")).toBe(true);
        if (signal !== "SIGTERM") expect(existsSync(`${state}.lock`), outcomes.join("; ")).toBe(false);
      }
    } finally {
      await dir.remove();
    }
  });

  it("two SIGTERMs 20 ms apart: exit 4, one JSON object saying so, the lock removed", async () => {
    const dir = await folder();
    try {
      const manifest = await dir.file("forced.yaml", smallManifest("forced", { slow: true, shots: 2 }));
      const child = spawn(
        process.execPath,
        [BIN, "run", manifest, "--sandbox", "--json", "--log-format", "json"],
        {
          cwd: dir.path,
          env: { PATH: process.env.PATH, HOME: process.env.HOME },
        },
      );
      let stdout = "";
      child.stdout.setEncoding("utf8").on("data", (d: string) => {
        stdout += d;
      });
      let fired = false;
      child.stderr.setEncoding("utf8").on("data", (d: string) => {
        if (fired || !d.includes('"event":"created"')) return;
        fired = true;
        child.kill("SIGTERM");
        setTimeout(() => child.kill("SIGTERM"), 20);
      });
      const code = await new Promise<number | null>((resolve) => child.once("close", (c) => resolve(c)));
      expect(fired).toBe(true);
      expect(code).toBe(4);
      const out = JSON.parse(stdout);
      expect(out.error ?? out.run, stdout).toBeDefined();
      if (out.error) expect(out.error).toMatchObject({ code: 4 });
      expect(existsSync(join(dir.path, ".clapper", "forced", "state.jsonl.lock"))).toBe(false);
    } finally {
      await dir.remove();
    }
  });

  it("a reader of stderr that goes away does not crash the run: it finishes and gives its lock back", async () => {
    const dir = await folder();
    try {
      const manifest = await dir.file("pipe.yaml", smallManifest("pipe", { shots: 2 }));
      const child = spawn(
        process.execPath,
        [BIN, "run", manifest, "--sandbox", "--log-format", "pretty", "--log-level", "info"],
        { cwd: dir.path, env: { PATH: process.env.PATH, HOME: process.env.HOME } },
      );
      child.stdout.resume();
      // The reader takes one chunk and leaves: every later write to stderr meets a closed pipe.
      child.stderr.once("data", () => child.stderr.destroy());
      const code = await new Promise<number | null>((resolve) => child.once("close", (c) => resolve(c)));
      expect(code).toBe(0);
      expect(existsSync(join(dir.path, ".clapper", "pipe", "state.jsonl.lock"))).toBe(false);
      const report = JSON.parse(
        await readFile(join(dir.path, "output", "pipe", "reports", "report.json"), "utf8"),
      );
      expect(report.run.status).toBe("succeeded");
    } finally {
      await dir.remove();
    }
  });
});
