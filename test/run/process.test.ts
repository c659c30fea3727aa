// `clapper run` as a process among others: signals, the lock on its state, and the commands that
// read or act on the state of a run that was killed (status, report, cancel). The runner and the
// sandbox are separate processes; every check is made from outside.
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { dirname } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/model.js";
import {
  type Balance,
  cli,
  cliEnv,
  journalRecords,
  LINE_IDS,
  type LogEvent,
  leftovers,
  readReport,
  replay,
  type SandboxProcess,
  SHOT_IDS,
  type Stats,
  settledBalance,
  staleBuild,
  startSandbox,
  statsDelta,
  unsureCreates,
  verifyOutputs,
  type Workspace,
  workspace,
} from "./harness.js";

const JOBS = [...SHOT_IDS, ...LINE_IDS];
const RUN_FLAGS = ["--log-format", "json", "--poll-interval", "0.05"];
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

// Slower than the crash tests: a video task takes about half a second, so tasks are in flight
// when a signal arrives.
let sb: SandboxProcess;
let counter = 0;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  sb = await startSandbox(0.01);
});

afterAll(async () => {
  await sb?.close();
});

const run = (ws: Workspace, extra: Partial<Parameters<typeof cli>[1]> = {}) =>
  cli(["run", ws.manifest, ...RUN_FLAGS], { cwd: ws.dir, env: cliEnv(sb), ...extra });

const createdCount = (events: readonly LogEvent[]) => events.filter((e) => e.event === "created").length;

interface Baseline {
  stats: Stats;
  balance: Balance;
}

async function baseline(): Promise<Baseline> {
  return { stats: await sb.stats(), balance: await settledBalance(sb) };
}

/**
 * Runs again until the run ends (once must do), then checks what the crash tests check: one task
 * per job, re-sent creates answered as replays, points, outputs. Returns the final report.
 */
async function resumeAndVerify(ws: Workspace, base: Baseline, unsure: number): Promise<Report> {
  const resumed = await run(ws).done;
  expect(resumed.code, resumed.messages.join("\n")).toBe(0);
  const report = await readReport(ws);
  expect(report.run.status).toBe("succeeded");
  expect(report.jobs.map((j) => `${j.id} ${j.status} attempts=${j.attempts}`)).toEqual(
    JOBS.map((id) => `${id} succeeded attempts=1`),
  );
  const d = statsDelta(base.stats, await sb.stats());
  expect({ video: d.video, speech: d.speech }).toEqual({ video: 3, speech: 3 });
  expect(d.createRequests - d.tasks).toBe(d.replays);
  expect(d.replays).toBeLessThanOrEqual(unsure);
  const balance = await settledBalance(sb);
  for (const j of report.jobs) expect(j.points, j.id).toBe(j.estimated_points);
  expect(report.points.spent).toBe(sum(report.jobs.map((j) => j.points)));
  expect(base.balance.total_points - balance.total_points).toBe(report.points.spent);
  expect(await verifyOutputs(report)).toEqual([]);
  expect(leftovers(ws.outputDir)).toEqual([]);
  expect(existsSync(`${ws.statePath}.lock`)).toBe(false);
  return report;
}

