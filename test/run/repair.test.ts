// A damaged state, from outside: a line in the middle of state.jsonl that is not a record (a disk,
// an editor, a copy cut short) stops `clapper run` before anything is submitted, with exit 2 and
// the file and line; `clapper run --repair-state` then goes on, killed with SIGKILL or SIGTERM at a
// random moment and run again until it ends with 0. After each iteration: exactly one task per job
// at the sandbox (a lost create was answered by its key with the task made before), the points the
// state says were paid equal to the balance drop, and every stored file's sha256 as reported.
//
// Seeded: CLAPPER_CRASH_SEED=N replays a failing sequence (the seed is printed).
import { existsSync } from "node:fs";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { attemptCost } from "../../src/state/run-state.js";
import {
  cli,
  cliEnv,
  journalRecords,
  LINE_IDS,
  type LogEvent,
  leftovers,
  readReport,
  replay,
  rng,
  type SandboxProcess,
  SHOT_IDS,
  settledBalance,
  staleBuild,
  startSandbox,
  statsDelta,
  verifyOutputs,
  workspace,
} from "./harness.js";

const SEED = Number(process.env.CLAPPER_CRASH_SEED ?? Math.floor(Math.random() * 2 ** 31));
const random = rng(SEED);
const between = (lo: number, hi: number) => Math.floor(lo + random() * (hi - lo + 1));
const JOBS = [...SHOT_IDS, ...LINE_IDS];
const RUN_FLAGS = ["--log-format", "json", "--poll-interval", "0.05"];

let sb: SandboxProcess;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  sb = await startSandbox(0.002);
});

afterAll(async () => {
  await sb?.close();
});

/** What the damage replaced: a record cut short, or bytes that were never one. */
const GARBAGE = [
  (line: string) => line.slice(0, Math.max(1, Math.floor(line.length / 2))),
  () => "\u0000\u0000\u0000\u0000\u0000\u0000",
  () => "<<<<<<< HEAD",
];

interface Iteration {
  /** The first run: killed on its k-th `created` line, or left to finish. */
  firstKill: number | undefined;
  /** How the repairing run is stopped, and when (ms after its first log line). */
  signal: "SIGKILL" | "SIGTERM";
  afterMs: number;
}

