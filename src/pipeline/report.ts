// The run report, built from the journal's state: report.json (the contract of BRIEF.md, plus a
// few fields), report.md for people, junit.xml for CI, a summary for GitHub's step summary, and
// report.html, the storyboard with its media (review-page.ts).
// Text from the services (error messages, resolutions) reaches all of them: the reports are
// redacted, and junit.xml and the markdown carry no control character.
import { createHash } from "node:crypto";
import { appendFile, readFile } from "node:fs/promises";
import { redact, redactDeep } from "../api/redact.js";
import { UPSCALE_TIERS } from "../api/video.js";
import {
  attemptCost,
  type JobState,
  openAttempt,
  paidIn,
  paidNotStored,
  type RunState,
  spentPoints,
} from "../engine/state.js";
import { type Job, MAX_SHOT_S, overrun, type VideoJob } from "../manifest/index.js";
import type { Sink } from "../sinks/sink.js";
import { mediaLinks, renderReviewPage } from "./review-page.js";

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

export interface ReportInput {
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

const REMOVED = "removed_from_manifest";

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
export function resolutionWarning(requested: string, delivered: string): string {
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
  const hasOutput = (status === "succeeded" || status === "skipped") && st?.output !== undefined;
  const delivered =
    hasOutput && st?.output?.resolution !== undefined ? short(st.output.resolution) : undefined;
  const requested = planned.kind === "video" ? planned.tier : undefined;
  const warnings =
    requested !== undefined && delivered !== undefined && delivered !== requested
      ? [resolutionWarning(requested, delivered)]
      : [];
  const long = planned.kind === "video" ? narrationTooLong(planned) : undefined;
  if (long) warnings.push(long);
  const flight = st ? inFlight(st) : undefined;
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
    output:
      hasOutput && st?.output
        ? {
            uri: st.output.uri,
            bytes: st.output.bytes,
            sha256: st.output.sha256,
            ...(delivered !== undefined ? { resolution: delivered } : {}),
          }
        : null,
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
    ...(st && editedSince(st, planned) ? { edited: true as const } : {}),
    ...(flight ? { in_flight: flight } : {}),
    ...(st && paidNotStored(st) ? { paid_not_stored: true as const } : {}),
  };
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

// ---------------------------------------------------------------------------------------------
// what the run's status is about, and what did not succeed
// ---------------------------------------------------------------------------------------------

/** Whether the run's status (and exit code) is about this job: not a removed row, not outside `--only`. */
function inScope(j: ReportJob, only: ReadonlySet<string> | undefined): boolean {
  if (only) return only.has(j.id);
  return !(j.status === "cancelled" && j.error?.code === REMOVED);
}

/** The jobs the run is about that did not succeed: failed first, then cancelled, then unfinished. */
export function unsuccessful(report: Report): ReportJob[] {
  const only = report.run.only ? new Set(report.run.only) : undefined;
  const of = (s: ReportJobStatus) => report.jobs.filter((j) => j.status === s && inScope(j, only));
  return [...of("failed"), ...of("cancelled"), ...of("pending")];
}

/** The job's status word, with where an unfinished job stands. */
function statusText(j: ReportJob): string {
  return j.status === "pending" && j.stage && j.stage !== "pending" ? `pending (${j.stage})` : j.status;
}

/** `1 job`, `2 jobs`: a count with its noun. */
export function plural(n: number, noun: string, nouns = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : nouns}`;
}

/**
 * The counts in the words every summary uses (the run's end, report.md, the review page, the
 * live line): generated (made in this run: `succeeded`), reused (`skipped`), failed, cancelled,
 * pending.
 */
export function countsText(c: Report["counts"]): string {
  return `${plural(c.total, "job")}: ${c.succeeded} generated, ${c.skipped} reused, ${c.failed} failed, ${c.cancelled} cancelled, ${c.pending} pending`;
}

/** The request id a service error message carries (`... (request req_123)`), if any. */
function requestIdOf(message: string | undefined): string | undefined {
  return message ? /\(request ([^\s()]+)\)/.exec(message)?.[1] : undefined;
}

// ---------------------------------------------------------------------------------------------
// text that is safe in XML and markdown
// ---------------------------------------------------------------------------------------------

/**
 * `text` without control characters: C0 (tab, line feed and carriage return kept when
 * `keepSpace`), DEL and C1, lone surrogates and U+FFFE/U+FFFF, none of which XML 1.0 allows
 * or recommends, and which a terminal showing report.md would obey. The result is redacted again:
 * a control character inside a secret must not hide it from the redaction.
 */
export function stripControls(text: string, keepSpace = true): string {
  let out = "";
  let changed = false;
  for (const ch of text) {
    const c = ch.codePointAt(0) as number;
    const bad =
      c < 0x20
        ? !(keepSpace && (c === 0x09 || c === 0x0a || c === 0x0d))
        : (c >= 0x7f && c <= 0x9f) || (c >= 0xd800 && c <= 0xdfff) || c === 0xfffe || c === 0xffff;
    if (bad) changed = true;
    else out += ch;
  }
  return changed ? redact(out) : text;
}

const XML_TEXT: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;" };
const XML_ATTR: Record<string, string> = {
  ...XML_TEXT,
  '"': "&quot;",
  "'": "&apos;",
  "\n": "&#10;",
  "\t": "&#9;",
};

/** Character data: control characters stripped, markup escaped. */
function xmlText(text: string): string {
  return stripControls(text).replace(/[&<>\r]/g, (c) => XML_TEXT[c] ?? c);
}

/** An attribute value: as text, and quotes and whitespace as references (kept through normalization). */
function xmlAttr(text: string): string {
  return stripControls(text).replace(/[&<>"'\r\n\t]/g, (c) => XML_ATTR[c] ?? c);
}

/** A markdown table cell or inline text: one line, no control character, no table or tag break. */
function md(text: string): string {
  return stripControls(text)
    .replace(/\r\n|[\r\n\t]/g, " ")
    .replace(/[\\|<`]/g, (c) => `\\${c}`);
}

