/**
 * What a sandbox video shows, as the macroblocks the H.264 writer sends (h264.ts): vertical bands of
 * colour and a pattern drawn from the task id, a box with the start of the prompt, one with the task
 * id, and a running timecode. Everything is derived from the task alone, so the same task always
 * gives the same pictures, and two tasks (even two takes of one request, which differ in id) differ.
 *
 * The bands depend on x only: the top macroblock row carries them as raw samples, and every
 * macroblock below that is not text copies the row above (Vertical prediction). A text box keeps
 * its bottom pixel row as plain pattern, so what is copied below it is the pattern again.
 */
import { createHash } from "node:crypto";
import { GLYPH_ADVANCE, GLYPH_ROWS, glyphPixel, printable } from "./font.js";
import { FPS, type Geometry, PCM_BYTES, type PcmMbs } from "./h264.js";

/** What the video of a task is drawn from. */
export interface VideoTask {
  readonly id: string;
  /** Untrusted text: only printable ASCII is drawn. */
  readonly prompt: string;
}

/** Samples of the pattern per column: luma per pixel, chroma per pair of pixels. */
interface Columns {
  readonly y: Uint8Array;
  readonly cb: Uint8Array;
  readonly cr: Uint8Array;
}

/** A text box, in macroblocks, and the pixel scale of its glyphs. */
interface Box {
  readonly mbX: number;
  readonly mbY: number;
  readonly mbW: number;
  readonly mbH: number;
  readonly scale: number;
  /** Pixels before the first glyph. */
  readonly padLeft: number;
}

const PROMPT_CHARS = 24;
// The id's prefix and ten hex digits: enough to tell two takes apart and find the task in a report.
const TAG_CHARS = 16;
const TIMECODE_CHARS = "00:00.0".length;
const TEXT_Y = 235;
// The box behind text keeps 30% of the pattern's contrast: the bands show through, the text reads.
const BOX_KEEP = 0.3;

type Mbs = readonly (readonly [number, Uint8Array])[];

/** A box as last drawn: its text and its macroblocks. */
interface Drawn {
  readonly text: string;
  readonly mbs: Mbs;
}

export class TaskPicture {
  private readonly plain: Columns;
  private readonly dimmed: Columns;
  /** The I_PCM macroblocks every IDR picture has (the top row and the still boxes), by address. */
  private readonly still: (Uint8Array | undefined)[];
  private readonly timecodeBox: Box | undefined;
  private readonly timecodeBackground: Uint8Array[];
  private readonly timecodes = new Map<number, Mbs>();
  private lastTimecode: Drawn | undefined;

  constructor(
    private readonly g: Geometry,
    task: VideoTask,
  ) {
    this.plain = patternColumns(g, task.id);
    // The box behind text keeps a little of the pattern: the bands show through, the text reads.
    const dim = (v: number, mid: number) => Math.round(mid + (v - mid) * BOX_KEEP);
    this.dimmed = {
      y: this.plain.y.map((v) => dim(v, 16)),
      cb: this.plain.cb.map((v) => dim(v, 128)),
      cr: this.plain.cr.map((v) => dim(v, 128)),
    };
    this.still = new Array(g.mbWidth * g.mbHeight).fill(undefined);
    for (let mbX = 0; mbX < g.mbWidth; mbX++) this.still[mbX] = this.mb(mbX, false, false);
    const { boxes, timecode } = layout(g, task);
    for (const [box, text] of boxes) {
      for (const [addr, mb] of this.render(box, this.background(box), text)) this.still[addr] = mb;
    }
    this.timecodeBox = timecode;
    this.timecodeBackground = timecode ? this.background(timecode) : [];
  }

  /** The I_PCM macroblocks of the IDR picture at frame `frame`. */
  idr(frame: number): PcmMbs {
    const mbs = this.still.slice();
    for (const [addr, mb] of this.timecode(frame)) mbs[addr] = mb;
    return mbs;
  }

