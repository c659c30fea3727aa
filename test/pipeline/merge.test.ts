// The merged report of a sharded run, from what the store holds: the shards' reports are input from
// other machines, so a missing, broken or misplaced one must give a true report or a clear error,
// never a report that counts a job twice or forgets one.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Job, loadManifest } from "../../src/manifest/index.js";
import { outputKey } from "../../src/manifest/outputs.js";
import type { Report, ReportJob } from "../../src/report/model.js";
import { MergeError, mergeReports, shardTotal } from "../../src/run/merge.js";
import { shardOf } from "../../src/run/shard.js";
import { LocalSink } from "../../src/sinks/local.js";
import { type TempDir, tempDir } from "../fixtures/audio.js";

let dir: TempDir;
let jobs: Job[];
beforeAll(async () => {
  dir = await tempDir("clapper-merge-");
  const lines = [
    "name: merged",
    "output: ./output",
    "defaults:",
    '  shot: { model: Vid-H3, resolution: 480P, duration: 4, ratio: "16:9" }',
    "shots:",
    ...Array.from({ length: 9 }, (_, i) => `  - { id: s${i + 1}, prompt: "shot ${i + 1}" }`),
  ];
  const file = await dir.file("merged.yaml", `${lines.join("\n")}\n`);
  const loaded = await loadManifest(file, { cwd: dir.path });
  expect(loaded.errors).toEqual([]);
  jobs = loaded.jobs;
});
afterAll(async () => {
  await dir.remove();
});

let n = 0;
/** A fresh output folder. */
function sink(): LocalSink {
  return new LocalSink(join(dir.path, `out-${n++}`));
}

function row(job: Job, points: number): ReportJob {
  return {
    id: job.id,
    kind: job.kind,
    status: "succeeded",
    task_id: `t-${job.id}`,
    attempts: 1,
    points,
    estimated_points: points,
    fingerprint: job.fingerprint,
    output: { uri: `/out/${outputKey(job)}`, bytes: 100, sha256: "ab".repeat(32) },
    error: null,
    source: `${job.file}:${job.line}`,
    elapsed_seconds: 1,
  };
}

/** Shard `index` of `total`'s report, as a shard run writes it, over its own jobs. */
function shardReport(index: number, total: number, over: Partial<Report["run"]> = {}): Report {
  const own = jobs.filter((j) => shardOf(j, total) === index).map((j) => row(j, 20));
  return {
    run: {
      name: "merged",
      manifest: "merged.yaml",
      status: "succeeded",
      started_at: `2026-11-27T0${index}:00:00.000Z`,
      finished_at: `2026-11-27T0${index}:30:00.000Z`,
      id: `run-${index}`,
      shard: { index, total },
      ...over,
    },
    points: {
      estimated: own.length * 20,
      spent: own.length * 20,
      balance_before: 10_000 - index,
      balance_after: 9_000 - index,
    },
    counts: { total: own.length, succeeded: own.length, failed: 0, cancelled: 0, skipped: 0, pending: 0 },
    jobs: own,
  };
}

async function put(s: LocalSink, index: number, total: number, report: unknown): Promise<void> {
  await s.writeText(`reports/shards/${index}-of-${total}/report.json`, JSON.stringify(report));
}

