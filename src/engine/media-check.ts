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
import { MediaCheckError } from "./verify.js";

export { MediaCheckError };

/** More bytes than the result's limit: refused before the rest is read. */
export class ResultTooLargeError extends MediaCheckError {
  override name = "ResultTooLargeError";
  constructor(
    message: string,
    readonly limit: number,
  ) {
    super(message);
  }
}

export interface MediaCheckOptions {
  kind: "video" | "speech";
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

export interface MediaCheck {
  /** Passes every chunk through unchanged; errors with a MediaCheckError. */
  stream: Transform;
  /** Throws until the stream has ended and passed every check. */
  result(): MediaCheckResult;
}

export const DURATION_TOLERANCE_S = 0.5;
/** Larger than the moov of hours of video; a bigger one is not what an encoder wrote. */
export const MOOV_CAP = 32 * 1024 * 1024;
/** Real files have four to six; the cap bounds what is kept about them. */
const MAX_TOP_LEVEL_BOXES = 4096;
/** An `mdat` running to the end of the file (size 0) may end with this much no sample refers to. */
const OPEN_MDAT_SLACK = 64 * 1024;
const FMT_CAP = 64 * 1024;

const MIB = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// Result size limit

/** Generous H.264 byte rates (bytes per second of video): several times what encoders emit. */
const VIDEO_BYTES_PER_SECOND: Record<VideoTier, number> = {
  "480P": 2 * MIB,
  "768P": 4 * MIB,
  "1080P": 8 * MIB,
  "2K": 12 * MIB,
  "4K": 25 * MIB,
};
type VideoTier = "480P" | "768P" | "1080P" | "2K" | "4K";
/** Room for containers, headers and any fixed overhead, whatever the duration. */
const LIMIT_BASE = 32 * MIB;
/** Slow speech in any script stays well under this; pauses included. */
const SPEECH_SECONDS_PER_CHAR = 0.5;
const SPEECH_FIXED_SECONDS = 10;
/** The slowest speed the speech API accepts. */
const SPEECH_MIN_SPEED = 0.5;
/** 48 kHz stereo 32-bit: more than any speech format the service offers. */
const SPEECH_BYTES_PER_SECOND = 48_000 * 2 * 4;

export type ResultLimitJob =
  | { kind: "video"; seconds: number; tier: VideoTier }
  | { kind: "speech"; countedChars: number; speed: number };

/**
 * A generous per-result byte limit: far above any real result of that length and resolution, low
 * enough that an endless or padded body is stopped long before it fills a disk.
 */
export function resultLimit(job: ResultLimitJob): number {
  if (job.kind === "video") {
    const seconds = Number.isFinite(job.seconds) && job.seconds > 0 ? job.seconds : 0;
    return Math.ceil(LIMIT_BASE + seconds * VIDEO_BYTES_PER_SECOND[job.tier]);
  }
  const chars = Number.isFinite(job.countedChars) && job.countedChars > 0 ? job.countedChars : 0;
  // Speed 0 means the default 1.0 to the service; below the API's minimum is treated as the minimum.
  const speed = Number.isFinite(job.speed) && job.speed > 0 ? Math.max(job.speed, SPEECH_MIN_SPEED) : 1;
  const seconds = (SPEECH_FIXED_SECONDS + chars * SPEECH_SECONDS_PER_CHAR) / speed;
  return Math.ceil(LIMIT_BASE + seconds * SPEECH_BYTES_PER_SECOND);
}

// ---------------------------------------------------------------------------------------------
// The stream

const n = (v: number | bigint): string => v.toLocaleString("en-US");
const mib = (v: number): string => `${(v / MIB).toFixed(1)} MiB`;

function tooLarge(what: string, limit: number): ResultTooLargeError {
  return new ResultTooLargeError(
    `${what}, more than the limit of ${n(limit)} bytes (${mib(limit)}) for this result (see --max-result-mb)`,
    limit,
  );
}

interface Scanner {
  push(chunk: Buffer): void;
  /** Called once with the total received; returns the duration in seconds. */
  finish(total: number): number;
}

/** The check without a stream around it, for a caller that already has one pass over the bytes. */
export interface MediaChecker {
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
  const scanner: Scanner = kind === "video" ? new Mp4Scanner(maxBytes) : new WavScanner(maxBytes);
  const label = kind === "video" ? "MP4" : "WAV";
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
            `lasts ${seconds.toFixed(2)} s by its ${kind === "video" ? "sample table" : "data chunk"}, ` +
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
export function asBuffer(chunk: Buffer | Uint8Array | string, encoding: BufferEncoding): Buffer {
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

const printable = (buf: Buffer, at: number): boolean => {
  for (let i = at; i < at + 4; i++) {
    const c = buf[i] ?? 0;
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
};
const showType = (buf: Buffer, at: number): string =>
  printable(buf, at)
    ? `'${buf.toString("latin1", at, at + 4)}'`
    : `${buf
        .subarray(at, at + 4)
        .toString("hex")
        .replace(/(..)(?!$)/g, "$1 ")} (hex)`;

// ---------------------------------------------------------------------------------------------
// MP4 (ISO/IEC 14496-12)

interface TopBox {
  type: string;
  /** File offset of the box header. */
  start: number;
  /** File offset of the payload. */
  payload: number;
  /** File offset just past the box; undefined for size 0 ("to the end of the file") until EOF. */
  end: number | undefined;
  /** Size 0 in the header: the box's end is wherever the file ends. */
  openEnded: boolean;
  /** mdat: the end of the last sample found in it. */
  reached: number;
}

interface Track {
  index: number;
  handler: string;
  timescale: number;
  /** stts: total duration in timescale units. */
  ticks: number;
  /** stsz with one size for every sample: chunks are measured without a walk over their samples. */
  uniform: number | undefined;
  sampleSize: (i: number) => number;
  chunkCount: number;
  chunkOffset: (i: number) => number;
  /** stsc entries: first chunk (1-based) and samples per chunk. */
  runs: Array<{ firstChunk: number; perChunk: number }>;
}

class Mp4Scanner implements Scanner {
  /** Invariant: the file offset of the next byte pushed. */
  private pos = 0;
  private readonly header = Buffer.alloc(16);
  private headerFill = 0;
  private headerNeed = 8;
  /** The box whose payload is streaming; undefined while a header is being read. */
  private box: TopBox | undefined;
  private left = 0;
  /** The whole moov box (header included, so its offsets + start are file offsets) as it arrives. */
  private moov: { start: number; data: Buffer; fill: number } | undefined;
  private tracks: Track[] | undefined;
  private count = 0;
  private readonly mdats: TopBox[] = [];

  constructor(private readonly maxBytes: number) {}

  push(chunk: Buffer): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.box === undefined) {
        const take = Math.min(this.headerNeed - this.headerFill, chunk.length - i);
        chunk.copy(this.header, this.headerFill, i, i + take);
        this.headerFill += take;
        this.pos += take;
        i += take;
        if (this.headerFill === 8 && this.headerNeed === 8) this.checkHeader();
        if (this.headerFill === this.headerNeed) this.open();
      } else {
        const take = Math.min(this.left, chunk.length - i);
        if (this.moov) chunk.copy(this.moov.data, this.moov.fill, i, i + take);
        if (this.moov) this.moov.fill += take;
        this.left -= take;
        this.pos += take;
        i += take;
        if (this.left === 0) this.close();
      }
    }
  }

