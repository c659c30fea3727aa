// episode.srt and episode.vtt: one cue per line heard, at the time its audio is heard in the episode.
// The times are measured from the episode itself (ffmpeg's silencedetect on its audio: the sandbox's
// speech is a steady tone, and there is no music), not taken from the record that made them.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { type Cue, formatSrt, formatVtt } from "../../src/episode/captions.js";
import { ffmpegBinary, runFfmpeg } from "../../src/episode/ffmpeg-run.js";
import { cli, runIn, setup } from "../run/helpers.js";
import { type Store, startStore } from "../s3/helpers.js";

const TOLERANCE = 0.1;
const HOSTILE = "Text with <b>&</b> --> in it.";

interface Parsed {
  id?: string;
  index?: number;
  start: number;
  end: number;
  lines: string[];
}

const seconds = (h: string, m: string, s: string, ms: string) =>
  Number(h) * 3600 + Number(m) * 60 + Number(s) + Number(ms) / 1000;

/** A SubRip file, strictly: 1-based index, `HH:MM:SS,mmm --> HH:MM:SS,mmm`, text, a blank line. */
function parseSrt(text: string): Parsed[] {
  expect(text.endsWith("\n")).toBe(true);
  return text
    .trimEnd()
    .split("\n\n")
    .map((block) => {
      const [index, timing, ...lines] = block.split("\n");
      const m = /^(\d{2,}):(\d{2}):(\d{2}),(\d{3}) --> (\d{2,}):(\d{2}):(\d{2}),(\d{3})$/.exec(timing ?? "");
      expect(m, `SRT timing line ${JSON.stringify(timing)}`).not.toBeNull();
      const g = m as RegExpExecArray;
      expect(index).toMatch(/^\d+$/);
      return {
        index: Number(index),
        start: seconds(g[1] as string, g[2] as string, g[3] as string, g[4] as string),
        end: seconds(g[5] as string, g[6] as string, g[7] as string, g[8] as string),
        lines,
      };
    });
}

/** A WebVTT file: `WEBVTT`, then cues of an identifier, `HH:MM:SS.mmm --> HH:MM:SS.mmm` and text. */
function parseVtt(text: string): Parsed[] {
  const [header, ...blocks] = text.trimEnd().split("\n\n");
  expect(header).toBe("WEBVTT");
  return blocks.map((block) => {
    const [id, timing, ...lines] = block.split("\n");
    const m = /^(\d{2,}):(\d{2}):(\d{2})\.(\d{3}) --> (\d{2,}):(\d{2}):(\d{2})\.(\d{3})$/.exec(timing ?? "");
    expect(m, `VTT timing line ${JSON.stringify(timing)}`).not.toBeNull();
    const g = m as RegExpExecArray;
    return {
      id: id as string,
      start: seconds(g[1] as string, g[2] as string, g[3] as string, g[4] as string),
      end: seconds(g[5] as string, g[6] as string, g[7] as string, g[8] as string),
      lines,
    };
  });
}

const unescapeVtt = (s: string) => s.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

/** Where the episode's audio is not silent, by ffmpeg's silencedetect. */
async function heard(episode: string): Promise<Array<{ start: number; end: number }>> {
  const { stderr } = await runFfmpeg(
    [
      "-hide_banner",
      "-nostdin",
      "-i",
      `file:${episode}`,
      "-map",
      "0:a:0",
      "-af",
      "silencedetect=noise=-50dB:d=0.15",
      "-f",
      "null",
      "-",
    ],
    { binary: ffmpegBinary(), timeoutMs: 60_000 },
  );
  const total = Number(
    /Duration: (\d+):(\d+):([\d.]+)/
      .exec(stderr)
      ?.slice(1)
      .reduce((t, v) => t * 60 + Number(v), 0),
  );
  const silences: Array<{ start: number; end: number }> = [];
  for (const m of stderr.matchAll(/silence_start: ([\d.e-]+)[\s\S]*?silence_end: ([\d.]+)/g))
    silences.push({ start: Math.max(0, Number(m[1])), end: Number(m[2]) });
  // The last silence may run to the end without a silence_end.
  const open = /silence_start: ([\d.e-]+)(?![\s\S]*silence_end)/.exec(stderr);
  if (open && !silences.some((s) => s.start === Math.max(0, Number(open[1]))))
    silences.push({ start: Number(open[1]), end: total });
  const sounds: Array<{ start: number; end: number }> = [];
  let at = 0;
  for (const s of silences) {
    if (s.start - at > 0.01) sounds.push({ start: at, end: s.start });
    at = s.end;
  }
  if (total - at > 0.01) sounds.push({ start: at, end: total });
  return sounds;
}

