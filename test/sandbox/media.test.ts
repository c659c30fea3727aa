import { parseBuffer } from "music-metadata";
import { describe, expect, it } from "vitest";
import { makeMp4, makeWav, speechDurationMs } from "../../src/sandbox/media.js";

// music-metadata only derives `duration` from audio tracks, so for a
// video-only MP4 the header values are read directly from the ISO BMFF boxes.
const CONTAINER_BOXES = new Set(["moov", "trak", "mdia", "minf", "stbl"]);

function findBox(buf: Buffer, path: readonly string[], start = 0, end = buf.length): Buffer | undefined {
  const [head, ...rest] = path;
  let pos = start;
  while (pos + 8 <= end) {
    const size = buf.readUInt32BE(pos);
    const type = buf.toString("ascii", pos + 4, pos + 8);
    if (size < 8) return undefined;
    if (type === head) {
      if (rest.length === 0) return buf.subarray(pos + 8, pos + size);
      if (!CONTAINER_BOXES.has(type)) return undefined;
      return findBox(buf, rest, pos + 8, pos + size);
    }
    pos += size;
  }
  return undefined;
}

function requireBox(buf: Buffer, path: readonly string[]): Buffer {
  const box = findBox(buf, path);
  if (box === undefined) throw new Error(`missing box ${path.join("/")}`);
  return box;
}

/** Duration in seconds from a version 0/1 header box laid out like mvhd/mdhd. */
function headerDurationS(box: Buffer): number {
  return box[0] === 1
    ? Number(box.readBigUInt64BE(24)) / box.readUInt32BE(20)
    : box.readUInt32BE(16) / box.readUInt32BE(12);
}

function tkhdSize(box: Buffer): { width: number; height: number } {
  const at = box[0] === 1 ? 88 : 76;
  return { width: box.readUInt32BE(at) / 65536, height: box.readUInt32BE(at + 4) / 65536 };
}

function avcProfileLevel(mp4: Buffer): { profile: number; level: number } {
  const at = mp4.indexOf("avcC", 0, "ascii");
  expect(at).toBeGreaterThan(0);
  expect(mp4[at + 4]).toBe(1); // configurationVersion
  return { profile: mp4[at + 5] ?? -1, level: mp4[at + 7] ?? -1 };
}

function countSyncSamples(mp4: Buffer): number {
  return requireBox(mp4, ["moov", "trak", "mdia", "minf", "stbl", "stss"]).readUInt32BE(4);
}

function pcmSamples(wav: Buffer): Int16Array {
  const data = wav.subarray(44);
  return new Int16Array(data.buffer, data.byteOffset, data.length / 2);
}

describe("makeWav", () => {
  it("is a 24 kHz mono 16-bit PCM WAV of the requested length", async () => {
    const wav = makeWav(1234);
    const { format } = await parseBuffer(wav, { mimeType: "audio/wav" });
    expect(format.container).toBe("WAVE");
    expect(format.sampleRate).toBe(24_000);
    expect(format.numberOfChannels).toBe(1);
    expect(format.bitsPerSample).toBe(16);
    expect(format.duration).toBeCloseTo(1.234, 3);
  });

  it("handles the 1 ms minimum", async () => {
    const { format } = await parseBuffer(makeWav(1), { mimeType: "audio/wav" });
    expect(format.duration).toBeCloseTo(0.001, 4);
  });

  it("contains a quiet but audible tone, not silence", () => {
    const samples = pcmSamples(makeWav(500));
    const peak = samples.reduce((m, s) => Math.max(m, Math.abs(s)), 0);
    expect(peak).toBeGreaterThan(500);
    expect(peak).toBeLessThan(32767 * 0.2);
  });

  it("rejects durations below 1 ms", () => {
    expect(() => makeWav(0)).toThrow(RangeError);
    expect(() => makeWav(Number.NaN)).toThrow(RangeError);
  });
});

describe("speechDurationMs", () => {
  it("follows the documented formula", () => {
    expect(speechDurationMs("", 1)).toBe(500);
    // 10 letters + 3 digits; punctuation and spaces do not count.
    expect(speechDurationMs("Hello, world! 123", 1)).toBe(200 + 13 * 70);
    expect(speechDurationMs("Hello, world! 123", 2)).toBe(Math.round((200 + 13 * 70) / 2));
  });

  it("counts letters and digits from any script", () => {
    expect(speechDurationMs("日本語テキスト", 1)).toBe(200 + 7 * 70);
    expect(speechDurationMs("café ١٢٣", 1)).toBe(200 + 7 * 70);
    expect(speechDurationMs("... !!! ???", 1)).toBe(500);
  });

  it("never shrinks as text grows", () => {
    let previous = 0;
    for (let n = 0; n <= 200; n++) {
      const ms = speechDurationMs("a".repeat(n), 1);
      expect(ms).toBeGreaterThanOrEqual(previous);
      previous = ms;
    }
    expect(speechDurationMs("a".repeat(200), 1)).toBeGreaterThan(speechDurationMs("a".repeat(100), 1));
  });

  it("is inversely proportional to speed", () => {
    const text = "The quick brown fox jumps over the lazy dog";
    const base = speechDurationMs(text, 1);
    expect(speechDurationMs(text, 2)).toBe(Math.round(base / 2));
    expect(speechDurationMs(text, 0.5)).toBe(base * 2);
    const speeds = [0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 4];
    const durations = speeds.map((s) => speechDurationMs(text, s));
    for (let i = 1; i < durations.length; i++) {
      expect(durations[i]).toBeLessThan(durations[i - 1] ?? Number.POSITIVE_INFINITY);
    }
  });

  it("rejects non-positive speeds", () => {
    expect(() => speechDurationMs("hi", 0)).toThrow(RangeError);
    expect(() => speechDurationMs("hi", -1)).toThrow(RangeError);
    expect(() => speechDurationMs("hi", Number.NaN)).toThrow(RangeError);
  });
});

