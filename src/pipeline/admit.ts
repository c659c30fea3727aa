// Admission: what this run will do and whether the budget allows it, decided on a copy of the
// state with the run's opening records applied. Nothing reaches the journal before the run is
// admitted, so a run refused for its budget (`--fresh` included) leaves the state as it found it.

import {
  applyRecord,
  type JobState,
  openAttempt,
  type RunRecord,
  type RunState,
  spentPoints,
} from "../engine/state.js";
import type { Job } from "../manifest/index.js";
import { outputKey } from "../manifest/outputs.js";

export interface StoreEntry {
  bytes: number;
  metadata?: Record<string, string>;
}

export interface BudgetRow {
  what: string;
  points: number;
}

export interface AdmitInput {
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
  /** Present when the run does not fit: the table to show; nothing is to be written. */
  refused?: BudgetRow[];
}

export function admit(input: AdmitInput): Admission {
  const preview = structuredClone(input.state);
  const records = [...input.opening];
  for (const r of records) applyRecord(preview, r);
  const more = (r: RunRecord) => {
    records.push(r);
    applyRecord(preview, r);
  };
  if (input.fresh) {
    const jobs = input.jobs
      .filter((job) => input.selected(job) && preview.jobs[job.id]?.freshIn !== preview.campaign)
      .map((job) => job.id);
    if (jobs.length > 0) more({ t: "fresh", epoch: input.fresh.epoch, jobs });
  }

  const work: Job[] = [];
  const found: Admission["found"] = [];
  let newCost = 0;
  for (const [index, job] of input.jobs.entries()) {
    if (!input.selected(job)) continue;
    const st = preview.jobs[job.id] as JobState;
    const entry = input.stored[index];
    const meta = entry?.metadata;
    const key = outputKey(job);
    const open = openAttempt(st);
    // The store is the truth where it can say what it holds (S3 metadata): an object made for this
    // very request, with its hash recorded, is the job's result whoever made it; except after a
    // --fresh of this campaign, when only an object made by one of its new attempts will do.
    const made = (task: string | undefined) =>
      task !== undefined && st.attempts.some((a) => a.n >= (st.countFrom ?? 1) && a.taskId === task);
    const fresh = st.freshIn === preview.campaign;
    const inStore =
      entry !== undefined &&
      meta?.fingerprint === job.fingerprint &&
      meta.sha256 !== undefined &&
      (!fresh || made(meta.task));
    const output = entry
      ? { uri: input.uri(key), bytes: entry.bytes, sha256: meta?.sha256 ?? "", fingerprint: job.fingerprint }
      : undefined;
    if (inStore && output && st.status === "collecting" && meta?.task === st.attempts.at(-1)?.taskId) {
      // Paid for in this state and stored before the run could record it (a kill after the upload):
      // recorded as produced, not as reused, so its points stay counted.
      more({ t: "stored", id: job.id, output });
      found.push({ job, uri: output.uri, skipped: false });
      continue;
    }
    if (inStore && output && !open && st.output?.fingerprint !== job.fingerprint) {
      more({ t: "stored", id: job.id, output });
      more({ t: "skip", id: job.id });
      found.push({ job, uri: output.uri, skipped: true });
      continue;
    }
    if (!open && st.status === "stored" && st.output?.fingerprint === job.fingerprint) {
      const same =
        entry !== undefined &&
        entry.bytes === st.output.bytes &&
        (meta?.fingerprint ?? job.fingerprint) === job.fingerprint;
      if (same) {
        const earlier = !st.attempts.some((a) => a.campaign === preview.campaign);
        if (earlier && !st.skipped) {
          more({ t: "skip", id: job.id });
          found.push({ job, uri: st.output.uri, skipped: true });
        }
        continue;
      }
    }
    if ((st.status === "failed" || st.status === "cancelled") && !input.retryFailed && !open) continue;
    // An attempt still open is resumed, even when the store holds the result: its task exists (or
    // may) and will be charged, so it is followed to its end and settled.
    work.push(job);
    // A job being collected was paid for already; an open attempt holds its reservation.
    if (!open && st.status !== "collecting") newCost += job.points ?? 0;
  }

  // A resumed run is the same run: what an earlier process of it spent counts against the budget,
  // and the attempts left open keep their reservations (the service holds them too).
  let spentBefore = 0;
  let openReserved = 0;
  for (const st of Object.values(preview.jobs)) {
    for (const a of [...st.attempts, ...(st.previous ?? [])])
      if (a.spent === undefined) openReserved += a.reserved;
    spentBefore += spentPoints(st, preview.campaign);
  }
  const { maxPoints, available } = input;
  const cap = Math.min(
    maxPoints === undefined ? Number.POSITIVE_INFINITY : Math.max(0, maxPoints - spentBefore),
    available + openReserved,
  );
  const admission: Admission = { records, work, found, cap, openReserved };
  if (newCost + openReserved > cap) {
    const table: BudgetRow[] = [{ what: `estimated cost of ${work.length} job(s) to do`, points: newCost }];
    if (openReserved > 0) table.push({ what: "reserved by tasks still running", points: openReserved });
    table.push({ what: "available points (service balance)", points: available });
    if (maxPoints !== undefined) table.push({ what: "budget (max_points)", points: maxPoints });
    if (maxPoints !== undefined && spentBefore > 0)
      table.push({ what: "already spent in this run", points: spentBefore });
    table.push({ what: "short by", points: newCost + openReserved - cap });
    admission.refused = table;
  }
  return admission;
}
