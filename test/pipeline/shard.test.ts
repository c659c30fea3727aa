// Shards: which part of a manifest a process works on. The assignment must be stable under edits
// (a changed or added row never moves another job), keep a shot with its takes and its lines, and
// spread a large manifest evenly; the settings read from flags and schedulers' variables must be
// refused with messages that name them.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Job } from "../../src/manifest/index.js";
import { loadManifest } from "../../src/manifest/index.js";
import {
  inShard,
  parseShard,
  parseShards,
  resolveShard,
  ShardError,
  shardKey,
  shardOf,
} from "../../src/run/shard.js";
import { type TempDir, tempDir } from "../fixtures/audio.js";

let dir: TempDir;
beforeAll(async () => {
  dir = await tempDir("clapper-shard-");
});
afterAll(async () => {
  await dir.remove();
});

function manifestText(
  shots: number,
  opts: { takes?: number; prefix?: string; lines?: boolean } = {},
): string {
  const out = [
    "name: sharded",
    "output: ./output",
    "defaults:",
    '  shot: { model: Vid-H3, resolution: 480P, duration: 4, ratio: "16:9" }',
    '  line: { language: EN, voice: "preset:en_female_bright" }',
    "shots:",
  ];
  for (let i = 1; i <= shots; i++)
    out.push(
      `  - { id: s${i}, prompt: "${opts.prefix ?? ""}shot ${i}"${opts.takes ? `, takes: ${opts.takes}` : ""} }`,
    );
  if (opts.lines) {
    out.push("lines:");
    for (let i = 1; i <= shots; i++)
      out.push(`  - { id: n${i}, shot: s${i}, text: "Line ${i} of the story." }`);
    out.push('  - { id: free, text: "A line of no shot." }');
  }
  return `${out.join("\n")}\n`;
}

let count = 0;
async function jobsOf(text: string): Promise<Job[]> {
  const file = await dir.file(`m${count++}.yaml`, text);
  const r = await loadManifest(file, { cwd: dir.path, speechPrice: 1 });
  expect(r.errors).toEqual([]);
  return r.jobs;
}

const assignment = (jobs: readonly Job[], n: number) => new Map(jobs.map((j) => [j.id, shardOf(j, n)]));

describe("shardOf", () => {
  it("never moves a job when other rows are edited, added or removed", async () => {
    const before = assignment(await jobsOf(manifestText(300)), 4);
    // Every prompt edited (new fingerprints), 100 rows added at the end.
    const after = assignment(await jobsOf(manifestText(400, { prefix: "edited " })), 4);
    for (const [id, shard] of before) expect(after.get(id), id).toBe(shard);
    // And a row removed from the middle moves nothing either.
    const fewer = (await jobsOf(manifestText(300))).filter((j) => j.id !== "shot/s150");
    for (const j of fewer) expect(shardOf(j, 4)).toBe(before.get(j.id));
  });

  it("keeps a shot, its takes and the lines that name it in one shard; a free line goes by itself", async () => {
    const jobs = await jobsOf(manifestText(40, { takes: 2, lines: true }));
    for (let i = 1; i <= 40; i++) {
      const group = jobs.filter(
        (j) => j.id === `line/n${i}` || j.id.startsWith(`shot/s${i}/`) || j.id === `shot/s${i}`,
      );
      expect(group).toHaveLength(3);
      expect(new Set(group.map((j) => shardOf(j, 5))).size, `shot s${i}`).toBe(1);
    }
    const free = jobs.find((j) => j.id === "line/free") as Job;
    expect(shardKey(free)).toBe("line/free");
  });

  it("spreads 2,000 shots evenly: every shard of 4 within 10% of a quarter", async () => {
    const jobs = await jobsOf(manifestText(2000));
    const sizes = [1, 2, 3, 4].map((s) => jobs.filter((j) => shardOf(j, 4) === s).length);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(2000);
    for (const size of sizes) expect(Math.abs(size - 500)).toBeLessThan(50);
    // Every job is in exactly one shard.
    for (const j of jobs)
      expect([1, 2, 3, 4].filter((s) => inShard(j, { index: s, total: 4 }))).toHaveLength(1);
  });

  it("is 1 for every job of an unsplit manifest", async () => {
    const jobs = await jobsOf(manifestText(20));
    expect(jobs.every((j) => shardOf(j, 1) === 1 && inShard(j, undefined))).toBe(true);
  });
});

