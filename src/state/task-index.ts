// Which attempts hold a task id: an index of a state's attempts by task id, so that asking "is this
// id another job's already?" after every create does not walk every attempt of every job (a run of
// N jobs would walk N^2 attempts; at 2,000 jobs that was a sixth of the run's CPU).
//
// Invariant: the index never misses a holder. It is built from the state when first asked, and the
// reducer's one place that gives an attempt its task id (applyCreated) adds to it. It may hold
// stale entries (an attempt dropped by an edit or a --fresh): a lookup checks each entry against the
// state itself, so a stale one is never an answer.
import type { Attempt, RunState } from "./run-state.js";

interface Holder {
  job: string;
  attempt: Attempt;
}

const indexes = new WeakMap<RunState, Map<string, Holder[]>>();

function add(index: Map<string, Holder[]>, taskId: string, holder: Holder): void {
  const list = index.get(taskId);
  if (!list) index.set(taskId, [holder]);
  else if (!list.some((h) => h.attempt === holder.attempt)) list.push(holder);
}

function build(state: RunState): Map<string, Holder[]> {
  const index = new Map<string, Holder[]>();
  for (const st of Object.values(state.jobs)) {
    for (const a of st.attempts) if (a.taskId !== undefined) add(index, a.taskId, { job: st.id, attempt: a });
    for (const a of st.previous ?? [])
      if (a.taskId !== undefined) add(index, a.taskId, { job: st.id, attempt: a });
  }
  return index;
}

/** The reducer gave `attempt` of job `job` its task id: indexed, if this state has an index yet. */
export function noteTask(state: RunState, job: string, attempt: Attempt): void {
  const index = indexes.get(state);
  if (index && attempt.taskId !== undefined) add(index, attempt.taskId, { job, attempt });
}

/** The attempts of `state` that hold `taskId` now, in no particular order. */
export function holdersOf(state: RunState, taskId: string): Holder[] {
  let index = indexes.get(state);
  if (!index) {
    index = build(state);
    indexes.set(state, index);
  }
  const found = index.get(taskId) ?? [];
  return found.filter(({ job, attempt }) => {
    const st = state.jobs[job];
    return (
      attempt.taskId === taskId &&
      st !== undefined &&
      (st.attempts.includes(attempt) || (st.previous?.includes(attempt) ?? false))
    );
  });
}
