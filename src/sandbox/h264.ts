/**
 * A hand-written H.264 bitstream (ITU-T H.264 section 7.3 syntax) for the sandbox's videos: no encoder,
 * only the few macroblock kinds a picture of vertical bands, text boxes and a timecode needs.
 *
 * - IDR pictures: I_PCM macroblocks (raw samples) where the picture has detail, and I_16x16 with
 *   Vertical prediction and no residual everywhere else, which copies the row above downward.
 * - P pictures: P_Skip everywhere (a copy of the previous picture) except the macroblocks given,
 *   re-sent as I_PCM.
 * Deblocking is off in every slice, so what is sent is exactly what is shown.
 */

/** MSB-first bit writer for RBSP payloads, with Exp-Golomb codes (H.264 9.1). */
class BitWriter {
  private buf: Uint8Array;
  private length = 0;
  private acc = 0;
  private accBits = 0;

  /** `capacity`: the bytes expected, so that big pictures are not copied as they grow. */
  constructor(capacity = 64) {
    this.buf = new Uint8Array(capacity);
  }

  /** `value` in `bits` bits (at most 24 a call). */
  u(bits: number, value: number): this {
    this.acc = (this.acc << bits) | (value & ((1 << bits) - 1));
    this.accBits += bits;
    while (this.accBits >= 8) {
      this.accBits -= 8;
      this.push((this.acc >>> this.accBits) & 0xff);
    }
    this.acc &= (1 << this.accBits) - 1;
    return this;
  }

  flag(value: boolean): this {
    return this.u(1, value ? 1 : 0);
  }

  ue(value: number): this {
    const codeNum = value + 1;
    const length = 31 - Math.clz32(codeNum);
    if (length >= 12) return this.u(length, 0).u(length + 1, codeNum);
    return this.u(2 * length + 1, codeNum);
  }

  se(value: number): this {
    return this.ue(value > 0 ? 2 * value - 1 : -2 * value);
  }

  /** Zero bits up to the next byte boundary (pcm_alignment_zero_bit), then raw bytes. */
  alignedBytes(bytes: Uint8Array): this {
    if (this.accBits > 0) this.u(8 - this.accBits, 0);
    this.reserve(bytes.length);
    this.buf.set(bytes, this.length);
    this.length += bytes.length;
    return this;
  }

  /** rbsp_trailing_bits(): a stop bit then zero padding to the byte boundary. */
  finish(): Uint8Array {
    this.u(1, 1);
    if (this.accBits > 0) this.u(8 - this.accBits, 0);
    return this.buf.subarray(0, this.length);
  }

  private push(byte: number): void {
    if (this.length === this.buf.length) this.reserve(1);
    this.buf[this.length++] = byte;
  }

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    const grown = new Uint8Array(Math.max(this.buf.length * 2, this.length + n));
    grown.set(this.buf.subarray(0, this.length));
    this.buf = grown;
  }
}

/**
 * Inserts emulation_prevention_three_byte so the payload never contains a start-code prefix (H.264
 * 7.4.1), into a new array that leaves `offset` bytes free at its start. Zero bytes are rare here (raw
 * samples are never 0), so it looks for them with indexOf.
 */
function escapeRbsp(rbsp: Uint8Array, offset: number): Uint8Array {
  const inserts: number[] = [];
  let at = rbsp.indexOf(0);
  while (at >= 0 && at + 2 < rbsp.length) {
    if (rbsp[at + 1] === 0 && (rbsp[at + 2] ?? 4) <= 3) {
      // 00 00 0x: a 3 goes before the third byte, which then starts a new count of zeros.
      inserts.push(at + 2);
      at = rbsp.indexOf(0, at + 2);
    } else {
      at = rbsp.indexOf(0, at + 1);
    }
  }
  const out = new Uint8Array(offset + rbsp.length + inserts.length);
  let from = 0;
  let to = offset;
  for (const at of inserts) {
    out.set(rbsp.subarray(from, at), to);
    to += at - from;
    out[to++] = 3;
    from = at;
  }
  out.set(rbsp.subarray(from), to);
  return out;
}

const NAL_SLICE = 1;
const NAL_IDR = 5;
const NAL_SPS = 7;
const NAL_PPS = 8;

function nalUnit(refIdc: number, type: number, rbsp: Uint8Array): Uint8Array {
  const nal = escapeRbsp(rbsp, 1);
  nal[0] = (refIdc << 5) | type;
  return nal;
}

