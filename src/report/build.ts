// report.json's model, built from the journal's state and the manifest's jobs.
// Text from the services (error messages, resolutions) reaches every report: the model is redacted.
import { redactDeep } from "../api/redact.js";
import { UPSCALE_TIERS } from "../api/video.js";
import { type Job, MAX_SHOT_S, overrun, type VideoJob } from "../manifest/index.js";
import {
  attemptCost,
  type JobState,
  openAttempt,
  paidIn,
  paidNotStored,
  type RunState,
  spentPoints,
} from "../state/run-state.js";
import type { KeptVersion } from "../state/versions.js";
import { type ByKind, byKind } from "./kinds.js";
import {
  countJobs,
  REMOVED,
  type Report,
  type ReportJob,
  type ReportJobStage,
  type ReportJobStatus,
  type ReportVersion,
  statusOver,
} from "./model.js";

interface ReportInput {
  state: RunState;
  jobs: readonly Job[];
  manifest: string;
  name: string;
  interrupted: boolean;
  balanceAfter?: number | undefined;
  note?: string;
  /** Ids the run was limited to (`--only`): its status is about them; the others are listed as they stand. */
  selected?: readonly string[];
  /** Why the run stopped before doing all its work: `run.stopped_by`. */
  stoppedBy?: string | undefined;
  /** What stopped it, for people: `run.stop_message`. */
  stopMessage?: string | undefined;
  /** A shard's report (`jobs` are then the shard's own). */
  shard?: { index: number; total: number } | undefined;
}

/**
 * Whether this campaign made (or paid for) the job's result: an attempt of it was made or settled
 * in it. A result stored in an earlier run and left as it was is reused, whether this run looked
 * at it (unchanged) or not (outside `--only`).
 */
export function madeIn(job: JobState, campaign: number, since?: number): boolean {
  if (job.skipped) return false;
  if (job.attempts.some((a) => a.campaign === campaign || a.settledIn === campaign)) return true;
  // Paid in an earlier run, its result stored in this one (downloaded again): made here too.
  const at = job.output?.at;
  return at !== undefined && since !== undefined && Number.isFinite(since) && at >= since;
}

/** When the state's campaign began (ms), to tell results stored in it. */
export function campaignStart(state: RunState): number | undefined {
  const start = Date.parse(state.run?.started_at ?? "");
  return Number.isFinite(start) ? start : undefined;
}

function statusOf(job: JobState | undefined, campaign: number, since?: number): ReportJobStatus {
  if (!job) return "pending";
  if (job.status === "stored") return madeIn(job, campaign, since) ? "succeeded" : "skipped";
  if (job.status === "failed") return "failed";
  if (job.status === "cancelled") return "cancelled";
  return "pending";
}

function stageOf(job: JobState | undefined): ReportJobStage {
  const s = job?.status;
  return s === "submitting" || s === "running" || s === "collecting" ? s : "pending";
}

/** A string from outside, bounded: a resolution is a short tier name. */
function short(text: string, max = 32): string {
  return text.length > max ? `${text.slice(0, max)}…` : text;
}

/** The warning for a video delivered at another resolution than asked for. */
function resolutionWarning(requested: string, delivered: string): string {
  if ((UPSCALE_TIERS as readonly string[]).includes(requested) && delivered === "768P")
    return `the upscale to ${requested} failed: the native 768P video was delivered (charged at the 768P price)`;
  return `delivered at ${delivered}, not the ${requested} asked for`;
}

/**
 * Milliseconds the job took in this campaign: from its first intent to its result stored, or to
 * its last attempt settled (failed, cancelled); else to `endMs`.
 */
function elapsedMs(
  st: JobState | undefined,
  campaign: number,
  status: ReportJobStatus,
  endMs: number,
): number {
  if (!st || status === "skipped") return 0;
  const mine = st.attempts.filter((a) => a.campaign === campaign);
  let start = Number.POSITIVE_INFINITY;
  let settled: number | undefined;
  for (const a of mine) {
    if (a.at !== undefined && a.at < start) start = a.at;
    if (a.endedAt !== undefined && (settled === undefined || a.endedAt > settled)) settled = a.endedAt;
  }
  if (!Number.isFinite(start)) return 0;
  let end: number | undefined;
  if (status === "succeeded") end = st.output?.at;
  else if (status === "failed" || status === "cancelled") end = settled;
  end ??= endMs;
  return Math.max(0, end - start);
}

const seconds = (ms: number) => Math.round(ms) / 1000;

