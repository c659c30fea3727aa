// Hostile answers under kills (issue 22): a service that answers two creates with one task id, a
// result corrupted in transfer, and a service slow to know its tasks whose results redirect. Each run is a process killed with SIGKILL or SIGTERM at a
// seeded random moment, then run again until it ends by itself. After each iteration, from
// outside: the tasks the sandbox made, the points the state says were paid against the balance
// drop, every stored file's sha256 against the report, and no lock left behind.
//
// Seeded: CLAPPER_CRASH_SEED=N replays a failing sequence (the seed is printed).
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type HostileService,
  hostileKey,
  hostileService,
  JOB_NOT_FOUND,
  lagFor,
  type Mutator,
} from "../fixtures/hostile.js";
import { errorBody } from "../fixtures/servers.js";
import {
  journalRecords,
  LINE_IDS,
  readReport,
  rng,
  SHOT_IDS,
  staleBuild,
  verifyOutputs,
  workspace,
} from "./harness.js";
import { balance, paidByState, run, runUntilEnded } from "./hostile-runs.js";

const SEED = Number(process.env.CLAPPER_CRASH_SEED ?? Math.floor(Math.random() * 2 ** 31));
const random = rng(SEED);
const between = (lo: number, hi: number) => Math.floor(lo + random() * (hi - lo + 1));
const KEY = hostileKey();

beforeAll(() => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
});

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
        const before = await balance(svc, KEY);
        const stop = { signal: (n % 2 ? "SIGKILL" : "SIGTERM") as NodeJS.Signals, afterMs: between(0, 500) };
        const first = await run({ svc, ws, key: KEY, retryBaseMs: 5 }, stop);
        story.push(`${stop.signal} after ${stop.afterMs} ms: ${first.signal ?? `exit ${first.code}`}`);
        // A stop that came after the run had ended changed nothing: that run is the one to judge.
        const ended = first.signal === null && first.code !== 4;
        const last = ended ? first : await runUntilEnded({ svc, ws, key: KEY, retryBaseMs: 5 }, story);
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
        expect(before - (await balance(svc, KEY)), `${what}\n${journal.join("\n")}`).toBe(paid);
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
        const before = await balance(svc, KEY);
        const broken = await runUntilEnded({ svc, ws, key: KEY, retryBaseMs: 5 }, story);
        expect(broken.code, story.join("; ")).toBe(1);
        const first = await readReport(ws);
        const taskOf = (id: string) => first.jobs.find((j) => j.id === id)?.task_id;
        const tasks = { s01: taskOf("shot/s01"), n01: taskOf("line/n01") };
        const made = (await svc.stats()).tasks_created;
        // Honest again: the next run is stopped at a random moment, then runs to its end.
        svc.proxy.mutate(undefined);
        const stop = { signal: (n % 2 ? "SIGKILL" : "SIGTERM") as NodeJS.Signals, afterMs: between(0, 400) };
        const stopped = await run({ svc, ws, key: KEY, retryBaseMs: 5 }, stop);
        story.push(`${stop.signal} after ${stop.afterMs} ms: ${stopped.signal ?? `exit ${stopped.code}`}`);
        const last = await runUntilEnded({ svc, ws, key: KEY, retryBaseMs: 5 }, story);
        const what = `seed ${SEED}, iteration ${n}: ${story.join("; ")}`;
        expect(last.code, what).toBe(0);
        const report = await readReport(ws);
        expect(report.run.status, what).toBe("succeeded");
        expect(report.jobs.find((j) => j.id === "shot/s01")?.task_id, what).toBe(tasks.s01);
        expect(report.jobs.find((j) => j.id === "line/n01")?.task_id, what).toBe(tasks.n01);
        expect((await svc.stats()).tasks_created, `${what}: no new task`).toEqual(made);
        expect(made, what).toEqual({ video: SHOT_IDS.length, speech: LINE_IDS.length });
        expect(before - (await balance(svc, KEY)), what).toBe(await paidByState(ws));
        expect(await verifyOutputs(report), what).toEqual([]);
        expect(existsSync(`${ws.statePath}.lock`), what).toBe(false);
      } finally {
        await svc.close();
        await ws.remove();
      }
    }
  });

  it("a service slow to know its tasks, whose results all redirect, killed and resumed: one task per job, paid once, every file intact", {
    timeout: 120_000,
  }, async () => {
    for (let n = 1; n <= 3; n++) {
      // Each task is "not found" and left out of the lists for 300 ms after it is first asked
      // about; every result download answers a 302 to itself first.
      const lagging = lagFor(300);
      const mutator: Mutator = {
        request: (ctx) =>
          ctx.kind === "poll" && lagging(ctx.hit.taskId)
            ? { reply: { status: 200, json: JOB_NOT_FOUND } }
            : undefined,
        task: (_t, ctx) => (ctx.via === "list" && lagging(ctx.task?.id) ? "omit" : undefined),
        media: (ctx) =>
          ctx.count === 1 ? { reply: { status: 302, headers: { location: ctx.url }, body: "" } } : undefined,
      };
      const svc = await hostileService(KEY, { timeScale: 0.002, mutator });
      const ws = await workspace(`slow-to-know-${n}`);
      const story: string[] = [];
      try {
        const before = await balance(svc, KEY);
        const stop = { signal: (n % 2 ? "SIGKILL" : "SIGTERM") as NodeJS.Signals, afterMs: between(0, 600) };
        const first = await run({ svc, ws, key: KEY, retryBaseMs: 5 }, stop);
        story.push(`${stop.signal} after ${stop.afterMs} ms: ${first.signal ?? `exit ${first.code}`}`);
        const ended = first.signal === null && first.code !== 4;
        const last = ended ? first : await runUntilEnded({ svc, ws, key: KEY, retryBaseMs: 5 }, story);
        const what = `seed ${SEED}, iteration ${n}: ${story.join("; ")}`;
        expect(last.code, what).toBe(0);
        const report = await readReport(ws);
        for (const j of report.jobs)
          expect(j.status, `${what}: ${j.id} ${JSON.stringify(j.error)}`).toBe("succeeded");
        expect((await svc.stats()).tasks_created, `${what}: one task per job`).toEqual({
          video: SHOT_IDS.length,
          speech: LINE_IDS.length,
        });
        const paid = await paidByState(ws);
        expect(before - (await balance(svc, KEY)), what).toBe(paid);
        expect(report.points.spent, what).toBe(paid);
        expect(
          svc.proxy.downloads.some((d) => d.action === "reply"),
          `${what}: a result was redirected`,
        ).toBe(true);
        expect(await verifyOutputs(report), what).toEqual([]);
        expect(existsSync(`${ws.statePath}.lock`), what).toBe(false);
      } finally {
        await svc.close();
        await ws.remove();
      }
    }
  });
});
