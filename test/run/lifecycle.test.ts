// The job's lifecycle table (src/run/lifecycle.ts) against the runner's decisions and the real
// reducer: every transition it lists is replayed through applyRecord, so the table cannot drift.
import { describe, expect, it } from "vitest";
import {
  LIFECYCLE,
  type LifeEvent,
  nextStep,
  type Phase,
  phaseOf,
  type Standing,
  type Step,
} from "../../src/run/lifecycle.js";
import {
  applyRecord,
  initialState,
  type JobState,
  type RunRecord,
  type RunState,
} from "../../src/state/run-state.js";

const ID = "s1";
const error = { code: "x", message: "x" };
const output = { uri: "file:///out/s1.mp4", bytes: 10, sha256: "h", fingerprint: "f1" };

const declare: Extract<RunRecord, { t: "job" }> = {
  t: "job",
  id: ID,
  kind: "video",
  fingerprint: "f1",
  estimate: 5,
};
const intent = (n: number): RunRecord => ({
  t: "intent",
  id: ID,
  n,
  key: `k${n}`,
  reserved: 5,
  announces: true,
});
const created = (n: number): RunRecord => ({ t: "created", id: ID, n, task_id: `t${n}` });

/** A minimal journal that leaves the job in each phase. */
const JOURNALS: Record<Phase, RunRecord[]> = {
  pending: [declare],
  intent: [declare, intent(1), { t: "sending", id: ID, n: 1 }],
  created: [declare, intent(1), created(1), { t: "task", id: ID, n: 1, status: "running" }],
  succeeded: [declare, intent(1), created(1), { t: "task", id: ID, n: 1, status: "succeeded" }],
  collecting: [
    declare,
    intent(1),
    created(1),
    { t: "task", id: ID, n: 1, status: "succeeded" },
    { t: "settled", id: ID, n: 1, spent: 5 },
  ],
  "paid-not-stored": [
    declare,
    intent(1),
    created(1),
    { t: "task", id: ID, n: 1, status: "succeeded" },
    { t: "settled", id: ID, n: 1, spent: 5 },
    { t: "failed", id: ID, error },
  ],
  stored: [
    declare,
    intent(1),
    created(1),
    { t: "task", id: ID, n: 1, status: "succeeded" },
    { t: "settled", id: ID, n: 1, spent: 5 },
    { t: "stored", id: ID, output },
  ],
  failed: [declare, intent(1), { t: "settled", id: ID, n: 1, spent: 0, error, fate: "failed" }],
  cancelled: [
    declare,
    intent(1),
    created(1),
    { t: "settled", id: ID, n: 1, spent: 0, error, fate: "cancelled" },
  ],
};

function phaseIn(state: RunState): Phase {
  return phaseOf(state.jobs[ID] as JobState);
}

function replay(records: RunRecord[]): RunState {
  const state = initialState();
  applyRecord(state, {
    t: "run",
    id: "r1",
    name: "r",
    manifest: "m.yaml",
    started_at: "2024-01-01T00:00:00Z",
  });
  for (const r of records) applyRecord(state, r);
  return state;
}

/** The record an event stands for, written about the job's last attempt (or its next one). */
function recordOf(event: LifeEvent, state: RunState): RunRecord {
  const attempts = state.jobs[ID]?.attempts ?? [];
  const n = attempts.at(-1)?.n ?? 1;
  switch (event) {
    case "job":
      return declare;
    case "job:edited":
      return { ...declare, fingerprint: "f2" };
    case "fresh":
      return { t: "fresh", epoch: "e2", jobs: [ID] };
    case "skip":
      return { t: "skip", id: ID };
    case "intent":
      return intent(attempts.length + 1);
    case "withdrawn":
      return { t: "withdrawn", id: ID, n };
    case "sending":
      return { t: "sending", id: ID, n };
    case "reserve":
      return { t: "reserve", id: ID, n, reserved: 7 };
    case "created":
      return created(n);
    case "task":
      return { t: "task", id: ID, n, status: "running" };
    case "task:succeeded":
      return { t: "task", id: ID, n, status: "succeeded" };
    case "shared":
      return { t: "shared", id: ID, n, task_id: attempts.at(-1)?.taskId ?? `t${n}`, error };
    case "problem":
      return { t: "problem", id: ID, error };
    case "settled":
      return { t: "settled", id: ID, n, spent: 5 };
    case "settled:error":
      return { t: "settled", id: ID, n, spent: 0, error };
    case "settled:failed":
      return { t: "settled", id: ID, n, spent: 0, error, fate: "failed" };
    case "settled:cancelled":
      return { t: "settled", id: ID, n, spent: 0, error, fate: "cancelled" };
    case "stored":
      return { t: "stored", id: ID, output };
    case "failed":
      return { t: "failed", id: ID, error };
    case "cancelled":
      return { t: "cancelled", id: ID };
  }
}

const EVENTS: LifeEvent[] = [
  "job",
  "job:edited",
  "fresh",
  "skip",
  "intent",
  "withdrawn",
  "sending",
  "reserve",
  "created",
  "task",
  "task:succeeded",
  "shared",
  "problem",
  "settled",
  "settled:error",
  "settled:failed",
  "settled:cancelled",
  "stored",
  "failed",
  "cancelled",
];
const PHASES = Object.keys(LIFECYCLE) as Phase[];

function applied(phase: Phase, event: LifeEvent): Phase {
  const state = replay(JOURNALS[phase]);
  applyRecord(state, recordOf(event, state));
  return phaseIn(state);
}

describe("the journals the tests build", () => {
  it.each(PHASES)("leave the job %s", (phase) => {
    expect(phaseIn(replay(JOURNALS[phase]))).toBe(phase);
  });
});

