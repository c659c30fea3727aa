// A regenerated line's replacement killed at every step (issue 25): SIGKILL just before the old
// file is linked to its version name, between the link and the unlink, just before and just after
// the new result takes the name (the runner kills itself there, test/run/kill-at.mjs), SIGTERM at
// two of those moments, and SIGKILL (from outside) while its task runs. Then run again to the end.
// After each: the output is the old or the new complete file and the old one is never lost (under its name or
// its version's), one task was created for the edit, the points reported equal the balance drop,
// and every stored file's sha256 is as reported: the kept version's is the first run's output's.
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReportJob } from "../../src/report/model.js";
import {
  cli,
  cliEnv,
  type LogEvent,
  leftovers,
  readReport,
  type SandboxProcess,
  settledBalance,
  sha256File,
  staleBuild,
  startSandbox,
  statsDelta,
  twoLines,
  verifyOutputs,
  type Workspace,
  workspace,
} from "./harness.js";

const PRELOAD = fileURLToPath(new URL("./kill-at.mjs", import.meta.url));
const FLAGS = ["--log-format", "json", "--poll-interval", "0.05"];

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

const manifest = twoLines;

interface Cut {
  what: string;
  /** The runner's own SIGKILL (kill-at.mjs). */
  at?: string;
  /** A signal from outside on a log line. */
  on?: (e: LogEvent) => NodeJS.Signals | undefined;
}

const CUTS: Cut[] = [
  {
    what: "SIGKILL while its task runs",
    on: (e) => (e.event === "created" && e.job === "line/n02" ? "SIGKILL" : undefined),
  },
  { what: "SIGKILL after the version is journalled, before the link", at: "before-link:n02.v1.wav" },
  { what: "SIGKILL between the link and the unlink", at: "after-link:n02.v1.wav" },
  {
    what: "SIGKILL after the old file moved, before the new one takes its name",
    at: "before-rename:n02.wav",
  },
  { what: "SIGKILL after the new one took its name, before it is recorded", at: "after-rename:n02.wav" },
  { what: "SIGTERM just before the link", at: "term-before-link:n02.v1.wav" },
  { what: "SIGTERM just before the new one takes its name", at: "term-before-rename:n02.wav" },
];

describe("a replacement killed at every step", () => {
  for (const [i, cut] of CUTS.entries()) {
    it(cut.what, async () => {
      // Texts of their own: one sandbox serves every case, and a request it has seen is a replay.
      const ws = await workspace("ep", { text: manifest(`The sea was calm (${i}).`) });
      spaces.push(ws);
      const env = cliEnv(sb);
      const first = await cli(["run", ws.manifest, ...FLAGS], { cwd: ws.dir, env }).done;
      expect(first.code, first.messages.join("\n")).toBe(0);
      const old = (await readReport(ws)).jobs.find((j) => j.id === "line/n02")?.output as NonNullable<
        ReportJob["output"]
      >;
      const output = join(ws.outputDir, "lines", "n02.wav");
      const kept = join(ws.outputDir, "lines", "n02.v1.wav");
      const stats = await sb.stats();
      const balance = (await settledBalance(sb)).total_points;

      await writeFile(ws.manifest, manifest(`The sea was calm and grey that long night (${i}).`));
      const killEnv = cut.at
        ? { ...env, NODE_OPTIONS: `--import=${PRELOAD}`, VERSIONS_KILL_AT: cut.at }
        : env;
      const killed = await cli(["run", ws.manifest, ...FLAGS], {
        cwd: ws.dir,
        env: killEnv,
        ...(cut.on ? { on: cut.on } : {}),
      }).done;
      // Killed where asked: by SIGKILL, or stopped by SIGTERM (exit 4).
      if (cut.at?.startsWith("term-")) expect(killed.code, killed.messages.join("\n")).toBe(4);
      else expect(killed.signal, killed.messages.join("\n")).toBe("SIGKILL");

      // The old file is under one of its two names, whole; the output name holds a whole file.
      const shas = await Promise.all([output, kept].filter(existsSync).map(sha256File));
      expect(shas).toContain(old.sha256);
      expect(existsSync(output) || existsSync(kept)).toBe(true);

      let last = killed;
      for (let i = 0; i < 3 && last.code !== 0; i++)
        last = await cli(["run", ws.manifest, ...FLAGS], { cwd: ws.dir, env }).done;
      expect(last.code, last.messages.join("\n")).toBe(0);

      const report = await readReport(ws);
      const n02 = report.jobs.find((j) => j.id === "line/n02") as ReportJob;
      expect(statsDelta(stats, await sb.stats()).tasks).toBe(1);
      expect(report.points.spent).toBe(balance - (await settledBalance(sb)).total_points);
      expect(n02.versions).toEqual([
        { uri: kept, sha256: old.sha256, bytes: old.bytes, at: expect.any(String) },
      ]);
      expect(await sha256File(kept)).toBe(old.sha256);
      expect(n02.output?.sha256).not.toBe(old.sha256);
      expect(await verifyOutputs(report)).toEqual([]);
      expect(existsSync(join(ws.outputDir, "lines", "n02.v2.wav"))).toBe(false);
      expect(leftovers(ws.outputDir)).toEqual([]);

      // Once more: nothing created, nothing kept again.
      const again = await cli(["run", ws.manifest, ...FLAGS, "--json"], { cwd: ws.dir, env }).done;
      expect(again.code).toBe(0);
      expect(statsDelta(stats, await sb.stats()).tasks).toBe(1);
      expect(
        (JSON.parse(again.stdout) as { jobs: ReportJob[] }).jobs.find((j) => j.id === "line/n02")?.versions,
      ).toEqual(n02.versions);
    });
  }
});
