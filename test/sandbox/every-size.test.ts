// Every video the spec allows (model × resolution × ratio × duration), made by the sandbox over real
// HTTP and downloaded from its result URL: each must be an MP4 that the project's own media check
// accepts, of the requested duration, whose H.264 stream says the size the ratio asks for at a level
// that admits that frame size. A task that succeeds and is paid must never have a result that fails.
import { Readable, Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ResolutionTier, VideoRatio } from "../../src/api/video.js";
import { resultLimit } from "../../src/results/size-policy.js";
import { mediaCheck } from "../../src/results/stream-check.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { outputSize } from "../../src/sandbox/protocol/video.js";
import { call, sandbox, until } from "../helpers/sandbox.js";

// From the spec (video-generation-api.md, "Create video task"), not from the code under test.
const MODELS = ["Vid-H3", "vid-h3-lite"] as const;
const RESOLUTIONS: readonly ResolutionTier[] = ["480P", "768P", "1080P", "2K", "4K"];
const RATIOS: readonly VideoRatio[] = ["adaptive", "21:9", "16:9", "4:3", "1:1", "3:4", "9:16"];
const DURATIONS = Array.from({ length: 27 }, (_, i) => 4 + i);
// The spec's own 480P table; the other tiers follow outputSize (computed from the ratio).
const SPEC_480P: Record<string, string> = {
  "21:9": "1120x480",
  "16:9": "864x480",
  "4:3": "640x480",
  "1:1": "480x480",
  "3:4": "480x640",
  "9:16": "480x864",
  adaptive: "864x480",
};

// H.264 Table A-1: MaxFS (macroblocks per frame) by level_idc.
const MAX_FS: Record<number, number> = {
  10: 99,
  11: 396,
  12: 396,
  13: 396,
  20: 396,
  21: 792,
  22: 1620,
  30: 1620,
  31: 3600,
  32: 5120,
  40: 8192,
  41: 8192,
  42: 8704,
  50: 22_080,
  51: 36_864,
  52: 36_864,
  60: 139_264,
  61: 139_264,
  62: 139_264,
};

interface Combo {
  model: (typeof MODELS)[number];
  resolution: ResolutionTier;
  ratio: VideoRatio;
  duration: number;
}

// Same-sized results next to each other, so the sandbox's MP4 cache serves both models.
const COMBOS: Combo[] = RESOLUTIONS.flatMap((resolution) =>
  RATIOS.flatMap((ratio) =>
    DURATIONS.flatMap((duration) => MODELS.map((model) => ({ model, resolution, ratio, duration }))),
  ),
);

let sb: Sandbox;
beforeAll(async () => {
  sb = await sandbox({ timeScale: 0.0001, points: 10_000_000 });
});
afterAll(async () => {
  await sb?.close();
});

describe("sandbox results for every size the spec allows", () => {
  it("covers the spec's combinations, 4K at 21:9 (5040x2160) among them", () => {
    expect(COMBOS).toHaveLength(2 * 5 * 7 * 27);
    for (const ratio of RATIOS) {
      const { width, height } = outputSize("480P", ratio);
      expect(`${width}x${height}`).toBe(SPEC_480P[ratio]);
    }
    expect(outputSize("4K", "21:9")).toEqual({ width: 5040, height: 2160 });
  });

  it("delivers a checked MP4 of the right size and duration for each", async () => {
    const problems: string[] = [];
    await eachLimited(COMBOS, 64, async (combo) => {
      const problem = await probeCombo(sb.url, combo).catch((error: Error) => error.message);
      if (problem) problems.push(`${label(combo)}: ${problem}`);
    });
    expect(problems).toEqual([]);
  }, 120_000);
});

const label = (c: Combo) => `${c.model} ${c.resolution} ${c.ratio} ${c.duration}s`;

/** Creates the task, waits for it, downloads its result and says what is wrong with it, if anything. */
async function probeCombo(base: string, c: Combo): Promise<string | undefined> {
  const created = await call(base, "POST", "/vid/v2/video_generation", {
    body: {
      model: c.model,
      content: [{ type: "text", text: "a lighthouse at dusk" }],
      resolution: c.resolution,
      ratio: c.ratio,
      duration: c.duration,
    },
  });
  if (created.status !== 200) return `create: HTTP ${created.status} ${JSON.stringify(created.body)}`;
  const id = created.body.task_id as string;
  const task = await until(
    async () => (await call(base, "GET", `/vid/v2/query/video_generation/${id}`)).body.task,
    (t) => t.status !== "queued" && t.status !== "running",
    30_000,
  );
  if (task.status !== "succeeded") return `task ended ${task.status}`;
  const res = await request(task.content.url as string);
  const data = Buffer.from(await res.body.arrayBuffer());
  if (res.statusCode !== 200) return `download: HTTP ${res.statusCode} ${data.toString("utf8", 0, 200)}`;
  const check = mediaCheck({
    kind: "video",
    expectedSeconds: c.duration,
    maxBytes: resultLimit({ kind: "video", seconds: c.duration, tier: c.resolution }),
  });
  await pipeline(Readable.from([data]), check.stream, new Writable({ write: (_c, _e, done) => done() }));
  const seconds = check.result().seconds;
  if (Math.abs(seconds - c.duration) > 0.05) return `lasts ${seconds} s`;
  const want = outputSize(c.resolution, c.ratio);
  return sizeProblem(probeMp4(data), want.width, want.height);
}

