// Admission: what this run will do and whether the budget allows it, decided on a copy of the
// state with the run's opening records applied. Nothing reaches the journal before the run is
// admitted, so a run refused for its budget (`--fresh` included) leaves the state as it found it.

import { type Job, unfitted } from "../manifest/index.js";
import { outputKey } from "../manifest/outputs.js";
import {
  applyRecord,
  type JobState,
  openAttempt,
  paidNotStored,
  type RunRecord,
  type RunState,
  spentPoints,
} from "../state/run-state.js";
import { versionName } from "../state/versions.js";
import type { PoolStanding } from "./types.js";

export interface StoreEntry {
  bytes: number;
  metadata?: Record<string, string>;
}

export interface BudgetRow {
  what: string;
  points: number;
}

interface AdmitInput {
  /** The journal's state; not changed. */
  state: RunState;
  /** The run's opening records (`run`, one `job` per planned job), in the order they will be written. */
  opening: RunRecord[];
  /**
   * `--fresh`: a new epoch for the jobs selected that this campaign has not regenerated yet (a
   * `--fresh` that did not finish is resumed: what it regenerated stays).
   */
  fresh?: { epoch: string };
  jobs: readonly Job[];
  /** What the store holds for each job (same order as `jobs`); undefined when absent or not asked. */
  stored: ReadonlyArray<StoreEntry | undefined>;
  /** The jobs to work on (`--only`); the rest are left as they are. */
  selected: (job: Job) => boolean;
  retryFailed: boolean;
  maxPoints: number | undefined;
  available: number;
  /** The manifest's shared pool as the coordinator holds it (its open reservations included). */
  pool?: PoolStanding | undefined;
  uri: (key: string) => string;
}

export interface Admission {
  /** Every record to append, in order: the opening ones and what the store was found to hold. */
  records: RunRecord[];
  work: Job[];
  /** Jobs found in the store (reused or collected by another process): for the log. */
  found: Array<{ job: Job; uri: string; skipped: boolean }>;
  /** The cap for the run's ledger: budget left and balance, whichever is lower. */
  cap: number;
  /** Points held by attempts still open (tasks created and not settled). */
  openReserved: number;
  /** The estimate of the new attempts to make (what a shard holds of its run's shared cap). */
  newCost: number;
  /** Present when the run does not fit: the table to show; nothing is to be written. */
  refused?: BudgetRow[];
}

/** The admission being decided: the state with the records so far applied, and what the store held. */
interface Draft {
  input: AdmitInput;
  preview: RunState;
  /** Every record to append, in order. */
  records: RunRecord[];
  found: Admission["found"];
}

/** What a selected job asks of the run: nothing, following what is paid for or open, or a new attempt. */
type Step = "none" | "resume" | "new";

export function admit(input: AdmitInput): Admission {
  const draft = openDraft(input);
  const work: Job[] = [];
  let newCost = 0;
  for (const [index, job] of input.jobs.entries()) {
    if (!input.selected(job)) continue;
    const step = stepFor(draft, job, input.stored[index]);
    if (step === "none") continue;
    work.push(job);
    // A shot still to be timed to its narration is held at the longest it may get.
    if (step === "new") newCost += unfitted(job) ? job.auto.maxPoints : (job.points ?? 0);
  }
  const { spentBefore, openReserved } = heldByRun(draft.preview);
  const { maxPoints, available } = input;
  const cap = Math.min(
    maxPoints === undefined ? Number.POSITIVE_INFINITY : Math.max(0, maxPoints - spentBefore),
    available + openReserved,
  );
  const admission: Admission = {
    records: draft.records,
    work,
    found: draft.found,
    cap,
    openReserved,
    newCost,
  };
  if (newCost + openReserved > cap)
    admission.refused = budgetTable(input, { jobs: work.length, newCost, openReserved, spentBefore, cap });
  else if (input.pool && newCost > input.pool.cap - input.pool.committed)
    admission.refused = poolTable(input.pool, work.length, newCost);
  return admission;
}