  /** The first 8 bytes of a top-level header: refuse what cannot be a box before reading more. */
  private checkHeader(): void {
    const start = this.pos - 8;
    const size = this.header.readUInt32BE(0);
    if (!printable(this.header, 4)) {
      throw new MediaCheckError(
        `invalid box header at offset ${n(start)}: type ${showType(this.header, 4)} is not four printable ` +
          `characters (trailing zeros or garbage after the last box?)`,
      );
    }
    if (size !== 0 && size !== 1 && size < 8) {
      throw new MediaCheckError(
        `invalid box header at offset ${n(start)}: ${showType(this.header, 4)} has size ${size}, below the 8 bytes of its own header`,
      );
    }
    if (this.count === 0 && this.header.toString("latin1", 4, 8) !== "ftyp") {
      throw new MediaCheckError(
        `does not start with an ftyp box (found ${showType(this.header, 4)}): not an MP4 file`,
      );
    }
    if (size === 1) this.headerNeed = 16;
  }

  private open(): void {
    const start = this.pos - this.headerNeed;
    const type = this.header.toString("latin1", 4, 8);
    const size32 = this.header.readUInt32BE(0);
    let size: number | undefined = size32;
    if (size32 === 1) {
      const large = this.header.readBigUInt64BE(8);
      if (large < 16n) {
        throw new MediaCheckError(
          `invalid box header at offset ${n(start)}: '${type}' has a 64-bit size of ${n(large)}, below its 16-byte header`,
        );
      }
      if (BigInt(start) + large > BigInt(this.maxBytes)) {
        throw tooLarge(`the '${type}' box at offset ${n(start)} declares ${n(large)} bytes`, this.maxBytes);
      }
      size = Number(large);
    } else if (size32 === 0) {
      size = undefined;
    }
    this.count += 1;
    if (this.count > MAX_TOP_LEVEL_BOXES) {
      throw new MediaCheckError(
        `more than ${n(MAX_TOP_LEVEL_BOXES)} top-level boxes: not a movie an encoder wrote`,
      );
    }
    if (type === "ftyp" && this.count > 1)
      throw new MediaCheckError(`a second ftyp box at offset ${n(start)}`);
    if (type === "moof") {
      throw new MediaCheckError(
        `fragmented MP4 (a moof box at offset ${n(start)}) is not accepted as a result`,
      );
    }
    // Size 0 is what a writer that never finished leaves; only a trailing data or free box may use it.
    if (size === undefined && type !== "mdat" && type !== "free" && type !== "skip") {
      throw new MediaCheckError(
        `the '${type}' box at offset ${n(start)} has size 0 ("to the end of the file"), which only a final mdat, free or skip box may use`,
      );
    }
    const end = size === undefined ? undefined : start + size;
    if (end !== undefined && end > this.maxBytes) {
      throw tooLarge(`the '${type}' box at offset ${n(start)} declares ${n(size ?? 0)} bytes`, this.maxBytes);
    }
    const box: TopBox = {
      type,
      start,
      payload: this.pos,
      end,
      openEnded: end === undefined,
      reached: this.pos,
    };
    if (type === "moov") {
      if (this.moov || this.tracks) throw new MediaCheckError(`a second moov box at offset ${n(start)}`);
      if ((size ?? 0) > MOOV_CAP) {
        throw new MediaCheckError(
          `the moov box at offset ${n(start)} declares ${n(size ?? 0)} bytes, more than the ${mib(MOOV_CAP)} a movie header may take`,
        );
      }
      const data = Buffer.allocUnsafe(size ?? 0);
      this.header.copy(data, 0, 0, this.headerNeed);
      this.moov = { start, data, fill: this.headerNeed };
    }
    if (type === "mdat") this.mdats.push(box);
    this.box = box;
    this.left = end === undefined ? Number.POSITIVE_INFINITY : end - this.pos;
    this.headerFill = 0;
    this.headerNeed = 8;
    if (this.left === 0) this.close();
  }

