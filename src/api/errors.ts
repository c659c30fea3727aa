// A small hierarchy of API errors, chosen by HTTP status and body shape (as the Stainless SDKs do).
// Every error carries the service's request id when there is one. None ever carries the API key.
import { BusinessErrorBody } from "./common.js";

export interface ApiErrorOptions {
  cause?: unknown;
  /** What the service asked us to wait before trying again (`Retry-After`), when it said. */
  retryAfterMs?: number | undefined;
}

export class ClapperApiError extends Error {
  override name = "ClapperApiError";
  /** What the service asked us to wait before trying again (`Retry-After`), when it said. */
  readonly retryAfterMs: number | undefined;
  constructor(
    message: string,
    /** HTTP status; undefined when no answer arrived. */
    readonly status: number | undefined,
    /** `request_id` or `request_uuid` from the body, else the `x-request-id` header. */
    readonly requestId: string | undefined,
    /** `RetCode` of business errors, `error.type` of validation-shaped errors. */
    readonly code: string | number | undefined,
    options: ApiErrorOptions = {},
  ) {
    super(
      requestId ? `${message} (request ${requestId})` : message,
      options.cause !== undefined ? { cause: options.cause } : undefined,
    );
    this.retryAfterMs = options.retryAfterMs;
  }
}

/** 400: the service refused the request's format or parameters; fixing the request is the only cure. */
export class ValidationError extends ClapperApiError {
  override name = "ValidationError";
}
/** 401: the key was missing, wrong or revoked. */
export class AuthenticationError extends ClapperApiError {
  override name = "AuthenticationError";
}
export class PermissionError extends ClapperApiError {
  override name = "PermissionError";
}
export class NotFoundError extends ClapperApiError {
  override name = "NotFoundError";
}
export class ConflictError extends ClapperApiError {
  override name = "ConflictError";
}
/** 429. `retryAfterMs` is the wait the service asked for, when it said. */
export class RateLimitError extends ClapperApiError {
  override name = "RateLimitError";
  constructor(
    message: string,
    status: number | undefined,
    requestId: string | undefined,
    code: string | number | undefined,
    retryAfterMs: number | undefined,
  ) {
    super(message, status, requestId, code, { retryAfterMs });
  }
}
/** The points balance cannot cover the task: nothing was created. */
export class InsufficientPointsError extends ClapperApiError {
  override name = "InsufficientPointsError";
}
/** A business error in the `{RetCode, Message}` shape that fits no narrower class. */
export class BusinessError extends ClapperApiError {
  override name = "BusinessError";
}
/** 5xx, and 2xx answers that do not match the documented schema. */
export class ServiceError extends ClapperApiError {
  override name = "ServiceError";
}
/**
 * A business error that says "not now" (busy, overloaded, timed out, try again): the request may be
 * repeated as it was, and a create carrying its Idempotency-Key is answered with the one task it
 * made, if any. Retried like a 503; after every retry the service is unavailable, not refusing.
 */
export class BusyError extends ServiceError {
  override name = "BusyError";
}
/** No (usable) answer arrived: refused, reset or dropped connections. */
export class ConnectionError extends ClapperApiError {
  override name = "ConnectionError";
  constructor(
    message: string,
    options: ApiErrorOptions & { status?: number; requestId?: string | undefined } = {},
  ) {
    super(message, options.status, options.requestId, undefined, options);
  }
}
/** No answer within the timeout of an attempt, or the service's own 408. */
export class TimeoutError extends ConnectionError {
  override name = "TimeoutError";
}
/** The caller's AbortSignal fired. */
export class AbortedError extends Error {
  override name = "AbortedError";
  constructor(
    message: string,
    /**
     * Whether an attempt of the request may have reached the service before the abort. False only
     * when no attempt was ever started (it was still waiting for its turn): then a create certainly
     * made nothing, and its intent can be taken back.
     */
    readonly maybeSent = true,
  ) {
    super(message);
  }
}

/** A result URL the client will not fetch: not http(s), or at a non-public address. */
export class ResultUrlError extends Error {
  override name = "ResultUrlError";
}

// The specs show no RetCode values, so business errors are also recognised by their message.
// Only an explicit shortage counts: "balance service unreachable" is not a lack of points.
const INSUFFICIENT =
  /insufficient (points|balance|credits?|funds)|(points|balance|credits?) (is |are )?(insufficient|not enough|too low)|not enough (points|credits?|balance)|余额不足|积分不足|点数不足/i;
const MISSING = /not found|does not exist|no such|not exist|不存在/i;
// "Not now", in the words services use: the spec's own "creation timeout" (retry with the same
// Idempotency-Key) among them. Only words that say the service itself is loaded or late count:
// "unavailable", "temporary" or "please try again" also end refusals of the request itself.
const BUSY = /\b(busy|overload(ed)?|throttl(ed|ing)|timed out|time-?out)\b|系统繁忙|服务繁忙|超时/i;

