// Real files from the sandbox's own media generator, hand-corrupted, streamed through the check in
// whole, one-byte and random-sized chunks so every boundary of every header is crossed.
import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { MediaCheckError, ResultTooLargeError } from "../../src/media/errors.js";
import { mp4Seconds } from "../../src/media/mp4.js";
import { wavSeconds } from "../../src/media/wav.js";
import { resultLimit } from "../../src/results/size-policy.js";
import {
  type MediaCheckOptions,
  type MediaCheckResult,
  mediaCheck,
  mediaCheckFile,
} from "../../src/results/stream-check.js";
import { makeMp4, makeWav, speechDurationMs } from "../../src/sandbox/media.js";
import { rng } from "../run/harness.js";

const MIB = 1024 * 1024;

type Mode = "whole" | "bytes" | "random";

function split(buf: Buffer, mode: Mode, seed = 1): Buffer[] {
  if (mode === "whole") return [buf];
  const parts: Buffer[] = [];
  const next = rng(seed);
  for (let at = 0; at < buf.length; ) {
    // Mostly small pieces (so headers straddle chunks), sometimes big ones.
    const size =
      mode === "bytes" ? 1 : next() < 0.8 ? 1 + Math.floor(next() * 40) : 1 + Math.floor(next() * 9000);
    parts.push(buf.subarray(at, at + size));
    at += size;
  }
  return parts;
}

interface Outcome {
  result?: MediaCheckResult;
  error?: unknown;
  /** sha256 and length of what came out of the check. */
  sha256: string;
  passed: number;
}

async function stream(source: Readable, options: MediaCheckOptions): Promise<Outcome> {
  const check = mediaCheck(options);
  const hash = createHash("sha256");
  let passed = 0;
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      hash.update(chunk);
      passed += chunk.length;
      done();
    },
  });
  try {
    await pipeline(source, check.stream, sink);
    return { result: check.result(), sha256: hash.digest("hex"), passed };
  } catch (error) {
    return { error, sha256: hash.digest("hex"), passed };
  }
}

const sha = (buf: Buffer) => createHash("sha256").update(buf).digest("hex");

/** Every split mode; one-byte chunks only where the file is small enough to keep the test quick. */
function modes(buf: Buffer): Mode[] {
  return buf.length <= 200_000 ? ["whole", "bytes", "random"] : ["whole", "random"];
}

async function accepted(buf: Buffer, options: MediaCheckOptions): Promise<MediaCheckResult> {
  let last: MediaCheckResult | undefined;
  for (const mode of modes(buf)) {
    for (const seed of mode === "random" ? [1, 2, 3] : [1]) {
      const out = await stream(Readable.from(split(buf, mode, seed)), options);
      expect(out.error, `${mode} split (seed ${seed})`).toBeUndefined();
      // Passed through unchanged: the sink hashes what the check lets out.
      expect(out.sha256).toBe(sha(buf));
      expect(out.result?.bytes).toBe(buf.length);
      last = out.result;
    }
  }
  return last as MediaCheckResult;
}

async function refused(buf: Buffer, options: MediaCheckOptions, message: RegExp): Promise<Outcome> {
  let last: Outcome | undefined;
  for (const mode of modes(buf)) {
    for (const seed of mode === "random" ? [1, 2, 3] : [1]) {
      const out = await stream(Readable.from(split(buf, mode, seed)), options);
      expect(out.error, `${mode} split (seed ${seed}) was accepted`).toBeInstanceOf(MediaCheckError);
      expect((out.error as Error).message, `${mode} split (seed ${seed})`).toMatch(message);
      last = out;
    }
  }
  return last as Outcome;
}

const video = (expectedSeconds?: number, maxBytes = 64 * MIB): MediaCheckOptions => ({
  kind: "video",
  maxBytes,
  ...(expectedSeconds !== undefined ? { expectedSeconds } : {}),
});
const speech = (expectedSeconds?: number, maxBytes = 64 * MIB): MediaCheckOptions => ({
  kind: "speech",
  maxBytes,
  ...(expectedSeconds !== undefined ? { expectedSeconds } : {}),
});

// ---------------------------------------------------------------------------------------------
// MP4 helpers: the generator writes ftyp, moov, mdat (fast start).

interface Box {
  type: string;
  start: number;
  size: number;
}

