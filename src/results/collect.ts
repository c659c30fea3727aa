// One result, from its URL into the sink: downloaded as a stream (never held whole), bounded in
// size, checked against its own container structure and duration as it flows, hashed and counted
// by the sink, and visible under its name only once every check passed.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import type { Readable } from "node:stream";
import { ConnectionError } from "../api/errors.js";
import type { Download, HttpClient } from "../api/http.js";
import { linkedSignal } from "../api/signal.js";
import { ResultTooLargeError } from "../media/errors.js";
import { serviceFor } from "../services/index.js";
import type { Sink, Written } from "../sinks/sink.js";
import { mediaChecker } from "./stream-check.js";

export interface ResultSpec {
  /** Job id, for messages. */
  id: string;
  kind: "video" | "speech";
  /** Sink key the result takes (`shots/s01.mp4`). */
  key: string;
  /** Requested duration (video); the file must match it. */
  expectedSeconds?: number;
  /** The most bytes this result may have. */
  maxBytes: number;
  /** Stored beside the object where the sink can (S3 metadata). */
  metadata: Record<string, string>;
  /** Runs once the result is complete and checked, before it replaces what is stored under `key`. */
  beforeReplace?: () => Promise<void>;
}

/**
 * Streams `url` into `sink` under `spec.key`. Throws MediaCheckError (ResultTooLargeError) when the
 * result is not what was asked for, ResultUrlError when its URL is refused, DownloadTimeUpError
 * when `trail`'s time for tries ran out before an answer came, and the HTTP layer's or the sink's
 * errors otherwise; nothing is left under the key, and no stream error goes unheard.
 */
export async function storeResult(
  http: HttpClient,
  sink: Sink,
  url: string,
  spec: ResultSpec,
  signal: AbortSignal,
  trail: DownloadTrail = new DownloadTrail(Number.POSITIVE_INFINITY),
): Promise<Written & { seconds: number }> {
  const what = `download ${spec.id}`;
  const res = await trail.open(url, what, signal, (s) => http.download(url, { signal: s, what }));
  if (res.contentLength !== undefined && res.contentLength > spec.maxBytes) {
    res.body.destroy();
    throw new ResultTooLargeError(
      `${spec.id}: the result is ${res.contentLength.toLocaleString("en-US")} bytes (Content-Length), more than the limit of ${spec.maxBytes.toLocaleString("en-US")} bytes for this result (see --max-result-mb)`,
      spec.maxBytes,
    );
  }
  const check = mediaChecker({
    kind: spec.kind,
    maxBytes: spec.maxBytes,
    ...(spec.expectedSeconds !== undefined ? { expectedSeconds: spec.expectedSeconds } : {}),
  });
  const floor = rateFloor(spec.id, res.body);
  let written: Written;
  try {
    written = await sink.write(spec.key, res.body, {
      ...(res.contentLength !== undefined ? { expectedBytes: res.contentLength } : {}),
      contentType: serviceFor(spec.kind).contentType,
      metadata: spec.metadata,
      signal,
      // One pass over the bytes as the sink reads them measures the rate and checks the container:
      // a stream per concern cost more than the checks themselves.
      observe: (chunk) => {
        floor.bytes += chunk.length;
        check.push(chunk);
      },
      // Every byte has been observed by now: this throws if the result as a whole is not right.
      check: async () => void check.end(),
      ...(spec.beforeReplace ? { beforeReplace: spec.beforeReplace } : {}),
    });
  } catch (error) {
    throw brokenTransfer(error, spec, new URL(url).host, floor.bytes, res.contentLength, signal);
  } finally {
    floor.stop();
  }
  // The media's own length: what a shot timed to its narration is fitted to.
  return { ...written, seconds: check.result().seconds };
}

/**
 * A transfer that broke off (the connection closed or reset under the body): which result, from
 * which host, after how many bytes. The cause is kept, so a store or network code is still seen.
 */
export class ResultTransferError extends Error {
  override name = "ResultTransferError";
}

/** What a failed write of a result is said as: a broken connection named, anything else as it came. */
function brokenTransfer(
  error: unknown,
  spec: ResultSpec,
  host: string,
  received: number,
  declared: number | undefined,
  signal: AbortSignal,
): unknown {
  // The result's own faults (broken, too large, too slow) and the store's already say what they are.
  const name = (error as Error | undefined)?.name ?? "";
  const connection =
    /^(SocketError|BodyTimeoutError)$/.test(name) ||
    /ERR_STREAM_PREMATURE_CLOSE|ECONNRESET|EPIPE|UND_ERR_SOCKET/.test(
      String((error as { code?: unknown })?.code ?? ""),
    );
  if (signal.aborted || !connection) return error;
  const of = declared !== undefined ? ` of ${declared.toLocaleString("en-US")}` : "";
  return new ResultTransferError(
    `${spec.id}: the download of its result from ${host} broke off after ${received.toLocaleString("en-US")}${of} bytes (${(error as Error).message})`,
    { cause: error },
  );
}

/** A result that trickles in: each chunk within the idle timeout, the whole far too slow. */
export class SlowResultError extends Error {
  override name = "SlowResultError";
}

/** After this long, a result must be arriving at least MIN_BYTES_PER_SECOND on average. */
const RATE_GRACE_MS = 30_000;
const MIN_BYTES_PER_SECOND = 16 * 1024;

/**
 * Stops a download whose average rate stays under the floor after the grace period (destroying
 * its body, so its reader ends with a SlowResultError): the HTTP layer's idle timeout alone lets a
 * byte every 29 s hold a job for days. The reader adds what it reads to `bytes`; `stop()` once
 * the body is done with.
 */