/** The parts of an error body worth reporting, read loosely: services drift from their documented shapes. */
function describeBody(body: unknown): { message?: string; type?: string; requestId?: string } {
  if (typeof body === "string") return body.trim() ? { message: body.trim().slice(0, 200) } : {};
  if (typeof body !== "object" || body === null) return {};
  const b = body as Record<string, unknown>;
  const inner = typeof b.error === "object" && b.error !== null ? (b.error as Record<string, unknown>) : {};
  const text = (v: unknown) => (typeof v === "string" && v !== "" ? v : undefined);
  const message = text(inner.message) ?? text(b.message) ?? text(b.Message) ?? text(b.error);
  const type = text(inner.type) ?? text(b.code);
  const requestId = text(b.request_id) ?? text(b.request_uuid);
  return {
    ...(message !== undefined ? { message: message.slice(0, 500) } : {}),
    ...(type !== undefined ? { type } : {}),
    ...(requestId !== undefined ? { requestId } : {}),
  };
}

/**
 * Classifies an answer. Returns undefined for a success: a 2xx whose body is not a business error
 * (an HTTP 200 with a non-zero RetCode is a failure, as the speech spec says).
 */
export function errorFromResponse(
  status: number,
  body: unknown,
  headerRequestId: string | undefined,
  retryAfterMs: number | undefined,
  what: string,
): ClapperApiError | undefined {
  const wait = { retryAfterMs };
  const business = BusinessErrorBody.safeParse(body);
  if (business.success) {
    const { RetCode, Message, request_uuid } = business.data;
    if (RetCode === 0 && status < 300) return undefined;
    const id = request_uuid ?? describeBody(body).requestId ?? headerRequestId;
    const message = `${what}: ${Message || `business error ${RetCode}`}`;
    if (INSUFFICIENT.test(Message)) return new InsufficientPointsError(message, status, id, RetCode);
    if (status === 404) return new NotFoundError(message, status, id, RetCode);
    if (status === 401)
      return new AuthenticationError(`${what}: the API key was refused (${Message})`, status, id, RetCode);
    if (status === 403) return new PermissionError(message, status, id, RetCode);
    if (status === 429) return new RateLimitError(message, status, id, RetCode, retryAfterMs);
    if (status >= 500) return new ServiceError(message, status, id, RetCode, wait);
    if (MISSING.test(Message)) return new NotFoundError(message, status, id, RetCode);
    if (BUSY.test(Message)) return new BusyError(message, status, id, RetCode, wait);
    if (status === 409) return new ConflictError(message, status, id, RetCode, wait);
    return new BusinessError(message, status, id, RetCode);
  }
  if (status < 300) return undefined;

  const described = describeBody(body);
  const id = described.requestId ?? headerRequestId;
  const code = described.type;
  const detail = described.message ? `: ${described.message}` : "";
  switch (true) {
    case status === 400:
      return new ValidationError(`${what} was refused${detail}`, status, id, code);
    case status === 401:
      return new AuthenticationError(`${what}: the API key was refused (HTTP 401)`, status, id, code);
    case status === 403:
      return new PermissionError(`${what}: not permitted${detail}`, status, id, code);
    case status === 404:
      return new NotFoundError(`${what}: not found${detail}`, status, id, code);
    case status === 408:
      return new TimeoutError(`${what}: the service timed out (HTTP 408)${detail}`, {
        status,
        requestId: id,
        retryAfterMs,
      });
    case status === 409:
      return new ConflictError(`${what}: conflict${detail}`, status, id, code, wait);
    case status === 429:
      return new RateLimitError(`${what}: rate limited (HTTP 429)${detail}`, status, id, code, retryAfterMs);
    case status >= 500:
      return new ServiceError(`${what}: service error (HTTP ${status})${detail}`, status, id, code, wait);
    case status >= 300 && status < 400:
      // An endpoint must answer where it was asked. (A result download follows a redirect itself,
      // checking each address as it checked the first: HttpClient.download.)
      return new ClapperApiError(
        `${what}: HTTP ${status}, a redirect, which is not followed (the answer must come from the address given)${detail}`,
        status,
        id,
        code,
      );
    default:
      return new ClapperApiError(`${what}: HTTP ${status}${detail}`, status, id, code);
  }
}

/**
 * The service could not be reached or would not serve, after the HTTP layer's own retries: no
 * answer, a timeout, a 5xx, or a rate limit that outlasted them. Nothing the caller did wrong; the
 * same request later may well succeed.
 */
export function isUnavailable(error: unknown): error is ClapperApiError {
  if (error instanceof ConnectionError || error instanceof RateLimitError || error instanceof BusyError)
    return true;
  return error instanceof ServiceError && error.status !== undefined && error.status >= 500;
}