describe("signals", () => {
  it.each(["SIGINT", "SIGTERM"] as const)(
    "%s stops the run, saves its state and exits 4; the next run resumes to 0 with no task twice",
    { timeout: 30_000 },
    async (signal) => {
      const ws = await workspace(`proc-${++counter}-${signal.toLowerCase()}`);
      try {
        const base = await baseline();
        let sentAt = 0;
        let statusBefore = true;
        const first = await run(ws, {
          on: (e, events) => {
            if (e.event !== "created" || createdCount(events) !== 2) return undefined;
            statusBefore = events.some((x) => x.event === "status");
            sentAt = Date.now();
            return signal;
          },
        }).done;
        const stopMs = Date.now() - sentAt;
        // Tasks were in flight, none finished yet: the interruption is what is tested here.
        expect(statusBefore).toBe(false);
        expect(first.signal).toBeNull();
        expect(first.code, first.messages.join("\n")).toBe(4);
        // The summary on stdout, as any run's that wrote its report (stderr is the JSON log's).
        expect(first.stdout.split("\n")).toContain(`run ${ws.name}: interrupted`);
        // Tasks were created before the stop: the summary says they still run at the service, holding points,
        // and how to follow or stop them.
        const said = first.stdout;
        expect(said).toMatch(
          / {2}interrupted: state saved; \d+ tasks? (is|are) still running at the service, holding \d+ reserved points/,
        );
        expect(said).toContain(`clapper cancel`);
        expect(stopMs).toBeLessThan(5000);

        // State saved: the journal holds every intent and the task ids it learnt; the report says
        // interrupted; the lock is released.
        const records = await journalRecords(ws.statePath);
        const state = replay(records);
        expect(records.filter((r) => r.t === "intent")).toHaveLength(6);
        const known = JOBS.filter((id) => state.jobs[id]?.attempts.at(-1)?.taskId !== undefined);
        expect(known.length).toBeGreaterThanOrEqual(2);
        expect(records.filter((r) => r.t === "stored")).toHaveLength(0);
        const interrupted = await readReport(ws);
        expect(interrupted.run.status).toBe("interrupted");
        expect(interrupted.counts).toMatchObject({ total: 6, pending: 6, succeeded: 0 });
        expect(interrupted.jobs.filter((j) => j.task_id !== null).map((j) => j.id)).toEqual(known);
        expect(existsSync(`${ws.statePath}.lock`)).toBe(false);
        // Nothing was created after the signal that the state does not know of, beyond the creates
        // it is unsure about (which the next run re-sends with the same key).
        const afterFirst = statsDelta(base.stats, await sb.stats());
        expect(afterFirst.tasks).toBeLessThanOrEqual(known.length + unsureCreates(state));

        await resumeAndVerify(ws, base, unsureCreates(state));
      } finally {
        await ws.remove();
      }
    },
  );

  it("a second SIGINT exits at once (code 4); the state still resumes with no task twice", {
    timeout: 30_000,
  }, async () => {
    const ws = await workspace(`proc-${++counter}-twice`);
    try {
      const base = await baseline();
      const p = run(ws);
      await p.when((e) => e.event === "created");
      p.child.kill("SIGINT");
      // Far enough apart that the two are delivered as two signals; long before the graceful stop ends.
      await new Promise((r) => setTimeout(r, 5));
      const secondAt = Date.now();
      p.child.kill("SIGINT");
      const r = await p.done;
      expect(r.code).toBe(4);
      expect(r.messages).toContain("clapper: second SIGINT, exiting now");
      // Exited there and then: the graceful stop's summary never came.
      expect(r.messages.join("\n")).not.toContain("state saved");
      expect(Date.now() - secondAt).toBeLessThan(1000);

      const state = replay(await journalRecords(ws.statePath));
      await resumeAndVerify(ws, base, unsureCreates(state));
    } finally {
      await ws.remove();
    }
  });
});

describe("a signal while the process leaves", () => {
  // A natural exit closes Node's signal watchers one by one while it tears down (5 to 20 ms on
  // these machines), and a SIGTERM then killed the process by the signal: no exit code for the
  // script or `docker stop` that sent it. Before the fix, 5 of these 8 delays died by SIGTERM.
  it("a SIGTERM 0 to 30 ms after the run's last log line keeps the run's exit code", {
    timeout: 60_000,
  }, async () => {
    const ws = await workspace(`proc-${++counter}-leaving`);
    try {
      const outcomes: string[] = [];
      for (const delay of [0, 2, 5, 10, 15, 20, 25, 30]) {
        // Each run after the first has nothing to do: it ends with 0 within a few milliseconds.
        const r = await run(ws, {
          on: (e) => (e.event === "run-finished" ? "SIGTERM" : undefined),
          ...(delay > 0 ? { onDelayMs: delay } : {}),
        }).done;
        outcomes.push(`${delay} ms: ${r.code ?? r.signal}`);
      }
      expect(outcomes).toEqual([0, 2, 5, 10, 15, 20, 25, 30].map((d) => `${d} ms: 0`));
    } finally {
      await ws.remove();
    }
  });
});

describe("signals during a download", () => {
  it("SIGINT while a 30 MiB result downloads: the next run downloads it again, no second task", {
    timeout: 40_000,
  }, async () => {
    const ws = await workspace(`proc-${++counter}-sigint-download`);
    await sb.pad(30 * 1024 * 1024);
    try {
      const base = await baseline();
      const first = await run(ws, {
        on: (e) =>
          e.event === "status" && e.status === "succeeded" && String(e.job).startsWith("shot/")
            ? "SIGINT"
            : undefined,
        onDelayMs: 20,
      }).done;
      expect(first.code, first.messages.join("\n")).toBe(4);
      const state = replay(await journalRecords(ws.statePath));
      // The signal came while a result was on its way (the job settled, not stored).
      expect(JOBS.some((id) => state.jobs[id]?.status === "collecting")).toBe(true);
      await resumeAndVerify(ws, base, unsureCreates(state));
    } finally {
      await sb.pad(0);
      await ws.remove();
    }
  });
});

