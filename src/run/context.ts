// What every stage of one run shares: its options and seams, why it may stop (the Halt), the stop
// every job listens to, the logger, and the resources to give back, in reverse order of taking.
import { setMaxListeners } from "node:events";
import { copyFile, mkdir, stat } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "pino";
import { ConnectionError, isUnavailable, ServiceError } from "../api/index.js";
import { redactDeep } from "../api/redact.js";
import type { VideoTask } from "../api/video.js";
import { LocalLedger } from "../budget/ledger.js";
import { acquireLock } from "../locks/file-lock.js";
import type { Job } from "../manifest/index.js";
import type { StillsAsStored } from "../review/stills.js";
import { serviceFor } from "../services/index.js";
import { Journal } from "../state/journal.js";
import { isS3State } from "../state/location.js";
import { repairJournalFile } from "../state/repair.js";
import { applyRecord, initialState, type RunRecord, type RunState } from "../state/run-state.js";
import { errorInfo } from "./errors.js";
import type { ProgressFeed } from "./feed.js";
import type { Halt } from "./halt.js";
import { outputs } from "./outputs.js";
import type { RunOptions, RunOutcome, Seams, StateStore } from "./types.js";

/** How long a service may answer nothing but 5xx and 429 before the run stops for it (it ends `unreachable`). */
const REFUSING_MS = 60_000;

/** The folder of the run's state cannot be made: a setting to fix (the run ends `refused`), not a bug. */
export class StateFolderError extends Error {
  override name = "StateFolderError";
}

/** Today's seams: a lease file, the journal file, a ledger in this process, the folder or S3. */
export const DEFAULT_SEAMS: Seams = {
  async lock(path, options) {
    // A state in S3 has no folder for a lock file; its lock is the coordinator's.
    if (isS3State(path)) {
      throw new StateFolderError(
        `--state ${path.replace(/\.lock$/, "")}: a state in S3 is locked through the coordinator: pass --coordinator redis://HOST:PORT (or set CLAPPER_REDIS_URL)`,
      );
    }
    try {
      await mkdir(dirname(path), { recursive: true });
    } catch (error) {
      throw new StateFolderError(
        `cannot create the state folder ${dirname(path)}: ${errorInfo(error).message}`,
        { cause: error },
      );
    }
    return acquireLock(path, options);
  },
  async openState(path, options) {
    if (isS3State(path)) {
      const { openS3State } = await import("../state/store.js");
      return openS3State(path, options);
    }
    if (options?.repair) {
      const repaired = await repairJournalFile(path, options.repair);
      if (repaired) options.repair.onRepaired?.(repaired);
    }
    const journal = await Journal.open<RunState, RunRecord>({
      path,
      initial: initialState,
      apply: applyRecord,
      // Records quote the services (error messages): whatever they echo, no secret reaches the disk.
      sanitize: redactDeep,
    });
    return Object.assign(journal, { keepCopy: () => keepCopy(path) });
  },
  ledger: ({ cap, openReserved }) => new LocalLedger(cap, openReserved),
  outputs,
};

/**
 * Before `--fresh` changes the state, a copy of it as it was, timestamped: every earlier state is
 * kept (the journal also keeps every attempt, so nothing a task cost is forgotten).
 */
async function keepCopy(statePath: string): Promise<void> {
  const info = await stat(statePath).catch(() => undefined);
  if (!info || info.size === 0) return;
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  await copyFile(statePath, `${statePath}.before-fresh-${stamp}`);
}

/** Whether a job is one of `--only`'s: a job id, a row id, an id prefix, or `shot/ROW`. */
export function matchesOnly(job: Job, only: readonly string[]): boolean {
  return only.some(
    (o) =>
      job.id === o ||
      job.rowId === o ||
      job.id.startsWith(`${o}/`) ||
      `${serviceFor(job.kind).row}/${job.rowId}` === o ||
      // One take without its kind: `s03/take-2` is `shot/s03/take-2`.
      `${serviceFor(job.kind).row}/${o}` === job.id,
  );
}

/** The ids and rows an `--only` could have meant, for a "did you mean" when one matches nothing. */
export function onlyChoices(jobs: readonly Job[]): string[] {
  const choices = new Set<string>();
  for (const job of jobs) {
    choices.add(job.id);
    choices.add(job.rowId);
    const row = `${serviceFor(job.kind).row}/`;
    if (job.id.startsWith(row) && job.id.slice(row.length) !== job.rowId)
      choices.add(job.id.slice(row.length));
  }
  return [...choices];
}

