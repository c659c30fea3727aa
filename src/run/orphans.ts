// The tasks no job of the manifest follows any more: attempts of an edited-away version of a row
// and of rows removed from the manifest. Each is followed to its end and settled, never collected,
// so every created task is paid for in some report and its reservation ends.
import { AbortedError, isUnavailable, NotFoundError } from "../api/index.js";
import { type ServiceTask, serviceFor, validCost } from "../services/index.js";
import type { Attempt, JobState } from "../state/run-state.js";
import { errorInfo, refused, sharedError } from "./errors.js";
import type { JobContext } from "./job-context.js";
import { holderOf, isReplay, markHolder } from "./task-ids.js";

export class Orphans {
  /** `unfinished`: told why a task is left open (it could not be followed or learned). */
  constructor(
    private readonly c: JobContext,
    private readonly unfinished: (why: string) => void,
  ) {}

  /**
   * Follows to their end the tasks no job of the manifest will: attempts of an edited-away version
   * of a row (`previous`) and of rows removed from the manifest. They are settled, never collected,
   * so every created task is paid for in some report and its reservation ends.
   */
  async settle(st: JobState, removed: boolean): Promise<void> {
    const open = [
      ...(st.previous ?? []).filter((a) => a.spent === undefined).map((a) => ({ a, previous: true })),
      ...(removed
        ? st.attempts.filter((a) => a.spent === undefined).map((a) => ({ a, previous: false }))
        : []),
    ];
    for (const { a, previous } of open) {
      if (this.c.signal.aborted) return;
      await this.settleAttempt(st, a, previous);
    }
  }

  /** One open attempt: its task learned when need be, followed to its end, and settled. */
  private async settleAttempt(st: JobState, a: Attempt, previous: boolean): Promise<void> {
    const record = { t: "settled" as const, id: st.id, n: a.n, ...(previous ? { previous } : {}) };
    if (!a.taskId) {
      const learned = await this.learnTask(st, a, previous);
      if (learned === "left") return;
      if (learned !== "found") {
        await this.c.journal.append({ ...record, spent: 0, error: learned }, { durable: true });
        await this.c.ledger.settle(a.reserved, 0, a.key);
        this.c.log.warn({ job: st.id, event: learned.code, attempt: a.n }, learned.message);
        return;
      }
    }
    const taskId = a.taskId as string;
    let final: ServiceTask;
    try {
      final = await serviceFor(st.kind).track(this.c.trackers, taskId, Math.floor(Date.now() / 1000));
    } catch (error) {
      // Stopped: the caller's loop sees the signal and goes no further.
      if (this.c.signal.aborted) return;
      if (!(error instanceof NotFoundError)) {
        this.unfinished(`some tasks could not be followed (${errorInfo(error).message})`);
        return;
      }
      const gone = {
        code: "task_not_found",
        message: `task ${taskId} is not known to the service any more`,
      };
      await this.c.journal.append({ ...record, spent: 0, error: gone }, { durable: true });
      await this.c.ledger.settle(a.reserved, 0, a.key);
      return;
    }
    await this.settleEnded(st, a, record, taskId, final);
  }

  /** An orphan's task that ended: its cost recorded and its reservation settled. */
  private async settleEnded(
    st: JobState,
    a: Attempt,
    record: { t: "settled"; id: string; n: number; previous?: boolean },
    taskId: string,
    final: ServiceTask,
  ): Promise<void> {
    const service = serviceFor(st.kind);
    const status = service.status(final);
    const ok = status === "succeeded";
    const stated = service.statedCost(final);
    // A video's cost is its price as reserved; a speech task states its own.
    const cost = !ok ? 0 : stated !== undefined && validCost(stated) ? stated : a.reserved;
    const replayed = ok && isReplay(this.c.clients.http.clockOffsetMs, a, service.createdAt(final));
    await this.c.journal.append(
      {
        ...record,
        spent: cost,
        ...(replayed ? { replayed } : {}),
        ...(ok ? {} : { error: { code: status, message: `task ${taskId} ended ${status}` } }),
      },
      { durable: true },
    );
    await this.c.ledger.settle(a.reserved, cost, a.key);
    this.c.log.info(
      { job: st.id, event: "orphan-settled", task_id: taskId, status, cost },
      "a task of an earlier version was followed to its end",
    );
  }

  /**
   * The task of an orphan's create whose answer never reached the journal. Its request is of a
   * version the manifest no longer has, so it is sent again as it was recorded, with its key: the
   * service answers with the task that key made (and pays nothing twice). "found": recorded
   * (`created`), to be followed. "left": the answer is unknown again; the next run asks. Otherwise
   * the reason no task can be, or be learned, to settle the attempt with 0.
   */
  private async learnTask(
    st: JobState,
    a: Attempt,
    previous: boolean,
  ): Promise<"found" | "left" | { code: string; message: string }> {
    // Announced creates: without a `sending` record, none left, and nothing was made.
    if (a.announces && !a.sending) {
      return {
        code: "never_sent",
        message: `an earlier version's create (attempt ${a.n}) was never sent: no task was made`,
      };
    }
    if (a.body === undefined) {
      // A journal from before `sending` records, or a body too large to keep.
      return {
        code: "abandoned",
        message: `an earlier version's create (attempt ${a.n}) may have reached the service; it cannot be sent again to find out`,
      };
    }
    let taskId: string;
    try {
      const call = { idempotencyKey: a.key, signal: this.c.signal };
      taskId = await serviceFor(st.kind).create(this.c.clients, a.body, call);
    } catch (error) {
      if (this.c.signal.aborted || error instanceof AbortedError) return "left";
      // Refused: had the first create made a task, its key would have returned it.
      if (refused(error)) {
        return {
          code: "refused",
          message: `an earlier version's create (attempt ${a.n}), sent again to learn its task, was refused: no task was made (${errorInfo(error).message})`,
        };
      }
      if (isUnavailable(error)) this.c.unavailable?.(error);
      this.unfinished(`some tasks could not be learned (${errorInfo(error).message})`);
      return "left";
    }
    // Another attempt's task: this create made none it can know of (see `shareTask`).
    const holder = holderOf(this.c.journal.state, taskId, a.key);
    if (holder) {
      const error = sharedError(st.id, taskId, holder.job);
      await markHolder(this.c, holder, taskId, error);
      return error;
    }
    await this.c.journal.append(
      { t: "created", id: st.id, n: a.n, task_id: taskId, ...(previous ? { previous } : {}) },
      { durable: true },
    );
    this.c.log.info(
      { job: st.id, event: "orphan-learned", task_id: taskId, attempt: a.n },
      "the task of an earlier version's unanswered create was learned by sending it again",
    );
    return "found";
  }
}
