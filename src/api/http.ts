// The one HTTP layer every call to both services goes through: a keep-alive pool, a timeout per
// attempt, retries as data, Idempotency-Keys on creates, errors chosen by status and body,
// responses checked against the zod schemas, and a debug line per attempt without the key.
import { randomUUID } from "node:crypto";
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import type { Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { Agent, type Dispatcher, request } from "undici";
import type { z } from "zod";
import { traceStart } from "../trace.js";
import { formatIssue, issuesFromZod } from "./common.js";
import {
  AbortedError,
  BusyError,
  ClapperApiError,
  ConnectionError,
  errorFromResponse,
  RateLimitError,
  ResultUrlError,
  ServiceError,
  TimeoutError,
  ValidationError,
} from "./errors.js";
import { addSecret, redact } from "./redact.js";
import {
  DEFAULT_POLICIES,
  isRefusedBeforeWork,
  isRetryableStatus,
  type PolicyName,
  parseRetryAfter,
  type RetryPolicy,
  retryDelay,
} from "./retry.js";
import { checkAbsoluteUrl, classifyHostLiteral } from "./urls.js";

/** The part of a pino logger the layer uses; a child logger of the CLI's is passed in. */
export interface Logger {
  debug(obj: object, msg?: string): void;
  info?(obj: object, msg?: string): void;
  warn(obj: object, msg?: string): void;
  /** pino's: the debug line of an attempt is built only when it is written. */
  isLevelEnabled?(level: string): boolean;
}

const silent: Logger = { debug() {}, warn() {} };

export interface HttpClientOptions {
  baseUrl: string;
  apiKey: string;
  /** Per attempt, from sending to the last byte of the answer. */
  timeoutMs?: number;
  policies?: Partial<Record<PolicyName, Partial<RetryPolicy>>>;
  logger?: Logger;
  /** Defaults to a keep-alive pool owned (and closed) by this client. */
  dispatcher?: Dispatcher;
  userAgent?: string;
  /** Runs each API attempt under the caller's limits (requests per second per service). */
  gate?: RequestGate;
  /**
   * Fetch result URLs at loopback and private addresses too. Off by default: a result URL is
   * fetched only from a public address or from the service's own origin, so a hostile or broken
   * answer cannot point the runner at the machine's neighbours (cloud metadata, admin ports).
   */
  allowPrivateUrls?: boolean;
}

/** API answers are small JSON documents; anything this large is not one. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/** A signal that never aborts, for a call made without one. */
const NEVER = new AbortController().signal;

/** The signals that follow each long-lived signal (the run's), behind one listener on it. */
const followers = new WeakMap<AbortSignal, Set<AbortController>>();

function follow(parent: AbortSignal, child: AbortController): () => void {
  let set = followers.get(parent);
  if (!set) {
    const mine = new Set<AbortController>();
    set = mine;
    followers.set(parent, mine);
    parent.addEventListener(
      "abort",
      () => {
        for (const c of mine) c.abort(parent.reason);
        mine.clear();
      },
      { once: true },
    );
  }
  set.add(child);
  const added = set;
  return () => void added.delete(child);
}

export interface LinkedSignal {
  signal: AbortSignal;
  /** The timeout fired (the signal's reason is a TimeoutError, as AbortSignal.timeout's is). */
  readonly timedOut: boolean;
  /** Stops the timeout; the signal still follows its parents. */
  stopTimer(): void;
  /** Lets the signal go: no timeout, and the parents no longer hold it. */
  done(): void;
}

/**
 * A signal aborted by any of `parents` (with its reason) or after `timeoutMs`: what
 * AbortSignal.any over AbortSignal.timeout gives, without their cost per request (tens of
 * microseconds, and bookkeeping that grows with every such signal alive). `done()` must be called
 * once the signal is no longer needed.
 */
export function linkedSignal(
  parents: ReadonlyArray<AbortSignal | undefined>,
  timeoutMs?: number,
): LinkedSignal {
  const ac = new AbortController();
  let timedOut = false;
  // Unref'd like AbortSignal.timeout's: a timeout alone keeps no process alive.
  let timer: NodeJS.Timeout | undefined =
    timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          ac.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError"));
        }, timeoutMs).unref();
  const unfollow: Array<() => void> = [];
  for (const parent of parents) {
    if (!parent || ac.signal.aborted) continue;
    if (parent.aborted) ac.abort(parent.reason);
    else unfollow.push(follow(parent, ac));
  }
  const stopTimer = () => {
    clearTimeout(timer);
    timer = undefined;
  };
  return {
    signal: ac.signal,
    get timedOut() {
      return timedOut;
    },
    stopTimer,
    done() {
      stopTimer();
      for (const f of unfollow) f();
      unfollow.length = 0;
    },
  };
}