describe("caption files", () => {
  const cues: Cue[] = [
    { id: "n01", start: 0.5, end: 1.4705, text: "One two three." },
    { id: "n02", start: 3723.004, end: 3725, text: `  ${HOSTILE}\n\n  Second line  \r\n` },
  ];

  it("SubRip: 1-based index, HH:MM:SS,mmm, no blank line inside a cue, no arrow in the text", () => {
    expect(formatSrt(cues)).toBe(
      [
        "1",
        "00:00:00,500 --> 00:00:01,471",
        "One two three.",
        "",
        "2",
        "01:02:03,004 --> 01:02:05,000",
        "Text with <b>&</b> -- > in it.",
        "Second line",
        "",
      ].join("\n"),
    );
  });

  it("WebVTT: the header, identifiers, HH:MM:SS.mmm, and &, < and > escaped", () => {
    expect(formatVtt(cues)).toBe(
      [
        "WEBVTT",
        "",
        "n01",
        "00:00:00.500 --> 00:00:01.471",
        "One two three.",
        "",
        "n02",
        "01:02:03.004 --> 01:02:05.000",
        "Text with &lt;b&gt;&amp;&lt;/b&gt; --&gt; in it.",
        "Second line",
        "",
      ].join("\n"),
    );
    expect(formatVtt([])).toBe("WEBVTT\n");
    expect(formatSrt([])).toBe("");
  });
});

