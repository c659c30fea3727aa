// Crash safety of `clapper run`, from outside: the runner is a child process killed with SIGKILL at
// chosen and random moments, then run again until it ends with 0. After every iteration: exactly
// one task per job attempt at the sandbox, every output on disk as report.json says, and the
// balance drop equal to the points the report says were spent. The moment each kill landed is
// read back from the journal, so the coverage claimed below is checked, not assumed.
//
// The randomness is seeded: CLAPPER_CRASH_SEED=N replays a failing sequence (the seed is printed).
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { appendFile, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/model.js";
import { LocalSink } from "../../src/sinks/local.js";
import { Journal } from "../../src/state/journal.js";
import {
  cli,
  cliEnv,
  journalRecords,
  LINE_IDS,
  type LogEvent,
  leftovers,
  type Phase,
  phasesAt,
  readReport,
  replay,
  rng,
  type SandboxProcess,
  SHOT_IDS,
  settledBalance,
  staleBuild,
  startSandbox,
  statsDelta,
  unsureCreates,
  verifyOutputs,
  workspace,
} from "./harness.js";

const SEED = Number(process.env.CLAPPER_CRASH_SEED ?? Math.floor(Math.random() * 2 ** 31));
const random = rng(SEED);
const between = (lo: number, hi: number) => Math.floor(lo + random() * (hi - lo + 1));
const JOBS = [...SHOT_IDS, ...LINE_IDS];
const RUN_FLAGS = ["--log-format", "json", "--poll-interval", "0.05"];
const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** Where to kill one run: on a log line (`on`) or after a delay (`afterMs`). */
interface Kill {
  what: string;
  on?: (e: LogEvent, events: readonly LogEvent[]) => boolean;
  /** With `on`: this long after the line. */
  delayMs?: number;
  afterMs?: number;
}

interface RunLog {
  kill: string | undefined;
  killed: boolean;
  code: number | null;
  phases: Phase[];
  unsure: number;
  ms: number;
}

interface Outcome {
  name: string;
  runs: RunLog[];
  ms: number;
}

/** The k-th log line with this event. */
const nth =
  (event: string, k: number) =>
  (e: LogEvent, events: readonly LogEvent[]): boolean =>
    e.event === event && events.filter((x) => x.event === event).length === k;

// Two lanes of iterations run side by side, each against its own sandbox process, so that the
// sandbox's counters of a lane belong to one iteration at a time.
const LANES = 2;
let lanes: SandboxProcess[] = [];
let counter = 0;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  lanes = await Promise.all(Array.from({ length: LANES }, () => startSandbox(0.002)));
});

afterAll(async () => {
  await Promise.all(lanes.map((sb) => sb.close()));
});

/** Runs the planned iterations over the lanes; every outcome, in plan order. */
async function runPlans(plans: Array<[string, Kill[]]>, outcomes: Outcome[]): Promise<void> {
  const queue = plans.map((plan, index) => ({ plan, index }));
  const results: Array<Outcome | undefined> = [];
  try {
    await Promise.all(
      lanes.map(async (sb) => {
        for (let next = queue.shift(); next; next = queue.shift()) {
          const [label, kills] = next.plan;
          results[next.index] = await iteration(sb, label, kills);
        }
      }),
    );
  } finally {
    outcomes.push(...results.filter((o): o is Outcome => o !== undefined));
  }
}

/**
 * One iteration: a fresh manifest (its own run name, state and output), runs killed as planned,
 * then runs until one ends with 0; then every check of the issue's "what it must show".
 */