async function iterate(n: number, plan: Iteration): Promise<string> {
  const name = `repair-${n}`;
  const ws = await workspace(name);
  const story: string[] = [];
  try {
    const before = await sb.stats();
    const balanceBefore = await settledBalance(sb);
    const first = await cli(["run", ws.manifest, ...RUN_FLAGS], {
      cwd: ws.dir,
      env: cliEnv(sb),
      ...(plan.firstKill !== undefined
        ? {
            on: (e: LogEvent, events: readonly LogEvent[]) =>
              e.event === "created" && events.filter((x) => x.event === "created").length === plan.firstKill
                ? "SIGKILL"
                : undefined,
          }
        : {}),
    }).done;
    story.push(
      first.signal ? `first run killed on created #${plan.firstKill}` : `first run exit ${first.code}`,
    );

    // The damage: one complete line in the middle replaced.
    const text = await readFile(ws.statePath, "utf8");
    const lines = text.split("\n");
    const complete = lines.length - 1;
    // Half the time a line of what was created and paid (the records that matter most), else any.
    const weighty = lines
      .slice(1, complete - 1)
      .map((l, i) => ({ l, i: i + 1 }))
      .filter(({ l }) => /^\{"t":"(intent|sending|created|settled|stored|finish|balance)"/.test(l));
    const at =
      random() < 0.5 && weighty.length > 0
        ? (weighty[between(0, weighty.length - 1)] as { i: number }).i
        : between(1, complete - 2);
    const lost = lines[at] as string;
    lines[at] = (GARBAGE[between(0, GARBAGE.length - 1)] as (l: string) => string)(lost);
    await writeFile(ws.statePath, lines.join("\n"));
    story.push(`line ${at + 1} of ${complete} damaged (was ${lost.slice(0, 80)})`);

    // Refused, with the file and the line, and nothing sent.
    const beforeRefusal = await sb.stats();
    const refused = await cli(["run", ws.manifest, ...RUN_FLAGS], { cwd: ws.dir, env: cliEnv(sb) }).done;
    const said = refused.messages.join("\n");
    expect(refused.code, `${story.join("; ")}\n${said}`).toBe(2);
    expect(said).toContain(`${ws.statePath}:${at + 1}:`);
    expect(said).toContain("--repair-state");
    expect(said).not.toMatch(/internal error/);
    expect(statsDelta(beforeRefusal, await sb.stats()).createRequests).toBe(0);
    // status and report say the same, and change nothing.
    const status = await cli(["status", ws.manifest, "--json"], { cwd: ws.dir, env: cliEnv(sb) }).done;
    expect(status.code).toBe(2);
    expect(JSON.parse(status.stdout).error.message).toContain(`:${at + 1}:`);

    // The way on: repaired, killed at a random moment, then run until it ends with 0.
    let ended = false;
    for (let i = 0; i < 5 && !ended; i++) {
      const kill = i === 0;
      // Every run asks for the repair: a kill before it was made leaves it to the next, and on a
      // state that is not damaged it does nothing.
      const r = await cli(["run", ws.manifest, ...RUN_FLAGS, "--repair-state"], {
        cwd: ws.dir,
        env: cliEnv(sb),
        ...(kill ? { on: () => plan.signal, onDelayMs: plan.afterMs } : {}),
      }).done;
      story.push(r.signal ? `repairing run stopped by ${r.signal}` : `run exit ${r.code}`);
      if (r.signal === null && r.code === 4) continue; // SIGTERM: interrupted, state saved
      if (r.signal) continue;
      expect(r.code, `${story.join("; ")}\n${r.messages.join("\n")}`).toBe(0);
      ended = true;
    }
    expect(ended, story.join("; ")).toBe(true);

    // The damaged file is kept beside the repaired one, once.
    const kept = (await readdir(dirname(ws.statePath))).filter((f) =>
      f.startsWith(`${basename(ws.statePath)}.damaged-`),
    );
    expect(kept.length, story.join("; ")).toBe(1);

    // One task per job at the sandbox: whatever the lost line said, nothing was created twice.
    const d = statsDelta(before, await sb.stats());
    expect({ video: d.video, speech: d.speech }, story.join("; ")).toEqual({ video: 3, speech: 3 });
    expect(d.createRequests - d.tasks, story.join("; ")).toBe(d.replays);

    // Points: what the state says every attempt cost is the balance drop.
    const balanceAfter = await settledBalance(sb);
    const state = replay(await journalRecords(ws.statePath));
    const paid = Object.values(state.jobs)
      .flatMap((job) => job.attempts)
      .reduce((sum, a) => sum + attemptCost(a), 0);
    expect(balanceAfter.reserved_points, story.join("; ")).toBe(0);
    expect(balanceBefore.total_points - balanceAfter.total_points, story.join("; ")).toBe(paid);
    const report = await readReport(ws);
    expect(report.run.status, story.join("; ")).toBe("succeeded");
    expect(report.jobs.map((j) => j.id).sort()).toEqual([...JOBS].sort());
    // A campaign the damage did not finish is reported whole: its report counts every point.
    if (plan.firstKill !== undefined) expect(report.points.spent, story.join("; ")).toBe(paid);

    // Every output as reported, by its sha256; nothing half-written; no lock left.
    expect(await verifyOutputs(report), story.join("; ")).toEqual([]);
    expect(leftovers(ws.outputDir), story.join("; ")).toEqual([]);
    expect(existsSync(`${ws.statePath}.lock`), story.join("; ")).toBe(false);
    return story.join("; ");
  } catch (error) {
    (error as Error).message += `\n(seed ${SEED}) ${story.join("; ")}`;
    throw error;
  } finally {
    await ws.remove();
  }
}

describe("a damaged state", () => {
  it("stops the run with exit 2 and its line; --repair-state, killed and resumed, pays nothing twice: 6 iterations", {
    timeout: 120_000,
  }, async () => {
    const stories: string[] = [];
    for (let n = 1; n <= 6; n++) {
      stories.push(
        await iterate(n, {
          firstKill: n % 3 === 0 ? undefined : between(1, 6),
          signal: n % 2 === 0 ? "SIGTERM" : "SIGKILL",
          afterMs: between(0, 400),
        }),
      );
    }
    console.log(`repair iterations (seed ${SEED}):\n${stories.join("\n")}`);
  });
});