describe("makeMp4", () => {
  const cases: readonly [number, number, number][] = [
    [4, 864, 480],
    [5, 1360, 768],
    [5, 480, 864],
    [4, 1920, 1080],
    [5, 1080, 1920],
    [4, 1120, 480],
    [30, 3840, 2160],
    [5, 5040, 2160],
    [4, 2160, 5040],
  ];

  it.each(cases)("%ss at %ix%i has the right duration, size and codec", async (durationS, width, height) => {
    const mp4 = await makeMp4(durationS, width, height, {
      id: "vtask_sizes",
      prompt: "a lighthouse at dusk",
    });

    const { format } = await parseBuffer(mp4, { mimeType: "video/mp4" });
    expect(format.container).toMatch(/avc1/);
    expect(format.hasVideo).toBe(true);
    expect(format.trackInfo.map((t) => t.codecName)).toEqual([expect.stringMatching(/avc1/)]);

    expect(headerDurationS(requireBox(mp4, ["moov", "mvhd"]))).toBeCloseTo(durationS, 1);
    const mdhd = headerDurationS(requireBox(mp4, ["moov", "trak", "mdia", "mdhd"]));
    expect(Math.abs(mdhd - durationS)).toBeLessThan(0.05);
    expect(tkhdSize(requireBox(mp4, ["moov", "trak", "tkhd"]))).toEqual({ width, height });

    const { profile, level } = avcProfileLevel(mp4);
    expect(profile).toBe(66);
    expect(level).toBeLessThanOrEqual(width * height > 3840 * 2160 ? 60 : 51);
    // A keyframe every 10 s: seeking decodes at most 239 almost empty P pictures.
    expect(countSyncSamples(mp4)).toBe(Math.ceil(durationS / 10));
  });

  it("picks a level that fits the frame size", async () => {
    expect(avcProfileLevel(await makeMp4(1, 864, 480)).level).toBe(30);
    expect(avcProfileLevel(await makeMp4(1, 1920, 1080)).level).toBe(40);
    expect(avcProfileLevel(await makeMp4(1, 3840, 2160)).level).toBe(51);
    // 4K at 21:9: 315x135 macroblocks, over 5.1's MaxFS of 36,864.
    expect(avcProfileLevel(await makeMp4(1, 5040, 2160)).level).toBe(60);
    expect(avcProfileLevel(await makeMp4(1, 2160, 5040)).level).toBe(60);
  });

  it("returns the cached Buffer for a repeated key, and each task its own file", async () => {
    const task = { id: "vtask_cache", prompt: "p" };
    const a = await makeMp4(4, 864, 480, task);
    expect(await makeMp4(4, 864, 480, task)).toBe(a);
    expect(await makeMp4(5, 864, 480, task)).not.toBe(a);
    expect(await makeMp4(4, 480, 864, task)).not.toBe(a);
    expect((await makeMp4(4, 864, 480, { ...task, id: "vtask_other" })).equals(a)).toBe(false);
    expect((await makeMp4(4, 864, 480, { ...task, prompt: "q" })).equals(a)).toBe(false);
  });

  it("evicts the least recently used entry once the cache is full, and makes it again byte for byte", async () => {
    const kept = await makeMp4(1, 16, 16);
    const dropped = await makeMp4(1, 16, 18);
    for (let i = 0; i < 31; i++) {
      // Touching `kept` makes `dropped` the oldest entry.
      await makeMp4(1, 16, 16);
      await makeMp4(1, 18 + 2 * i, 16);
    }
    expect(await makeMp4(1, 16, 16)).toBe(kept);
    // Made again after a second has passed: the writer's clock must not reach the file.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const again = await makeMp4(1, 16, 18);
    expect(again).not.toBe(dropped);
    expect(again.equals(dropped)).toBe(true);
  });

  it("rejects sizes H.264 cannot express here", async () => {
    await expect(makeMp4(4, 865, 480)).rejects.toThrow(RangeError);
    await expect(makeMp4(4, 14, 480)).rejects.toThrow(RangeError);
    // 512x512 macroblocks: over level 6's MaxFS of 139,264.
    await expect(makeMp4(4, 8192, 8192)).rejects.toThrow(RangeError);
    await expect(makeMp4(0, 864, 480)).rejects.toThrow(RangeError);
  });
});
