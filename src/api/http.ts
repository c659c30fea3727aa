// The one HTTP layer every call to both services goes through: a keep-alive pool, a timeout per
// attempt, retries as data, Idempotency-Keys on creates, errors chosen by status and body,
// responses checked against the zod schemas, and a debug line per attempt without the key.
import { randomUUID } from "node:crypto";
import type { Readable } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import { Agent, type Dispatcher } from "undici";
import type { z } from "zod";
import { type Exchange, firstHeader, sendAttempt } from "./attempt.js";
import { formatIssue, issuesFromZod } from "./common.js";
import {
  AbortedError,
  ClapperApiError,
  RateLimitError,
  ResultUrlError,
  ServiceError,
  ValidationError,
} from "./errors.js";
import { addSecret } from "./redact.js";
import { ResultRoutes } from "./result-urls.js";
import {
  classifyFailure,
  DEFAULT_POLICIES,
  errorCode,
  type PolicyName,
  type RetryPolicy,
  retryDelay,
  waitText,
} from "./retry.js";
import { linkedSignal } from "./signal.js";

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

/** A signal that never aborts, for a call made without one. */
const NEVER = new AbortController().signal;
/** Redirects a result download follows before it gives up: browsers and curl stop near here too. */
const MAX_REDIRECTS = 5;

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

type Query = Record<string, string | number | boolean | ReadonlyArray<string> | undefined>;