export function buildReport(input: ReportInput): Report {
  const { state } = input;
  // After a run finished, its campaign is the one before the current (empty) one.
  const campaign = state.run?.finished_at !== undefined ? state.campaign - 1 : state.campaign;
  // A report written again from state keeps the time the run really finished.
  const finishedAt = input.interrupted ? null : (state.run?.finished_at ?? new Date().toISOString());
  const parsedEnd = finishedAt !== null ? Date.parse(finishedAt) : Number.NaN;
  const endMs = Number.isFinite(parsedEnd) ? parsedEnd : Date.now();
  const jobs: ReportJob[] = input.jobs.map((planned) =>
    plannedJob(planned, state.jobs[planned.id], campaign, endMs, campaignStart(state)),
  );
  const planned = new Set(input.jobs.map((j) => j.id));
  addRemovedJobs(jobs, state, planned, campaign, endMs);
  const counts = countJobs(jobs);
  const status = runStatus(input, jobs, planned);
  // Messages come from the services: whatever they echo, the reports never carry a secret.
  return redactDeep<Report>({
    run: {
      name: input.name,
      manifest: input.manifest,
      status,
      started_at: state.run?.started_at ?? new Date().toISOString(),
      finished_at: finishedAt,
      id: state.run?.id ?? "",
      ...(input.selected ? { only: [...input.selected] } : {}),
      ...(input.stoppedBy ? { stopped_by: input.stoppedBy } : {}),
      ...(input.stopMessage ? { stop_message: input.stopMessage } : {}),
      ...(input.shard ? { shard: { index: input.shard.index, total: input.shard.total } } : {}),
    },
    points: {
      estimated: jobs.reduce((sum, j) => sum + (j.status === "skipped" ? 0 : (j.estimated_points ?? 0)), 0),
      spent: jobs.reduce((sum, j) => sum + j.points, 0),
      balance_before: state.balance_before ?? null,
      balance_after: input.balanceAfter ?? state.run?.balance_after ?? null,
    },
    counts,
    jobs,
    ...(input.note ? { note: input.note } : {}),
  });
}

/** What a row of each kind tells beyond the rest: a video's tier asked for, its narration cut. */
const KIND_FACTS: ByKind<{ requested?: string; long?: string | undefined }> = {
  video: (job) => ({ requested: job.tier, long: narrationTooLong(job) }),
  speech: () => ({}),
};

/** The row of a job of the manifest, as the state (`st`) has it in this campaign. */
function plannedJob(
  planned: Job,
  st: JobState | undefined,
  campaign: number,
  endMs: number,
  since: number | undefined,
): ReportJob {
  const status = statusOf(st, campaign, since);
  const attempts = st?.attempts.filter((a) => a.campaign === campaign) ?? [];
  const last = st?.attempts.at(-1);
  // A job in flight can carry a problem (a task that could not be read) without having ended.
  const lastError = st?.error ?? (st && !openAttempt(st) ? attempts.at(-1)?.error : undefined);
  const replayed = attempts.some((a) => a.replayed);
  const { output, delivered } = shownOutput(st, status);
  const { requested, long } = byKind(planned, KIND_FACTS);
  const warnings = rowWarnings(requested, delivered, long);
  return {
    id: planned.id,
    kind: planned.kind,
    status,
    task_id: last?.taskId ?? null,
    attempts: st ? attemptsBehind(st, campaign, status) : 0,
    // Failed and cancelled attempts are released, so they add 0; a reused result costs nothing now,
    // but a job this campaign paid for counts even when the store turned out to hold its result.
    points: st ? spentPoints(st, campaign) : 0,
    // Read from state when the manifest was loaded offline (status, report: no speech price).
    estimated_points: planned.points ?? (st?.fingerprint === planned.fingerprint ? st.estimate : null),
    fingerprint: planned.fingerprint,
    output,
    error:
      status === "failed" || status === "cancelled" || (status === "pending" && lastError)
        ? (lastError ?? null)
        : null,
    source: `${planned.file}:${planned.line}`,
    elapsed_seconds: seconds(elapsedMs(st, campaign, status, endMs)),
    ...(requested !== undefined ? { requested_resolution: requested } : {}),
    ...(status === "pending" ? { stage: stageOf(st) } : {}),
    ...(warnings.length > 0 ? { warnings } : {}),
    ...(replayed ? { replayed: true as const } : {}),
    spent_total: st ? spentTotal(st, campaign) : 0,
    ...(st ? stateMarks(st, planned) : {}),
  };
}

/** The stored result a row shows (only when it succeeded or was skipped), and the resolution it came in. */
function shownOutput(
  st: JobState | undefined,
  status: ReportJobStatus,
): { output: ReportJob["output"]; delivered: string | undefined } {
  const stored = status === "succeeded" || status === "skipped" ? st?.output : undefined;
  if (!stored) return { output: null, delivered: undefined };
  const delivered = stored.resolution !== undefined ? short(stored.resolution) : undefined;
  return {
    output: {
      uri: stored.uri,
      bytes: stored.bytes,
      sha256: stored.sha256,
      ...(delivered !== undefined ? { resolution: delivered } : {}),
    },
    delivered,
  };
}

/** A resolution other than the one asked for, and a narration cut short. */
function rowWarnings(
  requested: string | undefined,
  delivered: string | undefined,
  long: string | undefined,
): string[] {
  const warnings =
    requested !== undefined && delivered !== undefined && delivered !== requested
      ? [resolutionWarning(requested, delivered)]
      : [];
  if (long) warnings.push(long);
  return warnings;
}

