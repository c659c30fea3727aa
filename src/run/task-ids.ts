// Whose task a task id is. Invariant: one task id, one attempt; a task the Idempotency-Key returned
// from before this attempt's intent is a replay, paid for where it was made.
import type { Attempt, RunState } from "../state/run-state.js";
import { holdersOf } from "../state/task-index.js";
import type { JobContext } from "./job-context.js";

/**
 * The holder first, so that a kill anywhere here leaves it marked, or this attempt open (its
 * create is sent again with its key, answered the same, and this is done again). A holder of an
 * earlier run keeps what it stored then: its task was its own when it was made. One stored, or
 * being stored, fails now; one still running fails when its task is settled (`follow`).
 */
export async function markHolder(
  c: JobContext,
  holder: { job: string; attempt: Attempt },
  taskId: string,
  error: { code: string; message: string },
): Promise<void> {
  const other = c.journal.state.jobs[holder.job];
  if (!other || holder.attempt.campaign !== c.journal.state.campaign) return;
  await c.journal.append(
    { t: "shared", id: holder.job, n: holder.attempt.n, task_id: taskId, error },
    { durable: true },
  );
  if (other.status === "stored" || other.status === "collecting")
    await c.journal.append({ t: "failed", id: holder.job, error }, { durable: true });
  c.log.error({ job: holder.job, event: "task-id-shared", task_id: taskId }, error.message);
}

/** The job and attempt that already hold `taskId`, if any. */
export function holderOf(
  state: RunState,
  taskId: string,
  key: string,
): { job: string; attempt: Attempt } | undefined {
  // The same key is the same request (an edit reverted while its first task still ran): the
  // service answered it with the task it made, a replay, not another create's task.
  return holdersOf(state, taskId).find((h) => h.attempt.key !== key);
}

/**
 * Whether the task was created before this attempt's intent was written: then the key returned
 * a task of an earlier state or another machine, not one this attempt paid for. Both clocks are
 * read in whole seconds, so anything within three seconds counts as this attempt's own. A
 * service clock more than five minutes from ours is not trusted for this: nothing is a replay.
 */
export function isReplay(clockOffsetMs: number, attempt: Attempt, createdAt: number): boolean {
  if (attempt.at === undefined || !Number.isFinite(createdAt) || createdAt <= 0) return false;
  const offset = clockOffsetMs;
  if (Math.abs(offset) > 5 * 60 * 1000) return false;
  return createdAt * 1000 < attempt.at + offset - 3000;
}
