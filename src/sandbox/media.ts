/**
 * Real, playable media for the sandbox API emulator, produced without any
 * encoder binary: a synthesised WAV tone and a hand-written H.264 stream
 * (flat mid-grey picture) muxed into MP4.
 *
 * The H.264 part follows ITU-T H.264 section 7.3 syntax; the comments explain
 * why each choice keeps the stream small, standard-conforming and seekable.
 */
import { ArrayBufferTarget, Muxer } from "mp4-muxer";

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
// H.264 bitstream writing
// ---------------------------------------------------------------------------

/** MSB-first bit writer for RBSP payloads, with Exp-Golomb codes (H.264 9.1). */
class BitWriter {
  private readonly bytes: number[] = [];
  private current = 0;
  private bitCount = 0;

  u(bits: number, value: number): this {
    for (let i = bits - 1; i >= 0; i--) this.bit((value >>> i) & 1);
    return this;
  }

  flag(value: boolean): this {
    return this.bit(value ? 1 : 0);
  }

  ue(value: number): this {
    const codeNum = value + 1;
    const length = 31 - Math.clz32(codeNum);
    return this.u(length, 0).u(length + 1, codeNum);
  }

  se(value: number): this {
    return this.ue(value > 0 ? 2 * value - 1 : -2 * value);
  }

  /** rbsp_trailing_bits(): a stop bit then zero padding to the byte boundary. */
  finish(): Uint8Array {
    this.bit(1);
    while (this.bitCount !== 0) this.bit(0);
    return Uint8Array.from(this.bytes);
  }

  private bit(b: number): this {
    this.current = (this.current << 1) | b;
    this.bitCount++;
    if (this.bitCount === 8) {
      this.bytes.push(this.current);
      this.current = 0;
      this.bitCount = 0;
    }
    return this;
  }
}

/** Inserts emulation_prevention_three_byte so the payload never contains a start-code prefix (H.264 7.4.1). */
function escapeRbsp(rbsp: Uint8Array): Uint8Array {
  const out: number[] = [];
  let zeros = 0;
  for (const byte of rbsp) {
    if (zeros >= 2 && byte <= 3) {
      out.push(3);
      zeros = 0;
    }
    out.push(byte);
    zeros = byte === 0 ? zeros + 1 : 0;
  }
  return Uint8Array.from(out);
}

const NAL_SLICE = 1;
const NAL_IDR = 5;
const NAL_SPS = 7;
const NAL_PPS = 8;

function nalUnit(refIdc: number, type: number, rbsp: Uint8Array): Uint8Array {
  const payload = escapeRbsp(rbsp);
  const nal = new Uint8Array(1 + payload.length);
  nal[0] = (refIdc << 5) | type;
  nal.set(payload, 1);
  return nal;
}

/** MP4 samples carry NAL units with a 4-byte length prefix (AVCC) instead of Annex-B start codes. */
function avccSample(nals: readonly Uint8Array[]): Uint8Array {
  const size = nals.reduce((n, nal) => n + 4 + nal.length, 0);
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  let pos = 0;
  for (const nal of nals) {
    view.setUint32(pos, nal.length);
    out.set(nal, pos + 4);
    pos += 4 + nal.length;
  }
  return out;
}

const FPS = 24;
// An IDR every 2 s bounds how far a player must decode back when seeking.
const GOP_FRAMES = 2 * FPS;
// frame_num counts 0..GOP_FRAMES-1 within a GOP; sized so it never wraps.
const LOG2_MAX_FRAME_NUM = Math.max(4, Math.ceil(Math.log2(GOP_FRAMES)));
const PROFILE_BASELINE = 66;
// constraint_set0/1/2: the stream uses no FMO/ASO/redundant slices, so it is
// also decodable as Main and Extended (direct_8x8_inference is set for the
// latter); decoders that only do Constrained Baseline accept it.
const CONSTRAINT_FLAGS = 0xe0;

interface Geometry {
  readonly width: number;
  readonly height: number;
  readonly mbWidth: number;
  readonly mbHeight: number;
  readonly levelIdc: number;
}

interface LevelLimit {
  readonly idc: number;
  readonly maxFs: number;
  readonly maxMbps: number;
}