/**
 * What the HTTP layer needs from a rate limiter: a place to run each attempt, and to be told of a
 * 429. The engine's per-service limiter implements it; the layer works without one.
 */
export interface RequestGate {
  /**
   * `signal` aborts the wait for a turn as well as the attempt. `method` tells reads (GET) from
   * writes, which a gate may order differently; among waiting writes a higher `rank` may go first.
   */
  run<T>(
    path: string,
    attempt: () => Promise<T>,
    signal?: AbortSignal,
    method?: string,
    rank?: number,
  ): Promise<T>;
  rateLimited(path: string, retryAfterMs: number | undefined): void;
}

export interface Download {
  /** The response body, to be consumed (or destroyed) by the caller. */
  body: Readable;
  contentLength?: number;
  contentType?: string;
}

export type Query = Record<string, string | number | boolean | ReadonlyArray<string> | undefined>;

export interface RequestOptions<T> {
  method: "GET" | "POST" | "PUT" | "DELETE";
  path: string;
  query?: Query;
  body?: unknown;
  schema: z.ZodType<T>;
  /** `create` sends an Idempotency-Key (this one, or a new one) and repeats it on every attempt. */
  policy: PolicyName;
  idempotencyKey?: string;
  signal?: AbortSignal;
  /** Aborts the request only while no attempt has left yet (see CallOptions.queueSignal). */
  queueSignal?: AbortSignal;
  /** Its place among the writes waiting at the gate: higher goes first (see CallOptions.rank). */
  rank?: number;
  /** Names the call in messages: "create video task". */
  what: string;
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

export class HttpClient {
  readonly baseUrl: string;
  private readonly apiKey: string;
  private readonly timeoutMs: number;
  private readonly policies: Record<PolicyName, RetryPolicy>;
  private readonly logger: Logger;
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly userAgent: string;
  private readonly gate: RequestGate | undefined;
  private readonly allowPrivateUrls: boolean;
  /** Result downloads from other origins go through a pool that connects to public addresses only. */
  private publicPool: Agent | undefined;
  /** The service's origin, parsed once: results it serves itself are fetched through its own pool. */
  private baseOrigin: string | undefined;
  /**
   * The service's clock minus ours, from the `Date` header of its last answer (whole seconds, so
   * within about a second): turns our timestamps into the service's, to compare with `created_at`.
   */
  clockOffsetMs = 0;
  /** When the service last answered a request with a success (epoch ms; 0: never). */
  lastServedAt = 0;

  constructor(options: HttpClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    // Registered where the key is used, so no path that holds it can forget to.
    addSecret(options.apiKey);
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.policies = {
      read: { ...DEFAULT_POLICIES.read, ...options.policies?.read },
      create: { ...DEFAULT_POLICIES.create, ...options.policies?.create },
      write: { ...DEFAULT_POLICIES.write, ...options.policies?.write },
    };
    this.logger = options.logger ?? silent;
    this.ownsDispatcher = options.dispatcher === undefined;
    this.dispatcher =
      options.dispatcher ??
      new Agent({ keepAliveTimeout: 30_000, keepAliveMaxTimeout: 120_000, connections: 64 });
    this.userAgent = options.userAgent ?? "clapper";
    this.gate = options.gate;
    this.allowPrivateUrls = options.allowPrivateUrls ?? false;
  }

