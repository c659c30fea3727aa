/**
 * The MP4 (ISO/IEC 14496-12) scanner of the stream check (stream-check.ts says what is refused and
 * when): the top-level boxes as they stream past, the `moov` kept (capped) and parsed at its end,
 * every chunk of samples held against the file received.
 */

import { open } from "node:fs/promises";
import { MediaCheckError, mib, n, tooLarge } from "./errors.js";
import { printable, type Scanner, showType } from "./scanner.js";

/** Larger than the moov of hours of video; a bigger one is not what an encoder wrote. */
const MOOV_CAP = 32 * 1024 * 1024;
/** Real files have four to six; the cap bounds what is kept about them. */
const MAX_TOP_LEVEL_BOXES = 4096;
/** An `mdat` running to the end of the file (size 0) may end with this much no sample refers to. */
const OPEN_MDAT_SLACK = 64 * 1024;

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

export class Mp4Scanner implements Scanner {
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

/** `what` is a function when it takes formatting: it is said only when the box is too short. */
function need(box: Child, bytes: number, where: string, what: string | (() => string)): void {
  if (box.end - box.payload < bytes) {
    throw new MediaCheckError(
      `${where}/${box.type}: ${typeof what === "string" ? what : what()} needs ${n(bytes)} bytes, the box holds ${n(box.end - box.payload)}`,
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
  need(stts, 8 + sttsCount * 8, where, () => `${n(sttsCount)} entries`);
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
      need(sz, 12 + sampleCount * 4, where, () => `${n(sampleCount)} sample sizes`);
      sampleSize = (i) => buf.readUInt32BE(sz.payload + 12 + i * 4);
    }
  } else {
    const field = buf[sz.payload + 7] ?? 0;
    if (field !== 4 && field !== 8 && field !== 16) {
      throw new MediaCheckError(`${where}/stz2: field size ${field} (4, 8 or 16 expected)`);
    }
    need(sz, 12 + Math.ceil((sampleCount * field) / 8), where, () => `${n(sampleCount)} sample sizes`);
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
  need(co, 8 + chunkCount * (wide ? 8 : 4), where, () => `${n(chunkCount)} chunk offsets`);
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
  need(stsc, 8 + stscCount * 12, where, () => `${n(stscCount)} entries`);
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

// Duration from the movie header (`moov/mvhd`) alone, for files read whole or from disk: music-metadata
// reports durations of MP4 files only when they carry audio; generated and reference videos are often silent.

function mvhdSeconds(data: Buffer): number | undefined {
  if (data.length < 20) return undefined;
  const version = data[0];
  if (version === 1) {
    if (data.length < 32) return undefined;
    const timescale = data.readUInt32BE(20);
    const duration = Number(data.readBigUInt64BE(24));
    return timescale > 0 ? duration / timescale : undefined;
  }
  const timescale = data.readUInt32BE(12);
  const duration = data.readUInt32BE(16);
  return timescale > 0 ? duration / timescale : undefined;
}

/** The payload range of the first box of `type` among the boxes in [from, to). */
function findBox(
  data: Buffer,
  from: number,
  to: number,
  type: string,
): { start: number; end: number } | undefined {
  let at = from;
  while (at + 8 <= to) {
    let size = data.readUInt32BE(at);
    let header = 8;
    if (size === 1 && at + 16 <= to) {
      size = Number(data.readBigUInt64BE(at + 8));
      header = 16;
    } else if (size === 0) {
      size = to - at;
    }
    if (size < header || at + size > to) return undefined;
    if (data.toString("latin1", at + 4, at + 8) === type) return { start: at + header, end: at + size };
    at += size;
  }
  return undefined;
}

export function mp4Seconds(data: Buffer): number | undefined {
  const moov = findBox(data, 0, data.length, "moov");
  if (!moov) return undefined;
  const mvhd = findBox(data, moov.start, moov.end, "mvhd");
  return mvhd ? mvhdSeconds(data.subarray(mvhd.start, mvhd.end)) : undefined;
}

/** Reads only the box headers and the moov box, so a 1 GiB file costs a few small reads. */
export async function mp4FileSeconds(path: string): Promise<number | undefined> {
  const file = await open(path, "r");
  try {
    const { size } = await file.stat();
    const head = Buffer.alloc(16);
    let at = 0;
    while (at + 8 <= size) {
      await file.read(head, 0, 16, at);
      let box = head.readUInt32BE(0);
      const type = head.toString("latin1", 4, 8);
      if (box === 1) box = Number(head.readBigUInt64BE(8));
      else if (box === 0) box = size - at;
      if (box < 8) return undefined;
      if (type === "moov") {
        if (box > 64 * 1024 * 1024) return undefined;
        const moov = Buffer.alloc(box);
        await file.read(moov, 0, box, at);
        return mp4Seconds(moov);
      }
      at += box;
    }
    return undefined;
  } finally {
    await file.close();
  }
}