/** The opening records applied to a copy of the state, and the `fresh` record when asked. */
function openDraft(input: AdmitInput): Draft {
  const draft: Draft = {
    input,
    preview: structuredClone(input.state),
    records: [...input.opening],
    found: [],
  };
  for (const r of draft.records) applyRecord(draft.preview, r);
  if (input.fresh) {
    const { preview } = draft;
    const jobs = input.jobs
      .filter((job) => input.selected(job) && preview.jobs[job.id]?.freshIn !== preview.campaign)
      .map((job) => job.id);
    if (jobs.length > 0) more(draft, { t: "fresh", epoch: input.fresh.epoch, jobs });
  }
  return draft;
}

/** A record is applied as it is added: the decisions after it see the state it makes. */
function more(draft: Draft, r: RunRecord): void {
  draft.records.push(r);
  applyRecord(draft.preview, r);
}

/**
 * What the run does with a selected job; what the store was found to hold for it is recorded
 * (`stored`, `skip`) and listed in `found` on the way.
 */
function stepFor(draft: Draft, job: Job, entry: StoreEntry | undefined): Step {
  const { input, preview } = draft;
  const st = preview.jobs[job.id] as JobState;
  const meta = entry?.metadata;
  const key = outputKey(job);
  const open = openAttempt(st);
  const inStore = holdsResult(st, job, entry, preview.campaign);
  const output = entry
    ? { uri: input.uri(key), bytes: entry.bytes, sha256: meta?.sha256 ?? "", fingerprint: job.fingerprint }
    : undefined;
  if (inStore && output && st.status === "collecting" && meta?.task === st.attempts.at(-1)?.taskId) {
    // Paid for in this state and stored before the run could record it (a kill after the upload):
    // recorded as produced, not as reused, so its points stay counted.
    more(draft, { t: "stored", id: job.id, output });
    draft.found.push({ job, uri: output.uri, skipped: false });
    return "none";
  }
  if (inStore && output && !open && st.output?.fingerprint !== job.fingerprint) {
    more(draft, { t: "stored", id: job.id, output });
    more(draft, { t: "skip", id: job.id });
    draft.found.push({ job, uri: output.uri, skipped: true });
    return "none";
  }
  if (!open && st.status === "stored" && st.output?.fingerprint === job.fingerprint) {
    const same =
      entry !== undefined &&
      entry.bytes === st.output.bytes &&
      (meta?.fingerprint ?? job.fingerprint) === job.fingerprint;
    if (same) {
      // Found where this run's output puts it, not where it was stored (a project copied or moved
      // whole): the record follows the file, so the reports name this run's own.
      const here = input.uri(key);
      if (st.output.uri !== here) relocate(draft, job.id, st, here);
      const earlier = !st.attempts.some((a) => a.campaign === preview.campaign);
      if (earlier && !st.skipped) {
        more(draft, { t: "skip", id: job.id });
        draft.found.push({ job, uri: st.output.uri, skipped: true });
      }
      return "none";
    }
  }
  // Paid for, its result not stored: fetched again through its task, at no cost, by any run.
  // A new task follows (with --retry-failed) only if it is still not to be had; that one is
  // reserved when it is opened, within the cap, like any other.
  if (!open && paidNotStored(st)) return "resume";
  if ((st.status === "failed" || st.status === "cancelled") && !input.retryFailed && !open) return "none";
  // An attempt still open is resumed, even when the store holds the result: its task exists (or
  // may) and will be charged, so it is followed to its end and settled.
  // A job being collected was paid for already; an open attempt holds its reservation.
  return !open && st.status !== "collecting" ? "new" : "resume";
}

/**
 * The store is the truth where it can say what it holds (S3 metadata): an object made for this
 * very request, with its hash recorded, is the job's result whoever made it; except after a
 * --fresh of this campaign, when only an object made by one of its new attempts will do.
 */
