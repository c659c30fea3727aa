// `clapper assemble` killed mid-encode (SIGKILL, as a real process): the episode in place is the one
// before, whole, never half a file; the ffmpeg it started stops within its own time limit (a SIGKILL
// leaves a child running, and ffmpeg ignores a broken stderr); and the next assemble cleans the
// temporary file up and puts a checked episode in place.
import { spawn } from "node:child_process";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { parseFile } from "music-metadata";
import { beforeAll, describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { BIN, staleBuild } from "../run/harness.js";
import { runIn, setup, sha256 } from "../run/helpers.js";

function manifest(text: string): string {
  return stringify({
    name: "ep01",
    output: "./out",
    defaults: {
      shot: { model: "Vid-H3", resolution: "480P", duration: 8, ratio: "16:9" },
      line: { language: "EN", voice: "preset:en_female_bright" },
    },
    shots: Array.from({ length: 4 }, (_, i) => ({ id: `s0${i + 1}`, prompt: `Shot ${i + 1}` })),
    lines: [{ id: "n01", shot: "s01", text }],
    assemble: { transition: "fade", transition_seconds: 0.5 },
  });
}

/** The ffmpeg processes whose command line names `needle`. */
async function ffmpegsWith(needle: string): Promise<number[]> {
  const found: number[] = [];
  for (const pid of await readdir("/proc").catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue;
    const cmd = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (cmd.includes("ffmpeg") && cmd.includes(needle)) found.push(Number(pid));
  }
  return found;
}

beforeAll(() => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
});

describe("clapper assemble under SIGKILL", () => {
  it("leaves the episode before in place, whole; the next assemble cleans up and makes the new one", async () => {
    const { s, w } = await setup();
    const file = await w.write("ep01.yaml", manifest("Every night, the light came on at seven."));
    expect((await runIn(s, file)).outcome.exitCode).toBe(0);
    const assemble = (extra: string[] = []) =>
      spawn(process.execPath, [BIN, "assemble", file, "--json", ...extra], {
        cwd: w.dir,
        env: { PATH: process.env.PATH, HOME: process.env.HOME },
        stdio: ["ignore", "pipe", "pipe"],
      });
    const finished = (child: ReturnType<typeof assemble>) =>
      new Promise<{ code: number | null; signal: NodeJS.Signals | null; out: string }>((resolve) => {
        let out = "";
        child.stdout?.on("data", (d) => {
          out += d;
        });
        child.once("close", (code, signal) => resolve({ code, signal, out }));
      });
    const first = await finished(assemble());
    expect(first.code).toBe(0);
    const episode = join(w.out(), "episode.mp4");
    const before = JSON.parse(first.out).episode;
    expect(await sha256(episode)).toBe(before.sha256);

    // An edited line and a new run: the next assemble has work to do, and is killed while encoding.
    await w.write("ep01.yaml", manifest("Every night, without fail, the light came on at seven."));
    expect((await runIn(s, file)).outcome.exitCode).toBe(0);
    // Its time limit bounds the ffmpeg it leaves behind (ffmpeg stops itself: -timelimit).
    const child = assemble(["--ffmpeg-timeout", "3"]);
    const done = finished(child);
    // Killed once its ffmpeg is at work on the temporary episode beside the target.
    const deadline = Date.now() + 30_000;
    let encoders: number[] = [];
    while (Date.now() < deadline && encoders.length === 0) {
      encoders = await ffmpegsWith(".episode.mp4.assembling-");
      if (encoders.length === 0) await new Promise((r) => setTimeout(r, 20));
    }
    expect(encoders.length, "ffmpeg never started on the temporary episode").toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 300));
    child.kill("SIGKILL");
    expect((await done).signal).toBe("SIGKILL");

    // The episode before, whole.
    expect(await sha256(episode)).toBe(before.sha256);
    // Its ffmpeg stops within its own limit of 3 CPU seconds.
    const gone = Date.now() + 20_000;
    while (Date.now() < gone && (await ffmpegsWith(".episode.mp4.assembling-")).length > 0)
      await new Promise((r) => setTimeout(r, 50));
    expect(await ffmpegsWith(".episode.mp4.assembling-")).toEqual([]);

    const again = await finished(assemble());
    expect(again.code).toBe(0);
    const after = JSON.parse(again.out);
    expect(after.status).toBe("assembled");
    expect(await sha256(episode)).toBe(after.episode.sha256);
    expect(after.episode.sha256).not.toBe(before.sha256);
    const meta = await parseFile(episode, { duration: true });
    expect(Math.abs((meta.format.duration ?? 0) - 32)).toBeLessThanOrEqual(1 / 24);
    // Nothing temporary is left beside it.
    expect((await readdir(w.out())).filter((n) => n.includes(".assembling-"))).toEqual([]);
  }, 180_000);
});
