// Shards: one manifest split across machines that a scheduler starts (a Kubernetes Indexed Job, a
// CI matrix, an AWS Batch array). Each job belongs to one shard by a stable hash of its group, so
// an edit or a new row never moves another job; a shot, its takes and the narration lines that
// name it stay together (the lines of a shot are reviewed, and will be timed, with it).
import { createHash } from "node:crypto";
import type { Job } from "../manifest/index.js";
import { shotOf } from "../manifest/job.js";

/** Shard `index` of `total`, 1-based as Playwright and Jest count them. */
export interface Shard {
  index: number;
  total: number;
}

/** Where the shard came from, for the log and for messages: `--shard`, `JOB_COMPLETION_INDEX`, ... */
export interface ResolvedShard extends Shard {
  source: string;
}

/** A bound on N: far above any scheduler's parallelism, low enough that a typo is caught. */
export const MAX_SHARDS = 1000;

/** A refused shard setting; the message names the flag or variable and quotes what was got. */
export class ShardError extends Error {
  override name = "ShardError";
}

/** `3-of-4`: the folder name of a shard's state and reports. */
export function shardLabel(shard: Shard): string {
  return `${shard.index}-of-${shard.total}`;
}

/** The group a job is placed by: its shot (takes and the lines that name the shot), else itself. */
export function shardKey(job: Job): string {
  const shot = shotOf(job);
  return shot !== undefined ? `shot/${shot}` : job.id;
}

/** The shard (1-based) a job belongs to when the manifest is split in `total`. */
export function shardOf(job: Job, total: number): number {
  if (total <= 1) return 1;
  // The first 48 bits of SHA-256: uniform, the same on every machine and Node version.
  const digest = createHash("sha256").update(shardKey(job)).digest();
  return (digest.readUIntBE(0, 6) % total) + 1;
}

export function inShard(job: Job, shard: Shard | undefined): boolean {
  return shard === undefined || shardOf(job, shard.total) === shard.index;
}

const WHOLE = /^\d+$/;

function quoted(raw: string): string {
  return JSON.stringify(raw.length > 40 ? `${raw.slice(0, 39)}…` : raw);
}

function count(raw: string, name: string, what: string): number {
  const text = raw.trim();
  const value = WHOLE.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(value))
    throw new ShardError(`${name}: expected ${what} as a whole number, got ${quoted(raw)}`);
  return value;
}

function checkTotal(total: number, name: string, raw: string): void {
  if (total < 1 || total > MAX_SHARDS)
    throw new ShardError(`${name}: expected a number of shards from 1 to ${MAX_SHARDS}, got ${quoted(raw)}`);
}

/** `--shard I/N` (or CLAPPER_SHARD): 1-based, `1/1` being the whole manifest. */
export function parseShard(raw: string, name = "--shard"): Shard {
  const parts = raw.trim().split("/");
  if (parts.length !== 2)
    throw new ShardError(`${name}: expected I/N (shard I of N, from 1), got ${quoted(raw)}`);
  const index = count(parts[0] ?? "", name, "I in I/N");
  const total = count(parts[1] ?? "", name, "N in I/N");
  checkTotal(total, name, raw);
  if (index < 1 || index > total)
    throw new ShardError(`${name}: expected I from 1 to ${total} in I/N, got ${quoted(raw)}`);
  return { index, total };
}

/** `--shards N`: the number of shards a scheduler's 0-based index divides the manifest in. */
export function parseShards(raw: string, name = "--shards"): number {
  const total = count(raw, name, "the number of shards");
  checkTotal(total, name, raw);
  return total;
}

/** The schedulers' 0-based indexes that need `--shards N` beside them, in the order they are looked at. */
const ZERO_BASED = [
  ["JOB_COMPLETION_INDEX", "a Kubernetes Indexed Job"],
  ["AWS_BATCH_JOB_ARRAY_INDEX", "an AWS Batch array job"],
] as const;

function set(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name];
  return value !== undefined && value.trim() !== "" ? value : undefined;
}

/**
 * The shard this process works on: `--shard I/N` (or CLAPPER_SHARD), else a scheduler's index:
 * JOB_COMPLETION_INDEX or AWS_BATCH_JOB_ARRAY_INDEX (0-based) with `--shards N`, else GitLab's
 * CI_NODE_INDEX/CI_NODE_TOTAL (1-based, set by `parallel:`). Undefined: the whole manifest, as
 * is `1/1`. A scheduler's index without `--shards` is not a shard: a Job may run one clapper.
 */
export function resolveShard(o: {
  shard?: Shard | undefined;
  /** `--shards N`. */
  shards?: number | undefined;
  env: NodeJS.ProcessEnv;
  /** `plan --shards N` lists every shard: no index is needed. */
  indexOptional?: boolean;
}): ResolvedShard | undefined {
  const whole = (s: ResolvedShard) => (s.total === 1 ? undefined : s);
  if (o.shard) {
    if (o.shards !== undefined && o.shards !== o.shard.total)
      throw new ShardError(
        `--shard ${o.shard.index}/${o.shard.total} and --shards ${o.shards} disagree on the number of shards; give one of them`,
      );
    return whole({ ...o.shard, source: "--shard" });
  }
  if (o.shards !== undefined) {
    for (const [name, what] of ZERO_BASED) {
      const raw = set(o.env, name);
      if (raw === undefined) continue;
      const index = count(raw, name, `the 0-based index of ${what}`);
      if (index >= o.shards)
        throw new ShardError(
          `${name}: expected an index from 0 to ${o.shards - 1} (--shards ${o.shards}), got ${quoted(raw)}`,
        );
      return whole({ index: index + 1, total: o.shards, source: `${name}=${index}` });
    }
  }
  const nodeIndex = set(o.env, "CI_NODE_INDEX");
  const nodeTotal = set(o.env, "CI_NODE_TOTAL");
  if (nodeIndex !== undefined && nodeTotal !== undefined) {
    const total = count(nodeTotal, "CI_NODE_TOTAL", "the number of parallel jobs");
    checkTotal(total, "CI_NODE_TOTAL", nodeTotal);
    if (o.shards !== undefined && o.shards !== total)
      throw new ShardError(
        `CI_NODE_TOTAL=${total} and --shards ${o.shards} disagree on the number of shards; give --shard I/N to choose`,
      );
    const index = count(nodeIndex, "CI_NODE_INDEX", "the 1-based index of a parallel job");
    if (index < 1 || index > total)
      throw new ShardError(
        `CI_NODE_INDEX: expected an index from 1 to ${total} (CI_NODE_TOTAL), got ${quoted(nodeIndex)}`,
      );
    return whole({ index, total, source: `CI_NODE_INDEX=${index}` });
  }
  if (o.shards !== undefined && o.shards > 1 && !o.indexOptional)
    throw new ShardError(
      `--shards ${o.shards}: which shard is this one? Give --shard I/${o.shards} (or CLAPPER_SHARD), or run where the scheduler sets JOB_COMPLETION_INDEX (Kubernetes), AWS_BATCH_JOB_ARRAY_INDEX (AWS Batch) or CI_NODE_INDEX/CI_NODE_TOTAL (GitLab)`,
    );
  return undefined;
}