async function iteration(sb: SandboxProcess, label: string, kills: Kill[]): Promise<Outcome> {
  const started = Date.now();
  const name = `crash-${++counter}-${label}`;
  const ws = await workspace(name);
  const context = `${name} (seed ${SEED})`;
  const runs: RunLog[] = [];
  try {
    const before = await sb.stats();
    const balanceBefore = await settledBalance(sb);
    let unsure = 0;
    // When a kill lands after the run recorded its end, the report of that run is the campaign's.
    let finishedReport: Report | undefined;
    let ended = false;
    for (let i = 0; i < kills.length + 3 && !ended; i++) {
      const kill = kills[i];
      const on = kill?.on;
      const r = await cli(["run", ws.manifest, ...RUN_FLAGS], {
        cwd: ws.dir,
        env: cliEnv(sb),
        ...(on ? { on: (e, events) => (on(e, events) ? "SIGKILL" : undefined) } : {}),
        ...(kill?.delayMs !== undefined ? { onDelayMs: kill.delayMs } : {}),
        ...(kill?.afterMs !== undefined ? { killAfterMs: kill.afterMs } : {}),
      }).done;
      if (r.signal === "SIGKILL") {
        const state = replay(await journalRecords(ws.statePath));
        const phases = phasesAt(state, JOBS);
        const u = unsureCreates(state);
        unsure += u;
        if (phases.has("finished")) finishedReport ??= await readReport(ws);
        runs.push({ kill: kill?.what, killed: true, code: null, phases: [...phases], unsure: u, ms: r.ms });
        continue;
      }
      runs.push({ kill: kill?.what, killed: false, code: r.code, phases: [], unsure: 0, ms: r.ms });
      expect(r.code, `${context}: run ${i + 1} ended with ${r.code}: ${r.messages.join("\n")}`).toBe(0);
      ended = true;
    }
    expect(ended, `${context}: no run ended with 0`).toBe(true);

    const last = await readReport(ws);
    const report = finishedReport ?? last;
    if (finishedReport) {
      // The campaign had ended before the kill: the run after it reuses every output.
      expect(last.counts, context).toMatchObject({ total: 6, skipped: 6, succeeded: 0 });
      expect(last.points.spent, context).toBe(0);
    }
    expect(report.run.status, context).toBe("succeeded");
    // No [sandbox:fail] here: every job succeeds with its first attempt.
    expect(
      report.jobs.map((j) => `${j.id} ${j.status} attempts=${j.attempts}`),
      context,
    ).toEqual(JOBS.map((id) => `${id} succeeded attempts=1`));

    // Exactly one task per job attempt, at the sandbox.
    const after = await sb.stats();
    const d = statsDelta(before, after);
    expect({ video: d.video, speech: d.speech }, context).toEqual({ video: 3, speech: 3 });
    expect(d.tasks, context).toBe(sum(report.jobs.map((j) => j.attempts)));
    expect(new Set(report.jobs.map((j) => j.task_id)).size, context).toBe(6);
    // Every create sent again was answered with the task created before (same key), and only
    // creates whose answer the journal did not hold were sent again.
    expect(d.createRequests - d.tasks, context).toBe(d.replays);
    expect(d.replays, context).toBeLessThanOrEqual(unsure);

    // Points: each job cost its price once; the balance fell by exactly what the report says.
    const balanceAfter = await settledBalance(sb);
    for (const j of report.jobs) expect(j.points, `${context}: ${j.id}`).toBe(j.estimated_points);
    expect(report.points.spent, context).toBe(sum(report.jobs.map((j) => j.points)));
    expect(balanceBefore.total_points - balanceAfter.total_points, context).toBe(report.points.spent);
    expect(balanceAfter.reserved_points, context).toBe(0);
    expect(report.points.balance_before, context).toBe(balanceBefore.available_points);
    expect(report.points.balance_after, context).toBe(balanceAfter.available_points);

    // Every output present and verified; nothing half-written left behind; the lock released.
    expect(await verifyOutputs(report), context).toEqual([]);
    expect(leftovers(ws.outputDir), context).toEqual([]);
    expect(existsSync(`${ws.statePath}.lock`), context).toBe(false);
    return { name, runs, ms: Date.now() - started };
  } catch (error) {
    // What the runs recorded, for the failure message (the job definitions left out).
    const records = (await journalRecords(ws.statePath)).filter((r) => r.t !== "job");
    (error as Error).message +=
      `\n${show([{ name, runs, ms: Date.now() - started }])}\njournal of ${name}:\n${records.map((r) => JSON.stringify(r)).join("\n")}`;
    throw error;
  } finally {
    await ws.remove();
  }
}

