// A paid result collected: read through its task when needed, downloaded, checked and recorded as
// the job's success; or, when it cannot be, the job failed (broken) or left for a later run.
import { isUnavailable } from "../api/index.js";
import type { Job } from "../manifest/index.js";
import { type ServiceTask, serviceFor } from "../services/index.js";
import type { Written } from "../sinks/sink.js";
import type { Attempt, JobState } from "../state/run-state.js";
import { downloadResult } from "./download.js";
import { collectionFailure, collectionProblem, errorInfo, unreachableStore } from "./errors.js";
import type { JobContext } from "./job-context.js";

/** A collection's end: stored; failed for good (broken, or refused by its host); left for a later run. */
type Collected = "stored" | "failed" | "left";

export class Collection {
  /** `pending`: told why a result paid for is not stored yet. */
  constructor(
    private readonly c: JobContext,
    private readonly pending: (why: string) => void,
  ) {}

  private st(job: Job): JobState {
    return this.c.journal.state.jobs[job.id] as JobState;
  }

  /** What became of a result's collection: stored, failed for good, or left for a later run. */
  async paid(job: Job, paid: Attempt): Promise<Collected> {
    let outcome: Collected;
    try {
      const call = { signal: this.c.signal };
      const task = await serviceFor(job.kind).get(this.c.clients, paid.taskId as string, call);
      outcome = await this.collect(job, task, paid.n);
    } catch (error) {
      if (this.c.signal.aborted) return "left";
      outcome = await this.collectFailed(job, error);
    }
    this.c.progress(job);
    return outcome;
  }

  /** Stores a succeeded task's result; a failure leaves the job paid for and waiting, or failed. */
  async collect(job: Job, task: ServiceTask, n: number): Promise<Collected> {
    try {
      await downloadResult(this.c, job, task, (written) => this.stored(job, task, written, n));
      return this.st(job).status === "stored" ? "stored" : "failed";
    } catch (error) {
      if (this.c.signal.aborted) return "left";
      return this.collectFailed(job, error);
    }
  }

  /** Records a result stored and checked: the job's success. */
  private async stored(
    job: Job,
    task: ServiceTask,
    written: Written & { seconds?: number },
    n: number,
  ): Promise<void> {
    // Its task id given to another create meanwhile: whose request the file is cannot be told.
    const shared = this.st(job).attempts.find((a) => a.n === n)?.shared;
    if (shared) {
      await this.c.journal.append({ t: "failed", id: job.id, error: shared }, { durable: true });
      return;
    }
    const service = serviceFor(job.kind);
    const delivered = service.delivered(task);
    await this.c.journal.append(
      {
        t: "stored",
        id: job.id,
        output: {
          uri: written.uri,
          bytes: written.bytes,
          sha256: written.sha256,
          fingerprint: job.fingerprint,
          ...(delivered !== undefined ? { resolution: delivered } : {}),
          ...(written.seconds ? { seconds: Math.round(written.seconds * 1000) / 1000 } : {}),
          at: Date.now(),
        },
      },
      { durable: true },
    );
    this.c.onStored?.(job, written);
    const requested = service.requested(job);
    if (requested !== undefined && delivered !== requested)
      this.c.log.warn(
        { job: job.id, event: "resolution-fallback", requested, delivered },
        `delivered at ${delivered}, not the ${requested} asked for (a failed upscale delivers the native 768P)`,
      );
    this.c.log.info(
      { job: job.id, event: "stored", uri: written.uri, bytes: written.bytes, attempt: n },
      "result stored",
    );
  }

  /**
   * A result that is broken (its container or duration is not what was asked for), or that its
   * host keeps refusing with an error status, fails the job. Anything else (a connection lost, the
   * store down) leaves the job paid for and waiting to be collected, with the reason: the next run
   * fetches it again through its task, nothing is created twice.
   */
  private async collectFailed(job: Job, error: unknown): Promise<Collected> {
    const failure = collectionFailure(error);
    if (failure) {
      await this.c.journal.append({ t: "failed", id: job.id, error: failure }, { durable: true });
      this.c.log.error({ job: job.id, event: "failed", error: failure }, "the result could not be collected");
      return "failed";
    }
    const info = { code: collectionProblem(error), message: errorInfo(error).message };
    // The result host or the store is down: every other result would fail the same way.
    if (unreachableStore(error)) this.c.unreachable?.(error);
    else if (isUnavailable(error)) this.c.unavailable?.(error);
    await this.c.journal.append({ t: "problem", id: job.id, error: info });
    this.pending(`some results could not be stored (${info.message}); run again to collect them`);
    this.c.log.warn(
      { job: job.id, event: "collect-failed", error: info },
      "the result could not be stored; the next run collects it",
    );
    return "left";
  }
}
