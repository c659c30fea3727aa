// The run's state and the journal records that change it. The reducer is the only code that
// mutates state, so replaying the journal after a crash rebuilds exactly what was known.

import { noteTask } from "./task-index.js";
import { type KeptVersion, keepVersion, keptOf } from "./versions.js";

export type JobKind = "video" | "speech";

/** Where a job stands. `stored` is the only success: the result is in the sink, verified. */
export type JobStatus =
  | "pending" // not submitted in this state
  | "submitting" // intent written; the create may or may not have reached the service
  | "running" // the service has the task
  | "collecting" // the task succeeded; the result is being stored
  | "stored"
  | "failed"
  | "cancelled";

export interface Attempt {
  n: number;
  /** The run (campaign) that made it: a report counts only the current campaign's spending. */
  campaign: number;
  key: string;
  /** Points reserved in the run's ledger for this attempt (the estimate). */
  reserved: number;
  /** When the intent was written (ms since the epoch, this machine's clock): a task the service
   * says it created before this moment was not created by this attempt's request (a replay). */
  at?: number;
  taskId?: string;
  /**
   * Its intent promised a `sending` record before every create it sends (journals since that
   * record): without one, no create of it ever left, and none can have made a task.
   */
  announces?: true;
  /** A create of it may have been sent (a `sending` record), its task id not known yet. */
  sending?: true;
  /**
   * The body of that create, kept until its task is known: a row edited or removed since can still
   * send it again with its key and so learn the task it made. Absent when too large to keep.
   */
  body?: unknown;
  /** Last status the service reported. */
  taskStatus?: string;
  /** What the service actually charged; set when the attempt ended. */
  spent?: number;
  /**
   * The campaign that settled it: the report that learns a cost counts it, even for an attempt a
   * finished campaign left open (so every point paid is in some report).
   */
  settledIn?: number;
  /**
   * The Idempotency-Key returned a task created before this attempt's intent (an earlier state, a
   * second machine, an edit reverted): its points were paid where it was first created, not here.
   */
  replayed?: boolean;
  error?: { code: string; message: string };
  /** When the attempt was settled (ms since the epoch, this machine's clock), when recorded. */
  endedAt?: number;
  /**
   * The service gave this attempt's task id to another create too: whose request the task ran
   * cannot be told, so it is followed and paid, never collected, and the job fails with this.
   */
  shared?: { code: string; message: string };
}

interface StoredOutput {
  uri: string;
  bytes: number;
  sha256: string;
  /** Fingerprint of the request that produced it: a re-run reuses the output only if it matches. */
  fingerprint: string;
  /** Video: the resolution the service says it delivered (768P when an upscale fell back). */
  resolution?: string;
  /** The media's length in seconds, as read from the file (a WAV's data over its byte rate). */
  seconds?: number;
  /** When it was stored (ms since the epoch, this machine's clock): the end of the job's time. */
  at?: number;
}

export interface JobState {
  id: string;
  kind: JobKind;
  fingerprint: string;
  estimate: number;
  status: JobStatus;
  attempts: Attempt[];
  output?: StoredOutput;
  error?: { code: string; message: string };
  /** This run reused an earlier result instead of generating one. */
  skipped?: boolean;
  /** Points spent in a campaign by versions of this job that were edited since. */
  carried?: { campaign: number; points: number };
  /**
   * Attempts of edited-away versions that were still open: their tasks are followed to their end
   * and settled (never collected), so no created task is forgotten when a row changes.
   */
  previous?: Attempt[];
  /** The campaign whose `--fresh` regenerated this job: a later `--fresh` of it resumes, not restarts. */
  freshIn?: number;
  /** First attempt number that counts toward `--max-attempts` (after a `--fresh`). */
  countFrom?: number;
  /** Earlier outputs kept when new results replaced them, oldest first. */
  versions?: KeptVersion[];
  /** The version recorded last, its move perhaps not made (a kill): until the new result is stored. */
  keeping?: string;
  /** The output a `--fresh` stopped trusting: still on disk until a new result replaces it. */
  former?: StoredOutput;
}