describe("nextStep over the table", () => {
  const base: Omit<Standing, "phase"> = {
    fetchedAgain: false,
    stopped: false,
    exhausted: false,
    oneAtATime: false,
  };
  const expected: Record<Phase, Step> = {
    pending: { do: "open", inTurn: false },
    intent: { do: "create" },
    created: { do: "follow" },
    succeeded: { do: "follow" },
    collecting: { do: "collect", again: false },
    "paid-not-stored": { do: "collect", again: true },
    stored: { do: "open", inTurn: false },
    failed: { do: "open", inTurn: false },
    cancelled: { do: "open", inTurn: false },
  };

  it.each(PHASES)("%s: its row's effect", (phase) => {
    expect(nextStep({ ...base, phase })).toEqual(expected[phase]);
  });

  it.each(PHASES)("%s: the guards of opening (stopped, exhausted, one at a time)", (phase) => {
    const opens = expected[phase].do === "open";
    const stopped = nextStep({ ...base, phase, stopped: true, exhausted: true });
    const exhausted = nextStep({ ...base, phase, exhausted: true });
    const inTurn = nextStep({ ...base, phase, oneAtATime: true });
    // Stopped wins over exhausted, as the runner checked them.
    expect(stopped).toEqual(opens ? { do: "nothing", why: "stopped" } : expected[phase]);
    expect(exhausted).toEqual(opens ? { do: "nothing", why: "exhausted" } : expected[phase]);
    expect(inTurn).toEqual(opens ? { do: "open", inTurn: true } : expected[phase]);
  });

  it("fetches a paid result again once a run, then goes on as a failed job", () => {
    const phase = "paid-not-stored";
    expect(nextStep({ ...base, phase, fetchedAgain: true })).toEqual({ do: "open", inTurn: false });
    expect(nextStep({ ...base, phase, fetchedAgain: true, stopped: true })).toEqual({
      do: "nothing",
      why: "stopped",
    });
    expect(nextStep({ ...base, phase, fetchedAgain: true, oneAtATime: true })).toEqual({
      do: "open",
      inTurn: true,
    });
  });

  it("collects a job being collected whatever was fetched, stopped or spent", () => {
    const all = { fetchedAgain: true, stopped: true, exhausted: true, oneAtATime: true };
    expect(nextStep({ phase: "collecting", ...all })).toEqual({ do: "collect", again: false });
  });

  it("follows and creates what is open even when stopped or spent", () => {
    const all = { fetchedAgain: true, stopped: true, exhausted: true, oneAtATime: true };
    expect(nextStep({ phase: "intent", ...all })).toEqual({ do: "create" });
    expect(nextStep({ phase: "created", ...all })).toEqual({ do: "follow" });
  });
});

describe("the table against the reducer", () => {
  const listed = PHASES.flatMap((from) =>
    Object.entries(LIFECYCLE[from].on).map(([event, to]) => [from, event as LifeEvent, to as Phase] as const),
  );

  it.each(listed)("%s --%s--> %s", (from, event, to) => {
    expect(applied(from, event)).toBe(to);
  });

  /**
   * Records the table does not list for a phase that would move it if written: none of these is
   * written in that phase by the code that writes journals (jobs.ts, collection.ts, task-ids.ts,
   * orphans.ts, admit.ts, stages/, state/repair.ts). Every other unlisted record leaves it as it is.
   */
  const NEVER: Record<string, string> = {
    // An attempt ends once, and only an open one is settled: none is open here.
    "pending settled:failed": "no attempt open to settle",
    "pending settled:cancelled": "no attempt open to settle",
    // A create's task is journalled before its attempt is paid or cancelled.
    "intent settled": "a task is created before it is paid",
    "intent settled:cancelled": "a task is created before it is cancelled",
    // The next attempt is opened only once the one before it ended.
    "created intent": "an attempt is open",
    "succeeded intent": "an attempt is open",
    "collecting intent": "collected before anything is created",
    // A status is journalled when it changes; after succeeded there is none.
    "succeeded task": "a succeeded task's status is not journalled again",
    "paid-not-stored task": "a status is journalled only while its attempt is open",
    "succeeded settled:cancelled": "a succeeded task is not cancelled",
    // The admission does not give a stored job to the runner (an edit makes it pending first).
    "stored intent": "a stored job is not made again",
    // A stored job is failed only by task-ids.ts, after its `shared`: failed for good (below).
    "stored failed": "written only after shared",
    // No `cancelled` record is written (the reducer still reads it): a task's cancellation is its
    // settlement's fate. With an attempt open it would change nothing the runner looks at.
    ...Object.fromEntries(
      (["pending", "collecting", "paid-not-stored", "stored", "failed"] as const).map((p) => [
        `${p} cancelled`,
        "not written",
      ]),
    ),
  };

  it("every record it does not list is never written there, or leaves the phase unchanged", () => {
    const moved: string[] = [];
    for (const phase of PHASES)
      for (const event of EVENTS) {
        if (event in LIFECYCLE[phase].on) continue;
        if (applied(phase, event) !== phase) moved.push(`${phase} ${event}`);
      }
    expect(moved.sort()).toEqual(Object.keys(NEVER).sort());
  });

  it("a holder whose task id was shared fails for good, not paid-not-stored", () => {
    for (const phase of ["collecting", "stored"] as const) {
      const state = replay(JOURNALS[phase]);
      applyRecord(state, recordOf("shared", state));
      applyRecord(state, recordOf("failed", state));
      expect(phaseIn(state)).toBe("failed");
    }
  });
});
