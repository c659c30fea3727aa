// A paid result's download: an expired URL is read again through its task, a broken transfer is
// downloaded again, within a number of tries and a time for answers; never a transfer cut.
import { setTimeout as sleep } from "node:timers/promises";
import { ClapperApiError, type Clients, ResultUrlError } from "../api/index.js";
import type { Job } from "../manifest/index.js";
import { outputKey } from "../manifest/outputs.js";
import { MediaCheckError, ResultTooLargeError } from "../media/errors.js";
import { DownloadFailedError, DownloadTimeUpError, DownloadTrail, storeResult } from "../results/collect.js";
import { resultLimit } from "../results/size-policy.js";
import { type ServiceTask, serviceFor } from "../services/index.js";
import type { Written } from "../sinks/sink.js";
import { errorInfo, ResultUrlMissingError } from "./errors.js";
import type { JobContext } from "./job-context.js";
import { keeper } from "./versions.js";

/** Downloads of one result in one run: an expired URL or a broken transfer is tried again. */
const COLLECT_TRIES = 3;
/**
 * Time a result's tries may spend getting an answer (the HTTP layer's backoff included; never a
 * transfer under way). A result host that answers errors this long fails the job rather than
 * holding the run: its points are spent either way, and --retry-failed downloads it again.
 */
const COLLECT_BUDGET_MS = 20_000;
/** The pause after a result's first failed try; doubled after each. */
const COLLECT_PAUSE_MS = 500;

/**
 * Stores a succeeded task's result, trying again within limits, and hands it to `stored` once
 * stored and checked (a failure there is tried again too: the file may be stored again).
 */
export async function downloadResult(
  c: JobContext,
  job: Job,
  task: ServiceTask,
  stored: (written: Written & { seconds?: number }) => Promise<void>,
): Promise<void> {
  const service = serviceFor(job.kind);
  const taskId = service.id(task);
  let url = service.resultUrl(task);
  const expectedSeconds = service.expectedSeconds(job);
  const key = outputKey(job);
  const beforeReplace = keeper(c, job, key);
  const spec = {
    id: job.id,
    kind: job.kind,
    key,
    ...(beforeReplace ? { beforeReplace } : {}),
    maxBytes: c.maxResultBytes ?? resultLimit(service.resultLimit(job)),
    metadata: { job: job.id, task: taskId, fingerprint: job.fingerprint },
    ...(expectedSeconds !== undefined ? { expectedSeconds } : {}),
  };
  const trail = new DownloadTrail(COLLECT_BUDGET_MS);
  for (let tries = 1; ; tries++) {
    try {
      if (!url) url = await freshUrl(c.clients, job, taskId, c.signal);
      const http = c.clients.http;
      const written = await storeResult(http, c.sink, url, spec, c.signal, trail);
      await stored(written);
      return;
    } catch (error) {
      tryAgainOrThrow(c.signal, error, { tries, hadUrl: url !== undefined, trail, taskId });
      if (needsFreshUrl(error)) url = undefined;
      const waitMs = COLLECT_PAUSE_MS * 2 ** (tries - 1);
      c.log.warn(
        {
          job: job.id,
          event: "download-retry",
          try: tries,
          next_delay_ms: waitMs,
          error: errorInfo(error),
        },
        `the result of ${job.id} could not be stored (try ${tries} of ${COLLECT_TRIES}); trying again in ${waitMs / 1000} s`,
      );
      // Spaced: a result host or a proxy that broke one transfer is given time to recover.
      await sleep(waitMs, undefined, { signal: c.signal }).catch(() => undefined);
      if (c.signal.aborted) throw c.signal.reason;
    }
  }
}

/** Throws what ends a result's tries; returns when the failed try may be made again. */
function tryAgainOrThrow(
  signal: AbortSignal,
  error: unknown,
  at: { tries: number; hadUrl: boolean; trail: DownloadTrail; taskId: string },
): void {
  const { tries, trail } = at;
  // Too large is not cured by asking again; neither is an interrupt, nor a task that cannot
  // be read (the HTTP layer has retried that already).
  if (signal.aborted || error instanceof ResultTooLargeError) throw error;
  if (!at.hadUrl && !(error instanceof ResultUrlMissingError)) throw error;
  if (error instanceof ResultUrlMissingError && tries >= COLLECT_TRIES)
    throw new ResultUrlMissingError(`${error.message} (read ${tries} times)`);
  if (tries >= COLLECT_TRIES || trail.spent || error instanceof DownloadTimeUpError)
    throw givenUp(at.taskId, trail, error);
}

/** An expired or refused URL is fetched again through the task; a broken file is downloaded again. */
function needsFreshUrl(error: unknown): boolean {
  const expired =
    error instanceof ClapperApiError &&
    (error.status === 403 || error.status === 404 || error.status === 410);
  return expired || error instanceof MediaCheckError || error instanceof ResultUrlError;
}

/**
 * What the tries of a result end in: a DownloadFailedError when the host answered them with an
 * error status (the time for tries may have run out after such answers), else the error as it came.
 */
function givenUp(taskId: string, trail: DownloadTrail, error: unknown): unknown {
  const answered =
    error instanceof DownloadTimeUpError || (error instanceof ClapperApiError && error.status !== undefined);
  return answered && trail.status !== undefined && trail.status >= 400
    ? new DownloadFailedError(taskId, trail)
    : error;
}

async function freshUrl(clients: Clients, job: Job, taskId: string, signal: AbortSignal): Promise<string> {
  const service = serviceFor(job.kind);
  const task = await service.getPaid(clients, taskId, signal);
  const url = service.resultUrl(task);
  if (!url)
    throw new ResultUrlMissingError(
      `task ${taskId} (${job.id}) is ${service.status(task)} but gave no result URL${service.retention}; its points are spent: the next run reads it again`,
    );
  return url;
}
