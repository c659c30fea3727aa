// Stills of a run's videos, made with the real ffmpeg from real MP4s in a real output folder:
// one per video and version, kept in stills/, reused while the video's sha256 stays, made again
// when it changes; a broken video or a missing ffmpeg leaves a warning, never an error.
import { createHash } from "node:crypto";
import { mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { findFfmpeg } from "../../src/episode/ffmpeg-binary.js";
import type { Report, ReportJob } from "../../src/report/model.js";
import { makeStills, StillsAsStored, stillKey } from "../../src/review/stills.js";
import { makeMp4 } from "../../src/sandbox/media.js";
import { LocalSink } from "../../src/sinks/local.js";
import { type TempDir, tempDir } from "../fixtures/audio.js";

let dir: TempDir | undefined;
afterEach(async () => {
  await dir?.remove();
});

const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");

function job(id: string, uri: string, bytes: Buffer, over: Partial<ReportJob> = {}): ReportJob {
  return {
    id,
    kind: "video",
    status: "succeeded",
    task_id: "t",
    attempts: 1,
    points: 1,
    estimated_points: 1,
    fingerprint: "f",
    output: { uri, bytes: bytes.length, sha256: sha(bytes) },
    error: null,
    source: "m.yaml:1",
    elapsed_seconds: 1,
    ...over,
  };
}

function report(jobs: ReportJob[]): Report {
  return {
    run: { name: "r", manifest: "m.yaml", status: "succeeded", started_at: "", finished_at: null, id: "x" },
    points: { estimated: 0, spent: 0, balance_before: null, balance_after: null },
    counts: { total: jobs.length, succeeded: jobs.length, failed: 0, cancelled: 0, skipped: 0, pending: 0 },
    jobs,
  };
}

const JPEG = /^data:image\/jpeg;base64,\/9j\//;

describe("stills", () => {
  it("names stills after their video, a version keeping its number", () => {
    expect(stillKey("shots/s02.mp4")).toBe("stills/s02.jpg");
    expect(stillKey("shots/s03-take-2.mp4")).toBe("stills/s03-take-2.jpg");
    expect(stillKey("shots/s02.v1.mp4")).toBe("stills/s02.v1.jpg");
    expect(stillKey("other/deep/s02.mp4")).toBe("stills/other_deep_s02.jpg");
  });

  it("makes one per video and version, reuses it while the sha256 holds, remakes it when it changes", async () => {
    dir = await tempDir("clapper-stills-");
    const root = join(dir.path, "out");
    await mkdir(join(root, "shots"), { recursive: true });
    const sink = new LocalSink(root);
    const a = await makeMp4(4, 640, 360);
    const short = await makeMp4(1, 640, 360);
    const old = await makeMp4(3, 320, 180);
    await writeFile(join(root, "shots/s01.mp4"), a);
    await writeFile(join(root, "shots/s02.mp4"), short);
    await writeFile(join(root, "shots/s01.v1.mp4"), old);
    const jobs = [
      job("shot/s01", sink.uri("shots/s01.mp4"), a, {
        versions: [{ uri: sink.uri("shots/s01.v1.mp4"), sha256: sha(old), at: "2026-11-28T10:00:00Z" }],
      }),
      job("shot/s02", sink.uri("shots/s02.mp4"), short),
    ];
    const first = await makeStills(sink, report(jobs));
    expect(first.warnings).toEqual([]);
    expect([first.made, first.reused]).toEqual([3, 0]);
    for (const uri of [sink.uri("shots/s01.mp4"), sink.uri("shots/s01.v1.mp4"), sink.uri("shots/s02.mp4")])
      expect(first.images.get(uri), uri).toMatch(JPEG);
    const mtime = async (key: string) => (await stat(join(root, key))).mtimeMs;
    const s01At = await mtime("stills/s01.jpg");

    const again = await makeStills(sink, report(jobs));
    expect([again.made, again.reused]).toEqual([0, 3]);
    expect(again.images).toEqual(first.images);
    expect(await mtime("stills/s01.jpg")).toBe(s01At);

    // s01 generated again: a different video under the same name.
    const b = await makeMp4(5, 640, 360);
    await writeFile(join(root, "shots/s01.mp4"), b);
    const changed = [
      job("shot/s01", sink.uri("shots/s01.mp4"), b, { versions: jobs[0]?.versions }),
      jobs[1] as ReportJob,
    ];
    const third = await makeStills(sink, report(changed));
    expect([third.made, third.reused]).toEqual([1, 2]);
    expect(await mtime("stills/s01.jpg")).toBeGreaterThan(s01At);

    // A stopped run still writes its page: stills kept are reused, none is made, nothing throws.
    const c = await makeMp4(3, 640, 360);
    await writeFile(join(root, "shots/s01.mp4"), c);
    const stopped = await makeStills(
      sink,
      report([job("shot/s01", sink.uri("shots/s01.mp4"), c), jobs[1] as ReportJob]),
      { signal: AbortSignal.abort() },
    );
    expect([stopped.made, stopped.reused]).toEqual([0, 1]);
    expect(stopped.warnings).toEqual([expect.stringMatching(/s01\.mp4: stopped before ffmpeg started$/)]);
  });

  it("leaves a warning, not an error, for a broken video or a missing ffmpeg", async () => {
    dir = await tempDir("clapper-stills-");
    const root = join(dir.path, "out");
    await mkdir(join(root, "shots"), { recursive: true });
    const sink = new LocalSink(root);
    const broken = Buffer.from("not a video at all");
    await writeFile(join(root, "shots/s09.mp4"), broken);
    const one = await makeStills(sink, report([job("shot/s09", sink.uri("shots/s09.mp4"), broken)]));
    expect(one.images.size).toBe(0);
    expect(one.warnings).toHaveLength(1);
    expect(one.warnings[0]).toMatch(/^no still of .*s09\.mp4: ffmpeg exited with code 1/);

    const good = await makeMp4(4, 640, 360);
    await writeFile(join(root, "shots/s01.mp4"), good);
    await writeFile(join(root, "shots/s02.mp4"), good);
    const none = await makeStills(
      sink,
      report([
        job("shot/s01", sink.uri("shots/s01.mp4"), good),
        job("shot/s02", sink.uri("shots/s02.mp4"), good),
      ]),
      { binary: () => join(dir?.path ?? "", "no-ffmpeg-here") },
    );
    expect(none.images.size).toBe(0);
    expect(none.missing.size).toBe(2);
    // One reason, one warning.
    expect(none.warnings).toEqual([expect.stringMatching(/^no still of 2 videos .*cannot run ffmpeg/)]);
  });

  it("makes a large run's stills with a few ffmpeg processes, not one per video, all started by one helper", async () => {
    dir = await tempDir("clapper-stills-");
    const root = join(dir.path, "out");
    await mkdir(join(root, "shots"), { recursive: true });
    const sink = new LocalSink(root);
    // A wrapper that notes each run's parent, then is the real ffmpeg.
    const real = (await findFfmpeg()).path;
    const log = join(dir.path, "runs.log");
    const wrapper = join(dir.path, "ffmpeg");
    await writeFile(wrapper, `#!/bin/sh\necho $PPID >> '${log}'\nexec '${real}' "$@"\n`, { mode: 0o755 });
    const jobs: ReportJob[] = [];
    for (let i = 1; i <= 30; i++) {
      // Every tenth is under 2 s: no frame at 1 s in the batch, so it is made on its own.
      const mp4 = await makeMp4(i % 10 === 0 ? 1 : 2 + (i % 4), 320, 180);
      const key = `shots/s${String(i).padStart(2, "0")}.mp4`;
      await writeFile(join(root, key), mp4);
      jobs.push(job(`shot/s${i}`, sink.uri(key), mp4));
    }
    const made = await makeStills(sink, report(jobs), { binary: () => wrapper });
    expect(made.warnings).toEqual([]);
    expect([made.made, made.reused]).toEqual([30, 0]);
    for (const j of jobs) expect(made.images.get(j.output?.uri ?? ""), j.id).toMatch(JPEG);
    // Two batches (24 and 6), and the three short ones on their own (a try at 1 s, then the first frame).
    const parents = (await readFile(log, "utf8")).trim().split("\n").map(Number);
    expect(parents).toHaveLength(2 + 3 * 2);
    // Started by the helper, not by this (large) process: a fork of it each time is what it saves.
    expect(new Set(parents).size).toBe(1);
    expect(parents[0]).not.toBe(process.pid);
  });

  it("made as videos are stored, the page's pass reuses them; settled, it takes no more", async () => {
    dir = await tempDir("clapper-stills-");
    const root = join(dir.path, "out");
    await mkdir(join(root, "shots"), { recursive: true });
    const sink = new LocalSink(root);
    const jobs: ReportJob[] = [];
    const maker = new StillsAsStored(sink, { nice: 10 });
    for (let i = 1; i <= 5; i++) {
      const mp4 = await makeMp4(2 + i, 320, 180);
      const key = `shots/s0${i}.mp4`;
      await writeFile(join(root, key), mp4);
      jobs.push(job(`shot/s0${i}`, sink.uri(key), mp4));
      maker.add({ uri: sink.uri(key), sha256: sha(mp4) });
    }
    // The batch starts after a moment for more to arrive, and writes the index when done.
    await expect
      .poll(
        () =>
          stat(join(root, "stills/index.json")).then(
            () => true,
            () => false,
          ),
        { timeout: 15_000 },
      )
      .toBe(true);
    await maker.settle();
    const late = await makeMp4(2, 320, 180);
    await writeFile(join(root, "shots/s09.mp4"), late);
    maker.add({ uri: sink.uri("shots/s09.mp4"), sha256: sha(late) });
    await maker.settle();
    const page = await makeStills(sink, report(jobs));
    expect(page.warnings).toEqual([]);
    expect([page.made, page.reused]).toEqual([0, 5]);
    await expect(stat(join(root, "stills/s09.jpg"))).rejects.toThrow();
  });
});
