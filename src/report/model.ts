// The run report's shape (report.json: the contract of BRIEF.md, plus a few fields), and what is
// read off it the same way by every report: the counts, the run's status over its jobs, and which
// jobs the run is about. Built from the journal's state in build.ts; written as report.json,
// report.md, junit.xml, the step summary and report.html (writing.ts).

export type ReportJobStatus = "succeeded" | "failed" | "cancelled" | "skipped" | "pending";

/** Where an unfinished (`pending`) job stands: not submitted (or waiting for a retry), or in flight. */
export type ReportJobStage = "pending" | "submitting" | "running" | "collecting";

export interface ReportJob {
  id: string;
  kind: "video" | "speech";
  status: ReportJobStatus;
  task_id: string | null;
  attempts: number;
  points: number;
  estimated_points: number | null;
  fingerprint: string;
  /** `resolution` (video): what the service says it delivered; 768P when an upscale fell back. */
  output: { uri: string; bytes: number; sha256: string; resolution?: string } | null;
  error: { code: string; message: string } | null;
  source: string;
  /**
   * Seconds the job took in this run: from its first create to its result stored (or its task
   * settled); for a job that ended without a recorded time, or has not ended, to the end of the
   * run (or of the report, for an interrupted run). 0 when it was reused or not started.
   */
  elapsed_seconds: number;
  /** Video: the resolution the manifest asked for. */
  requested_resolution?: string;
  /** An unfinished job (`pending`): where it stands. */
  stage?: ReportJobStage;
  /** What a person should know about a job that did not fail: a delivered resolution that differs. */
  warnings?: string[];
  /**
   * The task was one created before this run (its Idempotency-Key returned it): its points were
   * paid where it was first created, so they are not counted here.
   */
  replayed?: true;
  /**
   * Everything the job's outputs cost over all runs: `points` (this run's, earlier versions it paid
   * for included) plus what the job's current version cost in every other run (all campaigns'
   * attempts, the generations before a `--fresh` too; replays count 0, paid where first created).
   * What versions edited away in earlier runs cost is not added: the state drops their attempts
   * when a row is edited, so such a sum could not be told exactly for every job; each of those
   * points is in the `points` of the run that paid it. For a row the manifest changed since the
   * state last saw it (`edited`), it is what the version the state holds cost. Always written by
   * this version; a shard's report.json from an older version (read by a merge) may lack it.
   */
  spent_total?: number;
  /**
   * The manifest's row changed since the job's output (or its last attempt) was made: the
   * manifest's fingerprint differs from the stored output's. `status` stays what the state says of
   * the earlier version; the next run generates the row again.
   */
  edited?: true;
  /**
   * Tasks of this job the service may still be running (created, or whose create may have left,
   * and not settled), and the points they hold reserved: after an interrupted run, what is still
   * under way at the service (`clapper cancel` stops them; the next run follows them).
   */
  in_flight?: { tasks: number; reserved_points: number };
  /**
   * A failed job whose task succeeded and was paid for, its result never stored: the next run
   * downloads it again through its task, at no cost (with or without `--retry-failed`).
   */
  paid_not_stored?: true;
  /**
   * Earlier outputs of the job kept when it was generated again (`shots/s02.v1.mp4`, oldest first):
   * a producer can still see and pick them.
   */
  versions?: ReportVersion[];
}

/** An earlier output of a job, kept beside the current one. */
export interface ReportVersion {
  uri: string;
  sha256: string;
  /** When it was replaced by a newer output (ISO 8601). */
  at: string;
  bytes?: number;
}

export interface Report {
  run: {
    name: string;
    manifest: string;
    status: "succeeded" | "partial" | "failed" | "interrupted";
    started_at: string;
    finished_at: string | null;
    id: string;
    /** The jobs the run was limited to with `--only`. */
    only?: string[];
    /** Why the run stopped before doing all its work (`max-failures`, `deadline`, `budget`, ...). */
    stopped_by?: string;
    /** What stopped it, for people. */
    stop_message?: string;
    /** A shard's report: the part of the manifest it covers (its jobs only are listed). */
    shard?: { index: number; total: number };
  };
  points: { estimated: number; spent: number; balance_before: number | null; balance_after: number | null };
  counts: {
    total: number;
    succeeded: number;
    failed: number;
    cancelled: number;
    skipped: number;
    pending: number;
  };
  jobs: ReportJob[];
  /** The merged report of a sharded run: each shard as its own report tells it (or `missing`). */
  shards?: ShardSummary[];
  note?: string;
}

export interface ShardSummary {
  index: number;
  total: number;
  /** `missing`: no report of this shard was found (never started, or its machine died first). */
  status: Report["run"]["status"] | "missing";
  counts: Report["counts"] | null;
  points: { estimated: number; spent: number } | null;
  started_at: string | null;
  finished_at: string | null;
  run_id: string | null;
  /** Where its report is. */
  report: string;
}

/** The error code of a row removed from the manifest, listed for what its tasks cost. */
export const REMOVED = "removed_from_manifest";

export function countJobs(jobs: readonly ReportJob[]): Report["counts"] {
  const count = (s: ReportJobStatus) => jobs.filter((j) => j.status === s).length;
  return {
    total: jobs.length,
    succeeded: count("succeeded"),
    failed: count("failed"),
    cancelled: count("cancelled"),
    skipped: count("skipped"),
    pending: count("pending"),
  };
}

/**
 * A run's status over the jobs it is about. "failed" only when nothing was done and something did
 * fail: jobs still pending (tasks left to follow, results left to collect) are unfinished work.
 */
export function statusOver(jobs: readonly ReportJob[], interrupted: boolean): Report["run"]["status"] {
  const done = jobs.filter((j) => j.status === "succeeded" || j.status === "skipped").length;
  const ended = jobs.filter((j) => j.status === "failed" || j.status === "cancelled").length;
  return interrupted
    ? "interrupted"
    : done === jobs.length
      ? "succeeded"
      : done === 0 && ended > 0
        ? "failed"
        : "partial";
}

/** Whether the run's status (and exit code) is about this job: not a removed row, not outside `--only`. */
export function inScope(j: ReportJob, only: ReadonlySet<string> | undefined): boolean {
  if (only) return only.has(j.id);
  return !(j.status === "cancelled" && j.error?.code === REMOVED);
}

/** The jobs the run is about that did not succeed: failed first, then cancelled, then unfinished. */
export function unsuccessful(report: Report): ReportJob[] {
  const only = report.run.only ? new Set(report.run.only) : undefined;
  const of = (s: ReportJobStatus) => report.jobs.filter((j) => j.status === s && inScope(j, only));
  return [...of("failed"), ...of("cancelled"), ...of("pending")];
}