/**
 * An MP4 sample of one NAL unit: a 4-byte length prefix (AVCC) instead of an Annex-B start code.
 * Escaped straight into the sample, as pictures can be megabytes.
 */
function avccSample(refIdc: number, type: number, rbsp: Uint8Array): Uint8Array {
  const sample = escapeRbsp(rbsp, 5);
  new DataView(sample.buffer).setUint32(0, sample.length - 4);
  sample[4] = (refIdc << 5) | type;
  return sample;
}

export const FPS = 24;
// An IDR every 10 s (x264's default keyframe interval is about that): IDR pictures carry the raw
// samples of the pattern and text, so they make most of a file's bytes and of the time to write it,
// while a player seeking decodes the P pictures between, which are almost all skipped macroblocks.
export const GOP_FRAMES = 10 * FPS;
// frame_num counts 0..GOP_FRAMES-1 within a GOP; sized so it never wraps.
const LOG2_MAX_FRAME_NUM = Math.max(4, Math.ceil(Math.log2(GOP_FRAMES)));
const PROFILE_BASELINE = 66;
// constraint_set0/1/2: the stream uses no FMO/ASO/redundant slices, so it is
// also decodable as Main and Extended (direct_8x8_inference is set for the
// latter); decoders that only do Constrained Baseline accept it.
const CONSTRAINT_FLAGS = 0xe0;

/** Bytes of one I_PCM macroblock in 8-bit 4:2:0: 256 luma samples, then 64 Cb and 64 Cr, each in raster order. */
export const PCM_BYTES = 384;

export interface Geometry {
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

export function geometry(width: number, height: number): Geometry {
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
    .u(16, 0)
    .u(16, 1) // num_units_in_tick
    .u(16, 0)
    .u(16, FPS * 2) // time_scale: a frame is two ticks
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
      // Present so slices can switch deblocking off: smoothing would blur the bands and the text.
      .flag(true) // deblocking_filter_control_present_flag
      .flag(false) // constrained_intra_pred_flag
      .flag(false) // redundant_pic_cnt_present_flag
      .finish()
  );
}

const SLICE_TYPE_P_ALL = 5;
const SLICE_TYPE_I_ALL = 7;
const MB_TYPE_I_PCM = 25;
// In a P slice the intra types follow the five inter ones (Table 7-13).
const MB_TYPE_P_SLICE_I_PCM = 5 + MB_TYPE_I_PCM;

// mb_type 1 = I_16x16_0_0_0 (Vertical, chroma cbp 0, luma cbp 0) as ue "010"; intra_chroma_pred_mode
// 2 = Vertical as ue "011"; mb_qp_delta 0 as se "1". Then Intra16x16DCLevel's coeff_token for no
// coefficients, whose code depends on nC (Table 9-5): "1" when nC < 2, "000011" when nC >= 8.
const VERTICAL_MB_LOW_NC = 0b0100111_1;
const VERTICAL_MB_LOW_NC_BITS = 8;
const VERTICAL_MB_HIGH_NC = 0b0100111_000011;
const VERTICAL_MB_HIGH_NC_BITS = 13;

/** By macroblock address: the samples of an I_PCM macroblock, or undefined where the picture is predicted. */
export type PcmMbs = readonly (Uint8Array | undefined)[];

/**
 * An IDR picture as a NAL unit. `pcm` must give every macroblock of the top row (Vertical prediction
 * has nothing above them to copy); each other macroblock it leaves out copies the bottom row of the
 * one above.
 */