// Table A-1 (only the levels worth choosing between for 24 fps content). Level 6 is here because
// the spec's upscaled sizes outgrow 5.1's MaxFS of 36,864 macroblocks: 4K at 21:9 is 5040x2160,
// 315x135 = 42,525. Signalling a lower level than the frame needs makes conforming decoders refuse it.
const LEVELS: readonly LevelLimit[] = [
  { idc: 30, maxFs: 1620, maxMbps: 40_500 },
  { idc: 31, maxFs: 3600, maxMbps: 108_000 },
  { idc: 32, maxFs: 5120, maxMbps: 216_000 },
  { idc: 40, maxFs: 8192, maxMbps: 245_760 },
  { idc: 42, maxFs: 8704, maxMbps: 522_240 },
  { idc: 50, maxFs: 22_080, maxMbps: 589_824 },
  { idc: 51, maxFs: 36_864, maxMbps: 983_040 },
  { idc: 60, maxFs: 139_264, maxMbps: 4_177_920 },
];

/** Lowest level that fits, so small clips stay playable on decoders that cap the level (A.3.1). */
function chooseLevel(mbWidth: number, mbHeight: number): number | undefined {
  const frameSize = mbWidth * mbHeight;
  const fits = (l: LevelLimit): boolean => {
    const maxSide = Math.sqrt(l.maxFs * 8);
    return frameSize <= l.maxFs && frameSize * FPS <= l.maxMbps && mbWidth <= maxSide && mbHeight <= maxSide;
  };
  return LEVELS.find(fits)?.idc;
}

function geometry(width: number, height: number): Geometry {
  for (const [name, v] of [
    ["width", width],
    ["height", height],
  ] as const) {
    // 4:2:0 cropping works in 2-pixel units, so odd sizes cannot be expressed.
    if (!Number.isInteger(v) || v < 16 || v % 2 !== 0) {
      throw new RangeError(`${name} must be an even integer >= 16, got ${v}`);
    }
  }
  const mbWidth = Math.ceil(width / 16);
  const mbHeight = Math.ceil(height / 16);
  const levelIdc = chooseLevel(mbWidth, mbHeight);
  if (levelIdc === undefined) {
    throw new RangeError(
      `${width}x${height} exceeds H.264 level 6 (at most 139,264 macroblocks a frame, e.g. 8192x4320)`,
    );
  }
  return { width, height, mbWidth, mbHeight, levelIdc };
}

function spsRbsp(g: Geometry): Uint8Array {
  const cropRight = (g.mbWidth * 16 - g.width) / 2;
  const cropBottom = (g.mbHeight * 16 - g.height) / 2;
  const cropping = cropRight > 0 || cropBottom > 0;
  const w = new BitWriter()
    .u(8, PROFILE_BASELINE)
    .u(8, CONSTRAINT_FLAGS)
    .u(8, g.levelIdc)
    .ue(0) // seq_parameter_set_id
    .ue(LOG2_MAX_FRAME_NUM - 4)
    // POC type 2 derives output order from frame_num: no B frames, so no POC to send.
    .ue(2)
    .ue(1) // max_num_ref_frames
    .flag(false) // gaps_in_frame_num_value_allowed_flag
    .ue(g.mbWidth - 1)
    .ue(g.mbHeight - 1)
    .flag(true) // frame_mbs_only_flag
    .flag(true) // direct_8x8_inference_flag
    .flag(cropping);
  if (cropping) w.ue(0).ue(cropRight).ue(0).ue(cropBottom);
  w.flag(true); // vui_parameters_present_flag
  writeVui(w);
  return w.finish();
}

/**
 * Timing info lets raw-stream tools know the rate, and bitstream_restriction
 * with zero reordering lets decoders output each frame immediately instead of
 * buffering for reorder they would otherwise have to assume.
 */
function writeVui(w: BitWriter): void {
  w.flag(false) // aspect_ratio_info_present_flag
    .flag(false) // overscan_info_present_flag
    .flag(false) // video_signal_type_present_flag
    .flag(false) // chroma_loc_info_present_flag
    .flag(true) // timing_info_present_flag
    .u(32, 1) // num_units_in_tick
    .u(32, FPS * 2) // time_scale: a frame is two ticks
    .flag(true) // fixed_frame_rate_flag
    .flag(false) // nal_hrd_parameters_present_flag
    .flag(false) // vcl_hrd_parameters_present_flag
    .flag(false) // pic_struct_present_flag
    .flag(true) // bitstream_restriction_flag
    .flag(true) // motion_vectors_over_pic_boundaries_flag
    .ue(0) // max_bytes_per_pic_denom: no limit
    .ue(0) // max_bits_per_mb_denom: no limit
    .ue(15) // log2_max_mv_length_horizontal
    .ue(15) // log2_max_mv_length_vertical
    .ue(0) // max_num_reorder_frames
    .ue(1); // max_dec_frame_buffering
}

