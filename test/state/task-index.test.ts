// The index of attempts by task id (src/state/task-index.ts) against the plain walk it replaced:
// the same holder for every id, after creates, an edit that drops attempts, a --fresh and a clone.
import { describe, expect, it } from "vitest";
import { applyRecord, initialState, type RunRecord, type RunState } from "../../src/state/run-state.js";
import { holdersOf } from "../../src/state/task-index.js";

/** The walk the index replaced: every attempt of every job, current and previous. */
function walk(state: RunState, taskId: string): string[] {
  const found: string[] = [];
  for (const st of Object.values(state.jobs))
    for (const a of [...st.attempts, ...(st.previous ?? [])])
      if (a.taskId === taskId) found.push(`${st.id}#${a.n}`);
  return found.sort();
}

const viaIndex = (state: RunState, taskId: string) =>
  holdersOf(state, taskId)
    .map((h) => `${h.job}#${h.attempt.n}`)
    .sort();

function apply(state: RunState, ...records: RunRecord[]): void {
  for (const r of records) applyRecord(state, r);
}

const job = (id: string, fingerprint = "f1"): RunRecord => ({
  t: "job",
  id,
  kind: "video",
  fingerprint,
  estimate: 5,
});
const intent = (id: string, n: number): RunRecord => ({
  t: "intent",
  id,
  n,
  key: `${id}-${n}-${Math.random()}`,
  reserved: 5,
});
const created = (id: string, n: number, task: string, previous?: true): RunRecord => ({
  t: "created",
  id,
  n,
  task_id: task,
  ...(previous ? { previous } : {}),
});

describe("the task index", () => {
  it("answers as the walk does, built before or after the creates", () => {
    const state = initialState();
    apply(state, job("a"), job("b"), intent("a", 1), created("a", 1, "t1"));
    // Built now, with t1 only; the later creates reach it through the reducer.
    expect(viaIndex(state, "t1")).toEqual(["a#1"]);
    apply(state, intent("b", 1), created("b", 1, "t2"), intent("a", 2), created("a", 2, "t3"));
    for (const t of ["t1", "t2", "t3", "t4"]) expect(viaIndex(state, t), t).toEqual(walk(state, t));
    expect(viaIndex(state, "t3")).toEqual(["a#2"]);
  });

  it("a task id given to two attempts has both holders", () => {
    const state = initialState();
    apply(state, job("a"), job("b"), intent("a", 1), intent("b", 1));
    expect(viaIndex(state, "x")).toEqual([]);
    apply(state, created("a", 1, "x"), created("b", 1, "x"));
    expect(viaIndex(state, "x")).toEqual(["a#1", "b#1"]);
  });

  it("an edit that drops settled attempts drops them from the answers; open ones stay as previous", () => {
    const state = initialState();
    apply(state, job("a"), intent("a", 1), created("a", 1, "old"), { t: "settled", id: "a", n: 1, spent: 5 });
    apply(state, intent("a", 2), created("a", 2, "open"));
    expect(viaIndex(state, "old")).toEqual(["a#1"]);
    // The row is edited: a new version of the job; the settled attempt is gone, the open one kept.
    apply(state, job("a", "f2"));
    expect(walk(state, "old")).toEqual([]);
    expect(viaIndex(state, "old")).toEqual([]);
    expect(viaIndex(state, "open")).toEqual(walk(state, "open"));
    expect(viaIndex(state, "open")).toEqual(["a#2"]);
    apply(state, intent("a", 1), created("a", 1, "new"));
    expect(viaIndex(state, "new")).toEqual(["a#1"]);
  });

  it("a clone of a state has an index of its own", () => {
    const state = initialState();
    apply(state, job("a"), intent("a", 1), created("a", 1, "t1"));
    expect(viaIndex(state, "t1")).toEqual(["a#1"]);
    const copy = structuredClone(state);
    apply(copy, job("b"), intent("b", 1), created("b", 1, "t2"));
    expect(viaIndex(copy, "t2")).toEqual(["b#1"]);
    expect(viaIndex(state, "t2")).toEqual([]);
    expect(viaIndex(copy, "t1")).toEqual(["a#1"]);
  });
});