  /** The macroblocks of frame `frame` (not the first of its GOP) that differ from the frame before. */
  changes(frame: number): Mbs {
    const before = this.timecode(frame - 1);
    const now = this.timecode(frame);
    if (before === now) return [];
    // Both lists hold the same addresses in the same order.
    return now.filter(([, mb], i) => {
      const old = before[i]?.[1];
      return old !== mb && !(old !== undefined && Buffer.compare(old, mb) === 0);
    });
  }

  private timecode(frame: number): Mbs {
    const tenths = Math.floor((frame * 10) / FPS);
    let mbs = this.timecodes.get(tenths);
    if (mbs === undefined) {
      const box = this.timecodeBox;
      const text = timecodeText(tenths);
      mbs = box ? this.render(box, this.timecodeBackground, text, this.lastTimecode) : [];
      this.lastTimecode = { text, mbs };
      // Frames come in order: the value before and this one are all that are asked again.
      if (this.timecodes.size > 2) this.timecodes.clear();
      this.timecodes.set(tenths, mbs);
    }
    return mbs;
  }

  /** A macroblock at column `mbX` of the pattern, dimmed or not, with its bottom row plain or not. */
  private mb(mbX: number, dimmed: boolean, plainBottom: boolean): Uint8Array {
    const mb = new Uint8Array(PCM_BYTES);
    const body = dimmed ? this.dimmed : this.plain;
    const x = mbX * 16;
    const c = mbX * 8;
    for (let i = 0; i < 16; i++) mb[i] = body.y[x + i] ?? 0;
    for (let i = 0; i < 8; i++) {
      mb[256 + i] = body.cb[c + i] ?? 0;
      mb[320 + i] = body.cr[c + i] ?? 0;
    }
    // Each plane's rows are alike: double the first row until the plane is full.
    for (let rows = 1; rows < 16; rows *= 2) mb.copyWithin(rows * 16, 0, rows * 16);
    for (let rows = 1; rows < 8; rows *= 2) {
      mb.copyWithin(256 + rows * 8, 256, 256 + rows * 8);
      mb.copyWithin(320 + rows * 8, 320, 320 + rows * 8);
    }
    if (plainBottom && dimmed) {
      for (let i = 0; i < 16; i++) mb[240 + i] = this.plain.y[x + i] ?? 0;
      for (let i = 0; i < 8; i++) {
        mb[312 + i] = this.plain.cb[c + i] ?? 0;
        mb[376 + i] = this.plain.cr[c + i] ?? 0;
      }
    }
    return mb;
  }

  /** A box's empty macroblocks, row by row: the pattern dimmed, the box's bottom pixel row plain. */
  private background(box: Box): Uint8Array[] {
    const out: Uint8Array[] = [];
    for (let by = 0; by < box.mbH; by++) {
      for (let bx = 0; bx < box.mbW; bx++) out.push(this.mb(box.mbX + bx, true, by === box.mbH - 1));
    }
    return out;
  }

  /**
   * The box's macroblocks with white text on the background, ascending by address. Given the same
   * box as drawn before, only the columns from the first changed character on are drawn anew: the
   * others are the same arrays as before (a timecode mostly changes its last digit).
   */
  private render(box: Box, background: readonly Uint8Array[], text: string, before?: Drawn): Mbs {
    const { scale } = box;
    const pad = padding(scale);
    let same = 0;
    if (before && before.text.length === text.length) {
      while (same < text.length && before.text[same] === text[same]) same++;
    }
    const firstColumn = before && same > 0 ? (box.padLeft + same * GLYPH_ADVANCE * scale) >> 4 : 0;
    const mbs = background.map((mb, i) =>
      i % box.mbW >= firstColumn ? mb.slice() : (before?.mbs[i]?.[1] ?? mb.slice()),
    );
    // One glyph pixel: a scale x scale square, cut where it crosses into another macroblock.
    const square = (left: number, top: number) => {
      for (let y = top; y < top + scale; y++) {
        for (let x = Math.max(left, firstColumn * 16); x < left + scale; ) {
          const end = Math.min(left + scale, ((x >> 4) + 1) * 16);
          const mb = mbs[(y >> 4) * box.mbW + (x >> 4)];
          mb?.fill(TEXT_Y, ((y & 15) << 4) | (x & 15), (((y & 15) << 4) | ((end - 1) & 15)) + 1);
          x = end;
        }
      }
    };
    for (let i = 0; i < text.length; i++) {
      const char = text.charCodeAt(i);
      for (let gx = 0; gx < GLYPH_ADVANCE - 1; gx++) {
        for (let gy = 0; gy < GLYPH_ROWS; gy++) {
          if (!glyphPixel(char, gx, gy)) continue;
          const left = box.padLeft + (i * GLYPH_ADVANCE + gx) * scale;
          const top = pad + gy * scale;
          square(left, top);
        }
      }
    }
    const at = (i: number) => (box.mbY + Math.floor(i / box.mbW)) * this.g.mbWidth + box.mbX + (i % box.mbW);
    return mbs.map((mb, i) => [at(i), mb] as const);
  }
}

