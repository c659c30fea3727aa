/**
 * Real, playable media for the sandbox API emulator, produced without any encoder binary: a
 * synthesised WAV tone, and an MP4 of a hand-written H.264 stream (h264.ts) showing the task
 * (frames.ts).
 */
import { BufferTarget, EncodedPacket, EncodedVideoPacketSource, Mp4OutputFormat, Output } from "mediabunny";
import { TaskPicture, type VideoTask } from "./frames.js";
import { FPS, GOP_FRAMES, geometry, idrSample, pSample, streamConfig } from "./h264.js";

// ---------------------------------------------------------------------------
// WAV
// ---------------------------------------------------------------------------

const WAV_SAMPLE_RATE = 24_000;
const TONE_HZ = 220;
// About -26 dBFS: clearly audible, so a listener can tell the file is not
// broken, yet quiet enough not to startle anyone reviewing many outputs.
const TONE_AMPLITUDE = 0.05;
// Starting/stopping a sine mid-cycle clicks; a short ramp removes that.
const FADE_MS = 10;

/** A mono 16-bit PCM WAV file of the given duration (milliseconds, >= 1): a quiet 220 Hz tone at 24 kHz. */
export function makeWav(durationMs: number): Buffer {
  if (!Number.isFinite(durationMs) || durationMs < 1) {
    throw new RangeError(`durationMs must be a finite number >= 1, got ${durationMs}`);
  }
  const sampleCount = Math.max(1, Math.round((durationMs * WAV_SAMPLE_RATE) / 1000));
  const header = wavHeader(sampleCount);
  const out = Buffer.alloc(header.length + sampleCount * 2);
  header.copy(out, 0);
  writeTone(out, header.length, sampleCount);
  return out;
}

function wavHeader(sampleCount: number): Buffer {
  const dataBytes = sampleCount * 2;
  const h = Buffer.alloc(44);
  h.write("RIFF", 0, "ascii");
  h.writeUInt32LE(36 + dataBytes, 4);
  h.write("WAVE", 8, "ascii");
  h.write("fmt ", 12, "ascii");
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20); // PCM
  h.writeUInt16LE(1, 22); // mono
  h.writeUInt32LE(WAV_SAMPLE_RATE, 24);
  h.writeUInt32LE(WAV_SAMPLE_RATE * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write("data", 36, "ascii");
  h.writeUInt32LE(dataBytes, 40);
  return h;
}

/** Samples after which the tone repeats exactly: 11 cycles of 220 Hz in 1,200 samples at 24 kHz. */
const TONE_PERIOD = WAV_SAMPLE_RATE / gcd(WAV_SAMPLE_RATE, TONE_HZ);
const TONE_STEP = (2 * Math.PI * TONE_HZ) / WAV_SAMPLE_RATE;
let toneBlock: Buffer | undefined;

function toneSample(i: number, gain: number): number {
  return Math.round(Math.sin(i * TONE_STEP) * TONE_AMPLITUDE * gain * 32767);
}

/**
 * The tone, with a short fade at each end. The body is copied from one exact period computed once:
 * a sine per sample made the sandbox spend most of a 400-job run on the WAVs it serves.
 */
function writeTone(out: Buffer, offset: number, sampleCount: number): void {
  if (!toneBlock) {
    toneBlock = Buffer.alloc(TONE_PERIOD * 2);
    for (let j = 0; j < TONE_PERIOD; j++) toneBlock.writeInt16LE(toneSample(j, 1), j * 2);
  }
  // Very short files would otherwise be all ramp and no tone.
  const fadeSamples = Math.min(Math.round((FADE_MS * WAV_SAMPLE_RATE) / 1000), Math.floor(sampleCount / 2));
  for (let i = 0; i < sampleCount; ) {
    const j = i % TONE_PERIOD;
    const n = Math.min(TONE_PERIOD - j, sampleCount - i);
    toneBlock.copy(out, offset + i * 2, j * 2, (j + n) * 2);
    i += n;
  }
  const ramp = (i: number) =>
    out.writeInt16LE(toneSample(i, fadeGain(i, sampleCount, fadeSamples)), offset + i * 2);
  for (let i = 0; i < fadeSamples; i++) ramp(i);
  for (let i = Math.max(fadeSamples, sampleCount - fadeSamples); i < sampleCount; i++) ramp(i);
}

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

function fadeGain(i: number, n: number, fade: number): number {
  if (fade <= 0) return 1;
  return Math.min(1, i / fade, (n - 1 - i) / fade);
}

// ---------------------------------------------------------------------------
// Speech duration
// ---------------------------------------------------------------------------

const COUNTED_CHAR = /[\p{L}\p{Nd}]/gu;

/**
 * Duration in ms that a speech task's audio gets: follows text length and speed.
 * Only letters and digits count so that punctuation or whitespace padding does
 * not change the result.
 */
export function speechDurationMs(text: string, speed: number): number {
  if (!Number.isFinite(speed) || speed <= 0) {
    throw new RangeError(`speed must be a finite number > 0, got ${speed}`);
  }
  const countedChars = text.match(COUNTED_CHAR)?.length ?? 0;
  return Math.round(Math.max(500, 200 + countedChars * 70) / speed);
}

// ---------------------------------------------------------------------------
// MP4
// ---------------------------------------------------------------------------