function holdsResult(st: JobState, job: Job, entry: StoreEntry | undefined, campaign: number): boolean {
  const meta = entry?.metadata;
  const made = (task: string | undefined) =>
    task !== undefined && st.attempts.some((a) => a.n >= (st.countFrom ?? 1) && a.taskId === task);
  const fresh = st.freshIn === campaign;
  return (
    entry !== undefined &&
    meta?.fingerprint === job.fingerprint &&
    meta.sha256 !== undefined &&
    (!fresh || made(meta.task))
  );
}

/**
 * A resumed run is the same run: what an earlier process of it spent counts against the budget,
 * and the attempts left open keep their reservations (the service holds them too).
 */
function heldByRun(preview: RunState): { spentBefore: number; openReserved: number } {
  let spentBefore = 0;
  let openReserved = 0;
  for (const st of Object.values(preview.jobs)) {
    for (const a of [...st.attempts, ...(st.previous ?? [])])
      if (a.spent === undefined) openReserved += a.reserved;
    spentBefore += spentPoints(st, preview.campaign);
  }
  return { spentBefore, openReserved };
}

/** The table shown when the run does not fit its budget or the balance. */
function budgetTable(
  input: AdmitInput,
  t: { jobs: number; newCost: number; openReserved: number; spentBefore: number; cap: number },
): BudgetRow[] {
  const { maxPoints, available } = input;
  const table: BudgetRow[] = [{ what: `estimated cost of ${t.jobs} job(s) to do`, points: t.newCost }];
  if (t.openReserved > 0) table.push({ what: "reserved by tasks still running", points: t.openReserved });
  table.push({ what: "available points (service balance)", points: available });
  if (maxPoints !== undefined) table.push({ what: "budget (max_points)", points: maxPoints });
  if (maxPoints !== undefined && t.spentBefore > 0)
    table.push({ what: "already spent in this run", points: t.spentBefore });
  table.push({ what: "short by", points: t.newCost + t.openReserved - t.cap });
  return table;
}

/** The table shown when a shard does not fit what its run's cap has left after the other shards. */
export function shardsTable(
  shards: { total: number; cap: number; committed: number },
  jobs: number,
  newCost: number,
): BudgetRow[] {
  return [
    { what: `estimated cost of ${jobs} job(s) to do in this shard`, points: newCost },
    { what: `budget (max_points), shared by the run's ${shards.total} shards`, points: shards.cap },
    { what: "committed by the shards (reserved and spent)", points: shards.committed },
    { what: "short by", points: newCost - Math.max(0, shards.cap - shards.committed) },
  ];
}

/** The table shown when the run does not fit what its shared pool has left this period. */
function poolTable(pool: PoolStanding, jobs: number, newCost: number): BudgetRow[] {
  const left = Math.max(0, pool.cap - pool.committed);
  return [
    { what: `estimated cost of ${jobs} job(s) to do`, points: newCost },
    {
      what: `pool ${pool.name} (${pool.period === "total" ? "in total" : pool.periodId}): max_points`,
      points: pool.cap,
    },
    { what: `pool ${pool.name}: committed by every run that names it`, points: pool.committed },
    { what: "short by", points: newCost - left },
  ];
}

/** The record that declares a job of the plan, with its fingerprint and estimate. */
export function declaration(job: Job): RunRecord {
  return { t: "job", id: job.id, kind: job.kind, fingerprint: job.fingerprint, estimate: job.points ?? 0 };
}

/** Names a stored output, and its kept versions beside it, where this run's output holds them. */
function relocate(draft: Draft, id: string, st: JobState, here: string): void {
  more(draft, { t: "stored", id, output: { ...(st.output as NonNullable<JobState["output"]>), uri: here } });
  for (const version of st.versions ?? [])
    more(draft, { t: "version", id, version: { ...version, uri: besideOutput(here, version.uri) } });
}

/** A kept version's uri in the folder of the output at `output`. */
function besideOutput(output: string, version: string): string {
  return `${output.slice(0, output.lastIndexOf("/") + 1)}${versionName(version)}`;
}