function timecodeText(tenths: number): string {
  const two = (n: number) => String(n).padStart(2, "0");
  return `${two(Math.floor(tenths / 600))}:${two(Math.floor(tenths / 10) % 60)}.${tenths % 10}`;
}

const padding = (scale: number) => scale;

/**
 * Glyph scale: 2 at 480p, 3 at 1080p, 4 at 4K, 6 at 8K. Slower than the picture grows: raw samples
 * cost 1.5 bytes a pixel, and on a big picture smaller text still reads.
 */
function textScale(g: Geometry): number {
  return Math.max(1, Math.round(Math.sqrt(Math.min(g.width, g.height) / 120)));
}

/** The three boxes with the text each shows (the prompt and id cut to fit), those that fit. */
interface Layout {
  readonly boxes: readonly (readonly [Box, string])[];
  readonly timecode: Box | undefined;
}

/**
 * Where the boxes go, in whole macroblocks inside the visible (uncropped) picture and below the top
 * row: the prompt a third of the way down, the task id under it, the timecode at the bottom. A box
 * that does not fit is left out (tiny pictures show the bands and what fits).
 */
function layout(g: Geometry, task: VideoTask): Layout {
  const scale = textScale(g);
  const visibleCols = Math.floor(g.width / 16);
  const visibleRows = Math.floor(g.height / 16);
  const left = visibleCols > 4 ? 1 : 0;
  const room = (visibleCols - left) * 16 - 3 * padding(scale);
  const maxChars = Math.min(PROMPT_CHARS, Math.floor(room / (GLYPH_ADVANCE * scale)));
  // One pixel row more than the text and its padding: the plain row at the bottom.
  const mbH = Math.ceil((GLYPH_ROWS * scale + 2 * padding(scale) + 1) / 16);
  const sized = (chars: number, mbY: number, padLeft = 2 * padding(scale)): Box | undefined => {
    const mbW = Math.ceil((chars * GLYPH_ADVANCE * scale + padLeft + padding(scale)) / 16);
    if (chars < 1 || mbY < 1 || mbY + mbH > visibleRows || left + mbW > visibleCols) return undefined;
    return { mbX: left, mbY, mbW, mbH, scale, padLeft };
  };
  // The last digit, the one that changes ten times a second, starts a macroblock column, so that
  // each change re-sends as few macroblocks as its glyph can span.
  const lastDigit = (TIMECODE_CHARS - 1) * GLYPH_ADVANCE * scale + 2 * padding(scale);
  const timecodePad = 2 * padding(scale) + ((16 - (lastDigit % 16)) % 16);
  const timecode = sized(TIMECODE_CHARS, visibleRows - mbH - (visibleRows > 8 ? 1 : 0), timecodePad);
  const promptY = Math.max(1, Math.round(visibleRows / 3));
  const out: [Box, string][] = [];
  const texts = [wordsThatFit(task.prompt, maxChars), printable(task.id, Math.min(TAG_CHARS, maxChars))];
  for (const [i, text] of texts.entries()) {
    const box = sized(text.length, promptY + i * mbH);
    if (box && (!timecode || box.mbY + box.mbH <= timecode.mbY)) out.push([box, text]);
  }
  return { boxes: out, timecode };
}

