// The sandbox's WAVs: the tone copied from one exact period (11 cycles of 220 Hz in 1,200 samples
// at 24 kHz) is the tone a sine per sample gives, to the last bit but rounding, with its fades.
import { describe, expect, it } from "vitest";
import { makeWav } from "../../src/sandbox/media.js";

/** What makeWav wrote before: a sine per sample, faded 10 ms at each end. */
function reference(ms: number): Int16Array {
  const n = Math.max(1, Math.round((ms * 24_000) / 1000));
  const fade = Math.min(240, Math.floor(n / 2));
  const step = (2 * Math.PI * 220) / 24_000;
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    const gain = fade <= 0 ? 1 : Math.min(1, i / fade, (n - 1 - i) / fade);
    out[i] = Math.round(Math.sin(i * step) * 0.05 * gain * 32767);
  }
  return out;
}

describe("makeWav", () => {
  it.each([1, 7, 19, 20, 21, 50, 1234, 20_000])("%d ms: the per-sample tone, within one step", (ms) => {
    const wav = makeWav(ms);
    const want = reference(ms);
    expect(wav.readUInt32LE(40)).toBe(want.length * 2);
    let worst = 0;
    for (let i = 0; i < want.length; i++) {
      worst = Math.max(worst, Math.abs(wav.readInt16LE(44 + i * 2) - (want[i] as number)));
    }
    expect(worst).toBeLessThanOrEqual(1);
    // The fades are there: the first and last samples are silent.
    expect(wav.readInt16LE(44)).toBe(0);
    if (want.length > 2) expect(wav.readInt16LE(44 + (want.length - 1) * 2)).toBe(0);
  });
});
