// Retry policy as data, and pure functions over it, so the behaviour is testable without a clock:
// which failures are worth another attempt, and how long to wait before it.
import { BusyError, ClapperApiError, ConnectionError, ResultUrlError, TimeoutError } from "./errors.js";

export interface RetryPolicy {
  /** Retries after the first attempt; 0 disables retrying. */
  maxRetries: number;
  /** First backoff; doubles each retry up to maxDelayMs. */
  baseDelayMs: number;
  maxDelayMs: number;
  /**
   * A Retry-After longer than this is not slept inside the request: the RateLimitError reaches the
   * caller with the wait, so a scheduler can pause a whole service instead of one blocked call.
   */
  maxRetryAfterMs: number;
  /**
   * Whether a failure after the request may have reached the service (a dropped connection, a 5xx)
   * is retried. Safe for reads and for creates that carry an Idempotency-Key; not for other writes.
   */
  retryAmbiguous: boolean;
}

export type PolicyName = "read" | "create" | "write";

export const DEFAULT_POLICIES: Readonly<Record<PolicyName, RetryPolicy>> = {
  read: { maxRetries: 8, baseDelayMs: 250, maxDelayMs: 8000, maxRetryAfterMs: 30_000, retryAmbiguous: true },
  // Creates always carry an Idempotency-Key, so repeating one returns the task created before.
  create: {
    maxRetries: 8,
    baseDelayMs: 500,
    maxDelayMs: 10_000,
    maxRetryAfterMs: 30_000,
    retryAmbiguous: true,
  },
  // Writes without idempotency (skill create) are retried only when the service surely did nothing.
  write: {
    maxRetries: 4,
    baseDelayMs: 500,
    maxDelayMs: 8000,
    maxRetryAfterMs: 30_000,
    retryAmbiguous: false,
  },
};

/** Statuses worth another attempt: timeouts, conflicts, rate limits and server errors. */
function isRetryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

/**
 * Statuses at which the service did nothing, so even a non-idempotent write may be repeated.
 * 429 comes from a limiter in front of the service.
 */
function isRefusedBeforeWork(status: number): boolean {
  return status === 429;
}

/**
 * Milliseconds to wait before retry number `retry` (1-based). A server's Retry-After wins;
 * otherwise exponential backoff with "equal jitter" (half fixed, half random) so that many
 * clients that failed together do not retry together.
 */
export function retryDelay(
  policy: RetryPolicy,
  retry: number,
  retryAfterMs: number | undefined,
  random: () => number = Math.random,
): number {
  if (retryAfterMs !== undefined) return Math.max(0, retryAfterMs);
  const exp = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** Math.max(0, retry - 1));
  return Math.round(exp / 2 + random() * (exp / 2));
}

/** IMF-fixdate, RFC 850 and asctime (RFC 9110 section 5.6.7): a day name, then a time of day. */
const HTTP_DATE = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,?\s.*\b\d{2}:\d{2}:\d{2}\b/i;

/**
 * Parses `Retry-After` (delta seconds or an HTTP date) and the non-standard `retry-after-ms`.
 * Returns undefined when absent or unreadable.
 */
export function parseRetryAfter(
  headers: Record<string, string | string[] | undefined>,
  now: number = Date.now(),
): number | undefined {
  const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);
  const ms = one(headers["retry-after-ms"]);
  if (ms !== undefined && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.ceil(Number(ms));
  const value = one(headers["retry-after"])?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000);
  // Date.parse is lenient ("-5" and "abc 12" are dates to it): only an HTTP-date shape is read,
  // so garbage means "not said" (backoff) rather than "retry at once".
  if (!HTTP_DATE.test(value)) return undefined;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Connection failures where the request certainly never reached the service. */
const NOT_SENT = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "UND_ERR_CONNECT_TIMEOUT",
  "EHOSTUNREACH",
]);

/** Failures of the request itself (an invalid header or URL): no attempt can succeed. */
const NOT_SENDABLE = new Set([
  "UND_ERR_INVALID_ARG",
  "ERR_INVALID_URL",
  "ERR_INVALID_ARG_TYPE",
  "ERR_INVALID_ARG_VALUE",
]);

/**
 * What a failed attempt means: the error to retry (and whether it surely did nothing), or thrown
 * when no retry can help. `origin` and `timeoutMs` name what failed in the message.
 */
export function classifyFailure(
  error: unknown,
  what: string,
  origin: string,
  timeoutMs: number,
): { failure: ClapperApiError; sureNotDone: boolean } {
  if (error instanceof ClapperApiError) {
    // 408 arrives as a TimeoutError: worth retrying like a lost answer.
    const retryable =
      error instanceof BusyError ||
      (error.status === undefined ? error instanceof ConnectionError : isRetryableStatus(error.status));
    if (!retryable) throw error;
    return { failure: error, sureNotDone: error.status !== undefined && isRefusedBeforeWork(error.status) };
  }
  const code = errorCode(error);
  // A result host that resolves to no public address: refused by policy, not a fault.
  if (code === "ENOTPUBLIC") {
    throw new ResultUrlError(`${what}: ${(error as Error).message}`, { cause: error });
  }
  if (code !== undefined && NOT_SENDABLE.has(code)) {
    // The request itself is malformed (a header undici refuses): repeating it cannot help.
    throw new ConnectionError(`${what}: the request could not be sent (${(error as Error).message})`, {
      cause: error,
    });
  }
  const failure = timedOut(error, code)
    ? new TimeoutError(`${what}: no answer within ${timeoutMs} ms`, { cause: error })
    : new ConnectionError(`${what}: connection to ${origin} failed (${code ?? (error as Error).message})`, {
        cause: error,
      });
  return { failure, sureNotDone: code !== undefined && NOT_SENT.has(code) };
}

export function errorCode(error: unknown): string | undefined {
  const e = error as { code?: unknown; cause?: { code?: unknown } };
  const code = e.code ?? e.cause?.code;
  return typeof code === "string" ? code : undefined;
}

function timedOut(error: unknown, code: string | undefined): boolean {
  return (
    (error as Error).name === "TimeoutError" ||
    code === "UND_ERR_HEADERS_TIMEOUT" ||
    code === "UND_ERR_BODY_TIMEOUT"
  );
}

/** A wait as a person reads it: `45 s`, `12 min`, `5 h`, `1157 days`. */
export function waitText(ms: number): string {
  if (!Number.isFinite(ms)) return "an unbounded time";
  const s = ms / 1000;
  if (s < 120) return `${Math.ceil(s)} s`;
  if (s < 120 * 60) return `${Math.round(s / 60)} min`;
  if (s < 48 * 3600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} days`;
}