/** Inline code: one line, no control character; fenced with two backticks when it holds one. */
function code(text: string): string {
  const line = stripControls(text).replace(/\r\n|[\r\n\t]/g, " ");
  return line.includes("`") ? `\`\` ${line} \`\`` : `\`${line}\``;
}

// ---------------------------------------------------------------------------------------------
// junit.xml
// ---------------------------------------------------------------------------------------------

type Verdict =
  | { as: "passed" }
  | { as: "failure" | "error" | "skipped"; type?: string; message: string; body?: string };

function details(report: Report, j: ReportJob): string {
  const requestId = requestIdOf(j.error?.message);
  return [
    `job: ${j.id} (${j.source})`,
    `status: ${statusText(j)}`,
    `task: ${j.task_id ?? "none"}`,
    `attempts: ${j.attempts}`,
    ...(j.error ? [`error: ${j.error.code}: ${j.error.message}`] : []),
    ...(requestId ? [`request: ${requestId}`] : []),
    ...(j.status === "pending"
      ? [`run ${report.run.status}${report.run.stopped_by ? ` (stopped by ${report.run.stopped_by})` : ""}`]
      : []),
  ].join("\n");
}

function verdictOf(report: Report, j: ReportJob, only: ReadonlySet<string> | undefined): Verdict {
  if (j.status === "succeeded" || j.status === "skipped") return { as: "passed" };
  if (!inScope(j, only)) {
    // Not what this run was about, so not what its exit code says: listed, not judged.
    return j.error?.code === REMOVED
      ? { as: "skipped", message: j.error.message }
      : { as: "skipped", message: `not selected by --only; ${statusText(j)}` };
  }
  if (j.status === "failed" || j.status === "cancelled") {
    return {
      as: "failure",
      type: j.error?.code ?? j.status,
      message: j.error?.message ?? j.status,
      body: details(report, j),
    };
  }
  // Unfinished: an interrupted run, or one that stopped submitting. Not done is not a pass.
  return {
    as: "error",
    type: "unfinished",
    message: `not finished in this run (${j.stage ?? "pending"})${j.error ? `: ${j.error.code}: ${j.error.message}` : ""}`,
    body: details(report, j),
  };
}