describe("the lock on a run's state", () => {
  it("a second run on the same state exits 5 at once, naming the holder, and creates nothing", {
    timeout: 30_000,
  }, async () => {
    const ws = await workspace(`proc-${++counter}-lock`);
    try {
      const base = await baseline();
      const holder = run(ws);
      await holder.when((e) => e.event === "created");
      const second = await run(ws).done;
      expect(second.code, second.messages.join("\n")).toBe(5);
      expect(second.messages.join("\n")).toContain(
        `another run holds ${ws.statePath}.lock (pid ${holder.child.pid} on `,
      );
      expect(second.ms).toBeLessThan(5000);
      expect(second.events.filter((e) => e.event === "submitting" || e.event === "created")).toEqual([]);
      // The holder was not disturbed.
      const first = await holder.done;
      expect(first.code, first.messages.join("\n")).toBe(0);
      const d = statsDelta(base.stats, await sb.stats());
      expect(d.tasks).toBe(6);
      expect(d.createRequests).toBe(6);
      const report = await readReport(ws);
      expect(report.jobs.map((j) => j.attempts)).toEqual([1, 1, 1, 1, 1, 1]);
      expect(existsSync(`${ws.statePath}.lock`)).toBe(false);
    } finally {
      await ws.remove();
    }
  });

  it("a second run exits 5 before it talks to the service (here: the service is down)", {
    timeout: 30_000,
  }, async () => {
    const ws = await workspace(`proc-${++counter}-lock-first`);
    try {
      // A live holder: this test process.
      await mkdir(dirname(ws.statePath), { recursive: true });
      const owner = { pid: process.pid, host: hostname(), started_at: new Date().toISOString() };
      await writeFile(`${ws.statePath}.lock`, JSON.stringify(owner));
      const before = await sb.stats();
      const down = await cli(["run", ws.manifest, ...RUN_FLAGS], {
        cwd: ws.dir,
        env: { ...cliEnv(sb), CLAPPER_BASE_URL: "http://127.0.0.1:9" },
      }).done;
      expect(down.code, down.messages.join("\n")).toBe(5);
      expect(down.messages.join("\n")).toContain(`(pid ${process.pid} on ${hostname()}`);
      const reachable = await run(ws).done;
      expect(reachable.code).toBe(5);
      const after = await sb.stats();
      expect(sum(Object.values(after.requests)) - sum(Object.values(before.requests))).toBe(0);
      expect(JSON.parse(await readFile(`${ws.statePath}.lock`, "utf8"))).toEqual(owner);
    } finally {
      await ws.remove();
    }
  });

  it("a lock left by a run killed with SIGKILL is taken over by the next run (no exit 5)", {
    timeout: 30_000,
  }, async () => {
    const ws = await workspace(`proc-${++counter}-stale`);
    try {
      const base = await baseline();
      const p = run(ws, {
        on: (e, events) => (e.event === "created" && createdCount(events) === 2 ? "SIGKILL" : undefined),
      });
      const killed = await p.done;
      expect(killed.signal).toBe("SIGKILL");
      const owner = JSON.parse(await readFile(`${ws.statePath}.lock`, "utf8")) as { pid: number };
      expect(owner.pid).toBe(p.child.pid);

      const state = replay(await journalRecords(ws.statePath));
      await resumeAndVerify(ws, base, unsureCreates(state));
    } finally {
      await ws.remove();
    }
  });
});