export function rateFloor(
  what: string,
  body: Readable,
  graceMs = RATE_GRACE_MS,
  minRate = MIN_BYTES_PER_SECOND,
): { bytes: number; stop(): void } {
  const started = Date.now();
  const floor = {
    bytes: 0,
    stop: () => clearInterval(timer),
  };
  const timer = setInterval(
    () => {
      const seconds = (Date.now() - started) / 1000;
      if (seconds * 1000 < graceMs || floor.bytes / seconds >= minRate) return;
      floor.stop();
      // The sink may not be reading yet (it opens its file first): the error is kept in the body's
      // state and thrown to the sink when it reads, never left as an unheard 'error' event.
      body.on("error", () => {});
      body.destroy(
        new SlowResultError(
          `${what}: the result arrives at ${Math.round(floor.bytes / seconds)} bytes/s, under ${minRate} after ${Math.round(seconds)} s; stopped`,
        ),
      );
    },
    Math.max(50, Math.min(5000, graceMs / 4)),
  ).unref();
  return floor;
}

/**
 * The time a result's tries may take ran out before any of them was answered with the file. A
 * ConnectionError, so that a host that never answered at all is taken for unreachable, as the HTTP
 * layer's own exhausted retries would be.
 */
export class DownloadTimeUpError extends ConnectionError {
  override name = "DownloadTimeUpError";
}

/**
 * A paid result the tries could not get: each was answered with an error status (or time ran out
 * after such answers). Names the task, the host and the last status; never the URL's path or
 * query, which may carry a signature.
 */
export class DownloadFailedError extends Error {
  override name = "DownloadFailedError";
  constructor(taskId: string, trail: DownloadTrail) {
    super(
      `the result of task ${taskId} could not be downloaded after ${trail.tries} ${trail.tries === 1 ? "try" : "tries"} (HTTP ${trail.status} from ${trail.host})`,
    );
  }
}

/**
 * The tries of one result, across its URLs, as undici's diagnostics channels see them: the HTTP
 * layer retries inside one download call, so only there can each try and its answer be counted.
 * `budgetMs` bounds the time spent getting an answer (backoff included), never a transfer that
 * has started: a large file on a slow link is not a failure to retry.
 */
export class DownloadTrail {
  /** Requests made for the result. */
  tries = 0;
  /** The status of the last answer any try got; undefined while none was answered. */
  status: number | undefined;
  /** Host (and port) of the last URL tried: never its path or query, which may hold a signature. */
  host = "";
  private waitedMs = 0;

  constructor(readonly budgetMs: number) {}

  /** Whether the time for tries is used up. */
  get spent(): boolean {
    return this.waitedMs >= this.budgetMs;
  }

  /** Runs `download` for `url`, counting its tries, under what is left of the budget. */
  async open(
    url: string,
    what: string,
    signal: AbortSignal,
    download: (signal: AbortSignal) => Promise<Download>,
  ): Promise<Download> {
    const target = new URL(url);
    this.host = target.host;
    const left = this.budgetMs - this.waitedMs;
    // setTimeout turns an infinite delay into 1 ms: no timer at all then.
    const budget = linkedSignal([signal], Number.isFinite(left) ? Math.max(0, left) : undefined);
    const stop = watchRequests(`${target.origin}${target.pathname}${target.search}`, this);
    const started = Date.now();
    try {
      const res = await download(budget.signal);
      // The body flows on under the caller's signal; let go of it when the body is done.
      if (res.body.closed) budget.done();
      else res.body.once("close", budget.done);
      return res;
    } catch (error) {
      budget.done();
      if (budget.timedOut && !signal.aborted) {
        const answer = this.status === undefined ? "no answer" : `last answer HTTP ${this.status}`;
        throw new DownloadTimeUpError(
          `${what}: ${this.tries} tries to ${this.host} in ${this.budgetMs / 1000} s got no file (${answer})`,
        );
      }
      throw error;
    } finally {
      // Cleared before the body flows: the budget never cuts a transfer short.
      budget.stopTimer();
      stop();
      this.waitedMs += Date.now() - started;
    }
  }
}

interface UndiciRequest {
  origin?: unknown;
  path?: unknown;
  method?: unknown;
}

/** Trails by the exact URL (origin, path and query) their requests go to. */
const watched = new Map<string, Set<DownloadTrail>>();

function trailsOf(request: UndiciRequest): Set<DownloadTrail> | undefined {
  if (request.method !== "GET") return undefined;
  return watched.get(`${String(request.origin).replace(/\/+$/, "")}${String(request.path)}`);
}

const onCreate = (message: unknown): void => {
  for (const trail of trailsOf((message as { request: UndiciRequest }).request) ?? []) trail.tries += 1;
};

const onHeaders = (message: unknown): void => {
  const { request, response } = message as { request: UndiciRequest; response: { statusCode: number } };
  for (const trail of trailsOf(request) ?? []) trail.status = response.statusCode;
};

/** Counts the requests to `key` into `trail` until the returned function is called. */
function watchRequests(key: string, trail: DownloadTrail): () => void {
  // Subscribed only while some result is being opened: undici publishes only to listeners.
  if (watched.size === 0) {
    subscribe("undici:request:create", onCreate);
    subscribe("undici:request:headers", onHeaders);
  }
  const set = watched.get(key) ?? new Set<DownloadTrail>();
  set.add(trail);
  watched.set(key, set);
  return () => {
    set.delete(trail);
    if (set.size === 0 && watched.get(key) === set) watched.delete(key);
    if (watched.size === 0) {
      unsubscribe("undici:request:create", onCreate);
      unsubscribe("undici:request:headers", onHeaders);
    }
  };
}
