// The merged report of a sharded run: every job of the manifest, in the manifest's order and in the
// contract of a single run's report, built from what the store holds (the shards' reports, and the
// outputs' own metadata where a shard left no report), never from a shard's disk: the machine that
// ran a shard may be gone.
import { createHash } from "node:crypto";
import pLimit from "p-limit";
import { z } from "zod";
import { redactDeep } from "../api/redact.js";
import type { Job } from "../manifest/index.js";
import { outputKey } from "../manifest/outputs.js";
import { countJobs, type Report, type ReportJob, type ShardSummary, statusOver } from "../report/model.js";
import { reportsFolder } from "../report/writing.js";
import { serviceFor } from "../services/index.js";
import type { Sink } from "../sinks/sink.js";
import { MAX_SHARDS, type Shard, shardOf } from "./shard.js";

/** A shard's report.json: 2,000 jobs take about 1.5 MB; anything far larger is not one of ours. */
const MAX_REPORT_BYTES = 64 * 1024 * 1024;

const STATUSES = ["succeeded", "partial", "failed", "interrupted"] as const;
const JOB_STATUSES = ["succeeded", "failed", "cancelled", "skipped", "pending"] as const;

/**
 * What the merge needs of a shard's report, checked: it comes from another machine through the
 * store. Fields beyond these are carried as they are.
 */
const ShardReportSchema = z.object({
  run: z.looseObject({
    name: z.string(),
    status: z.enum(STATUSES),
    started_at: z.string(),
    finished_at: z.string().nullable(),
    id: z.string(),
    shard: z.object({ index: z.number().int(), total: z.number().int() }).optional(),
  }),
  points: z.object({
    estimated: z.number(),
    spent: z.number(),
    balance_before: z.number().nullable(),
    balance_after: z.number().nullable(),
  }),
  counts: z.object({
    total: z.number(),
    succeeded: z.number(),
    failed: z.number(),
    cancelled: z.number(),
    skipped: z.number(),
    pending: z.number(),
  }),
  jobs: z.array(
    z.looseObject({
      id: z.string(),
      kind: z.enum(["video", "speech"]),
      status: z.enum(JOB_STATUSES),
      points: z.number(),
    }),
  ),
});

export class MergeError extends Error {
  override name = "MergeError";
}

interface MergeInput {
  /** The manifest's jobs, as planned now. */
  jobs: readonly Job[];
  /** The manifest as people name it, and the run's name. */
  manifest: string;
  name: string;
  sink: Sink;
  /** N; undefined: found from the shards' report folders in the store. */
  total?: number | undefined;
  signal?: AbortSignal;
}

interface Merged {
  report: Report;
  /** Shards whose report was not found. */
  missing: number[];
}

/** N, from the folders `reports/shards/I-of-N` in the store, when one N is there. */
export async function shardTotal(sink: Sink): Promise<number> {
  const names = await sink.folders("reports/shards", MAX_SHARDS * 4);
  const totals = new Set(names.flatMap((n) => /^\d+-of-(\d+)$/.exec(n)?.[1] ?? []).map(Number));
  if (totals.size === 1) return [...totals][0] as number;
  if (totals.size === 0)
    throw new MergeError(
      `no shard reports in ${sink.uri("reports/shards")}: run the shards first (clapper run MANIFEST --shard I/N)`,
    );
  throw new MergeError(
    `${sink.uri("reports/shards")} holds reports of runs split in ${[...totals].sort((a, b) => a - b).join(", ")} shards: give --shards N`,
  );
}

type ShardReport = z.infer<typeof ShardReportSchema>;

async function readShard(sink: Sink, shard: Shard): Promise<ShardReport | undefined> {
  const key = `${reportsFolder(shard)}/report.json`;
  const text = await sink.readText(key, MAX_REPORT_BYTES);
  if (text === undefined) return undefined;
  let parsed: ShardReport;
  try {
    parsed = ShardReportSchema.parse(JSON.parse(text));
  } catch (error) {
    const detail =
      error instanceof z.ZodError
        ? error.issues
            .slice(0, 3)
            .map((i) => `${i.path.join(".") || "(top)"}: ${i.message}`)
            .join("; ")
        : (error as Error).message;
    throw new MergeError(`${sink.uri(key)} is not a clapper report: ${detail}`);
  }
  const own = parsed.run.shard;
  if (own && (own.index !== shard.index || own.total !== shard.total))
    throw new MergeError(
      `${sink.uri(key)} is the report of shard ${own.index}/${own.total}, found where shard ${shard.index}/${shard.total}'s belongs`,
    );
  return parsed;
}

/**
 * A job no shard report lists (its shard left none): what the store holds for it. An object made
 * for this very request (its metadata names the fingerprint and the hash, as S3 keeps them) is the
 * job's result; its cost is not known here, so its points are 0 and the note says why.
 */