describe("commands on the state of a killed run", () => {
  it("status and report read it: the jobs as the journal has them, the run interrupted", {
    timeout: 30_000,
  }, async () => {
    const ws = await workspace(`proc-${++counter}-status`);
    try {
      const base = await baseline();
      const killed = await run(ws, {
        on: (e, events) => (e.event === "created" && createdCount(events) === 3 ? "SIGKILL" : undefined),
      }).done;
      expect(killed.signal).toBe("SIGKILL");
      const state = replay(await journalRecords(ws.statePath));
      const expected = JOBS.map((id) => {
        const job = state.jobs[id];
        return {
          id,
          status: job?.status === "stored" ? "succeeded" : "pending",
          task_id: job?.attempts.at(-1)?.taskId ?? null,
        };
      });
      expect(expected.filter((j) => j.task_id !== null).length).toBeGreaterThanOrEqual(3);

      const status = await cli(["status", ws.manifest, "--json"], { cwd: ws.dir, env: cliEnv(sb) }).done;
      expect(status.code, status.messages.join("\n")).toBe(0);
      const fromStatus = JSON.parse(status.stdout) as Report;
      expect(fromStatus.run.status).toBe("interrupted");
      expect(fromStatus.jobs.map((j) => ({ id: j.id, status: j.status, task_id: j.task_id }))).toEqual(
        expected,
      );
      expect(fromStatus.counts.pending).toBe(expected.filter((j) => j.status === "pending").length);

      const table = await cli(["status", ws.manifest], { cwd: ws.dir, env: cliEnv(sb) }).done;
      expect(table.code).toBe(0);
      expect(table.stdout.split("\n")[0]).toMatch(
        new RegExp(`^run ${fromStatus.run.name}: interrupted \\(6 jobs: `),
      );
      for (const j of expected.filter((x) => x.task_id)) expect(table.stdout).toContain(j.task_id as string);

      // `report` takes the dead run's lock over, writes the three files and lets the lock go.
      const rewritten = await cli(["report", ws.manifest], { cwd: ws.dir, env: cliEnv(sb) }).done;
      expect(rewritten.code, rewritten.messages.join("\n")).toBe(0);
      expect(rewritten.stdout).toContain(ws.reportPath);
      const report = await readReport(ws);
      expect(report.run.status).toBe("interrupted");
      expect(report.jobs.map((j) => ({ id: j.id, status: j.status, task_id: j.task_id }))).toEqual(expected);
      expect(existsSync(ws.reportPath.replace("report.json", "junit.xml"))).toBe(true);
      expect(existsSync(ws.reportPath.replace("report.json", "report.md"))).toBe(true);
      expect(existsSync(`${ws.statePath}.lock`)).toBe(false);

      await resumeAndVerify(ws, base, unsureCreates(state));
    } finally {
      await ws.remove();
    }
  });

  it("cancel cancels the killed run's tasks in flight; the next run records them cancelled and exits 1", {
    timeout: 40_000,
  }, async () => {
    // [sandbox:slow]: a video takes about five seconds here, so the tasks are still running.
    const ws = await workspace(`proc-${++counter}-cancel`, { slow: true, shotsOnly: true });
    try {
      const base = await baseline();
      const killed = await run(ws, {
        on: (e, events) => (e.event === "created" && createdCount(events) === 3 ? "SIGKILL" : undefined),
      }).done;
      expect(killed.signal).toBe("SIGKILL");
      const state = replay(await journalRecords(ws.statePath));
      const tasks = SHOT_IDS.map((id) => state.jobs[id]?.attempts.at(-1)?.taskId);
      expect(tasks.every((t) => t?.startsWith("vtask_"))).toBe(true);

      const cancel = await cli(["cancel", ws.manifest], { cwd: ws.dir, env: cliEnv(sb) }).done;
      expect(cancel.code, cancel.messages.join("\n")).toBe(0);
      const lines = cancel.stdout.trim().split("\n");
      expect(lines.map((l) => l.split(":")[0])).toEqual(SHOT_IDS.map((id, i) => `${id} ${tasks[i]}`));
      for (const line of lines) expect(line).not.toContain("not cancelled");

      const next = await run(ws).done;
      expect(next.code, next.messages.join("\n")).toBe(1);
      const report = await readReport(ws);
      expect(report.run.status).toBe("failed");
      expect(report.counts).toMatchObject({ total: 3, cancelled: 3, succeeded: 0, failed: 0, pending: 0 });
      expect(report.jobs.map((j) => [j.id, j.status, j.task_id, j.points, j.error?.code])).toEqual(
        SHOT_IDS.map((id, i) => [id, "cancelled", tasks[i], 0, "cancelled"]),
      );
      for (const id of SHOT_IDS) expect(next.stdout).toContain(`cancelled ${id}: `);
      // No new task for them, and every point released.
      const d = statsDelta(base.stats, await sb.stats());
      expect(d.tasks).toBe(3);
      const balance = await settledBalance(sb);
      expect(balance.total_points).toBe(base.balance.total_points);
      expect(balance.reserved_points).toBe(0);
      expect(report.points.spent).toBe(0);
    } finally {
      await ws.remove();
    }
  });
});