interface RequestOptions<T> {
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

/** What the retry loop needs to know of a request, whatever its kind. */
interface Retried {
  signal?: AbortSignal;
  queueSignal?: AbortSignal;
  rank?: number;
  what: string;
}

/** How a kind of request goes through the loop: at the gate or not, and bounded per attempt or not. */
interface Route {
  method: string;
  path: string;
  /** Named in connection failures: the service, or a result URL's own host. */
  origin: string;
  /** Whether the attempt waits its turn at the gate (API calls; not signed storage URLs). */
  gated: boolean;
  /**
   * A streamed body may take long and flows on after the attempt: it follows the caller's signal
   * itself, and is bounded by undici's idle timeouts instead of the attempt's timeout.
   */
  streaming: boolean;
}

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
  private readonly results: ResultRoutes;
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
    this.results = new ResultRoutes(this.baseUrl, this.dispatcher, options.allowPrivateUrls ?? false);
  }

  /** Whether a debug line would be written: pino drops it after it was built otherwise. */
  private debugging(): boolean {
    return this.logger.isLevelEnabled?.("debug") ?? true;
  }

  /** The parts of an exchange every kind shares: the pool, the debug line, the names. */
  private exchange(
    url: string,
    method: string,
    path: string,
    what: string,
    rest: Pick<Exchange, "headers" | "answer"> & Partial<Exchange>,
  ): Exchange {
    return {
      url,
      method,
      path,
      what,
      dispatcher: this.dispatcher,
      debugging: () => this.debugging(),
      log: (line) => this.logger.debug(line, "http attempt"),
      ...rest,
    };
  }

  async request<T>(opts: RequestOptions<T>): Promise<T> {
    const key = opts.policy === "create" ? (opts.idempotencyKey ?? randomUUID()) : opts.idempotencyKey;
    if (key !== undefined) checkIdempotencyKey(key, opts.what);
    const headers: Record<string, string> = {
      authorization: `Bearer ${this.apiKey}`,
      accept: "application/json",
      "user-agent": this.userAgent,
    };
    if (opts.body !== undefined) headers["content-type"] = "application/json";
    // Every attempt of a create carries the same key: the service answers a repeat with the first task.
    if (key !== undefined) headers["idempotency-key"] = key;
    const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
    const url = this.baseUrl + opts.path + queryString(opts.query);
    const exchange = this.exchange(url, opts.method, opts.path, opts.what, {
      headers,
      answer: "document",
      api: true,
      onDate: (header) => this.noteClock(header),
      ...(payload !== undefined ? { body: () => payload } : {}),
    });
    const route = {
      method: opts.method,
      path: opts.path,
      origin: this.baseUrl,
      gated: true,
      streaming: false,
    };
    return this.withRetries(this.policies[opts.policy], opts, route, async (attempt, signal, started) => {
      const reply = await sendAttempt(exchange, attempt, signal, started);
      // Any answer that is not a refusal: the service is there and serving.
      this.lastServedAt = Date.now();
      return this.validate(opts, reply.body, reply.requestId);
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
    const exchange = this.exchange(url, "PUT", path, opts.what, {
      headers: { "content-type": contentType, "content-length": String(size), "user-agent": this.userAgent },
      body: () => open() as unknown as Readable,
      answer: "document",
    });
    // The signed storage URL is not the API: no API rate limit applies.
    const route = { method: "PUT", path, origin: new URL(url).origin, gated: false, streaming: false };
    await this.withRetries(this.policies.read, opts, route, (attempt, signal, started) =>
      sendAttempt(exchange, attempt, signal, started),
    );
  }

  /**
   * Opens a result URL (signed; no API key) and hands back the body as a stream, so a file of any
   * size passes through without being held in memory. Failures before the body starts are
   * retried like reads; a 403/404/410 is thrown at once (an expired URL is renewed by the caller).
   */
  async download(url: string, opts: { signal?: AbortSignal; what: string }): Promise<Download> {
    // A result URL may redirect (a CDN, a signed copy elsewhere): each address it leads to is
    // checked as the first was (http(s), no user information, a public address), up to a bound.
    let next = url;
    for (let hop = 0; ; hop++) {
      const { dispatcher, target } = this.results.route(next, opts.what);
      const path = target.pathname;
      const exchange = this.exchange(next, "GET", path, opts.what, {
        headers: { "user-agent": this.userAgent },
        dispatcher,
        answer: "stream",
        redirects: true,
        // Idle time between two chunks of the body, not the whole transfer.
        timeoutMs: this.timeoutMs,
      });
      const route = { method: "GET", path, origin: target.origin, gated: false, streaming: true };
      const reply = await this.withRetries(this.policies.read, opts, route, (attempt, signal, started) =>
        sendAttempt(exchange, attempt, signal, started),
      );
      if (reply.location === undefined) {
        const length = Number(firstHeader(reply.headers["content-length"]));
        const type = firstHeader(reply.headers["content-type"]);
        return {
          body: reply.body as Readable,
          ...(Number.isFinite(length) && length >= 0 ? { contentLength: length } : {}),
          ...(type ? { contentType: type } : {}),
        };
      }
      if (hop >= MAX_REDIRECTS) {
        throw new ClapperApiError(
          `${opts.what}: the result URL redirected more than ${MAX_REDIRECTS} times; not followed further`,
          reply.status,
          reply.requestId,
          undefined,
        );
      }
      try {
        next = new URL(reply.location, target).href;
      } catch {
        throw new ResultUrlError(`${opts.what}: the result URL redirected to an address that is not a URL`);
      }
    }
  }

  private noteClock(header: string | string[] | undefined): void {
    const date = Date.parse(firstHeader(header) ?? "");
    if (Number.isFinite(date)) this.clockOffsetMs = date - Date.now();
  }

  /**
   * The one retry loop. `attempt` throws a ClapperApiError for an answer that is a failure (after
   * logging it), or whatever undici throws when no answer came (logged here); both are classified
   * and retried per the policy. Every attempt gives exactly one debug line.
   */
  private async withRetries<T>(
    policy: RetryPolicy,
    opts: Retried,
    route: Route,
    attempt: (n: number, signal: AbortSignal, started: number) => Promise<T>,
  ): Promise<T> {
    const where = { method: route.method, path: route.path };
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
        if (route.streaming) return attempt(n, opts.signal ?? NEVER, started);
        const link = linkedSignal([opts.signal], this.timeoutMs);
        return attempt(n, link.signal, started).finally(link.done);
      };
      try {
        return await (this.gate && route.gated ? this.gated(this.gate, where, go, opts, dispatched) : go());
      } catch (error) {
        if (!(error instanceof ClapperApiError)) this.noteLost(where, n, started, error, opts.signal);
        if (stopped()) throw aborted();
        ({ failure, sureNotDone } = classifyFailure(error, opts.what, route.origin, this.timeoutMs));
      }
      if (failure instanceof RateLimitError && this.gate && route.gated) {
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
      this.noteRetry(policy, opts.what, { ...where, origin: route.origin }, n, delayMs, failure);
      try {
        await sleep(delayMs, undefined, opts.signal ? { signal: opts.signal } : undefined);
      } catch {
        throw aborted();
      }
    }
  }

  /** The debug line of an attempt that got no answer (an answer's own line is written with it). */
  private noteLost(
    where: { method: string; path: string },
    n: number,
    started: number,
    error: unknown,
    signal: AbortSignal | undefined,
  ): void {
    if (!this.debugging()) return;
    const code = errorCode(error);
    this.logger.debug(
      {
        ...where,
        durationMs: Math.round(performance.now() - started),
        attempt: n,
        error: signal?.aborted ? "aborted" : (code ?? (error as Error).name),
      },
      "http attempt",
    );
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
    await this.results.close();
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
