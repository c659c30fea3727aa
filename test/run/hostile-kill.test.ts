// Two hostile answers under kills (issue 22): a service that answers two creates with one task id,
// and a result corrupted in transfer. Each run is a process killed with SIGKILL or SIGTERM at a
// seeded random moment, then run again until it ends by itself. After each iteration, from
// outside: the tasks the sandbox made, the points the state says were paid against the balance
// drop, every stored file's sha256 against the report, and no lock left behind.
//
// Seeded: CLAPPER_CRASH_SEED=N replays a failing sequence (the seed is printed).
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { attemptCost } from "../../src/state/run-state.js";
import { type HostileService, hostileKey, hostileService, type Mutator } from "../fixtures/hostile.js";
import { errorBody } from "../fixtures/servers.js";
import {
  type CliResult,
  cli,
  journalRecords,
  LINE_IDS,
  type LogEvent,
  readReport,
  replay,
  rng,
  SHOT_IDS,
  staleBuild,
  verifyOutputs,
  type Workspace,
  workspace,
} from "./harness.js";

const SEED = Number(process.env.CLAPPER_CRASH_SEED ?? Math.floor(Math.random() * 2 ** 31));
const random = rng(SEED);
const between = (lo: number, hi: number) => Math.floor(lo + random() * (hi - lo + 1));
const KEY = hostileKey();
const ARGS = ["--log-format", "json", "--poll-interval", "0.05", "--give-up-after", "5"];

beforeAll(() => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
});