describe("assemble writes captions", () => {
  it("one cue per line heard, each within 0.1 s of where its audio is in the episode (3 shots, an auto one, a cut line, an unplaced line)", async () => {
    const { s, w } = await setup();
    const file = await w.write(
      "ep01.yaml",
      stringify({
        name: "ep01",
        output: "./out",
        timing: { lead: 0.6, gap: 0.4, tail: 0.5 },
        defaults: {
          shot: { model: "Vid-H3", resolution: "480P", ratio: "16:9", duration: 4 },
          line: { language: "EN", voice: "preset:en_female_bright" },
        },
        shots: [
          { id: "s01", prompt: "A lighthouse at dusk", duration: "auto" },
          { id: "s02", prompt: "Waves on the rocks" },
          { id: "s03", prompt: "The lamp room" },
        ],
        lines: [
          { id: "n01", shot: "s01", text: "Every night, the light came on." },
          { id: "n02", shot: "s01", text: "Someone watched." },
          // Longer than its 4 s shot: heard until the shot ends, and its cue ends there too.
          {
            id: "n03",
            shot: "s02",
            text: "The waves kept breaking on the rocks below, all night long, until morning came.",
          },
          { id: "n04", shot: "s03", text: "The lamp turns,\n\nand turns." },
          { id: "n05", shot: "s03", text: HOSTILE },
          // No shot: not in the episode, so no cue.
          { id: "n06", text: "Never heard." },
        ],
      }),
    );
    expect((await runIn(s, file)).outcome.exitCode).toBe(0);
    const r = await cli(undefined, ["assemble", file, "--json"], {}, "silent");
    expect(r.code, r.err).toBe(0);
    const a = JSON.parse(r.out);
    const out = w.out();
    expect(a.captions).toMatchObject({
      cues: 5,
      srt: { uri: join(out, "episode.srt") },
      vtt: { uri: join(out, "episode.vtt") },
    });
    expect(a.shots[1].lines[0].cut).toBe(true);

    const srt = parseSrt(await readFile(join(out, "episode.srt"), "utf8"));
    const vtt = parseVtt(await readFile(join(out, "episode.vtt"), "utf8"));
    expect(srt.map((c) => c.index)).toEqual([1, 2, 3, 4, 5]);
    expect(vtt.map((c) => c.id)).toEqual(["n01", "n02", "n03", "n04", "n05"]);
    expect(vtt.map((c) => [c.start, c.end])).toEqual(srt.map((c) => [c.start, c.end]));
    // The text, escaped for each format, and never a blank line or an arrow inside a cue.
    expect(srt[3]?.lines).toEqual(["The lamp turns,", "and turns."]);
    expect(vtt[4]?.lines).toEqual(["Text with &lt;b&gt;&amp;&lt;/b&gt; --&gt; in it."]);
    expect(unescapeVtt(vtt[4]?.lines[0] ?? "")).toBe(HOSTILE);
    expect(srt[4]?.lines).toEqual(["Text with <b>&</b> -- > in it."]);
    for (const c of [...srt, ...vtt]) for (const l of c.lines) expect(l).not.toContain("-->");

    // Measured from the episode: each stretch of sound is one cue, within 0.1 s at both ends.
    const sounds = await heard(a.episode.uri);
    expect(sounds.length, JSON.stringify(sounds)).toBe(5);
    sounds.forEach((sound, i) => {
      const cue = srt[i] as Parsed;
      expect(
        Math.abs(cue.start - sound.start),
        `cue ${i + 1} start vs ${JSON.stringify(sound)}`,
      ).toBeLessThan(TOLERANCE);
      expect(Math.abs(cue.end - sound.end), `cue ${i + 1} end vs ${JSON.stringify(sound)}`).toBeLessThan(
        TOLERANCE,
      );
    });
    // The cut line's cue ends where its shot ends.
    expect(srt[2]?.end).toBeCloseTo(a.shots[2].start_seconds, 2);

    // A removed caption file: the episode is made again rather than called up to date.
    const again = await cli(undefined, ["assemble", file, "--json"], {}, "silent");
    expect(JSON.parse(again.out).status).toBe("up-to-date");
    await import("node:fs/promises").then((fs) => fs.rm(join(out, "episode.vtt")));
    const remade = JSON.parse((await cli(undefined, ["assemble", file, "--json"], {}, "silent")).out);
    expect(remade.status).toBe("assembled");
    expect(await readFile(join(out, "episode.vtt"), "utf8")).toMatch(/^WEBVTT\n/);

    // --output FILE: the captions beside FILE, named after it.
    const named = await cli(
      undefined,
      ["assemble", file, "--json", "--output", join(w.dir, "final", "cut.mp4")],
      {},
      "silent",
    );
    expect(named.code, named.err).toBe(0);
    expect(JSON.parse(named.out).captions.srt.uri).toBe(join(w.dir, "final", "cut.srt"));
    expect(await readFile(join(w.dir, "final", "cut.vtt"), "utf8")).toBe(
      await readFile(join(out, "episode.vtt"), "utf8"),
    );
  }, 120_000);
});

describe("assemble writes captions to S3", () => {
  let store: Store;
  beforeAll(async () => {
    store = await startStore();
  });
  afterAll(async () => {
    await store?.close();
  });

  it("uploads episode.srt and episode.vtt beside episode.mp4", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      name: "ep01",
      shots: [{ id: "s01", prompt: "A lighthouse at dusk" }],
      lines: [{ id: "n01", shot: "s01", text: HOSTILE }],
    });
    const { outcome } = await runIn(s, manifest, {
      output: "s3://clapper-out/runs/",
      s3: { endpoint: store.endpoint },
    });
    expect(outcome.exitCode).toBe(0);
    const r = await cli(
      undefined,
      ["assemble", manifest, "--json", "--s3-endpoint", store.endpoint],
      {},
      "silent",
    );
    expect(r.code, r.err).toBe(0);
    const a = JSON.parse(r.out);
    expect(a.captions.srt.uri).toBe("s3://clapper-out/runs/ep01/episode.srt");
    expect(a.captions.vtt.uri).toBe("s3://clapper-out/runs/ep01/episode.vtt");
    const vtt = await store.object("runs/ep01/episode.vtt");
    expect(vtt?.sha256).toBe(a.captions.vtt.sha256);
    const cues = parseVtt(vtt?.text ?? "");
    expect(cues.map((c) => unescapeVtt(c.lines.join("\n")))).toEqual([HOSTILE]);
    expect(cues[0]?.start).toBeCloseTo(a.shots[0].lines[0].start_seconds, 3);
    expect(parseSrt((await store.object("runs/ep01/episode.srt"))?.text ?? "")).toHaveLength(1);
  }, 120_000);
});