  private close(): void {
    if (this.moov && this.box?.type === "moov") {
      this.tracks = parseMoov(this.moov.data, this.moov.start);
      // Only the parsed tables are kept from here on; they are views into this buffer.
      this.moov = undefined;
    }
    this.box = undefined;
  }

  finish(total: number): number {
    if (this.box === undefined && this.headerFill > 0) {
      throw new MediaCheckError(
        `the file ends inside a box header (${this.headerFill} of ${this.headerNeed} bytes at offset ${n(total - this.headerFill)}; received ${n(total)} bytes)`,
      );
    }
    const open = this.box;
    if (open !== undefined) {
      if (open.end !== undefined) {
        throw new MediaCheckError(
          `${open.type} runs ${n(open.end - total)} bytes past the end of the file (the box at offset ` +
            `${n(open.start)} declares ${n(open.end - open.start)} bytes; received ${n(total)} bytes)`,
        );
      }
      open.end = total;
    }
    const tracks = this.tracks;
    if (tracks === undefined) {
      throw new MediaCheckError(
        `no moov box (the movie header) in ${n(total)} bytes: the file is incomplete`,
      );
    }
    if (this.mdats.length === 0) {
      throw new MediaCheckError(`no mdat box (the media data) in ${n(total)} bytes: the file is incomplete`);
    }
    for (const track of tracks) checkSamples(track, this.mdats, total);
    // A size-0 mdat has no size of its own to hold against the bytes received: its samples must
    // reach (nearly) the end, or a valid movie followed by padding would pass.
    for (const m of this.mdats) {
      if (m.openEnded && total - m.reached > OPEN_MDAT_SLACK) {
        throw new MediaCheckError(
          `the mdat at offset ${n(m.start)} runs to the end of the file (size 0), but its last sample ends at byte ` +
            `${n(m.reached)}: ${n(total - m.reached)} bytes after it belong to no sample (received ${n(total)} bytes)`,
        );
      }
    }
    const video = tracks.filter((t) => t.handler === "vide");
    if (video.length === 0) {
      throw new MediaCheckError(
        `no video track (track handlers: ${tracks.map((t) => `'${t.handler}'`).join(", ") || "none"})`,
      );
    }
    return Math.max(...video.map((t) => t.ticks / t.timescale));
  }
}

interface Child {
  type: string;
  /** Offsets into the moov buffer. */
  start: number;
  payload: number;
  end: number;
}

/** The boxes directly inside [from, to) of the moov buffer; every one must fit in its parent. */
function children(buf: Buffer, from: number, to: number, where: string, base: number): Child[] {
  const out: Child[] = [];
  let at = from;
  while (at < to) {
    if (to - at < 8) {
      throw new MediaCheckError(
        `${where}: ${to - at} stray bytes at offset ${n(base + at)}, too few for a box`,
      );
    }
    const type = buf.toString("latin1", at + 4, at + 8);
    let size = buf.readUInt32BE(at);
    let header = 8;
    if (size === 1) {
      if (to - at < 16)
        throw new MediaCheckError(`${where}/${type}: 64-bit size cut off at offset ${n(base + at)}`);
      const large = buf.readBigUInt64BE(at + 8);
      size = large > BigInt(to - at) ? Number.POSITIVE_INFINITY : Number(large);
      header = 16;
    }
    if (size < header || at + size > to) {
      throw new MediaCheckError(
        `${where}/${type}: the box at offset ${n(base + at)} declares ${Number.isFinite(size) ? n(size) : "more than"} bytes, ` +
          `its parent has ${n(to - at)} left`,
      );
    }
    out.push({ type, start: at, payload: at + header, end: at + size });
    at += size;
  }
  return out;
}

function only(list: Child[], type: string, where: string, base: number): Child {
  const found = list.filter((c) => c.type === type);
  if (found.length === 0) throw new MediaCheckError(`${where}: no ${type} box`);
  if (found.length > 1) {
    throw new MediaCheckError(
      `${where}: ${found.length} ${type} boxes (a second at offset ${n(base + (found[1]?.start ?? 0))})`,
    );
  }
  return found[0] as Child;
}

function need(box: Child, bytes: number, where: string, what: string): void {
  if (box.end - box.payload < bytes) {
    throw new MediaCheckError(
      `${where}/${box.type}: ${what} needs ${n(bytes)} bytes, the box holds ${n(box.end - box.payload)}`,
    );
  }
}

function parseMoov(buf: Buffer, base: number): Track[] {
  const headerSize = buf.readUInt32BE(0) === 1 ? 16 : 8;
  const top = children(buf, headerSize, buf.length, "moov", base);
  if (top.some((c) => c.type === "mvex")) {
    throw new MediaCheckError("fragmented MP4 (moov/mvex) is not accepted as a result");
  }
  only(top, "mvhd", "moov", base);
  const traks = top.filter((c) => c.type === "trak");
  if (traks.length === 0) throw new MediaCheckError("moov has no track");
  return traks.map((trak, i) => parseTrak(buf, trak, i + 1, base));
}

function parseTrak(buf: Buffer, trak: Child, index: number, base: number): Track {
  const where = `moov/trak[${index}]`;
  const kids = (box: Child, path: string) => children(buf, box.payload, box.end, path, base);
  const mdia = only(kids(trak, where), "mdia", where, base);
  const mdiaKids = kids(mdia, `${where}/mdia`);
  const mdhd = only(mdiaKids, "mdhd", `${where}/mdia`, base);
  const hdlr = only(mdiaKids, "hdlr", `${where}/mdia`, base);
  const minf = only(mdiaKids, "minf", `${where}/mdia`, base);
  const stblWhere = `${where}/mdia/minf/stbl`;
  const stbl = only(kids(minf, `${where}/mdia/minf`), "stbl", `${where}/mdia/minf`, base);
  const tables = kids(stbl, stblWhere);

  const v1 = buf[mdhd.payload] === 1;
  need(mdhd, v1 ? 32 : 20, `${where}/mdia`, "the header");
  const timescale = buf.readUInt32BE(mdhd.payload + (v1 ? 20 : 12));
  if (timescale === 0) throw new MediaCheckError(`${where}/mdia/mdhd: timescale 0`);
  need(hdlr, 12, `${where}/mdia`, "the handler type");
  const handler = buf.toString("latin1", hdlr.payload + 8, hdlr.payload + 12);

  const times = readTimeToSample(buf, only(tables, "stts", stblWhere, base), stblWhere);
  const sizes = readSampleSizes(buf, tables, stblWhere);
  if (times.samples !== sizes.count) {
    throw new MediaCheckError(
      `${stblWhere}: the time table (stts) covers ${n(times.samples)} samples, the size table lists ${n(sizes.count)}`,
    );
  }
  const { chunkCount, chunkOffset } = readChunkOffsets(buf, tables, stblWhere);
  const stsc = only(tables, "stsc", stblWhere, base);
  const runs = readChunkMap(buf, stsc, stblWhere, chunkCount, sizes.count);
  const { uniform, sampleSize } = sizes;
  return {
    index,
    handler,
    timescale,
    ticks: times.ticks,
    uniform,
    sampleSize,
    chunkCount,
    chunkOffset,
    runs,
  };
}

/** stts: the real duration, whatever the headers say. */
function readTimeToSample(buf: Buffer, stts: Child, where: string): { ticks: number; samples: number } {
  need(stts, 8, where, "the entry count");
  const sttsCount = buf.readUInt32BE(stts.payload + 4);
  need(stts, 8 + sttsCount * 8, where, `${n(sttsCount)} entries`);
  let ticks = 0;
  let timedSamples = 0;
  for (let e = 0; e < sttsCount; e++) {
    const count = buf.readUInt32BE(stts.payload + 8 + e * 8);
    ticks += count * buf.readUInt32BE(stts.payload + 12 + e * 8);
    timedSamples += count;
  }
  return { ticks, samples: timedSamples };
}

/** stsz or stz2: the sample count, and each sample's size read in place from the moov buffer. */
function readSampleSizes(
  buf: Buffer,
  tables: Child[],
  where: string,
): { count: number; uniform: number | undefined; sampleSize: (i: number) => number } {
  const sizes = tables.filter((c) => c.type === "stsz" || c.type === "stz2");
  if (sizes.length !== 1)
    throw new MediaCheckError(`${where}: ${sizes.length} sample size boxes (stsz/stz2)`);
  const sz = sizes[0] as Child;
  need(sz, 12, where, "the sample count");
  const sampleCount = buf.readUInt32BE(sz.payload + 8);
  let sampleSize: (i: number) => number;
  let uniform: number | undefined;
  if (sz.type === "stsz") {
    const size = buf.readUInt32BE(sz.payload + 4);
    if (size !== 0) {
      uniform = size;
      sampleSize = () => size;
    } else {
      need(sz, 12 + sampleCount * 4, where, `${n(sampleCount)} sample sizes`);
      sampleSize = (i) => buf.readUInt32BE(sz.payload + 12 + i * 4);
    }
  } else {
    const field = buf[sz.payload + 7] ?? 0;
    if (field !== 4 && field !== 8 && field !== 16) {
      throw new MediaCheckError(`${where}/stz2: field size ${field} (4, 8 or 16 expected)`);
    }
    need(sz, 12 + Math.ceil((sampleCount * field) / 8), where, `${n(sampleCount)} sample sizes`);
    const at = sz.payload + 12;
    sampleSize =
      field === 16
        ? (i) => buf.readUInt16BE(at + i * 2)
        : field === 8
          ? (i) => buf[at + i] ?? 0
          : (i) => ((buf[at + (i >> 1)] ?? 0) >> (i & 1 ? 0 : 4)) & 0xf;
  }
  return { count: sampleCount, uniform, sampleSize };
}

/** stco or co64: where each chunk starts in the file. */
function readChunkOffsets(
  buf: Buffer,
  tables: Child[],
  where: string,
): { chunkCount: number; chunkOffset: (i: number) => number } {
  const offsets = tables.filter((c) => c.type === "stco" || c.type === "co64");
  if (offsets.length !== 1) {
    throw new MediaCheckError(`${where}: ${offsets.length} chunk offset boxes (stco/co64)`);
  }
  const co = offsets[0] as Child;
  need(co, 8, where, "the entry count");
  const chunkCount = buf.readUInt32BE(co.payload + 4);
  const wide = co.type === "co64";
  need(co, 8 + chunkCount * (wide ? 8 : 4), where, `${n(chunkCount)} chunk offsets`);
  const chunkOffset = wide
    ? (i: number) => Number(buf.readBigUInt64BE(co.payload + 8 + i * 8))
    : (i: number) => buf.readUInt32BE(co.payload + 8 + i * 4);
  return { chunkCount, chunkOffset };
}

/** stsc: the runs of chunks with the same number of samples; they must place every sample once. */
function readChunkMap(
  buf: Buffer,
  stsc: Child,
  where: string,
  chunkCount: number,
  sampleCount: number,
): Track["runs"] {
  need(stsc, 8, where, "the entry count");
  const stscCount = buf.readUInt32BE(stsc.payload + 4);
  need(stsc, 8 + stscCount * 12, where, `${n(stscCount)} entries`);
  const runs: Track["runs"] = [];
  let mapped = 0;
  for (let e = 0; e < stscCount; e++) {
    const firstChunk = buf.readUInt32BE(stsc.payload + 8 + e * 12);
    const perChunk = buf.readUInt32BE(stsc.payload + 12 + e * 12);
    const previous = runs[runs.length - 1];
    if (e === 0 ? firstChunk !== 1 : firstChunk <= (previous?.firstChunk ?? 0) || firstChunk > chunkCount) {
      throw new MediaCheckError(
        `${where}/stsc: entry ${e + 1} starts at chunk ${n(firstChunk)} (chunks run 1..${n(chunkCount)}, in order, from 1)`,
      );
    }
    if (previous) mapped += (firstChunk - previous.firstChunk) * previous.perChunk;
    runs.push({ firstChunk, perChunk });
  }
  const last = runs[runs.length - 1];
  if (last) mapped += (chunkCount - last.firstChunk + 1) * last.perChunk;
  if (mapped !== sampleCount || (chunkCount > 0 && runs.length === 0)) {
    throw new MediaCheckError(
      `${where}: the chunk map (stsc over ${n(chunkCount)} chunks) places ${n(mapped)} samples, the size table lists ${n(sampleCount)}`,
    );
  }
  return runs;
}

/** Every chunk of samples must lie inside the received file and inside one mdat payload. */
function checkSamples(track: Track, mdats: TopBox[], total: number): void {
  let sample = 0;
  for (let r = 0; r < track.runs.length; r++) {
    const run = track.runs[r] as Track["runs"][number];
    const next = track.runs[r + 1]?.firstChunk ?? track.chunkCount + 1;
    for (let chunk = run.firstChunk; chunk < next; chunk++) {
      const from = track.chunkOffset(chunk - 1);
      // Invariant: a per-sample walk only happens over a size table that is really in the moov, so
      // a tiny hostile moov claiming billions of same-size samples costs one multiplication per chunk.
      let length = 0;
      if (track.uniform !== undefined) length = run.perChunk * track.uniform;
      else for (let k = 0; k < run.perChunk; k++) length += track.sampleSize(sample + k);
      const to = from + length;
      const what = () =>
        `track ${track.index} ('${track.handler}'), chunk ${n(chunk)} (samples ${n(sample + 1)}-${n(sample + run.perChunk)}) at bytes ${n(from)}-${n(to)}`;
      if (length > 0) {
        if (to > total) {
          throw new MediaCheckError(
            `${what()} runs ${n(to - total)} bytes past the end of the file (received ${n(total)} bytes)`,
          );
        }
        const mdat = mdats.find((m) => m.payload <= from && to <= (m.end ?? total));
        if (!mdat) {
          const where = mdats.map((m) => `${n(m.payload)}-${n(m.end ?? total)}`).join(", ");
          throw new MediaCheckError(`${what()} lies outside the media data (mdat payload at bytes ${where})`);
        }
        mdat.reached = Math.max(mdat.reached, to);
      }
      sample += run.perChunk;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// WAV (RIFF/WAVE)

/** Formats whose byte rate and block alignment are exact, so whole sample frames can be checked. */
const FRAMED_FORMATS = new Set([1, 3, 6, 7, 0xfffe]);

interface RiffChunk {
  id: string;
  start: number;
  size: number;
  /** Offset just past the payload, pad byte not included. */
  end: number;
}

class WavScanner implements Scanner {
  /** Invariant: the file offset of the next byte pushed. */
  private pos = 0;
  private readonly head = Buffer.alloc(12);
  private fill = 0;
  private state: "riff" | "header" | "body" | "pad" = "riff";
  /** Offset just past the RIFF chunk as its size declares it (8 + RIFF size). */
  private riffEnd = 0;
  private chunk: RiffChunk | undefined;
  private left = 0;
  private fmt: { data: Buffer; fill: number } | undefined;
  private format: { byteRate: number; blockAlign: number; framed: boolean } | undefined;
  private data: RiffChunk | undefined;
  private lastOdd = false;

  constructor(private readonly maxBytes: number) {}

  push(buf: Buffer): void {
    let i = 0;
    while (i < buf.length) {
      if (this.state === "riff" || this.state === "header") {
        if (this.state === "header" && this.fill === 0 && this.pos >= this.riffEnd) {
          throw new MediaCheckError(
            `data continues past the end of the RIFF chunk at offset ${n(this.riffEnd)} (its size says the file ` +
              `has ${n(this.riffEnd)} bytes${this.lastOdd ? " plus a pad byte" : ""}): trailing padding or garbage`,
          );
        }
        const want = this.state === "riff" ? 12 : 8;
        const take = Math.min(want - this.fill, buf.length - i);
        buf.copy(this.head, this.fill, i, i + take);
        this.fill += take;
        this.pos += take;
        i += take;
        if (this.state === "riff" && this.fill >= 4) this.checkMagic();
        if (this.fill === want) {
          this.fill = 0;
          if (this.state === "riff") this.openRiff();
          else this.openChunk();
        }
      } else if (this.state === "body") {
        const take = Math.min(this.left, buf.length - i);
        if (this.fmt) {
          buf.copy(this.fmt.data, this.fmt.fill, i, i + take);
          this.fmt.fill += take;
        }
        this.left -= take;
        this.pos += take;
        i += take;
        if (this.left === 0) this.closeChunk();
      } else {
        // The pad byte after an odd-sized chunk; its value does not matter.
        this.pos += 1;
        i += 1;
        this.state = "header";
      }
    }
  }

  private checkMagic(): void {
    const magic = this.head.toString("latin1", 0, 4);
    if (magic === "RF64") throw new MediaCheckError("an RF64 (64-bit) WAV file is not accepted as a result");
    if (magic !== "RIFF") {
      throw new MediaCheckError(`does not start with RIFF (found ${showType(this.head, 0)}): not a WAV file`);
    }
  }

  private openRiff(): void {
    if (this.head.toString("latin1", 8, 12) !== "WAVE") {
      throw new MediaCheckError(`a RIFF file of type ${showType(this.head, 8)}, not WAVE: not a WAV file`);
    }
    const size = this.head.readUInt32LE(4);
    if (size < 4) throw new MediaCheckError(`the RIFF size is ${size}, too small to hold even the WAVE tag`);
    this.riffEnd = 8 + size;
    if (this.riffEnd > this.maxBytes) {
      throw tooLarge(`the RIFF header declares a ${n(this.riffEnd)}-byte file`, this.maxBytes);
    }
    this.state = "header";
  }

  private openChunk(): void {
    const start = this.pos - 8;
    if (!printable(this.head, 0)) {
      throw new MediaCheckError(
        `invalid chunk header at offset ${n(start)}: id ${showType(this.head, 0)} is not four printable characters`,
      );
    }
    const id = this.head.toString("latin1", 0, 4);
    const size = this.head.readUInt32LE(4);
    const chunk: RiffChunk = { id, start, size, end: this.pos + size };
    if (this.pos > this.riffEnd) {
      throw new MediaCheckError(
        `the '${id}' chunk header at offset ${n(start)} crosses the end of the RIFF chunk at ${n(this.riffEnd)}`,
      );
    }
    if (chunk.end > this.riffEnd) {
      throw new MediaCheckError(
        `the '${id}' chunk at offset ${n(start)} declares ${n(size)} bytes and runs ${n(chunk.end - this.riffEnd)} ` +
          `bytes past the end of the RIFF chunk (its size says the file has ${n(this.riffEnd)} bytes)`,
      );
    }
    if (id === "fmt ") {
      if (this.format || this.fmt) throw new MediaCheckError(`a second fmt chunk at offset ${n(start)}`);
      if (this.data)
        throw new MediaCheckError(`the fmt chunk at offset ${n(start)} comes after the data chunk`);
      if (size < 16 || size > FMT_CAP) {
        throw new MediaCheckError(
          `the fmt chunk at offset ${n(start)} has ${n(size)} bytes (16 to ${n(FMT_CAP)} expected)`,
        );
      }
      this.fmt = { data: Buffer.alloc(size), fill: 0 };
    } else if (id === "data") {
      if (this.data) throw new MediaCheckError(`a second data chunk at offset ${n(start)}`);
      if (!this.format)
        throw new MediaCheckError(`the data chunk at offset ${n(start)} comes before any fmt chunk`);
      this.data = chunk;
    }
    this.chunk = chunk;
    this.left = size;
    this.state = "body";
    if (size === 0) this.closeChunk();
  }

  private closeChunk(): void {
    const chunk = this.chunk as RiffChunk;
    if (this.fmt) {
      this.format = parseFmt(this.fmt.data, chunk.start);
      this.fmt = undefined;
    }
    this.lastOdd = chunk.size % 2 === 1;
    this.chunk = undefined;
    this.state = this.lastOdd ? "pad" : "header";
  }

  finish(total: number): number {
    if (this.state === "riff") {
      throw new MediaCheckError(`the file ends after ${n(total)} bytes, inside the 12-byte RIFF header`);
    }
    const chunk = this.chunk;
    if (this.state === "body" && chunk) {
      throw new MediaCheckError(
        `the '${chunk.id.trim()}' chunk runs ${n(chunk.end - total)} bytes past the end of the file (the chunk at ` +
          `offset ${n(chunk.start)} declares ${n(chunk.size)} bytes; received ${n(total)} bytes)`,
      );
    }
    if (this.state === "header" && this.fill > 0) {
      throw new MediaCheckError(
        `the file ends inside a chunk header (${this.fill} of 8 bytes at offset ${n(total - this.fill)})`,
      );
    }
    // RIFF pads odd chunks to an even size; writers disagree on whether the RIFF size counts the
    // final pad byte, so the file may differ from it by that one byte.
    const fits = total === this.riffEnd || (this.lastOdd && Math.abs(total - this.riffEnd) === 1);
    if (!fits) {
      throw new MediaCheckError(
        total < this.riffEnd
          ? `the file ends ${n(this.riffEnd - total)} bytes before the end of its RIFF chunk (the RIFF size says ` +
              `${n(this.riffEnd)} bytes; received ${n(total)} bytes)`
          : `the file has ${n(total - this.riffEnd)} bytes more than its RIFF size says (${n(this.riffEnd)} bytes; received ${n(total)} bytes)`,
      );
    }
    const format = this.format;
    if (!format) throw new MediaCheckError("no fmt chunk: the audio format is unknown");
    const data = this.data;
    if (!data) throw new MediaCheckError("no data chunk: the file holds no audio");
    if (format.framed && data.size % format.blockAlign !== 0) {
      throw new MediaCheckError(
        `the data chunk holds ${n(data.size)} bytes, not a whole number of ${format.blockAlign}-byte sample frames`,
      );
    }
    return data.size / format.byteRate;
  }
}

function parseFmt(fmt: Buffer, start: number): { byteRate: number; blockAlign: number; framed: boolean } {
  const tag = fmt.readUInt16LE(0);
  const channels = fmt.readUInt16LE(2);
  const sampleRate = fmt.readUInt32LE(4);
  const byteRate = fmt.readUInt32LE(8);
  const blockAlign = fmt.readUInt16LE(12);
  const where = `the fmt chunk at offset ${n(start)}`;
  if (channels === 0 || sampleRate === 0 || byteRate === 0 || blockAlign === 0) {
    throw new MediaCheckError(
      `${where} has ${channels} channels, ${n(sampleRate)} Hz, ${n(byteRate)} bytes/s, ${blockAlign}-byte frames: none may be 0`,
    );
  }
  const framed = FRAMED_FORMATS.has(tag);
  if (framed && byteRate !== sampleRate * blockAlign) {
    throw new MediaCheckError(
      `${where} says ${n(byteRate)} bytes/s, but ${n(sampleRate)} Hz x ${blockAlign}-byte frames is ${n(sampleRate * blockAlign)}`,
    );
  }
  return { byteRate, blockAlign, framed };
}