describe("mergeReports", () => {
  it("lists every job once, in the manifest's order, with the shards' points and one id", async () => {
    const s = sink();
    for (const i of [1, 2, 3]) await put(s, i, 3, shardReport(i, 3));
    const { report, missing } = await mergeReports({
      jobs,
      manifest: "merged.yaml",
      name: "merged",
      sink: s,
    });
    expect(missing).toEqual([]);
    expect(report.jobs.map((j) => j.id)).toEqual(jobs.map((j) => j.id));
    expect(report.counts).toEqual({
      total: 9,
      succeeded: 9,
      failed: 0,
      cancelled: 0,
      skipped: 0,
      pending: 0,
    });
    expect(report.points).toEqual({
      estimated: 180,
      spent: 180,
      balance_before: 9_999,
      balance_after: 8_997,
    });
    expect(report.run).toMatchObject({
      status: "succeeded",
      started_at: "2026-11-27T01:00:00.000Z",
      finished_at: "2026-11-27T03:30:00.000Z",
    });
    expect(report.run.id).toMatch(/^merged-[0-9a-f]{32}$/);
    const again = await mergeReports({ jobs, manifest: "merged.yaml", name: "merged", sink: s, total: 3 });
    expect(again.report.run.id).toBe(report.run.id);
    expect(report.shards?.map((x) => [x.index, x.status, x.run_id])).toEqual([
      [1, "succeeded", "run-1"],
      [2, "succeeded", "run-2"],
      [3, "succeeded", "run-3"],
    ]);
  });

  it("says which shard left no report, lists its jobs as pending and is partial, not succeeded", async () => {
    const s = sink();
    await put(s, 1, 3, shardReport(1, 3));
    await put(s, 3, 3, shardReport(3, 3));
    const { report, missing } = await mergeReports({
      jobs,
      manifest: "m",
      name: "merged",
      sink: s,
      total: 3,
    });
    expect(missing).toEqual([2]);
    const second = jobs.filter((j) => shardOf(j, 3) === 2).map((j) => j.id);
    expect(second.length).toBeGreaterThan(0);
    for (const id of second) expect(report.jobs.find((j) => j.id === id)?.status).toBe("pending");
    expect(report.run.status).toBe("partial");
    expect(report.run.finished_at).toBeNull();
    expect(report.points.balance_after).toBeNull();
    expect(report.note).toMatch(/no report of shard 2 of 3/);
    expect(report.shards?.[1]).toMatchObject({ index: 2, status: "missing", counts: null });
  });

  it("counts a missing shard's job done when the store holds an object made for its very request", async () => {
    const s = sink();
    await put(s, 1, 2, shardReport(1, 2));
    const job = jobs.find((j) => shardOf(j, 2) === 2) as Job;
    // The local folder keeps no metadata: the merge cannot tell the object was made for this request.
    await mkdir(join(s.root, "shots"), { recursive: true });
    await writeFile(join(s.root, outputKey(job)), "not verified");
    const { report } = await mergeReports({ jobs, manifest: "m", name: "merged", sink: s, total: 2 });
    expect(report.jobs.find((j) => j.id === job.id)?.status).toBe("pending");
  });

  it("is interrupted when a shard was, and failed when nothing succeeded", async () => {
    const s = sink();
    await put(s, 1, 2, shardReport(1, 2, { status: "interrupted", finished_at: null }));
    await put(s, 2, 2, shardReport(2, 2));
    expect((await mergeReports({ jobs, manifest: "m", name: "merged", sink: s })).report.run.status).toBe(
      "interrupted",
    );
  });

  it("refuses a broken report, naming it, and one found in another shard's folder", async () => {
    const s = sink();
    await s.writeText("reports/shards/1-of-2/report.json", "{ not json");
    await put(s, 2, 2, shardReport(2, 2));
    await expect(mergeReports({ jobs, manifest: "m", name: "merged", sink: s })).rejects.toThrow(
      new RegExp(`${s.uri("reports/shards/1-of-2/report.json")} is not a clapper report`),
    );
    const t = sink();
    await put(t, 1, 2, {
      ...shardReport(1, 2),
      jobs: [{ id: "x", kind: "video", status: "done", points: 1 }],
    });
    await expect(mergeReports({ jobs, manifest: "m", name: "merged", sink: t, total: 2 })).rejects.toThrow(
      /jobs\.0\.status/,
    );
    const u = sink();
    await put(u, 1, 2, shardReport(2, 2));
    await expect(mergeReports({ jobs, manifest: "m", name: "merged", sink: u, total: 2 })).rejects.toThrow(
      /is the report of shard 2\/2, found where shard 1\/2's belongs/,
    );
  });

  it("refuses a report far larger than any report", async () => {
    const s = sink();
    await s.writeText("reports/shards/1-of-1/report.json", "");
    const big = join(s.root, "reports/shards/1-of-1/report.json");
    const { truncate } = await import("node:fs/promises");
    await truncate(big, 65 * 1024 * 1024);
    await expect(mergeReports({ jobs, manifest: "m", name: "merged", sink: s, total: 1 })).rejects.toThrow(
      /more than the 67108864 expected of it/,
    );
  });

  it("finds N from the store, and asks for --shards when runs of two sizes are there", async () => {
    const s = sink();
    await expect(shardTotal(s)).rejects.toThrow(MergeError);
    await put(s, 1, 4, shardReport(1, 4));
    await put(s, 3, 4, shardReport(3, 4));
    expect(await shardTotal(s)).toBe(4);
    await put(s, 1, 2, shardReport(1, 2));
    await expect(shardTotal(s)).rejects.toThrow(/runs split in 2, 4 shards: give --shards N/);
  });

  it("keeps a row a shard lists that the manifest no longer has (paid for), and ignores another split's rows", async () => {
    const s = sink();
    const one = shardReport(1, 2);
    const removed: ReportJob = {
      ...row(jobs[0] as Job, 30),
      id: "shot/gone",
      status: "cancelled",
      error: { code: "removed_from_manifest", message: "no longer in the manifest" },
    };
    await put(s, 1, 2, { ...one, jobs: [...one.jobs, removed] });
    await put(s, 2, 2, shardReport(2, 2));
    const { report } = await mergeReports({ jobs, manifest: "m", name: "merged", sink: s, total: 2 });
    expect(report.jobs.at(-1)?.id).toBe("shot/gone");
    expect(report.points.spent).toBe(9 * 20 + 30);
    expect(report.run.status).toBe("succeeded");
  });
});