export interface RunState {
  /** The state's own name: its first run's id, the same for every campaign after it. */
  id?: string;
  run?: {
    id: string;
    name: string;
    manifest: string;
    started_at: string;
    finished_at?: string;
    /** The balance when the run ended, kept so a report written again from state still shows it. */
    balance_after?: number;
    /** Journals written before `fresh` records: a `--fresh` started this campaign. */
    fresh?: boolean;
  };
  /**
   * The manifest this state belongs to (its real path): another manifest with the same name is
   * refused rather than mixed into it.
   */
  manifest_path?: string;
  /**
   * The manifest's path from the state's folder: a project copied or moved whole finds its manifest
   * where this says, whatever the absolute path (see state/locate.ts, checkOwner).
   */
  manifest_rel?: string;
  /**
   * Counts completed runs of this state. A run that is interrupted and resumed stays in one
   * campaign, so its report covers the work of every process that took part.
   */
  campaign: number;
  /**
   * Part of every Idempotency-Key; `--fresh` moves to a new, random epoch so that nothing earlier is
   * replayed (a counter would repeat after the state is deleted).
   */
  epoch: number | string;
  jobs: Record<string, JobState>;
  /** Reference voices uploaded for this run's state, by content hash (+ save name). */
  voices: Record<string, { asset_id?: string; voice_id?: string }>;
  /** Skills synced from the manifest, by name. */
  skills: Record<string, { id: string; sha256: string }>;
  balance_before?: number;
  /** The highest fencing token of a coordinator's lock that wrote here: an older holder may not. */
  fence?: number;
  /**
   * The coordinator's data generation when that token was given: tokens of another generation
   * (the coordinator lost its data and counts from 1 again) are not compared.
   */
  fence_generation?: string;
}

/** How an attempt's end decides the job's fate, written in the same record so a kill cannot split them. */
type Fate = "failed" | "cancelled";

export type RunRecord =
  | {
      t: "run";
      id: string;
      name: string;
      manifest: string;
      started_at: string;
      epoch?: number | string;
      /** Journals before `fresh` records: this run started a fresh campaign. */
      fresh?: boolean;
      manifest_path?: string;
      manifest_rel?: string;
    }
  /**
   * `--fresh`: these jobs are generated again, in a new epoch (so nothing earlier is replayed).
   * Written once per job and campaign: a `--fresh` that did not finish is resumed, not restarted.
   */
  | { t: "fresh"; epoch: string; jobs: string[] }
  | { t: "finish"; finished_at: string; balance_after?: number }
  | { t: "job"; id: string; kind: JobKind; fingerprint: string; estimate: number }
  | { t: "skip"; id: string }
  | {
      t: "intent";
      id: string;
      n: number;
      key: string;
      reserved: number;
      at?: number;
      /** Every create of this attempt is announced by a `sending` record written before it. */
      announces?: true;
    }
  /**
   * A create of this attempt is about to be sent (durable before it leaves), with its body when
   * small enough to keep: the task it makes can be learned by sending it again with its key, even
   * after its row was edited or removed.
   */
  | { t: "sending"; id: string; n: number; body?: unknown }
  /** An intent whose create was never sent: the attempt is taken back, as if never made. */
  | { t: "withdrawn"; id: string; n: number }
  /** The reservation of an open attempt changed (re-priced, or the task's own cost became known). */
  | { t: "reserve"; id: string; n: number; reserved: number }
  /** `previous`: an attempt of an edited-away version, whose task was learned by sending again. */
  | { t: "created"; id: string; n: number; task_id: string; previous?: boolean }
  | { t: "task"; id: string; n: number; status: string }
  /** The attempt's task id was given to another create too (see Attempt.shared). */
  | { t: "shared"; id: string; n: number; task_id: string; error: { code: string; message: string } }
  | {
      t: "settled";
      id: string;
      n: number;
      spent: number;
      error?: { code: string; message: string };
      fate?: Fate;
      replayed?: boolean;
      /** An attempt of an edited-away version (in `previous`): settled, the job itself unchanged. */
      previous?: boolean;
      /** When it was settled (ms since the epoch): the end of the attempt's time in the reports. */
      at?: number;
    }
  | { t: "stored"; id: string; output: StoredOutput }
  /** The stored output set aside as `version.uri` for a new result: durable before the move. */
  | { t: "version"; id: string; version: KeptVersion }
  /**
   * Something keeps the job from going on for now (a task that cannot be read, a result that
   * cannot be stored) without ending it: the job stays where it is, resumable, with this reason.
   */
  | { t: "problem"; id: string; error: { code: string; message: string } }
  | { t: "failed"; id: string; error: { code: string; message: string } }
  | { t: "cancelled"; id: string }
  | { t: "voice"; hash: string; asset_id?: string; voice_id?: string }
  | { t: "skill"; name: string; id: string; sha256: string }
  | { t: "balance"; available: number }
  /** The coordinator's lock was taken with this fencing token (by `holder`) before these records. */
  | { t: "lock"; fence: number; holder: string; generation?: string }
  /**
   * `--repair-state` rebuilt this journal: these lines of the damaged file (kept as `copy`, beside
   * it) were not records. Changes nothing in the state: what they held was written again before it.
   */
  | { t: "repaired"; at: string; lines: number[]; copy: string };