function idrSliceRbsp(g: Geometry, idrPicId: number, pcm: PcmMbs): Uint8Array {
  let pcmCount = 0;
  for (const mb of pcm) if (mb) pcmCount++;
  const w = new BitWriter(pcmCount * (PCM_BYTES + 2) + g.mbWidth * g.mbHeight * 2 + 64)
    .ue(0) // first_mb_in_slice
    .ue(SLICE_TYPE_I_ALL)
    .ue(0) // pic_parameter_set_id
    .u(LOG2_MAX_FRAME_NUM, 0) // frame_num
    .ue(idrPicId)
    .flag(false) // no_output_of_prior_pics_flag
    .flag(false) // long_term_reference_flag
    .se(0) // slice_qp_delta
    .ue(1); // disable_deblocking_filter_idc
  let previousPcm = false;
  for (let mbY = 0, mbAddr = 0; mbY < g.mbHeight; mbY++) {
    for (let mbX = 0; mbX < g.mbWidth; mbX++, mbAddr++) {
      const samples = pcm[mbAddr];
      if (samples !== undefined) {
        w.ue(MB_TYPE_I_PCM).alignedBytes(samples);
        previousPcm = true;
        continue;
      }
      if (mbY === 0) throw new RangeError("the top row of an IDR picture must be I_PCM");
      // nC (9.2.1): an I_PCM neighbour counts 16 coefficients, a residual-free I_16x16 one 0;
      // the left neighbour is missing at the picture's edge.
      const above = pcm[mbAddr - g.mbWidth] !== undefined ? 16 : 0;
      const left = mbX === 0 ? undefined : previousPcm ? 16 : 0;
      const nC = left === undefined ? above : (above + left + 1) >> 1;
      if (nC >= 8) w.u(VERTICAL_MB_HIGH_NC_BITS, VERTICAL_MB_HIGH_NC);
      else w.u(VERTICAL_MB_LOW_NC_BITS, VERTICAL_MB_LOW_NC);
      previousPcm = false;
    }
    previousPcm = false;
  }
  return w.finish();
}

/**
 * A P picture: P_Skip (the previous picture, motion zero since no macroblock ever moves) except the
 * macroblocks in `coded`, ascending by address, sent as I_PCM.
 */
function pSliceRbsp(g: Geometry, frameNum: number, coded: readonly (readonly [number, Uint8Array])[]) {
  const w = new BitWriter(coded.length * (PCM_BYTES + 8) + 64)
    .ue(0) // first_mb_in_slice
    .ue(SLICE_TYPE_P_ALL)
    .ue(0) // pic_parameter_set_id
    .u(LOG2_MAX_FRAME_NUM, frameNum)
    .flag(false) // num_ref_idx_active_override_flag
    .flag(false) // ref_pic_list_modification_flag_l0
    .flag(false) // adaptive_ref_pic_marking_mode_flag
    .se(0) // slice_qp_delta
    .ue(1); // disable_deblocking_filter_idc
  let next = 0;
  for (const [mbAddr, samples] of coded) {
    w.ue(mbAddr - next) // mb_skip_run
      .ue(MB_TYPE_P_SLICE_I_PCM)
      .alignedBytes(samples);
    next = mbAddr + 1;
  }
  const total = g.mbWidth * g.mbHeight;
  if (next < total) w.ue(total - next); // the trailing mb_skip_run
  return w.finish();
}

/** An IDR picture as one MP4 sample. */
export function idrSample(g: Geometry, idrPicId: number, pcm: PcmMbs): Uint8Array {
  return avccSample(3, NAL_IDR, idrSliceRbsp(g, idrPicId, pcm));
}

/** A P picture as one MP4 sample; see pSliceRbsp. */
export function pSample(
  g: Geometry,
  frameNum: number,
  coded: readonly (readonly [number, Uint8Array])[],
): Uint8Array {
  return avccSample(2, NAL_SLICE, pSliceRbsp(g, frameNum, coded));
}

interface StreamConfig {
  /** The AVCDecoderConfigurationRecord (avcC) that carries the SPS and PPS. */
  readonly description: Uint8Array;
  /** The RFC 6381 codec string, avc1.PPCCLL. */
  readonly codec: string;
}

export function streamConfig(g: Geometry): StreamConfig {
  const sps = nalUnit(3, NAL_SPS, spsRbsp(g));
  const pps = nalUnit(3, NAL_PPS, ppsRbsp());
  const description = new Uint8Array(11 + sps.length + pps.length);
  const view = new DataView(description.buffer);
  // Profile/compat/level are copied from the SPS so the two can never disagree.
  description.set([1, sps[1] ?? 0, sps[2] ?? 0, sps[3] ?? 0, 0xff, 0xe1], 0);
  view.setUint16(6, sps.length);
  description.set(sps, 8);
  description[8 + sps.length] = 1;
  view.setUint16(9 + sps.length, pps.length);
  description.set(pps, 11 + sps.length);
  const hex = (b: number | undefined): string => (b ?? 0).toString(16).toUpperCase().padStart(2, "0");
  return { description, codec: `avc1.${hex(sps[1])}${hex(sps[2])}${hex(sps[3])}` };
}