async function encodeMp4(durationS: number, width: number, height: number, task: VideoTask): Promise<Buffer> {
  const g = geometry(width, height);
  const frameCount = Math.round(durationS * FPS);
  if (frameCount < 1) throw new RangeError(`durationS too short for one frame at ${FPS} fps: ${durationS}`);
  const config = streamConfig(g);
  const picture = new TaskPicture(g, task);
  const output = new Output({
    format: new Mp4OutputFormat({ fastStart: "in-memory" }),
    target: new BufferTarget(),
  });
  const source = new EncodedVideoPacketSource("avc");
  // No frameRate: the track then keeps Mediabunny's 57,600 Hz timescale (a multiple of 24, so frame
  // times stay exact) instead of one tick a frame, whose whole-tick deltas tools cannot subdivide.
  output.addVideoTrack(source);
  await output.start();
  const meta = {
    decoderConfig: {
      codec: config.codec,
      codedWidth: width,
      codedHeight: height,
      description: config.description,
    },
  };
  // A P picture with nothing to change depends only on its place in the GOP.
  const unchanged = new Map<number, Uint8Array>();
  for (let i = 0; i < frameCount; i++) {
    const posInGop = i % GOP_FRAMES;
    let data: Uint8Array;
    if (posInGop === 0) {
      // Consecutive IDR pictures must differ in idr_pic_id (7.4.3); alternating suffices.
      data = idrSample(g, Math.floor(i / GOP_FRAMES) % 2, picture.idr(i));
    } else {
      const changes = picture.changes(i);
      const cached = changes.length === 0 ? unchanged.get(posInGop) : undefined;
      data = cached ?? pSample(g, posInGop, changes);
      if (changes.length === 0 && cached === undefined) unchanged.set(posInGop, data);
    }
    const packet = new EncodedPacket(data, posInGop === 0 ? "key" : "delta", i / FPS, 1 / FPS);
    // The decoder config only needs to reach the muxer once.
    await source.add(packet, i === 0 ? meta : undefined);
  }
  await output.finalize();
  const buffer = output.target.buffer;
  if (buffer === null) throw new Error("the MP4 writer produced no file");
  return clearTimes(Buffer.from(buffer));
}

const TIMED_BOXES = new Set(["mvhd", "tkhd", "mdhd"]);
const PARENT_BOXES = new Set(["moov", "trak", "mdia"]);

/**
 * Sets the creation and modification times of the movie, track and media headers to 0 ("unknown"):
 * the writer stamps the current time there, and a result must be the same bytes whenever it is
 * made (downloads are compared by SHA-256 across restarts and cache evictions).
 */
function clearTimes(mp4: Buffer, start = 0, end = mp4.length): Buffer {
  for (let pos = start; pos + 8 <= end; ) {
    const size = mp4.readUInt32BE(pos);
    if (size < 8 || pos + size > end) break;
    const type = mp4.toString("latin1", pos + 4, pos + 8);
    if (PARENT_BOXES.has(type)) clearTimes(mp4, pos + 8, pos + size);
    // Version 0 has two 32-bit times after version and flags, version 1 two 64-bit ones.
    if (TIMED_BOXES.has(type)) mp4.fill(0, pos + 12, pos + 12 + (mp4[pos + 8] === 1 ? 16 : 8));
    pos += size;
  }
  return mp4;
}

const MP4_CACHE_LIMIT = 32;
// Map iteration order is insertion order, so re-inserting on hit gives LRU for free. Promises, so
// that requests for a file still being written wait for it rather than write it again.
const mp4Cache = new Map<string, Promise<Buffer>>();
const NO_TASK: VideoTask = { id: "", prompt: "" };

/**
 * An MP4 (H.264 video only) of `durationS` seconds (rounded to whole frames) at 24 fps, width x height
 * pixels (even, >= 16, up to H.264 level 6 frame size, e.g. 5040x2160, 2160x5040 or 8192x4320), at
 * the lowest level that holds it. Its pictures show the task (frames.ts): bands drawn from its id, the
 * start of its prompt, its id and a running timecode. The same arguments give the same bytes.
 *
 * Cached (the last 32): the same Buffer instance is returned for repeated calls, so callers must not
 * mutate it.
 */
export async function makeMp4(
  durationS: number,
  width: number,
  height: number,
  task: VideoTask = NO_TASK,
): Promise<Buffer> {
  if (!Number.isFinite(durationS) || durationS <= 0) {
    throw new RangeError(`durationS must be a finite number > 0, got ${durationS}`);
  }
  geometry(width, height); // throws for a size H.264 cannot express, before anything is cached
  const key = JSON.stringify([task.id, task.prompt, durationS, width, height]);
  const hit = mp4Cache.get(key);
  if (hit !== undefined) {
    mp4Cache.delete(key);
    mp4Cache.set(key, hit);
    return hit;
  }
  const mp4 = encodeMp4(durationS, width, height, task);
  mp4Cache.set(key, mp4);
  mp4.catch(() => mp4Cache.delete(key));
  if (mp4Cache.size > MP4_CACHE_LIMIT) {
    const oldest = mp4Cache.keys().next();
    if (!oldest.done) mp4Cache.delete(oldest.value);
  }
  return mp4;
}