export function initialState(): RunState {
  return { jobs: {}, voices: {}, skills: {}, campaign: 1, epoch: 0 };
}

function attempt(job: JobState | undefined, n: number): Attempt | undefined {
  return job?.attempts.find((a) => a.n === n);
}

type RecordOf<T extends RunRecord["t"]> = Extract<RunRecord, { t: T }>;
type RunLevelRecord = RecordOf<
  "run" | "fresh" | "finish" | "voice" | "skill" | "balance" | "lock" | "repaired"
>;
type AttemptRecord = RecordOf<
  "intent" | "withdrawn" | "reserve" | "sending" | "created" | "task" | "settled" | "shared"
>;
type JobRecord = Exclude<RunRecord, RunLevelRecord | AttemptRecord>;

export function applyRecord(state: RunState, r: RunRecord): void {
  switch (r.t) {
    case "run":
    case "fresh":
    case "finish":
    case "voice":
    case "skill":
    case "balance":
    case "lock":
    case "repaired":
      applyRunRecord(state, r);
      break;
    case "intent":
    case "withdrawn":
    case "reserve":
    case "sending":
    case "created":
    case "task":
    case "settled":
    case "shared":
      applyAttemptRecord(state, r);
      break;
    default:
      applyJobRecord(state, r);
  }
}

/** Records about the run and the account: campaigns, epochs, voices, skills, the balance. */
function applyRunRecord(state: RunState, r: RunLevelRecord): void {
  switch (r.t) {
    case "run":
      applyRunStart(state, r);
      break;
    case "fresh": {
      state.epoch = r.epoch;
      for (const id of r.jobs) {
        const job = state.jobs[id];
        if (job) freshen(job, state.campaign);
      }
      break;
    }
    case "finish":
      if (state.run) {
        state.run.finished_at = r.finished_at;
        if (r.balance_after !== undefined) state.run.balance_after = r.balance_after;
      }
      state.campaign += 1;
      break;
    case "voice":
      state.voices[r.hash] = {
        ...state.voices[r.hash],
        ...(r.asset_id ? { asset_id: r.asset_id } : {}),
        ...(r.voice_id ? { voice_id: r.voice_id } : {}),
      };
      break;
    case "skill":
      state.skills[r.name] = { id: r.id, sha256: r.sha256 };
      break;
    case "balance":
      state.balance_before ??= r.available;
      break;
    case "lock":
      applyFence(state, r);
      break;
    case "repaired":
      break;
  }
}

/** A run starting, or resuming the campaign it belongs to. */
function applyRunStart(state: RunState, r: RecordOf<"run">): void {
  state.id ??= r.id;
  // A resumed run continues the campaign (and its start time); a new one starts it.
  if (!state.run || state.run.finished_at !== undefined) {
    state.run = { id: r.id, name: r.name, manifest: r.manifest, started_at: r.started_at };
    for (const job of Object.values(state.jobs)) job.skipped = false;
    // The balance before belongs to the campaign; a new campaign records its own.
    delete state.balance_before;
  }
  if (r.manifest_path !== undefined) state.manifest_path = r.manifest_path;
  if (r.manifest_rel !== undefined) state.manifest_rel = r.manifest_rel;
  else if (r.manifest_path !== undefined) delete state.manifest_rel;
  if (r.fresh) state.run.fresh = true;
  // Older journals started a fresh run in a new file with only the epoch on its first record.
  if (r.epoch !== undefined) state.epoch = r.epoch;
}