function show(outcomes: Outcome[]): string {
  return outcomes
    .map(
      (o) =>
        `${o.name} ${o.ms} ms: ${o.runs
          .map((r) =>
            r.killed ? `killed [${r.kill}] at {${r.phases.join(",")}} unsure=${r.unsure}` : `exit ${r.code}`,
          )
          .join(" -> ")}`,
    )
    .join("\n");
}

const killedRuns = (outcomes: Outcome[]) => outcomes.flatMap((o) => o.runs.filter((r) => r.killed));

describe("clapper run killed with SIGKILL, then resumed", () => {
  it("before create, after create, during the report, and killed again while resuming: 20 iterations", {
    timeout: 150_000,
  }, async () => {
    const plans: Array<[string, Kill[]]> = [];
    // Before create: early (start-up, plan, pre-flight), or just after an intent became durable
    // (the create may or may not be on its way).
    for (let i = 0; i < 3; i++) {
      const ms = between(150, 600);
      plans.push(["early", [{ what: `after ${ms} ms`, afterMs: ms }]]);
    }
    for (let i = 0; i < 3; i++) {
      const k = between(1, 6);
      plans.push(["intent", [{ what: `on submitting #${k}`, on: nth("submitting", k) }]]);
    }
    // After create: a task id durable, its task running, the creates of others in flight. (Up to
    // #5: the creates are sent before any look at a task, so no download is under way yet.)
    for (let i = 0; i < 5; i++) {
      const k = between(1, 5);
      plans.push(["created", [{ what: `on created #${k}`, on: nth("created", k) }]]);
    }
    // During the report: every result stored, the report being written, the run not yet ended.
    for (let i = 0; i < 4; i++) {
      plans.push(["report", [{ what: "on stored #6", on: nth("stored", 6) }]]);
    }
    // Killed after a create, then killed again in the resumed run's start-up (before it follows
    // anything: a resumed run looks at its finished tasks at once and downloads).
    for (let i = 0; i < 5; i++) {
      const k = between(1, 5);
      const ms = between(150, 600);
      plans.push([
        "twice",
        [
          { what: `on created #${k}`, on: nth("created", k) },
          { what: `after ${ms} ms`, afterMs: ms },
        ],
      ]);
    }
    expect(plans).toHaveLength(20);

    const outcomes: Outcome[] = [];
    try {
      await runPlans(plans, outcomes);
    } finally {
      console.log(`crash iterations (seed ${SEED}):\n${show(outcomes)}`);
    }

    // The moments were hit, as read back from the journals.
    const killed = killedRuns(outcomes);
    const where = (p: Phase) => killed.filter((r) => r.phases.includes(p)).length;
    expect(killed.length, show(outcomes)).toBe(25);
    // An intent durable, its create's outcome unknown: the resumed run had to re-send it.
    expect(killed.filter((r) => r.unsure > 0).length, show(outcomes)).toBeGreaterThanOrEqual(10);
    expect(where("after-create"), show(outcomes)).toBeGreaterThanOrEqual(10);
    expect(where("report"), show(outcomes)).toBeGreaterThanOrEqual(3);
  });

  it("during the download of 30 MiB results, and at uniformly random moments: 10 iterations", {
    timeout: 150_000,
  }, async () => {
    const plans: Array<[string, Kill[]]> = [];
    // The status line comes just before the settle and the download of a 30 MiB video.
    const onShotDone = (e: LogEvent) =>
      e.event === "status" && e.status === "succeeded" && String(e.job).startsWith("shot/");
    for (let i = 0; i < 5; i++) {
      const ms = between(5, 60);
      plans.push([
        "download",
        [{ what: `${ms} ms after a shot's status succeeded`, on: onShotDone, delayMs: ms }],
      ]);
    }
    // Anywhere in the first run's work, then anywhere in the resumed run's (from its first event on).
    const anyEvent = () => true;
    for (let i = 0; i < 5; i++) {
      const first = between(0, 900);
      const second = between(0, 600);
      plans.push([
        "random",
        [
          { what: `${first} ms after its first event`, on: anyEvent, delayMs: first },
          { what: `${second} ms after its first event`, on: anyEvent, delayMs: second },
        ],
      ]);
    }
    const outcomes: Outcome[] = [];
    await Promise.all(lanes.map((sb) => sb.pad(30 * 1024 * 1024)));
    try {
      await runPlans(plans, outcomes);
    } finally {
      await Promise.all(lanes.map((sb) => sb.pad(0)));
      console.log(`download and random iterations (seed ${SEED}):\n${show(outcomes)}`);
    }
    const downloads = killedRuns(outcomes.filter((o) => o.name.endsWith("-download")));
    expect(
      downloads.filter((r) => r.phases.includes("download")).length,
      show(outcomes),
    ).toBeGreaterThanOrEqual(3);
  });
});

