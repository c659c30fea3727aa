// One result, from its URL into the sink: downloaded as a stream (never held whole), bounded in
// size, checked against its own container structure and duration as it flows, hashed and counted
// by the sink, and visible under its name only once every check passed.
import { pipeline, type Readable, Transform } from "node:stream";
import type { HttpClient } from "../api/http.js";
import type { Sink, Written } from "../sinks/sink.js";
import { mediaCheck, ResultTooLargeError } from "./media-check.js";

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
}

/**
 * Streams `url` into `sink` under `spec.key`. Throws MediaCheckError (ResultTooLargeError) when the
 * result is not what was asked for, ResultUrlError when its URL is refused, and the HTTP layer's
 * or the sink's errors otherwise; nothing is left under the key, and no stream error goes unheard.
 */
export async function storeResult(
  http: HttpClient,
  sink: Sink,
  url: string,
  spec: ResultSpec,
  signal: AbortSignal,
): Promise<Written> {
  const res = await http.download(url, { signal, what: `download ${spec.id}` });
  if (res.contentLength !== undefined && res.contentLength > spec.maxBytes) {
    res.body.destroy();
    throw new ResultTooLargeError(
      `${spec.id}: the result is ${res.contentLength.toLocaleString("en-US")} bytes (Content-Length), more than the limit of ${spec.maxBytes.toLocaleString("en-US")} bytes for this result (see --max-result-mb)`,
      spec.maxBytes,
    );
  }
  const check = mediaCheck({
    kind: spec.kind,
    maxBytes: spec.maxBytes,
    ...(spec.expectedSeconds !== undefined ? { expectedSeconds: spec.expectedSeconds } : {}),
  });
  // pipeline() listens for errors on every stream and destroys them all together: an abort or a
  // reset connection mid-download ends the sink's write with an error, never as an unheard event.
  const meter = rateFloor(spec.id);
  const body: Readable = pipeline(res.body, meter, check.stream, () => {});
  return sink.write(spec.key, body, {
    ...(res.contentLength !== undefined ? { expectedBytes: res.contentLength } : {}),
    contentType: spec.kind === "video" ? "video/mp4" : "audio/wav",
    metadata: spec.metadata,
    signal,
    // Every byte has passed through the check by now; this throws if any check failed.
    check: async () => void check.result(),
  });
}

/** A result that trickles in: each chunk within the idle timeout, the whole far too slow. */
export class SlowResultError extends Error {
  override name = "SlowResultError";
}

/** After this long, a result must be arriving at least MIN_BYTES_PER_SECOND on average. */
const RATE_GRACE_MS = 30_000;
const MIN_BYTES_PER_SECOND = 16 * 1024;

/**
 * Passes bytes through and stops a download whose average rate stays under the floor after the
 * grace period: the HTTP layer's idle timeout alone lets a byte every 29 s hold a job for days.
 */
export function rateFloor(what: string, graceMs = RATE_GRACE_MS, minRate = MIN_BYTES_PER_SECOND): Transform {
  const started = Date.now();
  let bytes = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.length;
      done(null, chunk);
    },
  });
  const timer = setInterval(
    () => {
      const seconds = (Date.now() - started) / 1000;
      if (seconds * 1000 < graceMs || bytes / seconds >= minRate) return;
      meter.destroy(
        new SlowResultError(
          `${what}: the result arrives at ${Math.round(bytes / seconds)} bytes/s, under ${minRate} after ${Math.round(seconds)} s; stopped`,
        ),
      );
    },
    Math.max(50, Math.min(5000, graceMs / 4)),
  ).unref();
  meter.once("close", () => clearInterval(timer));
  return meter;
}
