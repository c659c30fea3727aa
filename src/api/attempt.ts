// One HTTP attempt, the same for every kind of request (an API call, an upload to a signed URL, a
// result download): send, read what came back within bounds, write one debug line, and turn a
// failure into the ClapperApiError its status and body call for.
import type { Readable } from "node:stream";
import { type Dispatcher, request } from "undici";
import { type ClapperApiError, errorFromResponse, ServiceError } from "./errors.js";
import { redact } from "./redact.js";
import { parseRetryAfter } from "./retry.js";

/** API answers are small JSON documents; anything this large is not one. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/** Of a failed download's body only the first words matter. */
const MAX_ERROR_BYTES = 64 * 1024;

/** What an attempt sends, and how it reads the answer. */
export interface Exchange {
  url: string;
  method: string;
  /** What the debug line names: never the query, which may hold a URL's signature. */
  path: string;
  headers: Record<string, string>;
  /** Called for each attempt: a stream can be read only once. */
  body?: () => string | Readable;
  dispatcher: Dispatcher;
  /** Names the call in messages: "create video task". */
  what: string;
  /**
   * "document": the answer is read whole (bounded) and parsed, and an API answer (`api`) with a
   * RetCode is a business error even with a 2xx. "stream": a success's body is handed on unread,
   * bounded by undici's timeouts between chunks instead.
   */
  answer: "document" | "stream";
  api?: boolean;
  /**
   * A "stream" exchange: a redirect with a Location is an answer (`location`, its body dropped),
   * for the caller to follow through its own checks; otherwise a redirect is a failure.
   */
  redirects?: boolean;
  /** Whether the attempt's debug line would be written at all (building it costs). */
  debugging(): boolean;
  log(line: object): void;
  /** Told of every answer's Date header: the service's clock. */
  onDate?(header: string | string[] | undefined): void;
  timeoutMs?: number;
}

/** An answer that is not a failure. `body` is parsed, or the unread stream of a "stream" exchange. */
interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  requestId: string | undefined;
  /** Where a redirect points (an exchange with `redirects`); `body` is then undefined. */
  location?: string;
}

/** The redirects a result download follows: the ones that repeat the GET elsewhere. */
const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** Sends one attempt; throws the ClapperApiError of an answer that is a failure. */
export async function sendAttempt(
  x: Exchange,
  attempt: number,
  signal: AbortSignal,
  started: number,
): Promise<Reply> {
  const res = await request(x.url, {
    method: x.method as Dispatcher.HttpMethod,
    headers: x.headers,
    dispatcher: x.dispatcher,
    signal,
    ...(x.body ? { body: x.body() } : {}),
    ...(x.answer === "stream" ? { headersTimeout: x.timeoutMs, bodyTimeout: x.timeoutMs } : {}),
  });
  const status = res.statusCode;
  const ok = status >= 200 && status < 300;
  const headerId = firstHeader(res.headers["x-request-id"]);
  const line = (requestId: string | undefined, durationMs: number) => {
    if (x.debugging())
      x.log({
        method: x.method,
        path: x.path,
        status,
        durationMs: Math.round(durationMs),
        attempt,
        requestId,
      });
  };
  if (x.answer === "stream") {
    // Logged as soon as the answer starts: a body may flow for long after.
    line(headerId, performance.now() - started);
    if (ok) return { status, headers: res.headers, body: res.body, requestId: headerId };
    const location = firstHeader(res.headers.location);
    if (x.redirects && REDIRECTS.has(status) && location) {
      await res.body.dump({ limit: MAX_ERROR_BYTES }).catch(() => undefined);
      return { status, headers: res.headers, body: undefined, requestId: headerId, location };
    }
    const text = redact(await readBounded(res.body, MAX_ERROR_BYTES, x.what, true)).slice(0, 2000);
    throw failure(x, status, res.headers, parseBody(text), headerId, headerId) as ClapperApiError;
  }
  // Whatever the service says is untrusted: bounded, and stripped of the key if it echoes it.
  const text = redact(await readBounded(res.body, MAX_ANSWER_BYTES, x.what));
  x.onDate?.(res.headers.date);
  const body = parseBody(text);
  const requestId = requestIdOf(body) ?? headerId;
  line(requestId, performance.now() - started);
  // A success without a RetCode cannot be a business error: its body is parsed once, by the
  // answer's own schema, not first by the error schema too.
  if (ok && !(x.api && hasRetCode(body))) return { status, headers: res.headers, body, requestId };
  const error = failure(x, status, res.headers, body, headerId, requestId);
  // An API answer's 2xx with RetCode 0 is a success after all.
  if (!error) return { status, headers: res.headers, body, requestId };
  throw error;
}

/** The error of an answer; undefined only for a 2xx that is no business error. */
function failure(
  x: Exchange,
  status: number,
  headers: Record<string, string | string[] | undefined>,
  body: unknown,
  headerId: string | undefined,
  requestId: string | undefined,
): ClapperApiError | undefined {
  const error = errorFromResponse(status, body, headerId, parseRetryAfter(headers), x.what);
  if (error || (status >= 200 && status < 300)) return error;
  return new ServiceError(`${x.what}: HTTP ${status}`, status, requestId, undefined);
}

/**
 * Reads a body up to `max` bytes. Past it, an API answer is refused (the connection is dropped);
 * an error body (`truncate`) is cut, since only its first words matter.
 */
async function readBounded(body: Readable, max: number, what: string, truncate = false): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const buffer = chunk as Buffer;
    size += buffer.length;
    if (size > max) {
      body.destroy();
      if (truncate) {
        chunks.push(buffer.subarray(0, buffer.length - (size - max)));
        break;
      }
      throw new ServiceError(
        `${what}: the answer is larger than ${max} bytes; refused`,
        200,
        undefined,
        undefined,
      );
    }
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function parseBody(text: string): unknown {
  if (text === "") return undefined;
  try {
    return JSON.parse(text);
  } catch {
    // Downstream HTTP errors may be plain text or HTML; keep the text for the message.
    return text;
  }
}

/** Whether an answer carries the RetCode of the business-error shape (BusinessErrorBody). */
function hasRetCode(body: unknown): boolean {
  return typeof body === "object" && body !== null && "RetCode" in body;
}

function requestIdOf(body: unknown): string | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const b = body as { request_id?: unknown; request_uuid?: unknown };
  const id = b.request_id ?? b.request_uuid;
  return typeof id === "string" ? id : undefined;
}

export function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
