// `clapper assemble` on real sandbox runs: the run in process against the sandbox over HTTP, then
// the CLI's main() as a user calls it; the episode is read back by music-metadata and ffmpeg.
import { readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseFile } from "music-metadata";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { pcmArgs } from "../../src/episode/ffmpeg.js";
import { ffmpegBinary, runFfmpeg } from "../../src/episode/ffmpeg-run.js";
import { makeWav } from "../../src/sandbox/media.js";
import { cli, runIn, setup, type Workspace } from "../run/helpers.js";

const FRAME = 1 / 24;

function manifest(o: { n02?: string; extraShot?: boolean; assemble?: Record<string, unknown> } = {}): string {
  return stringify({
    name: "ep01",
    output: "./out",
    defaults: {
      shot: { model: "Vid-H3", resolution: "480P", duration: 4, ratio: "16:9" },
      line: { language: "EN", voice: "preset:en_female_bright" },
    },
    shots: [
      { id: "s01", prompt: "A lighthouse at dusk" },
      { id: "s02", prompt: "Waves on the rocks" },
      // Another ratio: scaled into the others' size and padded.
      { id: "s03", prompt: "The lamp room, upright", ratio: "9:16" },
      ...(o.extraShot ? [{ id: "s04", prompt: "Never generated" }] : []),
    ],
    lines: [
      // 11 letters: 0.97 s at 0.5 s; then 0.25 s of gap; 8 letters: 0.76 s at 1.72 s.
      { id: "n01", shot: "s01", text: "One two three." },
      { id: "n02", shot: "s01", text: o.n02 ?? "Four five." },
    ],
    ...(o.assemble ? { assemble: o.assemble } : {}),
  });
}

/** RMS (of full scale) of the episode's audio over [from, from + seconds). */
async function rms(path: string, from: number, seconds: number): Promise<number> {
  const { stdout } = await runFfmpeg(pcmArgs(path, from, seconds), {
    binary: ffmpegBinary(),
    timeoutMs: 30_000,
    maxStdout: 16 * 1024 * 1024,
  });
  let sum = 0;
  const n = Math.floor(stdout.length / 2);
  for (let i = 0; i < n; i++) sum += (stdout.readInt16LE(i * 2) / 32768) ** 2;
  expect(n).toBeGreaterThan(0);
  return Math.sqrt(sum / n);
}

async function assembleJson(w: Workspace, file: string, extra: string[] = []) {
  const r = await cli(undefined, ["assemble", file, "--json", ...extra], {}, "silent");
  // Exactly one JSON object: JSON.parse refuses anything more or less.
  return { code: r.code, out: JSON.parse(r.out) as Record<string, any>, err: r.err, w };
}