// ---------------------------------------------------------------------------------------------
// torn journal
// ---------------------------------------------------------------------------------------------

const CHILD = fileURLToPath(new URL("./child.mjs", import.meta.url));

describe("the journal after a kill during heavy writes", () => {
  interface Counted {
    last: number;
    bad: number;
  }
  const options = (path: string) => ({
    path,
    initial: (): Counted => ({ last: 0, bad: 0 }),
    apply: (s: Counted, r: { t: string; i: number }) => {
      if (r.i !== s.last + 1) s.bad += 1;
      s.last = r.i;
    },
    compactEvery: 40,
  });

  it("keeps a whole prefix of the appends, every durable one included, through compactions and a torn last line (6 kills)", {
    timeout: 30_000,
  }, async () => {
    const dir = await mkdtemp(join(tmpdir(), "clapper-journal-"));
    try {
      for (let round = 0; round < 6; round++) {
        const path = join(dir, `j${round}.jsonl`);
        const child = spawn(process.execPath, [CHILD, "journal", path], {
          stdio: ["ignore", "pipe", "inherit"],
        });
        let durable = 0;
        const exited = new Promise<NodeJS.Signals | null>((resolve) =>
          child.once("close", (_c, s) => resolve(s)),
        );
        const enough = between(300, 2000);
        await new Promise<void>((resolve) => {
          createInterface({ input: child.stdout }).on("line", (line) => {
            durable = Math.max(durable, Number(line.split(" ")[1]));
            if (durable >= enough) resolve();
          });
          void exited.then(() => resolve());
        });
        child.kill("SIGKILL");
        expect(await exited).toBe("SIGKILL");
        // A write cut short, as a crash mid-line leaves it.
        await appendFile(path, `{"t":"n","i":${durable + 999},"pad":"xx`);

        const journal = await Journal.open<Counted, { t: string; i: number }>(options(path));
        const state = { ...journal.state };
        await journal.append({ t: "n", i: state.last + 1 });
        await journal.close();
        const text = await readFile(path, "utf8");
        // The torn line is gone, and the journal compacted on the way (a snapshot comes first).
        expect(text.endsWith("\n")).toBe(true);
        expect(() =>
          text
            .trim()
            .split("\n")
            .map((l) => JSON.parse(l)),
        ).not.toThrow();
        expect(text.startsWith('{"t":"snapshot"')).toBe(true);
        // No record twice, none missing, and every acknowledged durable one is there.
        expect(state.bad, `round ${round}`).toBe(0);
        expect(state.last, `round ${round}`).toBeGreaterThanOrEqual(durable);
        const again = await Journal.open<Counted, { t: string; i: number }>(options(path));
        expect(again.state).toEqual({ last: state.last + 1, bad: 0 });
        await again.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("a run killed while 43 jobs write their intents and task ids opens its state again, torn last line and all", {
    timeout: 60_000,
  }, async () => {
    const sb = lanes[0] as SandboxProcess;
    // Speech only, and killed at the k-th of 43 creates: the kill lands among the creates and their
    // durable records. (Looks at tasks may go between the creates: reads are not starved by a queue
    // of writes, so a line created first may be downloading already.)
    const ws = await workspace(`crash-${++counter}-heavy`, { extraLines: 40, linesOnly: true });
    const ids = [
      ...LINE_IDS,
      ...Array.from({ length: 40 }, (_, i) => `line/x${String(i + 1).padStart(3, "0")}`),
    ];
    try {
      const before = await sb.stats();
      const balanceBefore = await settledBalance(sb);
      const flags = [...RUN_FLAGS, "--rps", "100", "--in-flight", "64"];
      // At most 30 of 43, so that some creates are still to go when the kill lands.
      const k = between(5, 30);
      const killed = await cli(["run", ws.manifest, ...flags], {
        cwd: ws.dir,
        env: cliEnv(sb),
        on: (e, events) => (nth("created", k)(e, events) ? "SIGKILL" : undefined),
      }).done;
      expect(killed.signal, `exit ${killed.code}: ${killed.messages.join("\n")}`).toBe("SIGKILL");
      const records = await journalRecords(ws.statePath);
      const state = replay(records);
      expect(records.length).toBeGreaterThan(2 * ids.length);
      const phases = phasesAt(state, ids);
      expect([...phases], `killed at the ${k}th create`).toEqual(
        expect.arrayContaining(["after-create", "before-create"]),
      );
      expect(unsureCreates(state)).toBeGreaterThan(0);
      // The last write cut short: a task id the journal will not have.
      await appendFile(ws.statePath, '{"t":"created","id":"line/x040","n":1,"task_id":"stask_0');

      const resumed = await cli(["run", ws.manifest, ...flags], { cwd: ws.dir, env: cliEnv(sb) }).done;
      expect(resumed.code, resumed.messages.join("\n")).toBe(0);
      const text = await readFile(ws.statePath, "utf8");
      expect(text.endsWith("\n")).toBe(true);
      expect(text).not.toContain("stask_0\n");
      expect(() =>
        text
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l)),
      ).not.toThrow();

      const report = await readReport(ws);
      expect(report.jobs.map((j) => `${j.id} ${j.status} ${j.attempts}`)).toEqual(
        ids.map((id) => `${id} succeeded 1`),
      );
      const d = statsDelta(before, await sb.stats());
      expect(d.tasks).toBe(ids.length);
      expect(d.createRequests - d.tasks).toBe(d.replays);
      expect(d.replays).toBeLessThanOrEqual(unsureCreates(state));
      const balanceAfter = await settledBalance(sb);
      expect(balanceBefore.total_points - balanceAfter.total_points).toBe(report.points.spent);
      expect(report.points.spent).toBe(sum(report.jobs.map((j) => j.estimated_points ?? Number.NaN)));
      expect(await verifyOutputs(report)).toEqual([]);
    } finally {
      await ws.remove();
    }
  });
});

describe("the local sink after a writer was killed mid-file", () => {
  it("leaves the temporary file to nobody: the next writer into the folder removes it", {
    timeout: 15_000,
  }, async () => {
    const root = await mkdtemp(join(tmpdir(), "clapper-sink-"));
    try {
      const child = spawn(process.execPath, [CHILD, "sink", root, "shots/s01.mp4"], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      const exited = new Promise<NodeJS.Signals | null>((resolve) =>
        child.once("close", (_c, s) => resolve(s)),
      );
      await new Promise<void>((resolve) =>
        createInterface({ input: child.stdout }).once("line", () => resolve()),
      );
      child.kill("SIGKILL");
      expect(await exited).toBe("SIGKILL");
      const names = await readdir(join(root, "shots"));
      expect(names.filter((n) => n.endsWith(".partial"))).toHaveLength(1);
      expect(names).not.toContain("s01.mp4");

      const { Readable } = await import("node:stream");
      const written = await new LocalSink(root).write(
        "shots/s01.mp4",
        Readable.from([Buffer.from("result")]),
        {
          expectedBytes: 6,
        },
      );
      expect(written.bytes).toBe(6);
      expect(await readdir(join(root, "shots"))).toEqual(["s01.mp4"]);
      expect(await readFile(join(root, "shots/s01.mp4"), "utf8")).toBe("result");
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