function topBoxes(buf: Buffer): Box[] {
  const out: Box[] = [];
  for (let at = 0; at + 8 <= buf.length; ) {
    const size = buf.readUInt32BE(at);
    out.push({ type: buf.toString("latin1", at + 4, at + 8), start: at, size });
    at += size;
  }
  return out;
}

const CONTAINERS = new Set(["moov", "trak", "mdia", "minf", "stbl"]);

/** Absolute offset of the header of the box at `path` (first match at each level). */
function boxAt(buf: Buffer, path: readonly string[], from = 0, to = buf.length): number {
  const [head, ...rest] = path;
  for (let at = from; at + 8 <= to; ) {
    const size = buf.readUInt32BE(at);
    const type = buf.toString("latin1", at + 4, at + 8);
    if (type === head) {
      if (rest.length === 0) return at;
      if (!CONTAINERS.has(type)) break;
      return boxAt(buf, rest, at + 8, at + size);
    }
    at += size;
  }
  throw new Error(`no box ${path.join("/")}`);
}

const STBL = ["moov", "trak", "mdia", "minf", "stbl"];

function top(buf: Buffer, type: string): Box {
  const box = topBoxes(buf).find((b) => b.type === type);
  if (!box) throw new Error(`no ${type}`);
  return box;
}

/** The same movie with its moov after the media data, chunk offsets moved accordingly. */
function moovAtEnd(mp4: Buffer): Buffer {
  const ftyp = top(mp4, "ftyp");
  const moov = top(mp4, "moov");
  const mdat = top(mp4, "mdat");
  const out = Buffer.concat([
    mp4.subarray(ftyp.start, ftyp.start + ftyp.size),
    mp4.subarray(mdat.start, mdat.start + mdat.size),
    mp4.subarray(moov.start, moov.start + moov.size),
  ]);
  const stco = boxAt(out, [...STBL, "stco"]);
  const count = out.readUInt32BE(stco + 12);
  for (let i = 0; i < count; i++) {
    const at = stco + 16 + i * 4;
    out.writeUInt32BE(out.readUInt32BE(at) - moov.size, at);
  }
  return out;
}

function box(type: string, payload: Buffer): Buffer {
  const header = Buffer.alloc(8);
  header.writeUInt32BE(8 + payload.length, 0);
  header.write(type, 4, "latin1");
  return Buffer.concat([header, payload]);
}

/** What the sandbox sends with video_pad_bytes: the movie, then a `free` box of `pad` bytes. */
function freeHeader(pad: number): Buffer {
  if (pad > 0xffffffff) {
    const h = Buffer.alloc(16);
    h.writeUInt32BE(1, 0);
    h.write("free", 4, "latin1");
    h.writeBigUInt64BE(BigInt(pad), 8);
    return h;
  }
  const h = Buffer.alloc(8);
  h.writeUInt32BE(pad, 0);
  h.write("free", 4, "latin1");
  return h;
}

function patched(buf: Buffer, edit: (copy: Buffer) => void): Buffer {
  const copy = Buffer.from(buf);
  edit(copy);
  return copy;
}

const MP4 = await makeMp4(4, 320, 240);
const MDAT = top(MP4, "mdat");
const MOOV = top(MP4, "moov");
// The generator's WAV: RIFF, fmt (16 bytes), data; 24 kHz mono 16-bit.
const WAV = makeWav(1500);
const DATA_SIZE_AT = 40;
const RIFF_SIZE_AT = 4;

describe("the header-only check it replaces", () => {
  it("refuses a truncated movie and a short WAV whose headers alone look whole", async () => {
    const cutMp4 = MP4.subarray(0, MDAT.start + 100);
    const cutWav = WAV.subarray(0, 10_000);
    // The defect (issue 9, item 10): both were accepted from their headers alone, which still
    // carry the full duration.
    expect(mp4Seconds(cutMp4)).toBeCloseTo(4, 3);
    expect(wavSeconds(cutWav)).toBeCloseTo(1.5, 3);
    await refused(cutMp4, video(4), /^mdat runs [\d,]+ bytes past the end of the file/);
    await refused(cutWav, speech(), /^the 'data' chunk runs 62,044 bytes past the end of the file/);
  });
});