/** The lock's fencing token as the run took it. */
function applyFence(state: RunState, r: RecordOf<"lock">): void {
  // A new generation starts its tokens again; within one, they only grow.
  if (r.generation !== undefined && r.generation !== state.fence_generation) state.fence = r.fence;
  else state.fence = Math.max(state.fence ?? 0, r.fence);
  if (r.generation !== undefined) state.fence_generation = r.generation;
}

/** Records about a job as a whole: its version, and the ends that do not come from an attempt. */
function applyJobRecord(state: RunState, r: JobRecord): void {
  switch (r.t) {
    case "job":
      declareJob(state, r);
      break;
    case "skip": {
      const job = state.jobs[r.id];
      if (job) {
        job.status = "stored";
        job.skipped = true;
      }
      break;
    }
    case "problem": {
      const job = state.jobs[r.id];
      if (job) job.error = r.error;
      break;
    }
    case "stored": {
      const job = state.jobs[r.id];
      if (job) {
        job.output = r.output;
        job.status = "stored";
        delete job.error;
        delete job.keeping;
        delete job.former;
      }
      break;
    }
    case "version": {
      const job = state.jobs[r.id];
      if (job) keepVersion(job, r.version);
      break;
    }
    case "failed": {
      const job = state.jobs[r.id];
      if (job) {
        job.status = "failed";
        job.error = r.error;
      }
      break;
    }
    case "cancelled": {
      const job = state.jobs[r.id];
      if (job) job.status = "cancelled";
      break;
    }
  }
}

function declareJob(state: RunState, r: RecordOf<"job">): void {
  const existing = state.jobs[r.id];
  if (existing && existing.fingerprint === r.fingerprint) {
    existing.estimate = r.estimate;
    return;
  }
  // New, or edited: an edited job starts over (its old output stays recorded until replaced).
  // What its earlier version spent in this campaign stays counted: the points are gone.
  const carried = existing ? spentPoints(existing, state.campaign) : 0;
  // A task still running for the old version is not forgotten: it is followed and settled.
  const open = existing
    ? [...(existing.previous ?? []), ...existing.attempts].filter((a) => a.spent === undefined)
    : [];
  state.jobs[r.id] = {
    id: r.id,
    kind: r.kind,
    fingerprint: r.fingerprint,
    estimate: r.estimate,
    status: "pending",
    attempts: [],
    ...(existing?.output ? { output: existing.output } : {}),
    ...keptOf(existing),
    ...(carried > 0 ? { carried: { campaign: state.campaign, points: carried } } : {}),
    ...(open.length > 0 ? { previous: open } : {}),
  };
}

/** Records of one attempt's life: intent, created, task status, settled (or withdrawn). */
function applyAttemptRecord(state: RunState, r: AttemptRecord): void {
  switch (r.t) {
    case "intent": {
      const job = state.jobs[r.id];
      if (!job) break;
      job.attempts.push({
        n: r.n,
        campaign: state.campaign,
        key: r.key,
        reserved: r.reserved,
        ...(r.at !== undefined ? { at: r.at } : {}),
        ...(r.announces ? { announces: true as const } : {}),
      });
      job.status = "submitting";
      job.skipped = false;
      delete job.error;
      break;
    }
    case "withdrawn":
      withdrawAttempt(state, r);
      break;
    case "reserve": {
      const a = attempt(state.jobs[r.id], r.n);
      if (a && a.spent === undefined) a.reserved = r.reserved;
      break;
    }
    case "sending":
      markSending(state, r);
      break;
    case "created":
      applyCreated(state, r);
      break;
    case "task": {
      const a = attempt(state.jobs[r.id], r.n);
      if (a) a.taskStatus = r.status;
      // A status read again means whatever kept the task from being followed is over.
      const job = state.jobs[r.id];
      if (job && job.status === "running") delete job.error;
      break;
    }
    case "settled":
      settleAttempt(state, r);
      break;
    case "shared": {
      const job = state.jobs[r.id];
      const a = [...(job?.attempts ?? []), ...(job?.previous ?? [])].find(
        (x) => x.n === r.n && x.taskId === r.task_id,
      );
      if (a) a.shared = r.error;
      break;
    }
  }
}

function withdrawAttempt(state: RunState, r: RecordOf<"withdrawn">): void {
  const job = state.jobs[r.id];
  const last = job?.attempts.at(-1);
  // Only an open attempt without a task can be taken back: a created task is never forgotten.
  if (job && last && last.n === r.n && last.spent === undefined && last.taskId === undefined) {
    job.attempts.pop();
    job.status = "pending";
  }
}