  /** Whether a debug line would be written: pino drops it after it was built otherwise. */
  private debugging(): boolean {
    return this.logger.isLevelEnabled?.("debug") ?? true;
  }

  private noteClock(header: string | string[] | undefined): void {
    const date = Date.parse(firstHeader(header) ?? "");
    if (Number.isFinite(date)) this.clockOffsetMs = date - Date.now();
  }

  async request<T>(opts: RequestOptions<T>): Promise<T> {
    const key = opts.policy === "create" ? (opts.idempotencyKey ?? randomUUID()) : opts.idempotencyKey;
    if (key !== undefined) checkIdempotencyKey(key, opts.what);
    const url = this.baseUrl + opts.path + queryString(opts.query);
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.apiKey}`,
      accept: "application/json",
      "user-agent": this.userAgent,
    };
    if (opts.body !== undefined) headers["content-type"] = "application/json";
    // Every attempt of a create carries the same key: the service answers a repeat with the first task.
    if (key !== undefined) headers["idempotency-key"] = key;
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const where = { method: opts.method, path: opts.path };
    return this.withRetries(this.policies[opts.policy], opts, where, async (attempt, signal, started) => {
      traceStart(opts.policy === "create" ? "first create sent" : "first request sent");
      const res = await request(url, {
        method: opts.method,
        headers,
        dispatcher: this.dispatcher,
        signal,
        ...(payload !== undefined ? { body: payload } : {}),
      });
      // Whatever the service says is untrusted: bounded, and stripped of the key if it echoes it.
      const text = redact(await readBounded(res.body, MAX_ANSWER_BYTES, opts.what));
      this.noteClock(res.headers.date);
      const headerId = firstHeader(res.headers["x-request-id"]);
      const body = parseBody(text);
      const requestId = requestIdOf(body) ?? headerId;
      if (this.debugging())
        this.logger.debug(
          {
            method: opts.method,
            path: opts.path,
            status: res.statusCode,
            durationMs: Math.round(performance.now() - started),
            attempt,
            requestId,
          },
          "http attempt",
        );
      // A success without a RetCode cannot be a business error: its body is parsed once, by the
      // answer's own schema, not first by the error schema too.
      const error =
        res.statusCode < 300 && !hasRetCode(body)
          ? undefined
          : errorFromResponse(res.statusCode, body, headerId, parseRetryAfter(res.headers), opts.what);
      if (error) throw error;
      // Any answer that is not a refusal: the service is there and serving.
      this.lastServedAt = Date.now();
      return this.validate(opts, body, requestId);
    });
  }

  /**
   * PUTs a file to a pre-signed URL (the signature authenticates it: no API key is sent). A PUT
   * replaces the object, so it is retried like a read; `open` is called again for each attempt.
   */
  async upload(
    url: string,
    open: () => NodeJS.ReadableStream,
    size: number,
    contentType: string,
    opts: { signal?: AbortSignal; what: string },
  ): Promise<void> {
    // The query holds the signature: only the path is ever logged.
    const path = new URL(url).pathname;
    await this.withRetries(
      this.policies.read,
      opts,
      { method: "PUT", path },
      async (attempt, signal, started) => {
        const res = await request(url, {
          method: "PUT",
          headers: {
            "content-type": contentType,
            "content-length": String(size),
            "user-agent": this.userAgent,
          },
          body: open() as unknown as Readable,
          dispatcher: this.dispatcher,
          signal,
        });
        const text = redact(await readBounded(res.body, MAX_ANSWER_BYTES, opts.what));
        const durationMs = Math.round(performance.now() - started);
        const headerId = firstHeader(res.headers["x-request-id"]);
        const body = parseBody(text);
        const requestId = requestIdOf(body) ?? headerId;
        this.logger.debug(
          { method: "PUT", path, status: res.statusCode, durationMs, attempt, requestId },
          "http attempt",
        );
        if (res.statusCode >= 200 && res.statusCode < 300) return;
        throw (
          errorFromResponse(res.statusCode, body, headerId, parseRetryAfter(res.headers), opts.what) ??
          new ServiceError(`${opts.what}: HTTP ${res.statusCode}`, res.statusCode, requestId, undefined)
        );
      },
      // The signed storage URL is not the API: no API rate limit applies.
      { gated: false, origin: new URL(url).origin },
    );
  }

  /**
   * The one retry loop. `attempt` throws a ClapperApiError for an answer that is a failure (after
   * logging it), or whatever undici throws when no answer came (logged here); both are classified
   * and retried per the policy. Every attempt gives exactly one debug line.
   */
  private async withRetries<T>(
    policy: RetryPolicy,
    opts: { signal?: AbortSignal; queueSignal?: AbortSignal; rank?: number; what: string },
    where: { method: string; path: string },
    attempt: (n: number, signal: AbortSignal, started: number) => Promise<T>,
    mode: { gated: boolean; streaming?: boolean; origin?: string } = { gated: true },
  ): Promise<T> {
    const origin = mode.origin ?? this.baseUrl;
    // Whether any attempt was let go: an abort before that certainly sent nothing.
    let dispatched = false;
    const aborted = () => new AbortedError(`${opts.what}: aborted`, dispatched);
    // Invariant: the queue signal counts only until the first attempt leaves; after that, a request
    // that may have reached the service is carried through to its answer (or the caller's signal).
    const stopped = () =>
      opts.signal?.aborted === true || (!dispatched && opts.queueSignal?.aborted === true);
    for (let n = 1; ; n++) {
      if (stopped()) throw aborted();
      let started = performance.now();
      let failure: ClapperApiError;
      let sureNotDone: boolean;
      // The clock of an attempt starts when the gate lets it go, not while it waits its turn.
      const go = () => {
        dispatched = true;
        started = performance.now();
        // A streamed body may take long and flows on after the attempt: it follows the caller's
        // signal itself, and is bounded by undici's idle timeouts instead.
        if (mode.streaming) return attempt(n, opts.signal ?? NEVER, started);
        const link = linkedSignal([opts.signal], this.timeoutMs);
        return attempt(n, link.signal, started).finally(link.done);
      };
      try {
        return await (this.gate && mode.gated ? this.gated(this.gate, where, go, opts, dispatched) : go());
      } catch (error) {
        if (!(error instanceof ClapperApiError) && this.debugging()) {
          const code = errorCode(error);
          this.logger.debug(
            {
              ...where,
              durationMs: Math.round(performance.now() - started),
              attempt: n,
              error: opts.signal?.aborted ? "aborted" : (code ?? (error as Error).name),
            },
            "http attempt",
          );
        }
        if (stopped()) throw aborted();
        ({ failure, sureNotDone } = this.classify(error, opts.what, origin));
      }
      if (failure instanceof RateLimitError && this.gate && mode.gated) {
        this.gate.rateLimited(where.path, failure.retryAfterMs);
      }
      // A Retry-After is honoured on any retryable answer (429, 503, ...), not only on 429.
      const retryAfterMs = failure.retryAfterMs;
      if (!(policy.retryAmbiguous || sureNotDone) || n > policy.maxRetries) throw failure;
      if (retryAfterMs !== undefined && retryAfterMs > policy.maxRetryAfterMs) {
        failure.message += `; the service asks to wait ${waitText(retryAfterMs)} (Retry-After), longer than the ${waitText(policy.maxRetryAfterMs)} a request waits`;
        throw failure;
      }
      const delayMs = retryDelay(policy, n, retryAfterMs);
      this.noteRetry(policy, opts.what, { ...where, origin }, n, delayMs, failure);
      try {
        await sleep(delayMs, undefined, opts.signal ? { signal: opts.signal } : undefined);
      } catch {
        throw aborted();
      }
    }
  }

  /**
   * Runs an attempt in its turn at the gate. Until a first attempt has left, the wait for a turn
   * also ends with the queue signal (see RequestOptions.queueSignal).
   */
  private async gated<T>(
    gate: RequestGate,
    where: { method: string; path: string },
    go: () => Promise<T>,
    opts: { signal?: AbortSignal; queueSignal?: AbortSignal; rank?: number },
    dispatched: boolean,
  ): Promise<T> {
    if (dispatched || !opts.queueSignal)
      return gate.run(where.path, go, opts.signal, where.method, opts.rank);
    const wait = linkedSignal([opts.queueSignal, opts.signal]);
    try {
      return await gate.run(where.path, go, wait.signal, where.method, opts.rank);
    } finally {
      wait.done();
    }
  }

  /** What a failed attempt means: the error to retry (and whether it surely did nothing), or thrown. */
  private classify(
    error: unknown,
    what: string,
    origin: string,
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
      ? new TimeoutError(`${what}: no answer within ${this.timeoutMs} ms`, { cause: error })
      : new ConnectionError(`${what}: connection to ${origin} failed (${code ?? (error as Error).message})`, {
          cause: error,
        });
    return { failure, sureNotDone: code !== undefined && NOT_SENT.has(code) };
  }

  /**
   * Seen by whoever watches the log: an unreachable service is a line per retry, not silence. A
   * 429 is the rate adapting, expected under load: info, not a warning.
   */
  private noteRetry(
    policy: RetryPolicy,
    what: string,
    where: { method: string; path: string; origin: string },
    n: number,
    delayMs: number,
    failure: ClapperApiError,
  ): void {
    const retry = {
      event: "retry",
      ...where,
      attempt: n,
      of: policy.maxRetries + 1,
      next_delay_ms: Math.round(delayMs),
      ...(failure.status !== undefined ? { status: failure.status } : {}),
      error: failure.message,
    };
    const text = `${what} failed (attempt ${n} of ${policy.maxRetries + 1}); trying again in ${(delayMs / 1000).toFixed(1)} s`;
    if (failure instanceof RateLimitError) this.logger.info?.(retry, text);
    else this.logger.warn(retry, text);
  }

  /**
   * Opens a result URL (signed; no API key) and hands back the body as a stream, so a file of any
   * size passes through without being held in memory. Failures before the body starts are
   * retried like reads; a 403/404/410 is thrown at once (an expired URL is renewed by the caller).
   */
  async download(url: string, opts: { signal?: AbortSignal; what: string }): Promise<Download> {
    const { dispatcher, target } = this.resultDispatcher(url, opts.what);
    const path = target.pathname;
    return this.withRetries(
      this.policies.read,
      opts,
      { method: "GET", path },
      async (attempt, signal, started) => {
        const res = await request(url, {
          method: "GET",
          headers: { "user-agent": this.userAgent },
          dispatcher,
          signal,
          headersTimeout: this.timeoutMs,
          // Idle time between two chunks of the body, not the whole transfer.
          bodyTimeout: this.timeoutMs,
        });
        const durationMs = Math.round(performance.now() - started);
        const headerId = firstHeader(res.headers["x-request-id"]);
        if (this.debugging())
          this.logger.debug(
            { method: "GET", path, status: res.statusCode, durationMs, attempt, requestId: headerId },
            "http attempt",
          );
        if (res.statusCode >= 200 && res.statusCode < 300) {
          const length = Number(firstHeader(res.headers["content-length"]));
          const type = firstHeader(res.headers["content-type"]);
          return {
            body: res.body,
            ...(Number.isFinite(length) && length >= 0 ? { contentLength: length } : {}),
            ...(type ? { contentType: type } : {}),
          };
        }
        const text = redact(await readBounded(res.body, 64 * 1024, opts.what, true)).slice(0, 2000);
        throw (
          errorFromResponse(
            res.statusCode,
            parseBody(text),
            headerId,
            parseRetryAfter(res.headers),
            opts.what,
          ) ?? new ServiceError(`${opts.what}: HTTP ${res.statusCode}`, res.statusCode, headerId, undefined)
        );
      },
      { gated: false, streaming: true, origin: target.origin },
    );
  }

  /**
   * The services' own rule for material URLs, applied to the result URLs they hand back: http(s),
   * no user information, and a public address, unless the URL is on the service's own origin (the
   * sandbox serves results from itself) or private addresses are allowed. Host names are checked
   * after resolution, at connect time, so a name that resolves to a private address is refused too.
   */
  private resultDispatcher(url: string, what: string): { dispatcher: Dispatcher; target: URL } {
    const problem = checkAbsoluteUrl(url);
    if (problem) throw new ResultUrlError(`${what}: the result URL is not usable: ${problem}`);
    const parsed = new URL(url);
    if (parsed.username || parsed.password)
      throw new ResultUrlError(`${what}: the result URL carries user information; refused`);
    this.baseOrigin ??= new URL(this.baseUrl).origin;
    if (this.allowPrivateUrls || parsed.origin === this.baseOrigin)
      return { dispatcher: this.dispatcher, target: parsed };
    const cls = classifyHostLiteral(parsed.hostname);
    if (cls !== "public" && cls !== "name") {
      throw new ResultUrlError(
        `${what}: the result URL points at ${cls} address ${parsed.hostname}, not a public one; refused (--allow-private-urls allows it)`,
      );
    }
    this.publicPool ??= new Agent({
      keepAliveTimeout: 30_000,
      connections: 16,
      connect: { lookup: publicLookup },
    });
    return { dispatcher: this.publicPool, target: parsed };
  }
  private validate<T>(opts: RequestOptions<T>, body: unknown, requestId: string | undefined): T {
    const parsed = opts.schema.safeParse(body);
    if (parsed.success) return parsed.data;
    const detail = issuesFromZod(parsed.error).slice(0, 3).map(formatIssue).join("; ");
    throw new ServiceError(
      `${opts.what}: the answer did not have the documented shape: ${detail}`,
      200,
      requestId,
      undefined,
    );
  }

  async close(): Promise<void> {
    await this.publicPool?.close();
    if (this.ownsDispatcher) await this.dispatcher.close();
  }
}

/** Both specs: 1 to 128 characters after trimming. Refused here, so a bad key costs no request. */
function checkIdempotencyKey(key: string, what: string): void {
  const length = [...key.trim()].length;
  if (length < 1 || length > 128) {
    throw new ValidationError(
      `${what}: invalid request: Idempotency-Key: expected 1 to 128 characters after trimming, got ${length}`,
      undefined,
      undefined,
      "invalid_request",
    );
  }
}

function errorCode(error: unknown): string | undefined {
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

function queryString(query: Query | undefined): string {
  if (!query) return "";
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) params.append(name, v);
    else params.append(name, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
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

/** DNS lookup for result downloads: only public addresses are returned, so nothing else is dialled. */
function publicLookup(
  hostname: string,
  options: { all?: boolean; family?: number | string },
  callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
): void {
  const family = options.family === 4 || options.family === 6 ? options.family : 0;
  dnsLookup(
    hostname,
    { family, all: true },
    (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => {
      if (error) return callback(error, []);
      const usable = addresses.filter((a) => classifyHostLiteral(a.address) === "public");
      if (usable.length === 0) {
        const refused: NodeJS.ErrnoException = new Error(
          `${hostname} resolves to no public address (${addresses.map((a) => a.address).join(", ")}); refused`,
        );
        refused.code = "ENOTPUBLIC";
        return callback(refused, []);
      }
      if (options.all) return callback(null, usable);
      const first = usable[0] as LookupAddress;
      return callback(null, first.address, first.family);
    },
  );
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

function firstHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** A wait as a person reads it: `45 s`, `12 min`, `5 h`, `1157 days`. */
function waitText(ms: number): string {
  if (!Number.isFinite(ms)) return "an unbounded time";
  const s = ms / 1000;
  if (s < 120) return `${Math.ceil(s)} s`;
  if (s < 120 * 60) return `${Math.round(s / 60)} min`;
  if (s < 48 * 3600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} days`;
}