async function fromStore(sink: Sink, job: Job): Promise<ReportJob> {
  const key = outputKey(job);
  const found = await sink.stat(key);
  const meta = found?.metadata;
  const made = found !== undefined && meta?.fingerprint === job.fingerprint && meta.sha256 !== undefined;
  const requested = serviceFor(job.kind).requested(job);
  return {
    id: job.id,
    kind: job.kind,
    status: made ? "succeeded" : "pending",
    task_id: made ? (meta?.task ?? null) : null,
    attempts: 0,
    points: 0,
    estimated_points: job.points,
    fingerprint: job.fingerprint,
    output: made ? { uri: sink.uri(key), bytes: found.bytes, sha256: meta?.sha256 ?? "" } : null,
    error: null,
    source: `${job.file}:${job.line}`,
    elapsed_seconds: 0,
    ...(requested !== undefined ? { requested_resolution: requested } : {}),
    ...(made ? {} : { stage: "pending" as const }),
  };
}

function summary(sink: Sink, shard: Shard, r: ShardReport | undefined): ShardSummary {
  return {
    index: shard.index,
    total: shard.total,
    status: r?.run.status ?? "missing",
    counts: r?.counts ?? null,
    points: r ? { estimated: r.points.estimated, spent: r.points.spent } : null,
    started_at: r?.run.started_at ?? null,
    finished_at: r?.run.finished_at ?? null,
    run_id: r?.run.id ?? null,
    report: sink.uri(`${reportsFolder(shard)}/report.json`),
  };
}

/** The run's status over the shards: as a single run's is over its jobs. */
function mergedStatus(reports: ReadonlyArray<ShardReport | undefined>, jobs: readonly ReportJob[]) {
  const planned = jobs.filter((j) => j.error?.code !== "removed_from_manifest");
  return statusOver(
    planned,
    reports.some((r) => r?.run.status === "interrupted"),
  );
}

function earliest(values: ReadonlyArray<string | null | undefined>): string | null {
  const times = values.filter((v): v is string => typeof v === "string" && Number.isFinite(Date.parse(v)));
  return times.sort((a, b) => Date.parse(a) - Date.parse(b))[0] ?? null;
}

/** Reads every shard's report from the store and merges them over the manifest's jobs. */
export async function mergeReports(o: MergeInput): Promise<Merged> {
  const total = o.total ?? (await shardTotal(o.sink));
  const shards = Array.from({ length: total }, (_, i) => ({ index: i + 1, total }));
  const reports = await Promise.all(shards.map((s) => readShard(o.sink, s)));
  o.signal?.throwIfAborted();
  const missing = shards.filter((_, i) => reports[i] === undefined).map((s) => s.index);

  // Each shard's rows by id: a job's row is taken from the shard it belongs to now; another
  // shard's row of it (the manifest was split differently) is not this split's.
  const byShard = reports.map((r) => new Map((r?.jobs ?? []).map((j) => [j.id, j as unknown as ReportJob])));
  const looking = pLimit(16);
  const jobs = await Promise.all(
    o.jobs.map(
      (job) => byShard[shardOf(job, total) - 1]?.get(job.id) ?? looking(() => fromStore(o.sink, job)),
    ),
  );
  // Rows removed from the manifest whose tasks a shard paid for stay listed (so points.spent is the
  // sum of the jobs), once each.
  const planned = new Set(o.jobs.map((j) => j.id));
  for (const r of reports)
    for (const j of r?.jobs ?? []) if (!planned.has(j.id)) jobs.push(j as unknown as ReportJob);

  const finished = reports.every((r) => r !== undefined && r.run.finished_at !== null);
  const ends = reports.map((r) => r?.run.finished_at ?? null);
  const lastEnd = finished
    ? ([...ends].sort((a, b) => Date.parse(b ?? "") - Date.parse(a ?? ""))[0] ?? null)
    : null;
  const befores = reports.flatMap((r) => (r?.points.balance_before != null ? [r.points.balance_before] : []));
  const afters = reports.flatMap((r) => (r?.points.balance_after != null ? [r.points.balance_after] : []));
  const notes: string[] = [];
  if (missing.length > 0)
    notes.push(
      `no report of shard${missing.length === 1 ? "" : "s"} ${missing.join(", ")} of ${total}: ${missing.length === 1 ? "its" : "their"} jobs are listed as the store holds them (a result found is counted as succeeded, with its points unknown)`,
    );
  const report: Report = {
    run: {
      name: o.name,
      manifest: o.manifest,
      status: mergedStatus(reports, jobs),
      started_at: earliest(reports.map((r) => r?.run.started_at)) ?? new Date().toISOString(),
      finished_at: lastEnd,
      // One id for the merged run, the same for the same shard runs (each shard's is in `shards`).
      id: `merged-${createHash("sha256")
        .update(reports.map((r) => r?.run.id ?? "-").join(","))
        .digest("hex")
        .slice(0, 32)}`,
    },
    points: {
      estimated: jobs.reduce((sum, j) => sum + (j.status === "skipped" ? 0 : (j.estimated_points ?? 0)), 0),
      spent: jobs.reduce((sum, j) => sum + j.points, 0),
      // The account's balance before the first shard began and after the last one ended: the
      // shards ran side by side, so the highest before and the lowest after.
      balance_before: befores.length === total ? Math.max(...befores) : null,
      balance_after: finished && afters.length === total ? Math.min(...afters) : null,
    },
    counts: countJobs(jobs),
    jobs,
    shards: shards.map((s, i) => summary(o.sink, s, reports[i])),
    ...(notes.length > 0 ? { note: notes.join("; ") } : {}),
  };
  return { report: redactDeep<Report>(report), missing };
}
