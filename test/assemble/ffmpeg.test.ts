// The argv of every ffmpeg command assemble runs: paths are single arguments whatever they hold,
// never inside the filter graph; the cut points keep the episode's length the sum of its shots.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  cutPoints,
  type EpisodePlan,
  episodeArgs,
  parseProbe,
  parseVersion,
  pcmArgs,
  probeArgs,
  rateOf,
  SAMPLE_RATE,
} from "../../src/episode/ffmpeg.js";
import { FfmpegError, runFfmpeg, tailLines } from "../../src/episode/ffmpeg-run.js";

const HOSTILE = [
  "/tmp/my shots/s 01.mp4",
  `/tmp/quotes/it's "the" one.mp4`,
  "/tmp/ünïcødé/шот-😀.mp4",
  "/tmp/-starts-like-a-flag/concat:a|b;c=[d].mp4",
];

function plan(over: Partial<EpisodePlan> = {}): EpisodePlan {
  return {
    width: 1280,
    height: 720,
    fps: { num: 24, den: 1 },
    shots: [
      {
        path: HOSTILE[0] as string,
        frames: 96,
        samples: 192000,
        lines: [{ path: HOSTILE[1] as string }, { path: "/tmp/l 2.wav" }],
      },
      { path: HOSTILE[2] as string, frames: 120, samples: 240000, lines: [] },
      { path: HOSTILE[3] as string, frames: 96, samples: 192000, lines: [] },
    ],
    leadSamples: 24000,
    gapSamples: 12000,
    fadeSeconds: 0,
    output: "/tmp/out dir/.episode.mp4.assembling-1-ab",
    ...over,
  };
}

describe("episodeArgs", () => {
  it("gives each path as exactly one argument, behind -i, with file: and never in the filter graph", () => {
    const args = episodeArgs(plan({ music: { path: "/tmp/bed 'x'.mp3", db: -18, fadeOutSeconds: 2 } }));
    const inputs = args.flatMap((a, i) => (args[i - 1] === "-i" ? [a] : []));
    expect(inputs).toEqual([
      `file:${HOSTILE[0]}`,
      `file:${HOSTILE[2]}`,
      `file:${HOSTILE[3]}`,
      `file:${HOSTILE[1]}`,
      "file:/tmp/l 2.wav",
      "file:/tmp/bed 'x'.mp3",
    ]);
    // The music is looped: -stream_loop -1 right before its -i.
    expect(
      args.slice(args.indexOf("file:/tmp/bed 'x'.mp3") - 3, args.indexOf("file:/tmp/bed 'x'.mp3")),
    ).toEqual(["-stream_loop", "-1", "-i"]);
    expect(args.at(-1)).toBe("file:/tmp/out dir/.episode.mp4.assembling-1-ab");
    const graph = args[args.indexOf("-filter_complex") + 1] as string;
    for (const p of [...HOSTILE, "/tmp/l 2.wav", "bed"]) expect(graph).not.toContain(p);
    // Inputs are named by index: shots 0..2, the two lines 3 and 4, the music 5.
    expect(graph).toContain("[3:a]aresample=48000");
    expect(graph).toContain("[4:a]aresample=48000");
    expect(graph).toContain("[5:a]aresample=48000");
    expect(graph).toContain("concat=n=3:v=1:a=1[vout][narration]");
    expect(graph).toContain("volume=-18dB");
    expect(graph).toContain("amerge=inputs=2,pan=stereo|c0=c0+c2|c1=c1+c3[aout]");
    // Every shot to one size, rate and format, cut at its frames; narration cut at its samples.
    expect(graph).toContain("[1:v]scale=w=1280:h=720:force_original_aspect_ratio=decrease,pad=w=1280:h=720");
    expect(graph).toContain("trim=end_frame=120");
    expect(graph).toContain("atrim=end_sample=192000,asetpts=N/SR/TB[a0]");
    // A shot without lines is silence of its length.
    expect(graph).toContain("anullsrc=r=48000:cl=stereo,atrim=end_sample=240000");
    // Lead, line, gap, line.
    expect(graph).toMatch(/\[s0_0\]\[l0_0\]\[s0_1\]\[l0_1\]concat=n=4:v=0:a=1/);
    expect(args).toEqual(
      expect.arrayContaining(["-map", "[vout]", "-c:v", "libx264", "-c:a", "aac", "-nostdin"]),
    );
  });

  it("fades each shot to and from black inside its own length, at most half of it", () => {
    const graph = (p: EpisodePlan) => episodeArgs(p)[episodeArgs(p).indexOf("-filter_complex") + 1] as string;
    const faded = graph(plan({ fadeSeconds: 0.5 }));
    expect(faded).toContain("fade=t=in:st=0:d=0.5,fade=t=out:st=3.5:d=0.5[v0]");
    expect(faded).toContain("fade=t=out:st=4.5:d=0.5[v1]");
    expect(graph(plan({ fadeSeconds: 3 }))).toContain("fade=t=in:st=0:d=2,fade=t=out:st=2:d=2[v0]");
    expect(graph(plan())).not.toContain("fade=");
    // Without music the joined audio is the output.
    expect(graph(plan())).toContain("concat=n=3:v=1:a=1[vout][aout]");
  });

  it("gives ffmpeg its own time limit, in whole CPU seconds, before the inputs", () => {
    const args = episodeArgs(plan({ timeLimitSeconds: 12.2 }));
    expect(args.slice(args.indexOf("-timelimit"), args.indexOf("-timelimit") + 2)).toEqual([
      "-timelimit",
      "13",
    ]);
    expect(args.indexOf("-timelimit")).toBeLessThan(args.indexOf("-i"));
    expect(episodeArgs(plan())).not.toContain("-timelimit");
  });

  it("refuses relative paths (ffmpeg would read them as options or protocols)", () => {
    expect(() => episodeArgs(plan({ output: "episode.mp4" }))).toThrow(/absolute/);
    expect(() => probeArgs("-i.mp4")).toThrow(/absolute/);
    expect(() => episodeArgs(plan({ shots: [] }))).toThrow(/at least one shot/);
  });

  it("probe and PCM reads take the path as one argument too", () => {
    expect(probeArgs(HOSTILE[1] as string)).toEqual(["-hide_banner", "-nostdin", "-i", `file:${HOSTILE[1]}`]);
    const pcm = pcmArgs(HOSTILE[2] as string, 0.5, 1.25);
    expect(pcm).toContain(`file:${HOSTILE[2]}`);
    expect(pcm.slice(pcm.indexOf("-ss"), pcm.indexOf("-ss") + 4)).toEqual(["-ss", "0.5", "-t", "1.25"]);
  });
});

