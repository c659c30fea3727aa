/**
 * Streaming validation of a downloaded result: the bytes flow through unchanged (the sink hashes
 * and stores what comes out) while the container's own structure is checked against what was
 * actually received. A result that is truncated, padded, endless or not the requested length ends
 * the stream with a MediaCheckError instead of being stored as succeeded.
 *
 *   const check = mediaCheck({ kind: "video", expectedSeconds: 6, maxBytes: resultLimit(job) });
 *   await pipeline(body, check.stream, sinkInput);   // rejects with MediaCheckError
 *   check.result();                                 // { bytes, seconds } once the stream ended
 *
 *   mediaCheckFile(path, options)                    // the same check over a stored file
 *
 * What is refused, and when:
 * - at once: more bytes than `maxBytes` (ResultTooLargeError, the rest is never read), a box or
 *   RIFF size that already declares more than `maxBytes`, a top-level MP4 box header that cannot be
 *   one (size below 8 other than 0 and 1, a type that is not four printable ASCII characters, which
 *   is what trailing zeros or garbage look like), a first box other than `ftyp`, a second `ftyp` or
 *   `moov`, a fragmented movie (`moof`/`mvex`), a `moov` above 32 MiB or malformed inside; a body
 *   that does not start `RIFF....WAVE`, a WAV chunk that does not fit in the RIFF size, bytes after
 *   the end of the RIFF chunk.
 * - at the end: MP4 top-level boxes must cover the file exactly (the last box ends at EOF), there
 *   is one `moov` and at least one `mdat`, every chunk of samples the sample tables (`stsc`, `stsz`
 *   or `stz2`, `stco` or `co64`) reference lies inside the file and inside an `mdat`, and the video
 *   duration is the sample-table duration (`stts` over the `mdhd` timescale), not the `mvhd` header.
 *   WAV: RIFF size = file size - 8 (give or take the final pad byte of an odd chunk), one `fmt `
 *   before one complete `data` chunk, duration = data bytes / byte rate.
 * - the duration must be > 0, and within 0.5 s of `expectedSeconds` when that is given.
 *
 * Memory stays flat whatever the size: only box and chunk headers, the `moov` box (capped) and the
 * `fmt ` chunk are kept.
 */
import { createReadStream } from "node:fs";
import { Transform, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { MediaCheckError, n, tooLarge } from "../media/errors.js";
import { MEDIA, type MediaKind } from "../media/kinds.js";

export interface MediaCheckOptions {
  kind: MediaKind;
  /** Requested duration; the result must be within DURATION_TOLERANCE_S of it. */
  expectedSeconds?: number;
  /** The most bytes the result may have (see resultLimit). */
  maxBytes: number;
}

export interface MediaCheckResult {
  bytes: number;
  /** Video: the longest video track's sample-table duration. Speech: data bytes / byte rate. */
  seconds: number;
}

interface MediaCheck {
  /** Passes every chunk through unchanged; errors with a MediaCheckError. */
  stream: Transform;
  /** Throws until the stream has ended and passed every check. */
  result(): MediaCheckResult;
}

const DURATION_TOLERANCE_S = 0.5;

/** The check without a stream around it, for a caller that already has one pass over the bytes. */
interface MediaChecker {
  /** Takes the next bytes; throws a MediaCheckError (ResultTooLargeError past the limit). */
  push(chunk: Buffer): void;
  /** Once every byte is in: the whole result is checked; throws a MediaCheckError. */
  end(): MediaCheckResult;
  /** Throws until end() passed every check. */
  result(): MediaCheckResult;
}

export function mediaChecker(options: MediaCheckOptions): MediaChecker {
  const { kind, expectedSeconds, maxBytes } = options;
  if (!(maxBytes > 0)) throw new RangeError(`maxBytes must be > 0, got ${maxBytes}`);
  const media = MEDIA[kind];
  const scanner = media.scanner(maxBytes);
  const label = media.label;
  let bytes = 0;
  let outcome: MediaCheckResult | undefined;
  return {
    push(buf) {
      if (bytes + buf.length > maxBytes)
        throw tooLarge(`the result reached ${n(bytes + buf.length)} bytes and was stopped there`, maxBytes);
      bytes += buf.length;
      try {
        scanner.push(buf);
      } catch (error) {
        throw asCheckError(error, label);
      }
    },
    end() {
      try {
        if (bytes === 0) throw new MediaCheckError(`the result is empty (0 bytes), not a ${label} file`);
        const seconds = scanner.finish(bytes);
        if (!(seconds > 0)) throw new MediaCheckError(`the ${label} file has no duration (0 s of media)`);
        if (expectedSeconds !== undefined && Math.abs(seconds - expectedSeconds) > DURATION_TOLERANCE_S) {
          throw new MediaCheckError(
            `lasts ${seconds.toFixed(2)} s by its ${media.measuredBy}, ` +
              `${expectedSeconds} s were requested`,
          );
        }
        outcome = { bytes, seconds };
        return outcome;
      } catch (error) {
        throw asCheckError(error, label);
      }
    },
    result() {
      if (!outcome)
        throw new Error("mediaCheck: result() called before the stream ended and passed its checks");
      return outcome;
    },
  };
}

/** Bytes of any kind a stream may carry, as a Buffer (no copy for a Buffer or a Uint8Array). */
function asBuffer(chunk: Buffer | Uint8Array | string, encoding: BufferEncoding): Buffer {
  return Buffer.isBuffer(chunk)
    ? chunk
    : typeof chunk === "string"
      ? Buffer.from(chunk, encoding)
      : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

export function mediaCheck(options: MediaCheckOptions): MediaCheck {
  const checker = mediaChecker(options);
  const stream = new Transform({
    transform(chunk: Buffer | Uint8Array | string, encoding, done) {
      const buf = asBuffer(chunk, encoding);
      try {
        checker.push(buf);
      } catch (error) {
        done(error as Error);
        return;
      }
      done(null, buf);
    },
    flush(done) {
      try {
        checker.end();
        done();
      } catch (error) {
        done(error as Error);
      }
    },
  });
  return { stream, result: () => checker.result() };
}

/** The same check over a stored file, read once. */
export async function mediaCheckFile(path: string, options: MediaCheckOptions): Promise<MediaCheckResult> {
  const check = mediaCheck(options);
  const discard = new Writable({ write: (_chunk, _enc, done) => done() });
  await pipeline(createReadStream(path), check.stream, discard);
  return check.result();
}

/** A hostile file must end as a refused result, never as a crash with a reader's RangeError. */
function asCheckError(error: unknown, label: string): Error {
  if (error instanceof MediaCheckError) return error;
  return new MediaCheckError(`not a readable ${label} file (${(error as Error)?.message ?? String(error)})`, {
    cause: error,
  });
}