const time = (ms: number) => (ms / 1000).toFixed(3);

/**
 * One test case per job, so CI shows each shot and line, with the seconds it took. A failed or
 * cancelled job is a `<failure>` and an unfinished one an `<error>`, each with the task, attempts,
 * error and request id in its body; a reused job passes, with the property `reused`; a video
 * delivered at another resolution passes, with a `warning` property. The suite's counts and time
 * are those of its cases.
 */
export function junitXml(report: Report): string {
  const only = report.run.only ? new Set(report.run.only) : undefined;
  const tally = { failures: 0, errors: 0, skipped: 0, ms: 0 };
  const cases = report.jobs.map((j) => {
    const ms = Math.round(j.elapsed_seconds * 1000);
    tally.ms += ms;
    const verdict = verdictOf(report, j, only);
    const props: Array<[string, string]> = [];
    if (j.status === "skipped") props.push(["reused", "true"]);
    for (const w of j.warnings ?? []) props.push(["warning", w]);
    const inner: string[] = [];
    if (props.length > 0) {
      inner.push("      <properties>");
      for (const [name, value] of props)
        inner.push(`        <property name="${xmlAttr(name)}" value="${xmlAttr(value)}"/>`);
      inner.push("      </properties>");
    }
    if (verdict.as !== "passed") {
      if (verdict.as === "failure") tally.failures += 1;
      else if (verdict.as === "error") tally.errors += 1;
      else tally.skipped += 1;
      const attrs = `${verdict.type !== undefined ? ` type="${xmlAttr(verdict.type)}"` : ""} message="${xmlAttr(verdict.message)}"`;
      inner.push(
        verdict.body !== undefined
          ? `      <${verdict.as}${attrs}>${xmlText(verdict.body)}</${verdict.as}>`
          : `      <${verdict.as}${attrs}/>`,
      );
    }
    const open = `    <testcase classname="${xmlAttr(`${report.run.name}.${j.kind}`)}" name="${xmlAttr(j.id)}" time="${time(ms)}"`;
    return inner.length > 0 ? `${open}>\n${inner.join("\n")}\n    </testcase>` : `${open}/>`;
  });
  const counts = `tests="${report.jobs.length}" failures="${tally.failures}" skipped="${tally.skipped}" errors="${tally.errors}" time="${time(tally.ms)}"`;
  const suiteProps: Array<[string, string]> = [
    ["run_id", report.run.id],
    ["status", report.run.status],
    ["points_spent", String(report.points.spent)],
    ...(report.run.stopped_by ? [["stopped_by", report.run.stopped_by] as [string, string]] : []),
    ...(report.run.stop_message ? [["stop_message", report.run.stop_message] as [string, string]] : []),
  ];
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="clapper" ${counts}>`,
    `  <testsuite name="${xmlAttr(report.run.name)}" ${counts} timestamp="${xmlAttr(report.run.started_at)}">`,
    "    <properties>",
    ...suiteProps.map(([n, v]) => `      <property name="${xmlAttr(n)}" value="${xmlAttr(v)}"/>`),
    "    </properties>",
    ...cases,
    "  </testsuite>",
    "</testsuites>",
    "",
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------
// report.md and the step summary: what did not succeed first, then the totals
// ---------------------------------------------------------------------------------------------

/** Rows of the step summary's list of jobs that did not succeed; report.md lists them all. */
const SUMMARY_ROWS = 50;

function stopLine(report: Report): string[] {
  if (!report.run.stopped_by && !report.run.stop_message) return [];
  const by = report.run.stopped_by ? `Stopped by **${md(report.run.stopped_by)}**` : "Stopped";
  return [`${by}${report.run.stop_message ? `: ${md(report.run.stop_message)}` : "."}`, ""];
}

function totals(report: Report): string[] {
  const p = report.points;
  return [
    `${countsText(report.counts)}.`,
    `Points: ${p.spent} spent of ${p.estimated} estimated${p.balance_before !== null ? `; balance ${p.balance_before} before` : ""}${p.balance_after !== null ? `, ${p.balance_after} after` : ""}.`,
  ];
}

function errorText(j: ReportJob): string {
  return j.error ? md(`${j.error.code}: ${j.error.message}`) : "";
}

function problemTable(jobs: readonly ReportJob[], limit: number): string[] {
  if (jobs.length === 0) return [];
  const shown = jobs.slice(0, limit);
  return [
    "| job | status | attempts | task | error |",
    "| --- | --- | ---: | --- | --- |",
    ...shown.map(
      (j) => `| ${md(j.id)} | ${statusText(j)} | ${j.attempts} | ${md(j.task_id ?? "")} | ${errorText(j)} |`,
    ),
    ...(jobs.length > shown.length ? ["", `… and ${jobs.length - shown.length} more: see report.md.`] : []),
    "",
  ];
}

function warningItems(report: Report): string[] {
  return report.jobs.flatMap((j) => (j.warnings ?? []).map((w) => `- ${md(j.id)}: ${md(w)}`));
}

function warningList(all: readonly string[], limit: number): string[] {
  if (all.length === 0) return [];
  return [
    ...all.slice(0, limit),
    ...(all.length > limit ? [`- … and ${all.length - limit} more: see report.md.`] : []),
    "",
  ];
}

export function summaryMarkdown(report: Report): string {
  const bad = unsuccessful(report);
  const warnings = warningList(warningItems(report), SUMMARY_ROWS);
  return [
    `### clapper run ${md(report.run.name)}: ${report.run.status}`,
    "",
    ...stopLine(report),
    ...(bad.length > 0
      ? [`**${plural(bad.length, "job")} did not succeed:**`, "", ...problemTable(bad, SUMMARY_ROWS)]
      : []),
    ...totals(report),
    "",
    ...(warnings.length > 0 ? ["**Warnings:**", "", ...warnings] : []),
  ].join("\n");
}