describe("cutPoints", () => {
  it("ends each shot where the running sum of durations falls, so the total never drifts", () => {
    const seconds = Array.from({ length: 20 }, (_, i) => 4 + (i % 3) * 0.37);
    for (const fps of [
      { num: 24, den: 1 },
      { num: 30000, den: 1001 },
      { num: 25, den: 1 },
    ]) {
      const cuts = cutPoints(seconds, fps);
      const frames = cuts.reduce((n, c) => n + c.frames, 0);
      const total = seconds.reduce((a, b) => a + b, 0);
      expect(Math.abs((frames * fps.den) / fps.num - total)).toBeLessThanOrEqual(
        (0.5 * fps.den) / fps.num + 1e-9,
      );
      const samples = cuts.reduce((n, c) => n + c.samples, 0);
      expect(Math.abs(samples / SAMPLE_RATE - (frames * fps.den) / fps.num)).toBeLessThan(1 / SAMPLE_RATE);
    }
    expect(cutPoints([4, 4], { num: 24, den: 1 })).toEqual([
      { frames: 96, samples: 192000, startSeconds: 0 },
      { frames: 96, samples: 192000, startSeconds: 4 },
    ]);
  });
});

describe("reading ffmpeg", () => {
  it("parses a file's streams and the version", () => {
    const text = [
      "Input #0, mov,mp4,m4a,3gp,3g2,mj2, from 'file:/tmp/a.mp4':",
      "  Duration: 00:00:04.00, start: 0.000000, bitrate: 18 kb/s",
      "    Stream #0:0(und): Video: h264 (Constrained Baseline) (avc1 / 0x31637661), yuv420p, 1280x720, 16 kb/s, 23.98 fps, 23.98 tbr, 57600 tbn, 48 tbc (default)",
      "    Stream #0:1(und): Audio: aac (LC) (mp4a / 0x6134706D), 48000 Hz, stereo, fltp, 17 kb/s (default)",
      "At least one output file must be specified",
    ].join("\n");
    expect(parseProbe(text)).toEqual({
      video: { width: 1280, height: 720, fps: { num: 24000, den: 1001 } },
      videoStreams: 1,
      audioStreams: 1,
    });
    expect(parseProbe("")).toEqual({ videoStreams: 0, audioStreams: 0 });
    expect(rateOf(25)).toEqual({ num: 25, den: 1 });
    expect(rateOf(29.97)).toEqual({ num: 30000, den: 1001 });
    expect(parseVersion("ffmpeg version N-47683-g0e8eb07980-static https://johnvansickle.com\n")).toBe(
      "N-47683-g0e8eb07980-static",
    );
    expect(tailLines("a\r\nb\n\nc\rd\n", 3)).toEqual(["b", "c", "d"]);
  });

  it("a binary that is not there or not executable: a clear error naming it", async () => {
    const missing = runFfmpeg(["-version"], { binary: "/nonexistent/ffmpeg", timeoutMs: 5000 });
    await expect(missing).rejects.toThrow(FfmpegError);
    await expect(missing).rejects.toThrow(
      /cannot run ffmpeg at \/nonexistent\/ffmpeg: no such file \(ENOENT\); reinstall/,
    );
    const dir = await mkdtemp(join(tmpdir(), "clapper-ffmpeg-"));
    try {
      const plain = join(dir, "ffmpeg");
      await writeFile(plain, "not a program\n", { mode: 0o644 });
      const notExec = runFfmpeg(["-version"], { binary: plain, timeoutMs: 5000 });
      await expect(notExec).rejects.toThrow(/not executable \(EACCES\)/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