function ppsRbsp(): Uint8Array {
  return (
    new BitWriter()
      .ue(0) // pic_parameter_set_id
      .ue(0) // seq_parameter_set_id
      .flag(false) // entropy_coding_mode_flag: CAVLC
      .flag(false) // bottom_field_pic_order_in_frame_present_flag
      .ue(0) // num_slice_groups_minus1
      .ue(0) // num_ref_idx_l0_default_active_minus1
      .ue(0) // num_ref_idx_l1_default_active_minus1
      .flag(false) // weighted_pred_flag
      .u(2, 0) // weighted_bipred_idc
      .se(0) // pic_init_qp_minus26
      .se(0) // pic_init_qs_minus26
      .se(0) // chroma_qp_index_offset
      // Present so slices can switch deblocking off: nothing to smooth in a flat picture.
      .flag(true) // deblocking_filter_control_present_flag
      .flag(false) // constrained_intra_pred_flag
      .flag(false) // redundant_pic_cnt_present_flag
      .finish()
  );
}

const SLICE_TYPE_P_ALL = 5;
const SLICE_TYPE_I_ALL = 7;

// I_16x16, prediction mode 2 (DC), chroma cbp 0, luma cbp 0 (Table 7-11).
const MB_TYPE_I16X16_DC_NO_CBP = 3;

/** An IDR picture: every macroblock DC-predicted with no residual, which decodes to flat mid-grey (128). */
function idrSliceRbsp(g: Geometry, idrPicId: number): Uint8Array {
  const w = new BitWriter()
    .ue(0) // first_mb_in_slice
    .ue(SLICE_TYPE_I_ALL)
    .ue(0) // pic_parameter_set_id
    .u(LOG2_MAX_FRAME_NUM, 0) // frame_num
    .ue(idrPicId)
    .flag(false) // no_output_of_prior_pics_flag
    .flag(false) // long_term_reference_flag
    .se(0) // slice_qp_delta
    .ue(1); // disable_deblocking_filter_idc
  const mbCount = g.mbWidth * g.mbHeight;
  for (let i = 0; i < mbCount; i++) {
    w.ue(MB_TYPE_I16X16_DC_NO_CBP)
      .ue(0) // intra_chroma_pred_mode: DC
      .se(0) // mb_qp_delta
      // Intra16x16DCLevel coeff_token, TotalCoeff=0 with nC=0 (all neighbours are empty).
      .u(1, 1);
  }
  return w.finish();
}

/** A P picture made of one skip run: each frame repeats the previous one at almost no cost. */
function skipSliceRbsp(g: Geometry, frameNum: number): Uint8Array {
  return new BitWriter()
    .ue(0) // first_mb_in_slice
    .ue(SLICE_TYPE_P_ALL)
    .ue(0) // pic_parameter_set_id
    .u(LOG2_MAX_FRAME_NUM, frameNum)
    .flag(false) // num_ref_idx_active_override_flag
    .flag(false) // ref_pic_list_modification_flag_l0
    .flag(false) // adaptive_ref_pic_marking_mode_flag
    .se(0) // slice_qp_delta
    .ue(1) // disable_deblocking_filter_idc
    .ue(g.mbWidth * g.mbHeight) // mb_skip_run
    .finish();
}

function avcDecoderConfigurationRecord(sps: Uint8Array, pps: Uint8Array): Uint8Array {
  const out = new Uint8Array(11 + sps.length + pps.length);
  const view = new DataView(out.buffer);
  // Profile/compat/level are copied from the SPS so the two can never disagree.
  out.set([1, sps[1] ?? 0, sps[2] ?? 0, sps[3] ?? 0, 0xff, 0xe1], 0);
  view.setUint16(6, sps.length);
  out.set(sps, 8);
  out[8 + sps.length] = 1;
  view.setUint16(9 + sps.length, pps.length);
  out.set(pps, 11 + sps.length);
  return out;
}

function codecString(sps: Uint8Array): string {
  const hex = (b: number | undefined): string => (b ?? 0).toString(16).toUpperCase().padStart(2, "0");
  return `avc1.${hex(sps[1])}${hex(sps[2])}${hex(sps[3])}`;
}