/** What the state says of the job beyond this run: edited since, tasks in flight, paid for and not stored. */
function stateMarks(
  st: JobState,
  planned: Job,
): Pick<ReportJob, "edited" | "in_flight" | "paid_not_stored" | "versions"> {
  const flight = inFlight(st);
  return {
    ...(editedSince(st, planned) ? { edited: true as const } : {}),
    ...(flight ? { in_flight: flight } : {}),
    ...(paidNotStored(st) ? { paid_not_stored: true as const } : {}),
    ...(st.versions?.length ? { versions: st.versions.map(reportVersion) } : {}),
  };
}

/** A kept version as the report lists it (oldest first, as the state keeps them). */
function reportVersion(v: KeptVersion): ReportVersion {
  return { uri: v.uri, sha256: v.sha256, at: new Date(v.at).toISOString(), bytes: v.bytes };
}

/**
 * The attempts behind the row's status: this run's; for a failure an earlier run left (this run
 * did not try it again), the attempts that failed, so that a failed job never shows 0 attempts.
 */
function attemptsBehind(st: JobState, campaign: number, status: ReportJobStatus): number {
  const mine = st.attempts.filter((a) => a.campaign === campaign).length;
  if (mine > 0 || (status !== "failed" && status !== "cancelled")) return mine;
  return st.attempts.filter((a) => a.n >= (st.countFrom ?? 1)).length;
}

/** This run's points, plus what the job's current version was charged in every other run. */
function spentTotal(st: JobState, campaign: number): number {
  let total = spentPoints(st, campaign);
  for (const a of st.attempts) if (a.spent !== undefined && paidIn(a) !== campaign) total += attemptCost(a);
  return total;
}

/** The manifest's row differs from the version whose output (or, with none, whose attempts) the state holds. */
function editedSince(st: JobState, planned: Job): boolean {
  if (st.output) return st.output.fingerprint !== planned.fingerprint;
  return st.attempts.length > 0 && st.fingerprint !== planned.fingerprint;
}

/**
 * Attempts not settled whose task the service may be running: created, or whose create may have
 * left (a `sending` record, or a journal older than those records). An intent whose create never
 * left holds points in the run's ledger only, and no task.
 */
function inFlight(st: JobState): ReportJob["in_flight"] {
  let tasks = 0;
  let reserved = 0;
  for (const a of [...st.attempts, ...(st.previous ?? [])]) {
    if (a.spent !== undefined) continue;
    if (a.taskId === undefined && !a.sending && a.announces) continue;
    tasks += 1;
    reserved += a.reserved;
  }
  return tasks > 0 ? { tasks, reserved_points: reserved } : undefined;
}

/** An auto shot whose narration (with lead and tail) is longer than the longest shot: what was cut. */
function narrationTooLong(job: VideoJob): string | undefined {
  const over = overrun(job);
  return over
    ? `its narration takes ${over.wanted.toFixed(2)} s with lead and tail, longer than the longest shot (${MAX_SHOT_S} s): it runs past the shot's end`
    : undefined;
}

/**
 * Rows removed from the manifest whose tasks this campaign paid for (or still follows): listed,
 * as cancelled, so that points.spent stays the sum of the jobs and equal to the balance drop.
 * Pushed onto `jobs` one by one: there can be as many as the jobs, too many to spread.
 */
function addRemovedJobs(
  jobs: ReportJob[],
  state: RunState,
  planned: ReadonlySet<string>,
  campaign: number,
  endMs: number,
): void {
  for (const st of Object.values(state.jobs)) {
    if (planned.has(st.id)) continue;
    const points = spentPoints(st, campaign);
    const flight = inFlight(st);
    const open = st.attempts.some((a) => a.spent === undefined);
    if (points === 0 && !open) continue;
    jobs.push({
      id: st.id,
      kind: st.kind,
      status: "cancelled",
      task_id: st.attempts.at(-1)?.taskId ?? null,
      attempts: st.attempts.filter((a) => a.campaign === campaign).length,
      points,
      estimated_points: null,
      fingerprint: st.fingerprint,
      output: null,
      error: {
        code: REMOVED,
        message: open
          ? "no longer in the manifest; its task is still followed to its end"
          : "no longer in the manifest; its task was followed to its end and paid for",
      },
      source: "(removed from the manifest)",
      elapsed_seconds: seconds(elapsedMs(st, campaign, "cancelled", endMs)),
      spent_total: spentTotal(st, campaign),
      ...(flight ? { in_flight: flight } : {}),
    });
  }
}

/** The run's status is about the manifest's jobs (or those of --only), not rows removed from it. */
function runStatus(
  input: ReportInput,
  jobs: readonly ReportJob[],
  planned: ReadonlySet<string>,
): Report["run"]["status"] {
  const selected = input.selected ? new Set(input.selected) : undefined;
  const considered = jobs.filter((j) => (selected ? selected.has(j.id) : planned.has(j.id)));
  return statusOver(considered, input.interrupted);
}