/** The start of the text that fits in `maxChars`, cut after a word when that keeps at least half. */
function wordsThatFit(text: string, maxChars: number): string {
  const start = printable(text, maxChars + 1);
  if (start.length <= maxChars) return start;
  const space = start.lastIndexOf(" ");
  return space >= maxChars / 2 ? start.slice(0, space) : start.slice(0, maxChars);
}

/** A small deterministic generator (mulberry32) seeded from the task id's SHA-256. */
function random(id: string): () => number {
  let state = createHash("sha256").update(id).digest().readUInt32BE(0);
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

type Rgb = readonly [number, number, number];

function hsv(h: number, s: number, v: number): Rgb {
  const f = (n: number) => {
    const k = (n + h / 60) % 6;
    return v - v * s * Math.max(0, Math.min(k, 4 - k, 1));
  };
  return [f(5), f(3), f(1)];
}

/** BT.601 limited range, which decoders assume when the stream does not say. */
function ycbcr([r, g, b]: Rgb): Rgb {
  return [
    16 + 65.481 * r + 128.553 * g + 24.966 * b,
    128 - 37.797 * r - 74.203 * g + 112 * b,
    128 + 112 * r - 93.786 * g - 18.214 * b,
  ];
}

const clampSample = (v: number) => Math.max(16, Math.min(235, Math.round(v)));

/**
 * The bands: 3 to 7 of them, of widths, hues and brightness from the task id, each plain, striped,
 * ramped or combed (also from the id). Sized relative to the picture, so a task looks alike at
 * every size.
 */
function patternColumns(g: Geometry, id: string): Columns {
  const next = random(id);
  const count = 3 + Math.floor(next() * 5);
  const weights = Array.from({ length: count }, () => 1 + 3 * next());
  const total = weights.reduce((a, b) => a + b, 0);
  const baseHue = next() * 360;
  const style = Math.floor(next() * 4);
  const period = Math.max(4, Math.round(g.width / (12 + next() * 36)));
  const bands = weights.map((weight, k) => ({
    weight,
    rgb: hsv((baseHue + k * (137.5 + next() * 40)) % 360, 0.45 + 0.5 * next(), 0.3 + 0.65 * next()),
  }));
  const padded = g.mbWidth * 16;
  const columns: Columns = {
    y: new Uint8Array(padded),
    cb: new Uint8Array(padded / 2),
    cr: new Uint8Array(padded / 2),
  };
  let band = 0;
  let bandStart = 0;
  let bandEnd = ((bands[0]?.weight ?? total) / total) * g.width;
  for (let x = 0; x < padded; x++) {
    while (x >= bandEnd && band < bands.length - 1) {
      band++;
      bandStart = bandEnd;
      bandEnd += ((bands[band]?.weight ?? 0) / total) * g.width;
    }
    const [y, cb, cr] = ycbcr(bands[band]?.rgb ?? [0.5, 0.5, 0.5]);
    const gain = styleGain(style, x, period, (x - bandStart) / Math.max(1, bandEnd - bandStart));
    columns.y[x] = clampSample(16 + (y - 16) * gain);
    if (x % 2 === 0) {
      columns.cb[x / 2] = clampSample(cb);
      columns.cr[x / 2] = clampSample(cr);
    }
  }
  return columns;
}

/** How bright column `x` is against its band's colour, for each of the four styles. */
function styleGain(style: number, x: number, period: number, inBand: number): number {
  const phase = x % period;
  if (style === 1) return phase < Math.max(1, period / 4) ? 0.45 : 1;
  if (style === 2) return 0.6 + 0.55 * inBand;
  if (style === 3) return phase < Math.max(1, period / 6) ? 1.5 : 0.85;
  return 1;
}