interface GopSamples {
  readonly description: Uint8Array;
  readonly codec: string;
  /** Indexed by idr_pic_id parity, then by position in the GOP. */
  readonly samples: readonly (readonly Uint8Array[])[];
}

/**
 * Every GOP is byte-identical apart from idr_pic_id, so the samples are built
 * once and shared; the muxer only reads them.
 */
function buildGopSamples(g: Geometry): GopSamples {
  const sps = nalUnit(3, NAL_SPS, spsRbsp(g));
  const pps = nalUnit(3, NAL_PPS, ppsRbsp());
  const pFrames: Uint8Array[] = [];
  for (let frameNum = 1; frameNum < GOP_FRAMES; frameNum++) {
    pFrames.push(avccSample([nalUnit(2, NAL_SLICE, skipSliceRbsp(g, frameNum))]));
  }
  // Consecutive IDR pictures must differ in idr_pic_id (7.4.3); alternating suffices.
  const gop = (idrPicId: number): Uint8Array[] => [
    avccSample([nalUnit(3, NAL_IDR, idrSliceRbsp(g, idrPicId))]),
    ...pFrames,
  ];
  return {
    description: avcDecoderConfigurationRecord(sps, pps),
    codec: codecString(sps),
    samples: [gop(0), gop(1)],
  };
}

/** The subset of WebCodecs' EncodedVideoChunkMetadata that mp4-muxer reads. */
interface AvcChunkMeta {
  decoderConfig: {
    codec: string;
    codedWidth: number;
    codedHeight: number;
    description: Uint8Array;
  };
}

function encodeMp4(durationS: number, width: number, height: number): Buffer {
  const g = geometry(width, height);
  const frameCount = Math.round(durationS * FPS);
  if (frameCount < 1) throw new RangeError(`durationS too short for one frame at ${FPS} fps: ${durationS}`);
  const gop = buildGopSamples(g);
  const meta: AvcChunkMeta = {
    decoderConfig: { codec: gop.codec, codedWidth: width, codedHeight: height, description: gop.description },
  };
  const muxer = new Muxer({
    target: new ArrayBufferTarget(),
    // The default 57600 Hz track timescale is a multiple of 24, so frame times are exact.
    video: { codec: "avc", width, height },
    fastStart: "in-memory",
  });
  const frameUs = 1_000_000 / FPS;
  for (let i = 0; i < frameCount; i++) {
    const posInGop = i % GOP_FRAMES;
    const gopIndex = Math.floor(i / GOP_FRAMES);
    const data = gop.samples[gopIndex % 2]?.[posInGop];
    if (data === undefined) throw new Error("unreachable: GOP sample missing");
    // The decoder config only needs to reach the muxer once.
    muxer.addVideoChunkRaw(
      data,
      posInGop === 0 ? "key" : "delta",
      i * frameUs,
      frameUs,
      i === 0 ? meta : undefined,
    );
  }
  muxer.finalize();
  return Buffer.from(muxer.target.buffer);
}

// ---------------------------------------------------------------------------
// MP4 cache
// ---------------------------------------------------------------------------

const MP4_CACHE_LIMIT = 32;
// Map iteration order is insertion order, so re-inserting on hit gives LRU for free.
const mp4Cache = new Map<string, Buffer>();

/**
 * An MP4 (H.264 video only, flat grey) of `durationS` seconds (rounded to whole
 * frames) at 24 fps, width x height pixels (even, >= 16, up to H.264 level 6
 * frame size, e.g. 5040x2160, 2160x5040 or 8192x4320), at the lowest level that holds it.
 *
 * Cached by (durationS, width, height): the same Buffer instance is returned
 * for repeated calls, so callers must not mutate it.
 */
export function makeMp4(durationS: number, width: number, height: number): Buffer {
  if (!Number.isFinite(durationS) || durationS <= 0) {
    throw new RangeError(`durationS must be a finite number > 0, got ${durationS}`);
  }
  const key = `${durationS}:${width}:${height}`;
  const hit = mp4Cache.get(key);
  if (hit !== undefined) {
    mp4Cache.delete(key);
    mp4Cache.set(key, hit);
    return hit;
  }
  const mp4 = encodeMp4(durationS, width, height);
  mp4Cache.set(key, mp4);
  if (mp4Cache.size > MP4_CACHE_LIMIT) {
    const oldest = mp4Cache.keys().next();
    if (!oldest.done) mp4Cache.delete(oldest.value);
  }
  return mp4;
}