describe("parseShard and parseShards", () => {
  it("reads I/N, 1-based", () => {
    expect(parseShard("2/4")).toEqual({ index: 2, total: 4 });
    expect(parseShard(" 1/1 ")).toEqual({ index: 1, total: 1 });
    expect(parseShards("8")).toBe(8);
  });

  it.each([
    ["0/4", '--shard: expected I from 1 to 4 in I/N, got "0/4"'],
    ["5/4", '--shard: expected I from 1 to 4 in I/N, got "5/4"'],
    ["2", '--shard: expected I/N (shard I of N, from 1), got "2"'],
    ["a/4", '--shard: expected I in I/N as a whole number, got "a"'],
    ["1/0", '--shard: expected a number of shards from 1 to 1000, got "1/0"'],
    ["1/2.5", '--shard: expected N in I/N as a whole number, got "2.5"'],
    ["1/4/2", '--shard: expected I/N (shard I of N, from 1), got "1/4/2"'],
  ])("refuses %s", (raw, message) => {
    expect(() => parseShard(raw)).toThrow(new ShardError(message));
  });

  it("refuses a count of shards out of range, naming the variable it came from", () => {
    expect(() => parseShards("0", "CLAPPER_SHARDS")).toThrow(
      'CLAPPER_SHARDS: expected a number of shards from 1 to 1000, got "0"',
    );
    expect(() => parseShards("-3")).toThrow(
      '--shards: expected the number of shards as a whole number, got "-3"',
    );
  });
});

describe("resolveShard: the flag, then the schedulers' variables", () => {
  const env = (vars: Record<string, string>) => vars as NodeJS.ProcessEnv;

  it("takes --shard over every variable, and refuses a --shards that disagrees", () => {
    expect(resolveShard({ shard: { index: 2, total: 3 }, env: env({ JOB_COMPLETION_INDEX: "0" }) })).toEqual({
      index: 2,
      total: 3,
      source: "--shard",
    });
    expect(() => resolveShard({ shard: { index: 2, total: 3 }, shards: 4, env: env({}) })).toThrow(
      /disagree/,
    );
  });

  it("reads Kubernetes' and AWS Batch's 0-based indexes with --shards N", () => {
    expect(resolveShard({ shards: 4, env: env({ JOB_COMPLETION_INDEX: "0" }) })).toMatchObject({
      index: 1,
      total: 4,
      source: "JOB_COMPLETION_INDEX=0",
    });
    expect(resolveShard({ shards: 4, env: env({ AWS_BATCH_JOB_ARRAY_INDEX: "3" }) })).toMatchObject({
      index: 4,
      total: 4,
    });
    expect(() => resolveShard({ shards: 4, env: env({ JOB_COMPLETION_INDEX: "4" }) })).toThrow(
      'JOB_COMPLETION_INDEX: expected an index from 0 to 3 (--shards 4), got "4"',
    );
    expect(() => resolveShard({ shards: 4, env: env({ AWS_BATCH_JOB_ARRAY_INDEX: "x" }) })).toThrow(
      /AWS_BATCH_JOB_ARRAY_INDEX: expected the 0-based index of an AWS Batch array job/,
    );
  });

  it("ignores a scheduler's index without --shards: a Job may run one clapper over everything", () => {
    expect(
      resolveShard({ env: env({ JOB_COMPLETION_INDEX: "2", AWS_BATCH_JOB_ARRAY_INDEX: "1" }) }),
    ).toBeUndefined();
  });

  it("reads GitLab's 1-based CI_NODE_INDEX/CI_NODE_TOTAL by themselves", () => {
    expect(resolveShard({ env: env({ CI_NODE_INDEX: "3", CI_NODE_TOTAL: "5" }) })).toMatchObject({
      index: 3,
      total: 5,
    });
    expect(() => resolveShard({ env: env({ CI_NODE_INDEX: "0", CI_NODE_TOTAL: "5" }) })).toThrow(
      'CI_NODE_INDEX: expected an index from 1 to 5 (CI_NODE_TOTAL), got "0"',
    );
    expect(() => resolveShard({ shards: 4, env: env({ CI_NODE_INDEX: "1", CI_NODE_TOTAL: "5" }) })).toThrow(
      /CI_NODE_TOTAL=5 and --shards 4 disagree/,
    );
  });

  it("treats 1/1 as the whole manifest, and asks which shard when only --shards N is given", () => {
    expect(resolveShard({ shard: { index: 1, total: 1 }, env: env({}) })).toBeUndefined();
    expect(resolveShard({ env: env({ CI_NODE_INDEX: "1", CI_NODE_TOTAL: "1" }) })).toBeUndefined();
    expect(() => resolveShard({ shards: 3, env: env({}) })).toThrow(/--shards 3: which shard is this one\?/);
    // `plan --shards N` lists every shard: no index needed.
    expect(resolveShard({ shards: 3, env: env({}), indexOptional: true })).toBeUndefined();
  });
});