/** The account's balance, asked of the sandbox itself once nothing is reserved. */
async function balance(svc: HostileService): Promise<number> {
  for (let i = 0; ; i++) {
    const res = await fetch(`${svc.sandbox.url}/vid/v2/query/point_usage_summary`, {
      headers: { authorization: `Bearer ${KEY}` },
    });
    const b = (await res.json()) as { total_points: number; reserved_points: number };
    if (b.reserved_points === 0 || i > 200) return b.total_points;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** One run, stopped by `signal` `afterMs` after its first log line (or never). */
function run(
  svc: HostileService,
  ws: Workspace,
  stop?: { signal: NodeJS.Signals; afterMs: number },
): Promise<CliResult> {
  let sent = false;
  return cli(["run", ws.manifest, ...ARGS], {
    cwd: ws.dir,
    env: { CLAPPER_BASE_URL: svc.url, CLAPPER_API_KEY: KEY, CLAPPER_RETRY_BASE_MS: "5" },
    killAfterMs: 60_000,
    ...(stop
      ? {
          // Once: a second SIGTERM is a forced stop, another story.
          on: (_e: LogEvent) => {
            if (sent) return undefined;
            sent = true;
            return stop.signal;
          },
          onDelayMs: stop.afterMs,
        }
      : {}),
  }).done;
}

/** Runs until one ends by itself (not stopped by a signal, not interrupted): its result. */
async function runUntilEnded(svc: HostileService, ws: Workspace, story: string[]): Promise<CliResult> {
  for (let i = 0; i < 6; i++) {
    const r = await run(svc, ws);
    story.push(r.signal ? `killed ${r.signal}` : `exit ${r.code}`);
    if (r.signal === null && r.code !== 4) return r;
  }
  throw new Error(`no run ended by itself: ${story.join("; ")}`);
}

/** What every attempt in the state cost: what the account paid, by clapper's own account. */
async function paidByState(ws: Workspace): Promise<number> {
  const state = replay(await journalRecords(ws.statePath));
  return Object.values(state.jobs)
    .flatMap((job) => job.attempts)
    .reduce((sum, a) => sum + attemptCost(a), 0);
}

const is = (text: string | undefined, phrase: string) => text?.includes(phrase) ?? false;

describe("hostile answers under kills", () => {
  afterAll(() => {
    console.log(`hostile kill iterations: seed ${SEED}`);
  });

  it("two creates answered with one task id, killed and resumed: both fail, one task each paid once, nothing stored for them", {
    timeout: 120_000,
  }, async () => {
    for (let n = 1; n <= 3; n++) {
      let svc: HostileService | undefined;
      const mutator: Mutator = {
        request(ctx) {
          if (ctx.kind !== "create" || !is(ctx.text, "The lamp room")) return undefined;
          const s01 = [...(svc?.proxy.tasks.values() ?? [])].find((t) =>
            is(t.text, "a lighthouse on a cliff"),
          );
          if (!s01) return { reply: { status: 503, json: errorBody(503, "busy", "wait") } };
          return { reply: { status: 200, json: { task_id: s01.id } } };
        },
      };
      svc = await hostileService(KEY, { timeScale: 0.002, mutator });
      const ws = await workspace(`same-id-${n}`);
      const story: string[] = [];
      try {
        const before = await balance(svc);
        const stop = { signal: (n % 2 ? "SIGKILL" : "SIGTERM") as NodeJS.Signals, afterMs: between(0, 500) };
        const first = await run(svc, ws, stop);
        story.push(`${stop.signal} after ${stop.afterMs} ms: ${first.signal ?? `exit ${first.code}`}`);
        // A stop that came after the run had ended changed nothing: that run is the one to judge.
        const ended = first.signal === null && first.code !== 4;
        const last = ended ? first : await runUntilEnded(svc, ws, story);
        const what = `seed ${SEED}, iteration ${n}: ${story.join("; ")}`;
        expect(last.code, what).toBe(1);
        const report = await readReport(ws);
        for (const id of ["shot/s01", "shot/s02"]) {
          const j = report.jobs.find((x) => x.id === id);
          expect(j?.status, `${what}: ${id} ${JSON.stringify(j?.error)}`).toBe("failed");
          expect(j?.error?.code, what).toBe("task_id_shared");
        }
        const fine = report.jobs.filter((j) => j.id !== "shot/s01" && j.id !== "shot/s02");
        for (const j of fine) expect(j.status, `${what}: ${j.id}`).toBe("succeeded");
        // s02 never had a task of its own; every other job one.
        expect((await svc.stats()).tasks_created, what).toEqual({ video: 2, speech: 3 });
        const paid = await paidByState(ws);
        const journal = (await journalRecords(ws.statePath))
          .filter((r) => r.t !== "job")
          .map((r) => JSON.stringify(r));
        expect(before - (await balance(svc)), `${what}\n${journal.join("\n")}`).toBe(paid);
        expect(report.points.spent, what).toBe(paid);
        expect(await verifyOutputs({ ...report, jobs: fine }), what).toEqual([]);
        expect(existsSync(`${ws.statePath}.lock`), what).toBe(false);
      } finally {
        await svc.close();
        await ws.remove();
      }
    }
  });

  it("a result corrupted in transfer is downloaded again by the next run, killed and resumed, with no new task", {
    timeout: 120_000,
  }, async () => {
    for (let n = 1; n <= 3; n++) {
      // s01's result comes longer than its Content-Length, n01's is cut off mid-way: every try.
      const mutator: Mutator = {
        media: (ctx) =>
          is(ctx.task?.text, "a lighthouse on a cliff")
            ? { understate: 1000 }
            : is(ctx.task?.text, "the light came on at seven")
              ? { cut: 4096 }
              : undefined,
      };
      const svc = await hostileService(KEY, { timeScale: 0.002, mutator });
      const ws = await workspace(`corrupt-${n}`);
      const story: string[] = [];
      try {
        const before = await balance(svc);
        const broken = await runUntilEnded(svc, ws, story);
        expect(broken.code, story.join("; ")).toBe(1);
        const first = await readReport(ws);
        const taskOf = (id: string) => first.jobs.find((j) => j.id === id)?.task_id;
        const tasks = { s01: taskOf("shot/s01"), n01: taskOf("line/n01") };
        const made = (await svc.stats()).tasks_created;
        // Honest again: the next run is stopped at a random moment, then runs to its end.
        svc.proxy.mutate(undefined);
        const stop = { signal: (n % 2 ? "SIGKILL" : "SIGTERM") as NodeJS.Signals, afterMs: between(0, 400) };
        const stopped = await run(svc, ws, stop);
        story.push(`${stop.signal} after ${stop.afterMs} ms: ${stopped.signal ?? `exit ${stopped.code}`}`);
        const last = await runUntilEnded(svc, ws, story);
        const what = `seed ${SEED}, iteration ${n}: ${story.join("; ")}`;
        expect(last.code, what).toBe(0);
        const report = await readReport(ws);
        expect(report.run.status, what).toBe("succeeded");
        expect(report.jobs.find((j) => j.id === "shot/s01")?.task_id, what).toBe(tasks.s01);
        expect(report.jobs.find((j) => j.id === "line/n01")?.task_id, what).toBe(tasks.n01);
        expect((await svc.stats()).tasks_created, `${what}: no new task`).toEqual(made);
        expect(made, what).toEqual({ video: SHOT_IDS.length, speech: LINE_IDS.length });
        expect(before - (await balance(svc)), what).toBe(await paidByState(ws));
        expect(await verifyOutputs(report), what).toEqual([]);
        expect(existsSync(`${ws.statePath}.lock`), what).toBe(false);
      } finally {
        await svc.close();
        await ws.remove();
      }
    }
  });
});
