// The per-kind table: each kind's stored file is measured, and its stream check built, from its row.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MEDIA, mediaSeconds } from "../../src/media/kinds.js";
import { makeMp4, makeWav } from "../../src/sandbox/media.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "clapper-media-"));
  await writeFile(join(dir, "shot.mp4"), await makeMp4(3, 320, 240));
  await writeFile(join(dir, "line.wav"), makeWav(1250));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

describe("MEDIA", () => {
  it("measures a stored movie and a stored WAV from their headers", async () => {
    expect(await mediaSeconds(join(dir, "shot.mp4"), "video")).toBeCloseTo(3, 3);
    expect(await mediaSeconds(join(dir, "line.wav"), "speech")).toBeCloseTo(1.25, 3);
  });

  it("scans each kind's container and measures it the way its row says", async () => {
    const cases = [
      { kind: "video", file: await makeMp4(2, 320, 240), seconds: 2 },
      { kind: "speech", file: makeWav(500), seconds: 0.5 },
    ] as const;
    for (const { kind, file, seconds } of cases) {
      const scanner = MEDIA[kind].scanner(file.length);
      scanner.push(file);
      expect(scanner.finish(file.length)).toBeCloseTo(seconds, 3);
    }
  });

  it("refuses one kind's container scanned as the other's", async () => {
    const wav = makeWav(500);
    // A RIFF size read as an MP4 box header is no box type.
    expect(() => MEDIA.video.scanner(wav.length).push(wav)).toThrow(/^invalid box header at offset 0/);
    const mp4 = await makeMp4(1, 320, 240);
    expect(() => MEDIA.speech.scanner(mp4.length).push(mp4)).toThrow(/not a WAV file/);
    expect([MEDIA.video.label, MEDIA.speech.label]).toEqual(["MP4", "WAV"]);
  });
});