describe("clapper assemble", () => {
  it("cuts 3 shots (2 lines, none, another ratio) into one episode of their summed length, with the narration where it belongs; a re-run does nothing; an edited line re-assembles", async () => {
    const { s, w } = await setup();
    const file = await w.write("ep01.yaml", manifest());
    const ran = await runIn(s, file);
    expect(ran.outcome.exitCode).toBe(0);

    const first = await assembleJson(w, file);
    expect(first.code, first.err).toBe(0);
    const a = first.out;
    const episode = join(w.out(), "episode.mp4");
    expect(a.status).toBe("assembled");
    expect(a.episode.uri).toBe(episode);
    expect(a.shots.map((x: any) => `${x.id}:${x.width}x${x.height}:${x.lines.length}`)).toEqual([
      "s01:864x480:2",
      "s02:864x480:0",
      "s03:480x864:0",
    ]);
    expect(a.episode).toMatchObject({ width: 864, height: 480, fps: "24", streams: { video: 1, audio: 1 } });
    expect(a.shots[0].lines.map((l: any) => l.start_seconds)).toEqual([0.5, 1.72]);
    expect(a.warnings).toEqual(["shot s03 is 480x864: scaled to fit 864x480, padded with black"]);

    // The episode as a player reads it: its length is the shots' sum within a frame, one stream each.
    const sum = a.shots.reduce((t: number, x: any) => t + x.duration_seconds, 0);
    expect(sum).toBe(12);
    const meta = await parseFile(episode, { duration: true });
    expect(Math.abs((meta.format.duration ?? 0) - sum)).toBeLessThanOrEqual(FRAME);
    expect(meta.format.trackInfo.filter((t) => t.audio).length).toBe(1);
    expect(meta.format.trackInfo.length).toBe(2);
    expect(meta.format.hasVideo).toBe(true);
    const bytes = (await stat(episode)).size;
    expect(a.episode.bytes).toBe(bytes);

    // The tone of n01 is heard from 0.5 s, not before; shot s02 (no lines) is silent.
    const before = await rms(episode, 0.05, 0.4);
    const during = await rms(episode, 0.6, 0.8);
    const silentShot = await rms(episode, 4.2, 3.5);
    expect(before).toBeLessThan(0.001);
    expect(silentShot).toBeLessThan(0.001);
    // The sandbox's tone is 0.05 of full scale: RMS 0.035.
    expect(during).toBeGreaterThan(0.02);

    // The record beside the reports: the episode, its inputs and their hashes.
    const record = JSON.parse(await readFile(join(w.out(), "reports", "assemble.json"), "utf8"));
    expect(record.episode.sha256).toBe(a.episode.sha256);
    expect(record.fingerprint).toBe(a.fingerprint);
    expect(record.shots[0].lines[0]).toMatchObject({
      id: "n01",
      job: "line/n01",
      uri: join(w.out(), "lines", "n01.wav"),
    });
    expect(record.shots[0].sha256).toMatch(/^[0-9a-f]{64}$/);
    // And in the run's report, beside every other output.
    const report = JSON.parse(await readFile(join(w.out(), "reports", "report.json"), "utf8"));
    expect(report.episode).toMatchObject({ uri: episode, bytes, sha256: a.episode.sha256 });
    const reportMtime = (await stat(join(w.out(), "reports", "report.json"))).mtimeMs;

    // Nothing changed: nothing done, the file untouched.
    const mtime = (await stat(episode)).mtimeMs;
    const again = await cli(undefined, ["assemble", file], {}, "silent");
    expect(again.code).toBe(0);
    expect(again.out).toMatch(/^episode up to date: /);
    const againJson = await assembleJson(w, file);
    expect(againJson.out.status).toBe("up-to-date");
    expect((await stat(episode)).mtimeMs).toBe(mtime);
    expect((await stat(join(w.out(), "reports", "report.json"))).mtimeMs).toBe(reportMtime);

    // An edited line: refused until the run made it, then assembled again.
    await w.write("ep01.yaml", manifest({ n02: "Four five six seven." }));
    const stale = await assembleJson(w, file);
    expect(stale.code).toBe(1);
    expect(stale.out.error.message).toContain(
      "line n02 (line/n02) was edited in the manifest since its output was made",
    );
    expect((await stat(episode)).mtimeMs).toBe(mtime);
    expect((await runIn(s, file)).outcome.exitCode).toBe(0);
    const edited = await assembleJson(w, file);
    expect(edited.code, edited.err).toBe(0);
    expect(edited.out.status).toBe("assembled");
    expect(edited.out.episode.sha256).not.toBe(a.episode.sha256);
    expect(edited.out.shots[0].lines[1].duration_seconds).toBeGreaterThan(
      a.shots[0].lines[1].duration_seconds,
    );
  }, 120_000);

  it("refuses a shot not generated yet, naming it (exit 1, one JSON object); a run never made is refused too", async () => {
    const { s, w } = await setup();
    const file = await w.write("ep01.yaml", manifest());
    const never = await assembleJson(w, file);
    expect(never.code).toBe(1);
    expect(never.out.error).toMatchObject({ code: 1 });
    expect(never.out.error.message).toMatch(/^no run of ep01 yet: no shot is stored; run clapper run /);
    expect((await runIn(s, file)).outcome.exitCode).toBe(0);
    await w.write("ep01.yaml", manifest({ extraShot: true }));
    const r = await assembleJson(w, file);
    expect(r.code).toBe(1);
    expect(r.out.error.message).toMatch(
      /^cannot assemble ep01: shot s04 \(shot\/s04\) has not been generated yet; run clapper run .*ep01\.yaml first \(1 input missing\)$/,
    );
    expect(r.out.refused).toEqual([
      { job: "shot/s04", reason: "shot s04 (shot/s04) has not been generated yet" },
    ]);
    const text = await cli(undefined, ["assemble", file], {}, "silent");
    expect(text.code).toBe(1);
    expect(text.err).toMatch(/^clapper: cannot assemble ep01: shot s04/);
  }, 60_000);

  it("fades and a music bed: the same length, music heard under a shot with no narration, faded out at the end", async () => {
    const { s, w } = await setup();
    await writeFile(join(w.dir, "bed music.wav"), makeWav(3000));
    const file = await w.write(
      "ep01.yaml",
      manifest({
        assemble: { music: "bed music.wav", music_db: -6, transition: "fade", transition_seconds: 0.5 },
      }),
    );
    expect((await runIn(s, file)).outcome.exitCode).toBe(0);
    const r = await assembleJson(w, file);
    expect(r.code, r.err).toBe(0);
    const episode = r.out.episode.uri as string;
    const meta = await parseFile(episode, { duration: true });
    expect(Math.abs((meta.format.duration ?? 0) - 12)).toBeLessThanOrEqual(FRAME);
    expect(r.out.music).toMatchObject({
      path: "bed music.wav",
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    // The 3 s bed is looped under all 12 s: heard in the middle of s02 and in s03.
    expect(await rms(episode, 5, 1)).toBeGreaterThan(0.005);
    expect(await rms(episode, 9, 1)).toBeGreaterThan(0.005);
    // Faded out at the very end.
    expect(await rms(episode, 11.85, 0.1)).toBeLessThan(await rms(episode, 9, 1));
    // A changed bed re-assembles.
    await writeFile(join(w.dir, "bed music.wav"), makeWav(2000));
    const again = await assembleJson(w, file);
    expect(again.out.status).toBe("assembled");
  }, 120_000);

  it("assembles shots timed to their narration: each as long as its lines with lead, gap and tail", async () => {
    const { s, w } = await setup();
    const file = await w.write(
      "ep01.yaml",
      stringify({
        name: "ep01",
        output: "./out",
        timing: { lead: 1, gap: 0.5, tail: 0.75 },
        defaults: {
          shot: { model: "Vid-H3", resolution: "480P", ratio: "16:9" },
          line: { language: "EN", voice: "preset:en_female_bright" },
        },
        shots: [
          { id: "s01", prompt: "A lighthouse at dusk", duration: "auto" },
          { id: "s02", prompt: "Waves on the rocks", duration: 4 },
        ],
        lines: [
          { id: "n01", shot: "s01", text: "Every night, the light came on at seven." },
          { id: "n02", shot: "s01", text: "And every night, someone was watching." },
        ],
      }),
    );
    expect((await runIn(s, file)).outcome.exitCode).toBe(0);
    const r = await assembleJson(w, file);
    expect(r.code, r.err).toBe(0);
    const [s01, s02] = r.out.shots;
    const [n01, n02] = s01.lines;
    // The shot's length is its narration's, with lead, gap and tail, rounded up.
    expect(s01.duration_seconds).toBe(
      Math.ceil(1 + n01.duration_seconds + 0.5 + n02.duration_seconds + 0.75 - 1e-3),
    );
    expect(s02.duration_seconds).toBe(4);
    expect(n01.start_seconds).toBe(1);
    expect(n02.start_seconds).toBeCloseTo(1 + n01.duration_seconds + 0.5, 2);
    const meta = await parseFile(r.out.episode.uri, { duration: true });
    expect(Math.abs((meta.format.duration ?? 0) - (s01.duration_seconds + 4))).toBeLessThanOrEqual(FRAME);
    // Heard from the lead on, silent before it.
    expect(await rms(r.out.episode.uri, 0.1, 0.8)).toBeLessThan(0.001);
    expect(await rms(r.out.episode.uri, 1.1, 0.8)).toBeGreaterThan(0.02);
  }, 120_000);

  it("assembles a sharded run from its shards' states together (--shards N)", async () => {
    const { s, w } = await setup();
    const file = await w.write("ep01.yaml", manifest());
    for (const shard of ["1/2", "2/2"]) {
      const ran = await cli(s, ["run", file, "--shard", shard, "--poll-interval", "0.05"], {}, "silent");
      expect(ran.code, ran.err).toBe(0);
    }
    // Without --shards there is no state of the whole run to read.
    const unsharded = await assembleJson(w, file);
    expect(unsharded.code).toBe(1);
    expect(unsharded.out.error.message).toMatch(/^no run of ep01 yet/);
    const r = await assembleJson(w, file, ["--shards", "2"]);
    expect(r.code, r.err).toBe(0);
    expect(r.out.shots.map((x: any) => x.id)).toEqual(["s01", "s02", "s03"]);
    const meta = await parseFile(r.out.episode.uri, { duration: true });
    expect(Math.abs((meta.format.duration ?? 0) - 12)).toBeLessThanOrEqual(FRAME);
    const refused = await assembleJson(w, file, ["--shards", "0"]);
    expect(refused.code).toBe(2);
  }, 120_000);

  it("manifest errors name assemble.FIELD with the file and line (exit 2)", async () => {
    const { w } = await setup();
    const file = await w.write(
      "ep01.yaml",
      manifest({ assemble: { music: "absent.mp3", transition: "wipe", takes: { s09: 2, s01: 2 } } }),
    );
    const r = await assembleJson(w, file);
    expect(r.code).toBe(2);
    const problems = r.out.error.problems.map((p: any) => `${p.file}:${p.line}: ${p.field}: ${p.message}`);
    expect(problems).toEqual([
      expect.stringMatching(/\/ep01\.yaml:\d+: assemble\.music: file not found: absent\.mp3/),
      expect.stringMatching(
        /\/ep01\.yaml:\d+: assemble\.transition: expected one of none, fade, got "?wipe"?/,
      ),
      expect.stringMatching(/\/ep01\.yaml:\d+: assemble\.takes\.s09: no shot "s09"/),
      expect.stringMatching(
        /\/ep01\.yaml:\d+: assemble\.takes\.s01: shot s01 has 1 take, so take 2 does not exist/,
      ),
    ]);
  });
});