function resolutionCell(j: ReportJob): string {
  if (!j.requested_resolution) return "";
  const delivered = j.output?.resolution;
  if (delivered === undefined || delivered === j.requested_resolution) return md(j.requested_resolution);
  return md(`${j.requested_resolution} asked, ${delivered} delivered`);
}

export function reportMarkdown(report: Report): string {
  const bad = unsuccessful(report);
  const items = warningItems(report);
  const rows = report.jobs.map(
    (j) =>
      `| ${md(j.id)} | ${j.kind} | ${j.status}${j.edited ? " (edited)" : ""} | ${j.points} | ${j.spent_total ?? j.points} | ${j.estimated_points ?? "?"} | ${j.attempts} | ${j.elapsed_seconds.toFixed(1)} | ${resolutionCell(j)} | ${j.output ? md(j.output.uri) : ""} | ${errorText(j)} |`,
  );
  return [
    `# clapper report: ${md(report.run.name)}`,
    "",
    `Manifest ${code(report.run.manifest)}, started ${md(report.run.started_at)}, ${report.run.finished_at ? `finished ${md(report.run.finished_at)}` : "not finished"}; status **${report.run.status}**.`,
    "",
    ...stopLine(report),
    ...(report.note ? [`Note: ${md(report.note)}`, ""] : []),
    ...(bad.length > 0 ? [`## Did not succeed (${bad.length})`, "", ...problemTable(bad, bad.length)] : []),
    "## Totals",
    "",
    ...totals(report),
    "",
    ...(items.length > 0 ? [`## Warnings (${items.length})`, "", ...warningList(items, items.length)] : []),
    ...shardLines(report),
    "## Jobs",
    "",
    "| job | kind | status | points | in all | estimated | attempts | seconds | resolution | output | error |",
    "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ...rows,
    "",
  ].join("\n");
}

