// How the run reads an error: what a journal record and a log line say of it, whether a create was
// refused (nothing made, nothing owed), and whether a collection failure fails the job or waits.
import {
  ClapperApiError,
  InsufficientPointsError,
  RateLimitError,
  ResultUrlError,
  ServiceError,
  ValidationError,
} from "../api/index.js";
import { MediaCheckError, ResultTooLargeError } from "../media/errors.js";
import { DownloadFailedError, ResultTransferError } from "../results/collect.js";
import { OutputError } from "../sinks/sink.js";

export function errorInfo(error: unknown): { code: string; message: string } {
  if (error instanceof ClapperApiError)
    return { code: String(error.code ?? error.name), message: error.message };
  return { code: (error as Error).name ?? "Error", message: (error as Error).message ?? String(error) };
}

/**
 * A succeeded task read without its result URL: a service between stages (the URL comes a moment
 * later) or a result past its retention. Paid for either way: looked at again, never failed for it.
 */
export class ResultUrlMissingError extends Error {
  override name = "ResultUrlMissingError";
}

/**
 * The service said no to a create: nothing was made, so nothing is owed (a 429 is "later", not
 * "no"; a 5xx or a lost answer may have made the task).
 */
export function refused(error: unknown): boolean {
  return (
    error instanceof ValidationError ||
    error instanceof InsufficientPointsError ||
    (error instanceof ClapperApiError &&
      error.status !== undefined &&
      error.status < 500 &&
      // A 429 or a "busy" answer is "later"; a 2xx that cannot be read may have made the task.
      !(error instanceof RateLimitError) &&
      !(error instanceof ServiceError))
  );
}

/** The error a collection failure fails its job with; undefined when the job is to wait instead. */
export function collectionFailure(error: unknown): { code: string; message: string } | undefined {
  if (error instanceof DownloadFailedError) {
    return {
      code: "download_failed",
      message: `${error.message}; its points were spent: the next run downloads it again, at no cost`,
    };
  }
  if (error instanceof MediaCheckError && !(error instanceof ResultTooLargeError))
    return { code: "result_invalid", message: error.message };
  return undefined;
}

/** The code a collection that is left for a later run is journalled with. */
export function collectionProblem(error: unknown): string {
  return error instanceof ResultTooLargeError
    ? "result_too_large"
    : error instanceof ResultUrlError
      ? "result_url_refused"
      : error instanceof ResultUrlMissingError
        ? "result_url_missing"
        : "collect_failed";
}

/** Network failures of the store's client (the AWS SDK passes Node's codes through). */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EPIPE",
]);

/** The store could not be reached (as opposed to refusing this one object). */
export function unreachableStore(error: unknown): boolean {
  if (error instanceof OutputError) return error.unreachable;
  // A result host that broke one transfer off is not the store, and not down.
  if (error instanceof ResultTransferError) return false;
  for (let e = error as { code?: unknown; cause?: unknown } | undefined, depth = 0; e && depth < 5; depth++) {
    if (typeof e.code === "string" && NETWORK_CODES.has(e.code)) return true;
    e = e.cause as typeof e;
  }
  return false;
}

/** Why two jobs whose creates the service answered with one task id both fail. */
export function sharedError(
  jobId: string,
  taskId: string,
  holder: string,
): { code: string; message: string } {
  return {
    code: "task_id_shared",
    message: `the service answered the create of ${jobId} with task ${taskId}, which it had given to ${holder} already: neither can tell whose request it ran, so both fail; run with --retry-failed to create new tasks`,
  };
}
