// Rebuilding a damaged journal (`clapper run --repair-state`). Lines that are not records are
// dropped; what they held is rebuilt from the lines around them where a later record proves it:
// - a record of an attempt whose intent was lost: the intent, with the attempt's own
//   Idempotency-Key (it is derived, not random), so a create sent again is answered with the task
//   that key made, never a second one;
// - a record of a job whose declaration was lost: the declaration, from the manifest;
// - a result stored for an attempt whose settlement was lost: the settlement, at what was reserved
//   for it (the task's own cost once known, the base price when an upscale fell back).
// Whatever else a lost line said is found again by the run: a lost task id by sending the create
// again with its key, a lost status by looking at the task, a lost result by downloading it again.
// The only lines that cannot be rebuilt are a snapshot (the whole state before it) and the run's
// first record when it cannot be told what it was: then the repair refuses rather than guess.
import { createHash } from "node:crypto";
import { copyFile, open, readFile, rename } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { JournalDamagedError, journalLines } from "./journal.js";
import { applyRecord, initialState, type JobKind, type RunRecord, type RunState } from "./state.js";

/** What the manifest says of a job, to declare it again. */
export interface RepairJob {
  kind: JobKind;
  fingerprint: string;
  estimate: number;
  /** Video with an upscale: what it costs when the upscale falls back to 768P. */
  fallbackPoints?: number;
}

export interface RepairInput {
  jobs: ReadonlyMap<string, RepairJob>;
  /** The Idempotency-Key of an attempt (the run's own derivation). */
  keyOf: (epoch: number | string, jobId: string, fingerprint: string, n: number) => string;
  /** Told what was done, when the journal was damaged and has been repaired. */
  onRepaired?: (repaired: Repaired & { copy: string }) => void;
}

export interface Repaired {
  records: Array<RunRecord | { t: "snapshot"; state: RunState }>;
  /** Line numbers (1-based) that were not records. */
  dropped: number[];
  /** What was written again, one phrase each: "the intent of shot/s01 attempt 1". */
  rebuilt: string[];
}

/** The damage cannot be repaired without guessing what was paid for. */
export class UnrepairableStateError extends Error {
  override name = "UnrepairableStateError";
}

type AttemptRecord = Extract<
  RunRecord,
  { t: "intent" | "withdrawn" | "reserve" | "sending" | "created" | "task" | "settled" }
>;
const ATTEMPT = new Set(["withdrawn", "reserve", "sending", "created", "task", "settled"]);
const OF_A_JOB = new Set([
  "intent",
  "skip",
  "problem",
  "stored",
  "failed",
  "cancelled",
  "shared",
  ...ATTEMPT,
]);

