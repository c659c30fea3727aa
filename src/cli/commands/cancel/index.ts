// `clapper cancel MANIFEST`: the run's tasks still in flight, cancelled.
import { ConnectionError, isUnavailable } from "../../../api/errors.js";
import type { Clients } from "../../../api/index.js";
import { openAttempt } from "../../../engine/state.js";
import type { LocatedRun } from "../../../pipeline/locate.js";
import type { Shard } from "../../../pipeline/shard.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import { locate, neverRun, ownState } from "../run/state.js";

export interface CancelRow {
  job: string;
  task_id: string;
  status: string;
  /** The service refused to cancel it (the command then exits 1). */
  failed?: boolean;
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
  const results: CancelRow[] = [];
  try {
    const opts = o.signal ? { signal: o.signal } : {};
    for (const { job, taskId } of open) {
      try {
        const res =
          job.kind === "video"
            ? await clients.video.cancelTask(taskId, opts)
            : await clients.speech.cancelTask(taskId, opts);
        results.push({ job: job.id, task_id: taskId, status: res.status });
      } catch (error) {
        // The service cannot be reached or will not serve: no other task will fare better; say so
        // at the top (exit 6).
        if (error instanceof ConnectionError || isUnavailable(error)) throw error;
        results.push({
          job: job.id,
          task_id: taskId,
          status: `not cancelled: ${(error as Error).message}`,
          failed: true,
        });
      }
    }
  } finally {
    await clients.close();
  }
  return { rows: results, never: false };
}
