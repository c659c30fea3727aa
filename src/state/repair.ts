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
import {
  applyRecord,
  initialState,
  type JobKind,
  type JobState,
  type RunRecord,
  type RunState,
} from "./run-state.js";

/** What the manifest says of a job, to declare it again. */
interface RepairJob {
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
  /** Why this state may not be used by this run (another manifest's), judged on the repaired state. */
  refuse?: (state: RunState) => string | undefined;
  /** Told what was done, when the journal was damaged and has been repaired. */
  onRepaired?: (repaired: Repaired & { copy: string }) => void;
}

interface Repaired {
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
  "version",
  "failed",
  "cancelled",
  "shared",
  ...ATTEMPT,
]);

/** Records of the run as a whole that nothing after them proves: lost, they cannot be rebuilt. */
const UNREBUILDABLE = /^\s*\{\s*"t"\s*:\s*"(snapshot|fresh|finish|run)"/;

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
      // The run's own first record is written again by the next run; any other run-level record
      // (a snapshot, a --fresh, a campaign's start or end) changes what every later line means.
      const kind = UNREBUILDABLE.exec(line.text)?.[1];
      const first = index === 0 && (kind === "run" || line.text.trim() === "");
      if ((kind !== undefined || index === 0) && !first) {
        throw new UnrepairableStateError(
          `line ${line.n} held ${kind ? `a "${kind}" record` : "the start of the state"}, which nothing after it proves: what was created and paid for cannot be rebuilt without guessing`,
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
  if (out.dropped.length > 0) checkRebuilt(state);
  return out;
}

type HealedRecord =
  | AttemptRecord
  | Extract<RunRecord, { t: "skip" | "problem" | "stored" | "version" | "failed" | "cancelled" | "shared" }>;

/** Writes again, before `r`, what `r` proves existed: its job's declaration, its attempt's intent or settlement. */
function heal(
  state: RunState,
  r: HealedRecord,
  input: RepairInput,
  push: (r: RunRecord) => void,
  rebuilt: string[],
): void {
  const known = input.jobs.get(r.id);
  const declare = (why: string) => {
    if (!known) {
      throw new UnrepairableStateError(
        `the records of ${r.id} lost its declaration, and the manifest no longer has that row: its tasks cannot be followed without guessing`,
      );
    }
    push({ t: "job", id: r.id, kind: known.kind, fingerprint: known.fingerprint, estimate: known.estimate });
    rebuilt.push(`the declaration of ${r.id}${why}`);
  };
  if (!state.jobs[r.id]) declare("");
  if (r.t === "intent") healBeforeIntent(state, r, input, push, rebuilt, declare);
  const job = state.jobs[r.id];
  if (!job) return;
  if (ATTEMPT.has(r.t) && r.t !== "withdrawn" && r.t !== "intent" && !("previous" in r && r.previous)) {
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

/**
 * An intent proves that the job was declared with the fingerprint its key was made from, and that
 * the attempt before it had ended: a lost re-declaration (an edited row) or a lost end of the
 * attempt before (its `withdrawn` or `settled`) is written again, or the repair refuses.
 */
function healBeforeIntent(
  state: RunState,
  r: Extract<RunRecord, { t: "intent" }>,
  input: RepairInput,
  push: (r: RunRecord) => void,
  rebuilt: string[],
  declare: (why: string) => void,
): void {
  const job = state.jobs[r.id] as JobState;
  const known = input.jobs.get(r.id);
  if (r.key !== input.keyOf(state.epoch, r.id, job.fingerprint, r.n)) {
    if (known && r.key === input.keyOf(state.epoch, r.id, known.fingerprint, r.n)) declare(" (edited)");
    else {
      throw new UnrepairableStateError(
        `the intent of ${r.id} attempt ${r.n} has a key no record around it explains (a lost --fresh or edit): its task cannot be told apart without guessing`,
      );
    }
  }
  const now = state.jobs[r.id] as JobState;
  const last = now.attempts.at(-1);
  if (!last || last.spent !== undefined) return;
  if (last.n === r.n && last.taskId === undefined) {
    // The same attempt opened again: the one before was taken back, never sent.
    push({ t: "withdrawn", id: r.id, n: last.n });
    rebuilt.push(`the withdrawal of ${r.id} attempt ${last.n}`);
    return;
  }
  const ended = last.taskStatus;
  if (
    last.n === r.n - 1 &&
    last.taskId !== undefined &&
    (ended === "succeeded" || ended === "failed" || ended === "cancelled")
  ) {
    // A next attempt is opened only once this one was settled: at its cost, or at nothing.
    const spent = ended === "succeeded" ? last.reserved : 0;
    push({
      t: "settled",
      id: r.id,
      n: last.n,
      spent,
      ...(ended === "succeeded"
        ? {}
        : { error: { code: ended, message: `task ${last.taskId} ended ${ended}` } }),
    });
    rebuilt.push(`the settlement of ${r.id} attempt ${last.n} (${spent} points)`);
    return;
  }
  throw new UnrepairableStateError(
    `attempt ${last.n} of ${r.id} lost how it ended (${last.taskId ? `task ${last.taskId}, last seen ${ended ?? "with no status"}` : "its create may have been sent"}): what it cost cannot be told without guessing`,
  );
}

/** What a repaired state must be for a run to go on from it: else it refuses rather than guess. */
function checkRebuilt(state: RunState): void {
  for (const job of Object.values(state.jobs)) {
    const numbers = job.attempts.map((a) => a.n);
    if (new Set(numbers).size !== numbers.length) {
      throw new UnrepairableStateError(
        `${job.id} has two attempts numbered alike: the records cannot be put in order`,
      );
    }
    const open = job.attempts.filter((a) => a.spent === undefined);
    if (open.length > 1 || (open[0] && open[0] !== job.attempts.at(-1))) {
      throw new UnrepairableStateError(
        `${job.id} has an attempt left open before its last one: what it cost cannot be told without guessing`,
      );
    }
  }
}

/** Each line of `records` as the journal holds it. */
function journalText(records: Repaired["records"]): string {
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
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    // No state yet: nothing to repair (a script may ask for the repair on every run).
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  const { lines } = journalLines(text);
  if (!lines.some((l, i) => l.record === undefined && i < lines.length - 1)) return undefined;
  const repaired = repairRecords(text, input);
  // Judged before anything is written: a state of another manifest is not rebuilt from this one's rows.
  const refusal = input.refuse?.(stateOf(repaired.records));
  if (refusal) throw new UnrepairableStateError(refusal);
  // Named by its content: a repair killed before its rename and made again keeps one copy.
  const copy = `${path}.damaged-${createHash("sha256").update(text).digest("hex").slice(0, 12)}`;
  await copyFile(path, copy);
  // The damaged file's only copy is on the disk before the file itself is replaced.
  const kept = await open(copy, "r");
  try {
    await kept.datasync();
  } finally {
    await kept.close();
  }
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

/** The state the repaired records make. */
function stateOf(records: Repaired["records"]): RunState {
  let state = initialState();
  for (const r of records) {
    if (r.t === "snapshot") state = structuredClone(r.state);
    else applyRecord(state, r);
  }
  return state;
}