function sizeProblem(p: Mp4Probe, width: number, height: number): string | undefined {
  const want = `${width}x${height}`;
  if (`${p.tkhd.width}x${p.tkhd.height}` !== want) return `tkhd says ${p.tkhd.width}x${p.tkhd.height}`;
  if (`${p.entry.width}x${p.entry.height}` !== want) return `avc1 says ${p.entry.width}x${p.entry.height}`;
  if (`${p.sps.width}x${p.sps.height}` !== want) return `the SPS says ${p.sps.width}x${p.sps.height}`;
  const maxFs = MAX_FS[p.sps.level];
  const mbs = p.sps.mbWidth * p.sps.mbHeight;
  if (maxFs === undefined) return `unknown level_idc ${p.sps.level}`;
  // A.3.1: frame size, and each side at most sqrt(8 * MaxFS) macroblocks.
  const side = Math.sqrt(8 * maxFs);
  if (mbs > maxFs || p.sps.mbWidth > side || p.sps.mbHeight > side)
    return `level_idc ${p.sps.level} (MaxFS ${maxFs}) cannot hold ${p.sps.mbWidth}x${p.sps.mbHeight} macroblocks`;
  if (p.entry.level !== p.sps.level) return `avcC level ${p.entry.level}, SPS level ${p.sps.level}`;
  return undefined;
}

async function eachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>) {
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await fn(item);
    }
  };
  await Promise.all(Array.from({ length: limit }, worker));
}

// ---------------------------------------------------------------------------------------------
// What a player reads: the track header, the sample entry and the H.264 sequence parameter set.

interface Mp4Probe {
  tkhd: { width: number; height: number };
  entry: { width: number; height: number; level: number };
  sps: { width: number; height: number; mbWidth: number; mbHeight: number; level: number };
}

const CONTAINERS = new Set(["moov", "trak", "mdia", "minf", "stbl"]);

function box(buf: Buffer, path: readonly string[], start = 0, end = buf.length): Buffer {
  const [head, ...rest] = path;
  for (let pos = start; pos + 8 <= end; ) {
    const size = buf.readUInt32BE(pos);
    if (size < 8) break;
    const type = buf.toString("latin1", pos + 4, pos + 8);
    if (type === head) {
      if (rest.length === 0) return buf.subarray(pos + 8, pos + size);
      if (CONTAINERS.has(type)) return box(buf, rest, pos + 8, pos + size);
    }
    pos += size;
  }
  throw new Error(`no ${path.join("/")} box`);
}

function probeMp4(mp4: Buffer): Mp4Probe {
  const tkhd = box(mp4, ["moov", "trak", "tkhd"]);
  const at = tkhd[0] === 1 ? 88 : 76;
  const stsd = box(mp4, ["moov", "trak", "mdia", "minf", "stbl", "stsd"]);
  // stsd: version/flags, entry count, then the avc1 entry (ISO/IEC 14496-12 VisualSampleEntry).
  if (stsd.toString("latin1", 12, 16) !== "avc1") throw new Error("the sample entry is not avc1");
  const avc1 = stsd.subarray(8 + 8);
  const avcC = box(avc1, ["avcC"], 78);
  const spsLength = avcC.readUInt16BE(6);
  return {
    tkhd: { width: tkhd.readUInt32BE(at) / 65536, height: tkhd.readUInt32BE(at + 4) / 65536 },
    entry: { width: avc1.readUInt16BE(24), height: avc1.readUInt16BE(26), level: avcC[3] ?? -1 },
    sps: parseSps(avcC.subarray(8, 8 + spsLength)),
  };
}

/** The picture size from a Baseline SPS NAL unit (H.264 7.3.2.1.1), cropping applied. */
function parseSps(nal: Buffer): Mp4Probe["sps"] {
  const rbsp: number[] = [];
  let zeros = 0;
  for (const byte of nal.subarray(1)) {
    // An emulation_prevention_three_byte after two zeros is not payload.
    if (zeros >= 2 && byte === 3) {
      zeros = 0;
      continue;
    }
    rbsp.push(byte);
    zeros = byte === 0 ? zeros + 1 : 0;
  }
  let bit = 0;
  const u = (n: number) => {
    let v = 0;
    for (let k = 0; k < n; k++, bit++) v = v * 2 + (((rbsp[bit >> 3] ?? 0) >> (7 - (bit & 7))) & 1);
    return v;
  };
  const ue = () => {
    let zeros = 0;
    while (u(1) === 0) zeros++;
    return 2 ** zeros - 1 + u(zeros);
  };
  const profile = u(8);
  if (profile !== 66) throw new Error(`profile_idc ${profile}, only Baseline is parsed here`);
  u(8);
  const level = u(8);
  ue(); // seq_parameter_set_id
  ue(); // log2_max_frame_num_minus4
  const pocType = ue();
  if (pocType === 0) ue();
  if (pocType === 1) throw new Error("pic_order_cnt_type 1 is not parsed here");
  ue(); // max_num_ref_frames
  u(1); // gaps_in_frame_num_value_allowed_flag
  const mbWidth = ue() + 1;
  const mapHeight = ue() + 1;
  const frameMbsOnly = u(1);
  if (!frameMbsOnly) u(1);
  u(1); // direct_8x8_inference_flag
  const crop = u(1) ? [ue(), ue(), ue(), ue()] : [0, 0, 0, 0];
  const [left = 0, right = 0, top = 0, bottom = 0] = crop;
  const mbHeight = mapHeight * (frameMbsOnly ? 1 : 2);
  const cropY = frameMbsOnly ? 2 : 4;
  return {
    width: mbWidth * 16 - 2 * (left + right),
    height: mbHeight * 16 - cropY * (top + bottom),
    mbWidth,
    mbHeight,
    level,
  };
}
