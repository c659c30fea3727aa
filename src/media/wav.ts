/**
 * The WAV (RIFF/WAVE) scanner of the stream check (stream-check.ts says what is refused and when):
 * the RIFF header, then each chunk's header as it streams past; only the `fmt ` chunk is kept.
 */
import { MediaCheckError, n, tooLarge } from "./errors.js";
import { printable, type Scanner, showType } from "./scanner.js";

const FMT_CAP = 64 * 1024;

/** Formats whose byte rate and block alignment are exact, so whole sample frames can be checked. */
const FRAMED_FORMATS = new Set([1, 3, 6, 7, 0xfffe]);

interface RiffChunk {
  id: string;
  start: number;
  size: number;
  /** Offset just past the payload, pad byte not included. */
  end: number;
}

export class WavScanner implements Scanner {
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
      if (this.state === "riff" || this.state === "header") i += this.takeHeader(buf, i);
      else if (this.state === "body") i += this.takeBody(buf, i);
      else i += this.skipPad();
    }
  }

  /** Reads (part of) the RIFF header or a chunk's header from `buf` at `i`; returns the bytes taken. */
  private takeHeader(buf: Buffer, i: number): number {
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
    if (this.state === "riff" && this.fill >= 4) this.checkMagic();
    if (this.fill === want) {
      this.fill = 0;
      if (this.state === "riff") this.openRiff();
      else this.openChunk();
    }
    return take;
  }

  /** Passes (part of) a chunk's payload, keeping it only for `fmt `; returns the bytes taken. */
  private takeBody(buf: Buffer, i: number): number {
    const take = Math.min(this.left, buf.length - i);
    if (this.fmt) {
      buf.copy(this.fmt.data, this.fmt.fill, i, i + take);
      this.fmt.fill += take;
    }
    this.left -= take;
    this.pos += take;
    if (this.left === 0) this.closeChunk();
    return take;
  }

  /** The pad byte after an odd-sized chunk; its value does not matter. */
  private skipPad(): number {
    this.pos += 1;
    this.state = "header";
    return 1;
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
  // Said only when a check fails: formatting numbers for every result cost more than the checks.
  const where = () => `the fmt chunk at offset ${n(start)}`;
  if (channels === 0 || sampleRate === 0 || byteRate === 0 || blockAlign === 0) {
    throw new MediaCheckError(
      `${where()} has ${channels} channels, ${n(sampleRate)} Hz, ${n(byteRate)} bytes/s, ${blockAlign}-byte frames: none may be 0`,
    );
  }
  const framed = FRAMED_FORMATS.has(tag);
  if (framed && byteRate !== sampleRate * blockAlign) {
    throw new MediaCheckError(
      `${where()} says ${n(byteRate)} bytes/s, but ${n(sampleRate)} Hz x ${blockAlign}-byte frames is ${n(sampleRate * blockAlign)}`,
    );
  }
  return { byteRate, blockAlign, framed };
}

// Duration from a RIFF/WAVE header: the data chunk's declared size over the fmt chunk's byte rate.
// Needs only the first bytes of the file, so a result can be checked while it streams elsewhere.

export function wavSeconds(head: Buffer): number | undefined {
  if (
    head.length < 12 ||
    head.toString("latin1", 0, 4) !== "RIFF" ||
    head.toString("latin1", 8, 12) !== "WAVE"
  ) {
    return undefined;
  }
  let byteRate: number | undefined;
  let at = 12;
  while (at + 8 <= head.length) {
    const id = head.toString("latin1", at, at + 4);
    const size = head.readUInt32LE(at + 4);
    if (id === "fmt " && at + 20 <= head.length) byteRate = head.readUInt32LE(at + 16);
    if (id === "data") return byteRate ? size / byteRate : undefined;
    // Chunks are padded to an even size.
    at += 8 + size + (size % 2);
  }
  return undefined;
}