export class RunContext {
  readonly seams: Seams;
  readonly cwd: string;
  /** The user's stop, the deadline, or an unreachable service: every wait of the run ends here. */
  readonly signal: AbortSignal;
  /** Every request of every job listens here: the signal, a lost lock, or a broken state. */
  readonly stop = new AbortController();
  /** The review page's stills, made as videos are stored; settled before the reports are written. */
  stills: StillsAsStored | undefined;
  /** The run's logger; once admitted, a child carrying the run's name and id. */
  log: Logger;
  /** A state write failed (a full disk): going on would lose track of what was paid for. */
  broken: Error | undefined;
  /** Set once the state is open: a lost lock freezes it. */
  store: StateStore | undefined;
  /** Where the callback listener hands a task's news, once the jobs run (the video poller). */
  onCallback: ((task: VideoTask) => void) | undefined;
  private readonly releases: Array<() => Promise<unknown> | unknown> = [];

  constructor(
    readonly options: RunOptions,
    readonly halt: Halt,
    readonly feed: ProgressFeed,
  ) {
    this.seams = { ...DEFAULT_SEAMS, ...options.seams };
    this.cwd = options.cwd ?? process.cwd();
    this.signal = halt.signal;
    this.log = options.logger;
    // Thousands of requests listen to the stop at once.
    setMaxListeners(0, this.stop.signal);
    const onAbort = () => this.stop.abort(this.signal.reason);
    this.signal.addEventListener("abort", onAbort, { once: true });
    this.defer(() => this.signal.removeEventListener("abort", onAbort));
    // A stop that came before this listener: passed on now.
    if (this.signal.aborted) onAbort();
  }

  /** Gives `release` back when the run ends, after everything taken later (reverse order). */
  defer(release: () => Promise<unknown> | unknown): void {
    this.releases.push(release);
  }

  /** Ends every job's requests, then gives back what was taken, last first. A failure in one does not skip the rest. */
  async release(): Promise<void> {
    this.stop.abort();
    for (const release of this.releases.reverse()) {
      try {
        await release();
      } catch (error) {
        this.log.warn({ event: "release-failed", error: errorInfo(error) }, "could not release a resource");
      }
    }
    this.releases.length = 0;
  }

  readonly fail = (error: unknown): void => {
    if (this.broken) return;
    this.broken = error as Error;
    this.log.error(
      { event: "state-write-failed", error: errorInfo(error) },
      "the run's state could not be written; stopping",
    );
    this.stop.abort(error);
  };

  /**
   * A call failed after every retry of the HTTP layer. No connection at all for that long: the
   * service (or the store, or a result host) is gone, and the run stops (it ends `unreachable`). A 5xx or a 429 is
   * a service that answers: one bad task or one long Retry-After is not a reason to stop the others,
   * so only a service that has served nothing for REFUSING_MS stops the run.
   */
  readonly unavailable = (error: unknown): void => {
    const gone = error instanceof ConnectionError;
    const refusing =
      isUnavailable(error) && Date.now() - this.options.clients.http.lastServedAt > REFUSING_MS;
    if (gone || refusing) this.halt.unreachable(error);
  };

  /** How a run that stopped early says so, when it stopped before submitting anything. */
  stoppedEarly(statePath?: string): RunOutcome {
    const halt = this.halt;
    return {
      end: halt.end,
      ...(halt.by && halt.by !== "signal" ? { stoppedBy: halt.by } : {}),
      message:
        halt.by === "signal"
          ? "interrupted before anything was submitted"
          : `${halt.message ?? "stopped"}; nothing was submitted`,
      ...(statePath ? { statePath } : {}),
    };
  }

  /** An error no stage handled: a stop or an unreachable service is an outcome, anything else a bug. */
  caught(error: unknown, statePath: string | undefined): RunOutcome {
    if (!this.signal.aborted && isUnavailable(error)) this.halt.unreachable(error);
    if (this.signal.aborted) {
      return { ...this.stoppedEarly(statePath), message: this.halt.message ?? "interrupted" };
    }
    // A service's answer its specification does not allow (a malformed pricing answer): the
    // service's fault (`unreachable`), state saved; never taken for a bug of clapper's, nor the manifest's.
    if (error instanceof ServiceError) {
      return {
        end: "unreachable",
        message: `a service gave an answer its specification does not allow: ${error.message}; state saved; run again once it answers as documented`,
        ...(statePath ? { statePath } : {}),
      };
    }
    throw error;
  }
}