/** The merged report's shards, one row each. */
function shardLines(report: Report): string[] {
  const shards = report.shards;
  if (!shards || shards.length === 0) return [];
  return [
    `## Shards (${shards.length})`,
    "",
    "| shard | status | jobs | succeeded | failed | pending | points | started | finished |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ...shards.map(
      (s) =>
        `| ${s.index}/${s.total} | ${s.status} | ${s.counts?.total ?? ""} | ${s.counts ? s.counts.succeeded + s.counts.skipped : ""} | ${s.counts?.failed ?? ""} | ${s.counts?.pending ?? ""} | ${s.points?.spent ?? ""} | ${md(s.started_at ?? "")} | ${md(s.finished_at ?? "")} |`,
    ),
    "",
  ];
}

// ---------------------------------------------------------------------------------------------
// writing them
// ---------------------------------------------------------------------------------------------

export interface WriteReportsOptions {
  /**
   * Append the summary to `$GITHUB_STEP_SUMMARY` when it is set. Default true: the run writes it.
   * `clapper report` passes false: each step of a GitHub job has its own summary file, all shown
   * together, so a report written again in a later step would show the run twice.
   */
  stepSummary?: boolean;
  /** Where in the sink: `reports` (default), `reports/shards/I-of-N` for a shard. */
  folder?: string;
  /**
   * The manifest's jobs: report.html shows what they asked for (prompt, text, voice, shot, take)
   * beside what the report says became of them. Without them the page lists the report's rows.
   */
  jobs?: readonly Job[];
}

/** The reports' folder in the sink: a shard's go to `reports/shards/I-of-N`. */
export function reportsFolder(shard?: { index: number; total: number }): string {
  return shard ? `reports/shards/${shard.index}-of-${shard.total}` : "reports";
}

/** The marker that makes one run's summary, with these results, appear once in a summary file. */
function summaryMarker(report: Report): string {
  const key = JSON.stringify([report.run.id, report.run.finished_at, report.counts, report.points.spent]);
  return `<!-- clapper-summary ${createHash("sha256").update(key).digest("hex").slice(0, 24)} -->`;
}

/**
 * Appends the summary to the step summary file at `path`, unless this file holds it already (the
 * same run with the same results: `clapper report` after the run in one step, or twice).
 * Returns whether it appended.
 */
export async function appendStepSummary(path: string, report: Report): Promise<boolean> {
  const marker = summaryMarker(report);
  const existing = await readFile(path, "utf8").catch(() => "");
  if (existing.includes(marker)) return false;
  await appendFile(path, `${marker}\n${summaryMarkdown(report)}`);
  return true;
}

/** Writes the four reports beside the outputs, and the summary for GitHub Actions when asked. */
export async function writeReports(
  sink: Sink,
  report: Report,
  env: NodeJS.ProcessEnv,
  options: WriteReportsOptions = {},
): Promise<string[]> {
  const folder = options.folder ?? "reports";
  const uris = [
    await sink.writeText(`${folder}/report.json`, `${JSON.stringify(report, null, 2)}\n`, "application/json"),
    await sink.writeText(`${folder}/report.md`, reportMarkdown(report), "text/markdown"),
    await sink.writeText(`${folder}/junit.xml`, junitXml(report), "application/xml"),
  ];
  const { links, expiresAt } = await mediaLinks(sink, report, folder);
  const page = renderReviewPage({ report, jobs: options.jobs ?? [], links, linksExpireAt: expiresAt });
  uris.push(await sink.writeText(`${folder}/report.html`, page, "text/html; charset=utf-8"));
  if (env.GITHUB_STEP_SUMMARY && options.stepSummary !== false)
    await appendStepSummary(env.GITHUB_STEP_SUMMARY, report);
  return uris;
}