describe("mediaCheck: MP4", () => {
  it("accepts the generator's fast-start movie and measures it from the sample table", async () => {
    expect(topBoxes(MP4).map((b) => b.type)).toEqual(["ftyp", "moov", "mdat"]);
    const result = await accepted(MP4, video(4));
    expect(result.seconds).toBeCloseTo(4, 3);
  });

  it("accepts the moov at the end of the file (the usual encoder layout)", async () => {
    const tail = moovAtEnd(MP4);
    expect(topBoxes(tail).map((b) => b.type)).toEqual(["ftyp", "mdat", "moov"]);
    expect((await accepted(tail, video(4))).seconds).toBeCloseTo(4, 3);
  });

  it("accepts the sandbox's padded results: a trailing free box, 32-bit or 64-bit size", async () => {
    const pad = 100_000;
    const small = Buffer.concat([MP4, freeHeader(pad), Buffer.alloc(pad - 8)]);
    expect((await accepted(small, video(4))).bytes).toBe(MP4.length + pad);
    const large = Buffer.alloc(16);
    large.writeUInt32BE(1, 0);
    large.write("free", 4, "latin1");
    large.writeBigUInt64BE(BigInt(pad), 8);
    await accepted(Buffer.concat([MP4, large, Buffer.alloc(pad - 16)]), video(4));
  });

  it("accepts a larger movie (1280x720, 6 s) through random chunks", async () => {
    const mp4 = await makeMp4(6, 1280, 720);
    expect((await accepted(mp4, video(6))).seconds).toBeCloseTo(6, 3);
  });

  it("accepts a final mdat of size 0 (to the end of the file) that its samples fill", async () => {
    // ftyp, moov, mdat(size 0): the generator's layout with the last box left open.
    await accepted(
      patched(MP4, (c) => c.writeUInt32BE(0, MDAT.start)),
      video(4),
    );
  });

  it("refuses a movie truncated in the middle of mdat", async () => {
    const cut = MP4.subarray(0, MDAT.start + Math.floor(MDAT.size / 2));
    const half = MDAT.start + MDAT.size - cut.length;
    await refused(cut, video(4), new RegExp(`^mdat runs ${half.toLocaleString("en-US")} bytes past the end`));
  });

  it("refuses a movie one byte short", async () => {
    await refused(MP4.subarray(0, MP4.length - 1), video(4), /^mdat runs 1 bytes past the end of the file/);
    const tail = moovAtEnd(MP4);
    await refused(tail.subarray(0, tail.length - 1), video(4), /^moov runs 1 bytes past the end of the file/);
  });

  it("refuses a Content-Length-style cut at the end of moov", async () => {
    // Fast start: everything up to the end of moov arrives, the media data never does.
    const cut = MP4.subarray(0, MOOV.start + MOOV.size);
    await refused(cut, video(4), /^no mdat box \(the media data\) in [\d,]+ bytes: the file is incomplete/);
    // Moov at the end: the cut lands inside it.
    const tail = moovAtEnd(MP4);
    await refused(tail.subarray(0, tail.length - 200), video(4), /^moov runs 200 bytes past the end/);
    // A cut inside a box header is named as such.
    await refused(MP4.subarray(0, MDAT.start + 5), video(4), /ends inside a box header \(5 of 8 bytes/);
  });

  it("refuses an mdat whose size says more than there is", async () => {
    const longer = patched(MP4, (c) => c.writeUInt32BE(MDAT.size + 1000, MDAT.start));
    await refused(longer, video(4), /^mdat runs 1,000 bytes past the end of the file \(the box at offset/);
  });

  it("refuses chunk offsets past the end of the file or outside mdat", async () => {
    const stco = boxAt(MP4, [...STBL, "stco"]);
    const count = MP4.readUInt32BE(stco + 12);
    const lastEntry = stco + 16 + (count - 1) * 4;
    const past = patched(MP4, (c) => c.writeUInt32BE(MP4.length + 100, lastEntry));
    await refused(
      past,
      video(4),
      /^track 1 \('vide'\), chunk \d+ \(samples [\d,-]+\) at bytes [\d,-]+ runs [\d,]+ bytes past the end of the file/,
    );
    // Into the moov: inside the file, but not media data.
    const inMoov = patched(MP4, (c) => c.writeUInt32BE(MOOV.start + 8, stco + 16));
    await refused(
      inMoov,
      video(4),
      /^track 1 \('vide'\), chunk 1 .* lies outside the media data \(mdat payload at bytes/,
    );
  });

  it("refuses a valid movie followed by 1 MiB of zeros, at the first zero header", async () => {
    const padded = Buffer.concat([MP4, Buffer.alloc(MIB)]);
    const out = await refused(
      padded,
      video(4),
      new RegExp(
        `^invalid box header at offset ${MP4.length.toLocaleString("en-US")}: type 00 00 00 00 \\(hex\\) is not four printable`,
      ),
    );
    // Stopped as soon as the header was seen: almost none of the zeros went through.
    expect(out.passed).toBeLessThan(MP4.length + 10_000);
  });

  it("refuses a valid movie followed by garbage", async () => {
    const next = rng(7);
    const garbage = Buffer.from(Array.from({ length: 4096 }, () => Math.floor(next() * 256)));
    await refused(
      Buffer.concat([MP4, garbage]),
      video(4),
      /invalid box header at offset|past the end of the file|declares/,
    );
    // A box header with a size below 8.
    const tiny = Buffer.from([0, 0, 0, 5, 0x6a, 0x75, 0x6e, 0x6b, 0]);
    await refused(
      Buffer.concat([MP4, tiny]),
      video(4),
      /'junk' has size 5, below the 8 bytes of its own header/,
    );
    // A well-formed box that claims more than follows.
    await refused(
      Buffer.concat([MP4, box("free", Buffer.alloc(100)).subarray(0, 50)]),
      video(4),
      /^free runs 58 bytes past the end/,
    );
  });

  it("refuses what is not an MP4 at the first header", async () => {
    const html = Buffer.from("<!DOCTYPE html><html><body>502 Bad Gateway</body></html>\n".repeat(100));
    const out = await refused(
      html,
      video(4),
      /^does not start with an ftyp box \(found 'CTYP'\): not an MP4 file/,
    );
    expect(out.passed).toBeLessThan(10_000);
    await refused(Buffer.from("{}"), video(4), /ends inside a box header \(2 of 8 bytes/);
    await refused(Buffer.alloc(0), video(4), /^the result is empty \(0 bytes\)/);
  });

  it("refuses a second moov, a missing moov, and a fragmented movie", async () => {
    const moov = MP4.subarray(MOOV.start, MOOV.start + MOOV.size);
    await refused(Buffer.concat([MP4, moov]), video(4), /^a second moov box at offset/);
    const ftyp = MP4.subarray(0, MOOV.start);
    await refused(
      Buffer.concat([ftyp, MP4.subarray(MDAT.start)]),
      video(4),
      /^no moov box \(the movie header\) in [\d,]+ bytes/,
    );
    await refused(
      Buffer.concat([MP4, box("moof", Buffer.alloc(16))]),
      video(4),
      /fragmented MP4 \(a moof box/,
    );
  });

  it("measures the real duration from stts, not the mvhd header", async () => {
    // Halve every sample's duration: the headers still say 4 s, the samples last 2 s.
    const stts = boxAt(MP4, [...STBL, "stts"]);
    const delta = MP4.readUInt32BE(stts + 20);
    const short = patched(MP4, (c) => c.writeUInt32BE(delta / 2, stts + 20));
    await refused(short, video(4), /^lasts 2\.00 s by its sample table, 4 s were requested/);
    expect((await accepted(short, video())).seconds).toBeCloseTo(2, 3);
  });

  it("refuses a duration more than 0.5 s from the request, accepts within it", async () => {
    await refused(MP4, video(6), /^lasts 4\.00 s by its sample table, 6 s were requested/);
    await refused(MP4, video(3.4), /lasts 4\.00 s/);
    await accepted(MP4, video(4.4));
    await accepted(MP4, video(3.6));
  });

  it("refuses sample tables that disagree with each other", async () => {
    const stts = boxAt(MP4, [...STBL, "stts"]);
    const count = MP4.readUInt32BE(stts + 16);
    const fewer = patched(MP4, (c) => c.writeUInt32BE(count - 1, stts + 16));
    await refused(fewer, video(), /the time table \(stts\) covers 95 samples, the size table lists 96/);
    const stsz = boxAt(MP4, [...STBL, "stsz"]);
    const more = patched(MP4, (c) => c.writeUInt32BE(c.readUInt32BE(stsz + 16) + 1000, stsz + 16));
    await refused(more, video(), /stsz: [\d,]+ sample sizes needs [\d,]+ bytes, the box holds/);
  });

  it("refuses a tiny moov claiming billions of samples quickly, without walking them", async () => {
    const stts = boxAt(MP4, [...STBL, "stts"]);
    const stsz = boxAt(MP4, [...STBL, "stsz"]);
    const stsc = boxAt(MP4, [...STBL, "stsc"]);
    const chunks = MP4.readUInt32BE(boxAt(MP4, [...STBL, "stco"]) + 12);
    const perChunk = 500_000_000;
    const hostile = patched(MP4, (c) => {
      c.writeUInt32BE(chunks * perChunk, stts + 16);
      c.writeUInt32BE(1, stsz + 12); // one size for every sample: no table to bound the count
      c.writeUInt32BE(chunks * perChunk, stsz + 16);
      c.writeUInt32BE(perChunk, stsc + 20);
    });
    const started = Date.now();
    await refused(
      hostile,
      video(),
      /^track 1 \('vide'\), chunk 1 \(samples 1-500,000,000\) .* runs [\d,]+ bytes past the end/,
    );
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("refuses a movie whose moov is above the cap, at its header", async () => {
    const header = Buffer.alloc(8);
    header.writeUInt32BE(33 * MIB, 0);
    header.write("moov", 4, "latin1");
    const out = await refused(
      Buffer.concat([MP4.subarray(0, MOOV.start), header, Buffer.alloc(1000)]),
      video(),
      /the moov box at offset 28 declares 34,603,008 bytes, more than the 32\.0 MiB a movie header may take/,
    );
    expect(out.passed).toBeLessThan(100);
  });

  it("refuses a final mdat of size 0 followed by padding no sample refers to", async () => {
    const open = patched(MP4, (c) => c.writeUInt32BE(0, MDAT.start));
    await refused(
      Buffer.concat([open, Buffer.alloc(MIB)]),
      video(4),
      /mdat at offset [\d,]+ runs to the end of the file \(size 0\), but its last sample ends at byte [\d,]+: 1,048,576 bytes after it belong to no sample/,
    );
  });
});

// ---------------------------------------------------------------------------------------------
// WAV

/** An 8-bit mono PCM WAV: one-byte frames, so an odd data size and its pad byte can be written. */
function oddWav(samples: number, opts: { padByte: boolean; riffCountsPad: boolean; after?: Buffer }): Buffer {
  const pad = samples % 2 === 1 && opts.padByte ? 1 : 0;
  const after = opts.after ?? Buffer.alloc(0);
  const h = Buffer.alloc(44);
  h.write("RIFF", 0, "latin1");
  const countedPad = samples % 2 === 1 && opts.riffCountsPad ? 1 : 0;
  h.writeUInt32LE(36 + samples + countedPad + after.length, 4);
  h.write("WAVEfmt ", 8, "latin1");
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(8000, 24);
  h.writeUInt32LE(8000, 28);
  h.writeUInt16LE(1, 32);
  h.writeUInt16LE(8, 34);
  h.write("data", 36, "latin1");
  h.writeUInt32LE(samples, 40);
  return Buffer.concat([h, Buffer.alloc(samples, 0x80), Buffer.alloc(pad), after]);
}

describe("mediaCheck: WAV", () => {
  it("accepts the generator's WAV and measures it as data bytes / byte rate", async () => {
    expect((await accepted(WAV, speech())).seconds).toBeCloseTo(1.5, 6);
    expect((await accepted(makeWav(1), speech())).seconds).toBeCloseTo(0.001, 6);
  });

  it("accepts odd data chunks with or without the pad byte counted, and chunks after data", async () => {
    expect(
      (await accepted(oddWav(8001, { padByte: true, riffCountsPad: true }), speech())).seconds,
    ).toBeCloseTo(8001 / 8000, 6);
    await accepted(oddWav(8001, { padByte: true, riffCountsPad: false }), speech());
    await accepted(oddWav(8001, { padByte: false, riffCountsPad: false }), speech());
    await accepted(oddWav(8001, { padByte: false, riffCountsPad: true }), speech());
    // LIST/INFO/ISFT "clap": metadata some encoders write after the audio.
    const info = Buffer.from("LIST\x12\x00\x00\x00INFOISFT\x06\x00\x00\x00clap\x00\x00", "latin1");
    await accepted(oddWav(8000, { padByte: true, riffCountsPad: true, after: info }), speech());
  });

  it("refuses a RIFF size too big (the file ends before it)", async () => {
    const big = patched(WAV, (c) => c.writeUInt32LE(c.readUInt32LE(RIFF_SIZE_AT) + 100, RIFF_SIZE_AT));
    await refused(
      big,
      speech(),
      /^the file ends 100 bytes before the end of its RIFF chunk \(the RIFF size says 72,144 bytes; received 72,044 bytes\)/,
    );
  });

  it("refuses a RIFF size too small, at the data chunk header", async () => {
    const small = patched(WAV, (c) => c.writeUInt32LE(c.readUInt32LE(RIFF_SIZE_AT) - 100, RIFF_SIZE_AT));
    const out = await refused(
      small,
      speech(),
      /^the 'data' chunk at offset 36 declares 72,000 bytes and runs 100 bytes past the end of the RIFF chunk/,
    );
    expect(out.passed).toBeLessThan(10_000);
  });

  it("refuses a data chunk shorter than the audio that follows it", async () => {
    const short = patched(WAV, (c) => c.writeUInt32LE(c.readUInt32LE(DATA_SIZE_AT) - 100, DATA_SIZE_AT));
    await refused(
      short,
      speech(),
      /invalid chunk header at offset 71,944: id .* is not four printable characters/,
    );
  });

  it("refuses a data chunk claiming more than is present", async () => {
    const claims = patched(WAV, (c) => {
      c.writeUInt32LE(c.readUInt32LE(DATA_SIZE_AT) + 1000, DATA_SIZE_AT);
      c.writeUInt32LE(c.readUInt32LE(RIFF_SIZE_AT) + 1000, RIFF_SIZE_AT);
    });
    await refused(
      claims,
      speech(),
      /^the 'data' chunk runs 1,000 bytes past the end of the file \(the chunk at offset 36 declares 73,000 bytes; received 72,044 bytes\)/,
    );
    await refused(
      WAV.subarray(0, 30_000),
      speech(),
      /^the 'data' chunk runs 42,044 bytes past the end of the file/,
    );
    await refused(WAV.subarray(0, 30), speech(), /ends inside the fmt|'fmt' chunk runs 6 bytes past the end/);
  });

  it("refuses trailing zeros at once", async () => {
    const out = await refused(
      Buffer.concat([WAV, Buffer.alloc(MIB)]),
      speech(),
      /^data continues past the end of the RIFF chunk at offset 72,044 .*trailing padding or garbage/,
    );
    expect(out.passed).toBeLessThan(WAV.length + 10_000);
    // One extra byte is a pad byte only after an odd chunk.
    await refused(
      Buffer.concat([WAV, Buffer.alloc(1)]),
      speech(),
      /^data continues past the end of the RIFF chunk/,
    );
    await refused(
      Buffer.concat([oddWav(8001, { padByte: true, riffCountsPad: false }), Buffer.alloc(2)]),
      speech(),
      /^data continues past the end of the RIFF chunk/,
    );
  });

  it("refuses what is not RIFF/WAVE at the first bytes", async () => {
    const out = await refused(
      Buffer.concat([Buffer.from("ID3\x04"), Buffer.alloc(MIB)]),
      speech(),
      /^does not start with RIFF \(found 49 44 33 04 \(hex\)\): not a WAV file/,
    );
    expect(out.passed).toBeLessThan(100);
    await refused(
      patched(WAV, (c) => c.write("AVI ", 8, "latin1")),
      speech(),
      /a RIFF file of type 'AVI ', not WAVE/,
    );
    await refused(WAV.subarray(0, 7), speech(), /ends after 7 bytes, inside the 12-byte RIFF header/);
  });

  it("refuses a data chunk before fmt, a zero byte rate, and partial sample frames", async () => {
    const rate0 = patched(WAV, (c) => c.writeUInt32LE(0, 28));
    await refused(rate0, speech(), /fmt chunk at offset 12 has 1 channels, 24,000 Hz, 0 bytes\/s/);
    const wrongRate = patched(WAV, (c) => c.writeUInt32LE(96_000, 28));
    await refused(wrongRate, speech(), /says 96,000 bytes\/s, but 24,000 Hz x 2-byte frames is 48,000/);
    // One byte less of audio and the sizes to match (no pad byte, as the pad rule allows).
    const odd = patched(WAV, (c) => {
      c.writeUInt32LE(c.readUInt32LE(DATA_SIZE_AT) - 1, DATA_SIZE_AT);
      c.writeUInt32LE(c.readUInt32LE(RIFF_SIZE_AT) - 1, RIFF_SIZE_AT);
    });
    await refused(odd.subarray(0, odd.length - 1), speech(), /not a whole number of 2-byte sample frames/);
    const dataFirst = Buffer.concat([WAV.subarray(0, 12), Buffer.from("data\0\0\0\0"), WAV.subarray(12)]);
    dataFirst.writeUInt32LE(WAV.readUInt32LE(4) + 8, 4);
    await refused(dataFirst, speech(), /the data chunk at offset 12 comes before any fmt chunk/);
  });

  it("refuses empty audio and a wrong duration", async () => {
    const empty = oddWav(0, { padByte: false, riffCountsPad: false });
    await refused(empty, speech(), /^the WAV file has no duration/);
    await refused(WAV, speech(3), /^lasts 1\.50 s by its data chunk, 3 s were requested/);
    await accepted(WAV, speech(1.9));
  });
});

// ---------------------------------------------------------------------------------------------
// Limits, endless bodies and memory

/** A body that never ends: `head` then fresh `chunk`-sized buffers forever, counting what it made. */
function endless(head: Buffer, chunk = 64 * 1024): { body: Readable; produced: () => number } {
  let produced = 0;
  let sentHead = false;
  const body = new Readable({
    read() {
      if (!sentHead) {
        sentHead = true;
        produced += head.length;
        this.push(head);
        return;
      }
      produced += chunk;
      this.push(Buffer.alloc(chunk));
    },
  });
  return { body, produced: () => produced };
}

describe("limits", () => {
  it("stops an endless body just past maxBytes, without reading on", async () => {
    const maxBytes = 8 * MIB;
    // ftyp, then an mdat of size 0: nothing but the limit can end it.
    const head = Buffer.concat([MP4.subarray(0, MOOV.start), Buffer.from([0, 0, 0, 0]), Buffer.from("mdat")]);
    const { body, produced } = endless(head);
    const started = Date.now();
    const out = await stream(body, video(4, maxBytes));
    expect(out.error).toBeInstanceOf(ResultTooLargeError);
    expect((out.error as Error).message).toMatch(
      /^the result reached [\d,]+ bytes and was stopped there, more than the limit of 8,388,608 bytes \(8\.0 MiB\) for this result \(see --max-result-mb\)/,
    );
    expect(out.passed).toBeLessThanOrEqual(maxBytes);
    expect(produced()).toBeLessThan(maxBytes + 512 * 1024);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(body.destroyed).toBe(true);
  });

  it("refuses a box or RIFF size above maxBytes at its header", async () => {
    // The sandbox's own padding at 8 GiB: refused from its 16-byte header.
    const big = endless(Buffer.concat([MP4, freeHeader(8 * 1024 * MIB)]));
    const out = await stream(big.body, video(4, 64 * MIB));
    expect(out.error).toBeInstanceOf(ResultTooLargeError);
    expect((out.error as Error).message).toMatch(
      /^the 'free' box at offset [\d,]+ declares 8,589,934,592 bytes, more than the limit/,
    );
    expect(big.produced()).toBeLessThan(MP4.length + 512 * 1024);

    const riff = patched(WAV.subarray(0, 44), (c) => c.writeUInt32LE(0xffffffff, RIFF_SIZE_AT));
    const wav = endless(riff);
    const w = await stream(wav.body, speech(undefined, 64 * MIB));
    expect(w.error).toBeInstanceOf(ResultTooLargeError);
    expect((w.error as Error).message).toMatch(/^the RIFF header declares a 4,294,967,303-byte file/);
    expect(w.passed).toBe(0);
  });

  it("resultLimit: generous for the real sizes, ordered by tier, bounded", async () => {
    const tiers = ["480P", "768P", "1080P", "2K", "4K"] as const;
    const limits = tiers.map((tier) => resultLimit({ kind: "video", seconds: 6, tier }));
    expect([...limits].sort((a, b) => a - b)).toEqual(limits);
    expect(limits[0]).toBe(32 * MIB + 12 * MIB);
    expect(limits[4]).toBe(32 * MIB + 150 * MIB);
    expect(resultLimit({ kind: "video", seconds: 10, tier: "1080P" })).toBeGreaterThan(
      (await makeMp4(10, 1920, 1080)).length * 10,
    );

    const text = "Hello there, this is a line of narration for the storyboard.";
    const chars = text.match(/[\p{L}\p{Nd}]/gu)?.length ?? 0;
    const limit = resultLimit({ kind: "speech", countedChars: chars, speed: 0.5 });
    expect(limit).toBeGreaterThan(makeWav(speechDurationMs(text, 0.5)).length * 10);
    expect(limit).toBeLessThan(100 * MIB);
    // Speed 0 is the service's default 1.0; faster speech gets a smaller limit.
    expect(resultLimit({ kind: "speech", countedChars: chars, speed: 0 })).toBe(
      resultLimit({ kind: "speech", countedChars: chars, speed: 1 }),
    );
    expect(resultLimit({ kind: "speech", countedChars: chars, speed: 2 })).toBeLessThan(limit);
    for (const l of [...limits, limit]) expect(Number.isInteger(l)).toBe(true);
  });
});

describe("streaming", () => {
  it("checks a 200 MiB padded video with flat memory", async () => {
    setFlagsFromString("--expose-gc");
    const gc = runInNewContext("gc") as () => void;
    const mp4 = await makeMp4(6, 1280, 720);
    const pad = 200 * MIB;
    const total = mp4.length + pad;
    const chunk = MIB;
    // Fresh buffers, not one reused, and written to: a check that kept references would show in
    // arrayBuffers, and in rss (untouched allocUnsafe pages would not).
    let left = pad - 8;
    let first = true;
    const body = new Readable({
      read() {
        if (first) {
          first = false;
          this.push(Buffer.concat([mp4, freeHeader(pad)]));
          return;
        }
        if (left === 0) {
          this.push(null);
          return;
        }
        const size = Math.min(chunk, left);
        left -= size;
        this.push(Buffer.allocUnsafe(size).fill(0x5a));
      },
    });
    gc();
    const base = process.memoryUsage();
    let peakRss = 0;
    let peakBuffers = 0;
    let seen = 0;
    const check = mediaCheck(video(6, 256 * MIB));
    const sink = new Writable({
      write(c: Buffer, _enc, done) {
        seen += c.length;
        if (seen % (8 * MIB) < c.length) {
          gc();
          const now = process.memoryUsage();
          peakRss = Math.max(peakRss, now.rss - base.rss);
          peakBuffers = Math.max(peakBuffers, now.arrayBuffers - base.arrayBuffers);
        }
        done();
      },
    });
    const started = Date.now();
    await pipeline(body, check.stream, sink);
    const ms = Date.now() - started;
    expect(check.result()).toEqual({ bytes: total, seconds: expect.closeTo(6, 3) });
    console.log(
      `200 MiB padded video: ${ms} ms, peak rss +${(peakRss / MIB).toFixed(1)} MiB, ` +
        `peak arrayBuffers +${(peakBuffers / MIB).toFixed(1)} MiB`,
    );
    expect(peakRss).toBeLessThan(30 * MIB);
    // Backing stores are freed by a background sweeper after gc(), so a few chunks may still count;
    // a check that kept what it passed on would show the whole 200 MiB.
    expect(peakBuffers).toBeLessThan(30 * MIB);
    expect(ms).toBeLessThan(5000);
  });

  it("mediaCheckFile checks a stored file the same way", async () => {
    const dir = await mkdtemp(join(tmpdir(), "clapper-media-check-"));
    try {
      const good = join(dir, "good.mp4");
      await writeFile(good, moovAtEnd(MP4));
      expect((await mediaCheckFile(good, video(4))).seconds).toBeCloseTo(4, 3);
      const bad = join(dir, "bad.wav");
      await writeFile(bad, WAV.subarray(0, 1000));
      await expect(mediaCheckFile(bad, speech())).rejects.toThrow(
        /the 'data' chunk runs 71,044 bytes past the end/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