/** A create about to leave, with the body it sends (kept to learn its task if the answer is lost). */
function markSending(state: RunState, r: RecordOf<"sending">): void {
  const a = attempt(state.jobs[r.id], r.n);
  if (a && a.spent === undefined && a.taskId === undefined) {
    a.sending = true;
    if (r.body !== undefined) a.body = r.body;
    else delete a.body;
  }
}

/** An attempt's task is known: of this version's attempt, or of an open one of an earlier version. */
function applyCreated(state: RunState, r: RecordOf<"created">): void {
  const job = state.jobs[r.id];
  const a = r.previous ? job?.previous?.find((p) => p.n === r.n && p.spent === undefined) : attempt(job, r.n);
  if (a) {
    a.taskId = r.task_id;
    noteTask(state, r.id, a);
    // The task is known: what was sent to learn it is needed no more.
    delete a.body;
  }
  if (r.previous) return;
  if (job && job.status === "submitting") job.status = "running";
}

function settleAttempt(state: RunState, r: RecordOf<"settled">): void {
  const job = state.jobs[r.id];
  const a = r.previous ? job?.previous?.find((p) => p.n === r.n && p.spent === undefined) : attempt(job, r.n);
  // An attempt ends once: a second settlement (a record written again) never rewrites what it cost.
  if (a && a.spent !== undefined) return;
  if (a) {
    a.spent = r.spent;
    a.settledIn = state.campaign;
    delete a.body;
    if (r.error) a.error = r.error;
    if (r.replayed) a.replayed = true;
    if (r.at !== undefined) a.endedAt = r.at;
  }
  if (!job || r.previous) return;
  if (r.fate) {
    job.status = r.fate;
    if (r.error) job.error = r.error;
    return;
  }
  // An attempt that ended in error leaves the job to be retried, failed or resumed by the runner.
  job.status = !r.error && a?.taskStatus === "succeeded" ? "collecting" : "pending";
}

/**
 * `--fresh`: the job is generated again. What is in flight (an open attempt, a paid result not yet
 * stored) is kept: it is new work already paid for, and forgetting it would pay for it twice.
 */
function freshen(job: JobState, campaign: number): void {
  job.freshIn = campaign;
  if (openAttempt(job) || job.status === "collecting") return;
  job.status = "pending";
  job.skipped = false;
  // Attempts made before count no more toward --max-attempts: this is a new generation.
  job.countFrom = job.attempts.length + 1;
  // Not trusted as this job's result any more, yet still the file a new result replaces.
  if (job.output) job.former = job.output;
  delete job.output;
  delete job.error;
}

/** Points an attempt cost this state's account: nothing for a replay, paid where it was created. */
export function attemptCost(a: Attempt): number {
  return a.replayed ? 0 : (a.spent ?? 0);
}

/** The campaign an attempt's cost belongs to: the one that settled it. */
export function paidIn(a: Attempt): number {
  return a.settledIn ?? a.campaign;
}

/** What the job cost in this campaign: its attempts that ended, and earlier versions' spending. */
export function spentPoints(job: JobState, campaign: number): number {
  let own = 0;
  for (const a of job.attempts) if (paidIn(a) === campaign) own += attemptCost(a);
  for (const a of job.previous ?? [])
    if (a.spent !== undefined && paidIn(a) === campaign) own += attemptCost(a);
  return own + (job.carried?.campaign === campaign ? job.carried.points : 0);
}

/** The attempt that is still open (intent written, not settled), if any. */
export function openAttempt(job: JobState): Attempt | undefined {
  const last = job.attempts.at(-1);
  return last && last.spent === undefined ? last : undefined;
}

/**
 * A failed job whose task succeeded and was paid for, its result never stored (the download was
 * refused, or what came was broken or cut short): the next run downloads it again through its
 * task, at no cost, before --retry-failed would pay for a new one. Not a job whose attempt ended in
 * error (a task id another job held: its result cannot be told to be this job's).
 */
export function paidNotStored(st: JobState): boolean {
  const last = st.attempts.at(-1);
  return (
    st.status === "failed" &&
    last?.taskId !== undefined &&
    last.spent !== undefined &&
    last.error === undefined &&
    last.shared === undefined &&
    last.taskStatus === "succeeded"
  );
}