export function repairRecords(text: string, input: RepairInput): Repaired {
  const { lines } = journalLines<RunRecord | { t: "snapshot"; state: RunState }>(text);
  let state = initialState();
  const out: Repaired = { records: [], dropped: [], rebuilt: [] };
  const push = (r: RunRecord) => {
    applyRecord(state, r);
    out.records.push(r);
  };
  for (const [index, line] of lines.entries()) {
    const r = line.record;
    if (r === undefined) {
      if (
        /^\s*\{\s*"t"\s*:\s*"snapshot"/.test(line.text) ||
        (index === 0 && !/^\s*\{\s*"t"\s*:\s*"run"/.test(line.text))
      ) {
        throw new UnrepairableStateError(
          `line ${line.n} held ${index === 0 ? "the start of the state (a snapshot of everything before it, or the run's first record)" : "a snapshot of the whole state"}: without it what was created and paid for cannot be rebuilt`,
        );
      }
      out.dropped.push(line.n);
      continue;
    }
    if (r.t === "snapshot") {
      state = structuredClone(r.state);
      out.records.push(r);
      continue;
    }
    if (OF_A_JOB.has(r.t)) heal(state, r as AttemptRecord, input, push, out.rebuilt);
    push(r);
  }
  return out;
}

/** Writes again, before `r`, what `r` proves existed: its job's declaration, its attempt's intent or settlement. */
function heal(
  state: RunState,
  r: AttemptRecord | Extract<RunRecord, { t: "skip" | "problem" | "stored" | "failed" | "cancelled" }>,
  input: RepairInput,
  push: (r: RunRecord) => void,
  rebuilt: string[],
): void {
  const known = input.jobs.get(r.id);
  if (!state.jobs[r.id] && known) {
    push({ t: "job", id: r.id, kind: known.kind, fingerprint: known.fingerprint, estimate: known.estimate });
    rebuilt.push(`the declaration of ${r.id}`);
  }
  const job = state.jobs[r.id];
  if (!job) return;
  if (ATTEMPT.has(r.t) && r.t !== "withdrawn" && !("previous" in r && r.previous)) {
    const n = (r as AttemptRecord).n;
    const last = job.attempts.at(-1)?.n ?? 0;
    // Only the next attempt can have had its intent lost: an older one's records would follow it.
    if (n === last + 1) {
      push({
        t: "intent",
        id: r.id,
        n,
        key: input.keyOf(state.epoch, r.id, job.fingerprint, n),
        reserved: r.t === "reserve" ? r.reserved : job.estimate,
        announces: true,
      });
      rebuilt.push(`the intent of ${r.id} attempt ${n}`);
    }
  }
  if (r.t === "stored") {
    const last = job.attempts.at(-1);
    if (last?.taskId !== undefined && last.spent === undefined) {
      const fellBack = known?.fallbackPoints !== undefined && r.output.resolution === "768P";
      const spent = fellBack ? (known?.fallbackPoints as number) : last.reserved;
      push({ t: "settled", id: r.id, n: last.n, spent });
      rebuilt.push(`the settlement of ${r.id} attempt ${last.n} (${spent} points)`);
    }
  }
}

/** Each line of `records` as the journal holds it. */
export function journalText(records: Repaired["records"]): string {
  return records.map((r) => `${JSON.stringify(r)}\n`).join("");
}

/**
 * Repairs the journal file in place when it is damaged; undefined when it is not. The damaged file
 * is kept beside it (`state.jsonl.damaged-HASH`), and the repaired one takes its name by a rename:
 * a kill at any moment leaves either the damaged file (repaired again next time) or the repaired one.
 */
export async function repairJournalFile(
  path: string,
  input: RepairInput,
): Promise<(Repaired & { copy: string }) | undefined> {
  const text = await readFile(path, "utf8");
  const { lines } = journalLines(text);
  if (!lines.some((l, i) => l.record === undefined && i < lines.length - 1)) return undefined;
  const repaired = repairRecords(text, input);
  // Named by its content: a repair killed before its rename and made again keeps one copy.
  const copy = `${path}.damaged-${createHash("sha256").update(text).digest("hex").slice(0, 12)}`;
  await copyFile(path, copy);
  const marker: RunRecord = {
    t: "repaired",
    at: new Date().toISOString(),
    lines: repaired.dropped,
    copy: basename(copy),
  };
  const draft = `${path}.repair`;
  const out = await open(draft, "w");
  try {
    await out.writeFile(journalText([...repaired.records, marker]));
    await out.datasync();
  } finally {
    await out.close();
  }
  await rename(draft, path);
  // The rename itself reaches the disk before anything is sent on the strength of it.
  const dir = await open(dirname(path), "r");
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
  return { ...repaired, copy };
}

/**
 * Exit 2 for a damaged state: where, what the services still hold, and the way on that pays
 * nothing twice. Deleting the state is the one thing not to do: a run without it pays again.
 */
export function damagedMessage(
  error: JournalDamagedError | UnrepairableStateError,
  manifest: string,
): string {
  if (error instanceof UnrepairableStateError) {
    return `the run's state cannot be repaired: ${error.message}. Nothing was submitted. Restore the state file from a backup; the tasks it named are still at the services (clapper tasks list shows them)`;
  }
  return `${error.message}. Nothing was submitted. The tasks this run created are still at the services and their points still count; the state is how clapper knows them, so do not delete it. To go on: clapper run ${manifest} --repair-state keeps a copy of the damaged file, rebuilds the state from every readable line, and sends any create whose answer was lost again with its own Idempotency-Key, so the services answer with the task they already made: nothing is paid twice`;
}

/** Whether `error` is a damaged state, said as `damagedMessage` says it. */
export function isDamagedState(error: unknown): error is JournalDamagedError | UnrepairableStateError {
  return error instanceof JournalDamagedError || error instanceof UnrepairableStateError;
}
