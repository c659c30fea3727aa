// `clapper cancel MANIFEST`: the run's tasks still in flight, cancelled.
import { ConnectionError, isUnavailable } from "../../../api/errors.js";
import type { Clients } from "../../../api/index.js";
import type { Shard } from "../../../run/shard.js";
import { serviceFor } from "../../../services/index.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import type { LocatedRun } from "../../../state/locate.js";
import { openAttempt } from "../../../state/run-state.js";
import { locate, neverRun, ownState } from "../run/state.js";
import { ENDED, outcomeOf } from "../tasks/statuses.js";

/**
 * What became of one task: `cancelled`; `stopping` (the service took the cancel, and the task,
 * which an execution node held, stops a moment later); `ended` (it had ended before: nothing to
 * cancel); `refused` (the service would not cancel it: it goes on, and is paid for if it succeeds).
 */
export type CancelOutcome = "cancelled" | "stopping" | "ended" | "refused";

export interface CancelRow {
  job: string;
  task_id: string;
  /** The task's status as the service last said it. */
  status: string;
  outcome: CancelOutcome;
  /** Why it was refused, when it was. */
  reason?: string;
}

/**
 * Cancels the run's tasks that have not ended; the next run records what became of them. The
 * services are connected only when there is something to cancel.
 */
export async function cancelRun(o: {
  manifest: string;
  cwd: string;
  state?: string | undefined;
  shard?: Shard | undefined;
  s3?: S3ClientOptions;
  connect: (located: LocatedRun) => Promise<Pick<Clients, "video" | "speech"> & { close(): Promise<void> }>;
  signal?: AbortSignal;
}): Promise<{ rows: CancelRow[]; never: boolean }> {
  const located = await locate(o.manifest, o.cwd, o);
  const state = await ownState(located, o.s3);
  const open = Object.values(state.jobs).flatMap((job) => {
    const attempt = openAttempt(job);
    return attempt?.taskId ? [{ job, taskId: attempt.taskId }] : [];
  });
  if (open.length === 0) return { rows: [], never: neverRun(state) };
  const clients = await o.connect(located);
  const rows: CancelRow[] = [];
  try {
    const opts = o.signal ? { signal: o.signal } : {};
    for (const { job, taskId } of open) {
      const service = serviceFor(job.kind);
      const row = { job: job.id, task_id: taskId };
      try {
        const { status } = await service.cancel(clients, taskId, opts);
        rows.push({ ...row, status, outcome: outcomeOf(status) });
      } catch (error) {
        // The service cannot be reached or will not serve: no other task will fare better; say so
        // at the top (exit 6).
        if (error instanceof ConnectionError || isUnavailable(error)) throw error;
        // Refused: it may have ended before (nothing to cancel), or be past cancelling.
        const task = await service.get(clients, taskId, opts).catch(() => undefined);
        const status = task ? service.status(task) : "unknown";
        rows.push(
          ENDED.has(status)
            ? { ...row, status, outcome: "ended" }
            : { ...row, status, outcome: "refused", reason: (error as Error).message },
        );
      }
    }
  } finally {
    await clients.close();
  }
  return { rows, never: false };
}

/** One line a task: what was asked, what the service said, and what follows from it. */
export function renderCancelRow(r: CancelRow): string {
  const at = `${r.job} ${r.task_id}`;
  switch (r.outcome) {
    case "cancelled":
      return `${at}: cancelled`;
    case "stopping":
      return `${at}: cancel accepted; the task was ${r.status} on an execution node and stops shortly (the next run records its end)`;
    case "ended":
      return `${at}: had already ended (${r.status}); nothing to cancel`;
    case "refused":
      return `${at}: not cancelled: ${r.reason}; it goes on (${r.status}), and is paid for if it succeeds`;
  }
}
