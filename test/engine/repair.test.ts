// The repair of a damaged journal, line by line: whichever one line of a run's journal is lost, the
// repaired state keeps every attempt with its own Idempotency-Key (so a create sent again is
// answered with the task made before), and counts what was paid as the whole journal did.
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Journal, JournalDamagedError } from "../../src/state/journal.js";
import {
  type RepairInput,
  repairJournalFile,
  repairRecords,
  UnrepairableStateError,
} from "../../src/state/repair.js";
import {
  applyRecord,
  attemptCost,
  initialState,
  type RunRecord,
  type RunState,
} from "../../src/state/run-state.js";

const key = (epoch: number | string, id: string, fp: string, n: number) => `k-${epoch}-${id}-${fp}-${n}`;
const INPUT: RepairInput = {
  jobs: new Map([
    ["shot/s01", { kind: "video", fingerprint: "fa", estimate: 190, fallbackPoints: 100 }],
    ["line/n01", { kind: "speech", fingerprint: "fb", estimate: 7 }],
  ]),
  keyOf: key,
};

/** A run: a shot upscaled that fell back to 768P, a line whose first attempt failed. */
const RECORDS: RunRecord[] = [
  { t: "run", id: "r1", name: "demo", manifest: "demo.yaml", started_at: "2026-11-27T00:00:00Z" },
  { t: "job", id: "shot/s01", kind: "video", fingerprint: "fa", estimate: 190 },
  { t: "job", id: "line/n01", kind: "speech", fingerprint: "fb", estimate: 7 },
  { t: "balance", available: 1000 },
  {
    t: "intent",
    id: "shot/s01",
    n: 1,
    key: key(0, "shot/s01", "fa", 1),
    reserved: 190,
    at: 1,
    announces: true,
  },
  { t: "sending", id: "shot/s01", n: 1 },
  {
    t: "intent",
    id: "line/n01",
    n: 1,
    key: key(0, "line/n01", "fb", 1),
    reserved: 7,
    at: 1,
    announces: true,
  },
  { t: "sending", id: "line/n01", n: 1 },
  { t: "created", id: "shot/s01", n: 1, task_id: "v1" },
  { t: "created", id: "line/n01", n: 1, task_id: "a1" },
  { t: "reserve", id: "line/n01", n: 1, reserved: 8 },
  { t: "task", id: "line/n01", n: 1, status: "failed" },
  { t: "settled", id: "line/n01", n: 1, spent: 0, error: { code: "task_failed", message: "x" } },
  {
    t: "intent",
    id: "line/n01",
    n: 2,
    key: key(0, "line/n01", "fb", 2),
    reserved: 8,
    at: 2,
    announces: true,
  },
  { t: "sending", id: "line/n01", n: 2 },
  { t: "created", id: "line/n01", n: 2, task_id: "a2" },
  { t: "task", id: "shot/s01", n: 1, status: "succeeded" },
  { t: "settled", id: "shot/s01", n: 1, spent: 100 },
  {
    t: "stored",
    id: "shot/s01",
    output: { uri: "file:///s01.mp4", bytes: 1, sha256: "x", fingerprint: "fa", resolution: "768P" },
  },
  { t: "task", id: "line/n01", n: 2, status: "succeeded" },
  { t: "settled", id: "line/n01", n: 2, spent: 8 },
  {
    t: "stored",
    id: "line/n01",
    output: { uri: "file:///n01.wav", bytes: 1, sha256: "y", fingerprint: "fb" },
  },
  { t: "finish", finished_at: "2026-11-27T00:01:00Z" },
];

function stateOf(records: ReadonlyArray<RunRecord | { t: "snapshot"; state: RunState }>): RunState {
  let state = initialState();
  for (const r of records) {
    if (r.t === "snapshot") state = structuredClone(r.state);
    else applyRecord(state, r);
  }
  return state;
}

const text = (records: readonly unknown[]) => records.map((r) => `${JSON.stringify(r)}\n`).join("");
const attempts = (s: RunState) =>
  Object.values(s.jobs)
    .flatMap((j) => j.attempts.map((a) => `${j.id} ${a.n} ${a.key}`))
    .sort();
const paid = (s: RunState) =>
  Object.values(s.jobs)
    .flatMap((j) => j.attempts)
    .reduce((sum, a) => sum + attemptCost(a), 0);

describe("repairRecords", () => {
  const whole = stateOf(RECORDS);

  it("keeps every attempt and its key, and what was paid, whichever one line after the first is lost", () => {
    for (let lost = 1; lost < RECORDS.length; lost++) {
      const lines = RECORDS.map((r, i) => (i === lost ? "not a record" : JSON.stringify(r)));
      const repaired = repairRecords(`${lines.join("\n")}\n`, INPUT);
      const state = stateOf(repaired.records);
      const what = `line ${lost + 1} (${RECORDS[lost]?.t}) lost`;
      expect(repaired.dropped, what).toEqual([lost + 1]);
      expect(attempts(state), what).toEqual(attempts(whole));
      // A lost settlement of a failed attempt is found again when its task is looked at: it paid 0.
      expect(paid(state), what).toBe(paid(whole));
      // Every job is still known, with the fingerprint it had.
      expect(Object.keys(state.jobs).sort(), what).toEqual(Object.keys(whole.jobs).sort());
    }
  });

  it("writes a lost settlement of a stored result at its cost: the base price after an upscale fell back", () => {
    const lost = RECORDS.findIndex((r) => r.t === "settled" && r.id === "shot/s01");
    const lines = RECORDS.map((r, i) => (i === lost ? "{" : JSON.stringify(r)));
    const repaired = repairRecords(`${lines.join("\n")}\n`, INPUT);
    expect(repaired.rebuilt).toEqual(["the settlement of shot/s01 attempt 1 (100 points)"]);
  });

  it("writes a lost intent with the attempt's own key, so a create sent again is answered by its task", () => {
    const lost = RECORDS.findIndex((r) => r.t === "intent" && r.id === "line/n01" && r.n === 2);
    const lines = RECORDS.map((r, i) => (i === lost ? "\u0000\u0000" : JSON.stringify(r)));
    const repaired = repairRecords(`${lines.join("\n")}\n`, INPUT);
    expect(repaired.rebuilt).toEqual(["the intent of line/n01 attempt 2"]);
    const a = stateOf(repaired.records).jobs["line/n01"]?.attempts[1];
    expect(a?.key).toBe(key(0, "line/n01", "fb", 2));
    // No `at`: the task its key returns is this attempt's own, never taken for a replay.
    expect(a?.at).toBeUndefined();
  });

  it("refuses a lost snapshot, and a lost first line that was not the run's record", () => {
    const snapshot = `{"t":"snapshot","state":${JSON.stringify(whole)}}`;
    expect(() => repairRecords(`${snapshot.slice(0, 40)}\n${JSON.stringify(RECORDS[1])}\n`, INPUT)).toThrow(
      UnrepairableStateError,
    );
    expect(() => repairRecords(`garbage\n${JSON.stringify(RECORDS[1])}\n`, INPUT)).toThrow(/line 1 held/);
    // The run's own first record is rebuilt by the next run: repaired.
    const cut = JSON.stringify(RECORDS[0]).slice(0, 30);
    expect(repairRecords(`${cut}\n${text(RECORDS.slice(1))}`, INPUT).dropped).toEqual([1]);
  });
});

describe("repairRecords, line by line, where a lost line changes what later ones mean", () => {
  const k = (id: string, fp: string, n: number, epoch: number | string = 0) => key(epoch, id, fp, n);
  const run = {
    t: "run",
    id: "r1",
    name: "demo",
    manifest: "demo.yaml",
    started_at: "2026-11-27T00:00:00Z",
  } as const;
  const shot = (fingerprint: string): RunRecord => ({
    t: "job",
    id: "shot/s01",
    kind: "video",
    fingerprint,
    estimate: 190,
  });
  const lose = (records: readonly unknown[], at: number, as = "not a record") =>
    `${records.map((r, i) => (i === at ? as : JSON.stringify(r))).join("\n")}\n`;
  const stored = (fingerprint: string): RunRecord => ({
    t: "stored",
    id: "shot/s01",
    output: { uri: "file:///s01.mp4", bytes: 1, sha256: "x", fingerprint },
  });

  it("a lost withdrawal: the attempt opened again is one attempt, paid once", () => {
    const records: RunRecord[] = [
      run,
      shot("fa"),
      { t: "intent", id: "shot/s01", n: 1, key: k("shot/s01", "fa", 1), reserved: 190, announces: true },
      { t: "withdrawn", id: "shot/s01", n: 1 },
      { t: "intent", id: "shot/s01", n: 1, key: k("shot/s01", "fa", 1), reserved: 190, announces: true },
      { t: "sending", id: "shot/s01", n: 1 },
      { t: "created", id: "shot/s01", n: 1, task_id: "T" },
      { t: "settled", id: "shot/s01", n: 1, spent: 190 },
      stored("fa"),
    ];
    const repaired = repairRecords(lose(records, 3), INPUT);
    expect(repaired.rebuilt).toEqual(["the withdrawal of shot/s01 attempt 1"]);
    const state = stateOf(repaired.records);
    expect(state.jobs["shot/s01"]?.attempts.map((a) => [a.n, a.taskId, a.spent])).toEqual([[1, "T", 190]]);
    expect(paid(state)).toBe(190);
  });

  it("a lost settlement of an attempt before the last: settled at its cost, not left open", () => {
    const records: RunRecord[] = [
      run,
      shot("fa"),
      { t: "intent", id: "shot/s01", n: 1, key: k("shot/s01", "fa", 1), reserved: 190, announces: true },
      { t: "created", id: "shot/s01", n: 1, task_id: "T1" },
      { t: "task", id: "shot/s01", n: 1, status: "succeeded" },
      { t: "settled", id: "shot/s01", n: 1, spent: 190 },
      { t: "failed", id: "shot/s01", error: { code: "download_failed", message: "x" } },
      { t: "finish", finished_at: "2026-11-27T00:01:00Z" },
      { ...run, id: "r2" },
      { t: "intent", id: "shot/s01", n: 2, key: k("shot/s01", "fa", 2), reserved: 190, announces: true },
      { t: "created", id: "shot/s01", n: 2, task_id: "T2" },
      { t: "task", id: "shot/s01", n: 2, status: "succeeded" },
      { t: "settled", id: "shot/s01", n: 2, spent: 190 },
      stored("fa"),
    ];
    const state = stateOf(repairRecords(lose(records, 5), INPUT).records);
    expect(state.jobs["shot/s01"]?.attempts.map((a) => a.spent)).toEqual([190, 190]);
    expect(paid(state)).toBe(380);
  });

  it("a lost re-declaration of an edited row: the old version's open attempt is followed as before, the new one its own", () => {
    const edited: RepairInput = {
      ...INPUT,
      jobs: new Map([["shot/s01", { kind: "video", fingerprint: "fb", estimate: 190 }]]),
    };
    const records: RunRecord[] = [
      run,
      shot("fa"),
      { t: "intent", id: "shot/s01", n: 1, key: k("shot/s01", "fa", 1), reserved: 190, announces: true },
      { t: "created", id: "shot/s01", n: 1, task_id: "T1" },
      shot("fb"),
      { t: "intent", id: "shot/s01", n: 1, key: k("shot/s01", "fb", 1), reserved: 190, announces: true },
      { t: "created", id: "shot/s01", n: 1, task_id: "T2" },
      { t: "settled", id: "shot/s01", n: 1, spent: 190, previous: true },
      { t: "settled", id: "shot/s01", n: 1, spent: 190 },
      stored("fb"),
    ];
    const whole = stateOf(records);
    const repaired = repairRecords(lose(records, 4), edited);
    expect(repaired.rebuilt).toEqual(["the declaration of shot/s01 (edited)"]);
    const state = stateOf(repaired.records);
    const tasks = (s: RunState) => [
      ...(s.jobs["shot/s01"]?.previous ?? []).map((a) => `previous ${a.taskId} ${a.spent}`),
      ...(s.jobs["shot/s01"]?.attempts ?? []).map((a) => `${a.taskId} ${a.spent}`),
    ];
    expect(tasks(state)).toEqual(tasks(whole));
    expect(paid(state) + 190).toBe(380);
  });

  it("refuses what nothing after it proves: a --fresh, a campaign's end or start, a row gone from the manifest", () => {
    const fresh: RunRecord[] = [
      run,
      shot("fa"),
      { t: "fresh", epoch: "e2", jobs: ["shot/s01"] },
      {
        t: "intent",
        id: "shot/s01",
        n: 1,
        key: k("shot/s01", "fa", 1, "e2"),
        reserved: 190,
        announces: true,
      },
      { t: "created", id: "shot/s01", n: 1, task_id: "T" },
    ];
    // Cut where its type still shows, or gone whole: the next intent's key says an epoch was lost.
    expect(() => repairRecords(lose(fresh, 2, '{"t":"fresh","epoch":"e'), INPUT)).toThrow(/a "fresh" record/);
    expect(() => repairRecords(lose(fresh, 2), INPUT)).toThrow(/a key no record around it explains/);
    const finish = [run, shot("fa"), { t: "finish", finished_at: "x" }, { ...run, id: "r2" }, shot("fa")];
    expect(() => repairRecords(lose(finish, 2, '{"t":"finish","fin'), INPUT)).toThrow(/a "finish" record/);
    const removed: RunRecord[] = [
      run,
      { t: "job", id: "shot/gone", kind: "video", fingerprint: "fz", estimate: 190 },
      { t: "intent", id: "shot/gone", n: 1, key: k("shot/gone", "fz", 1), reserved: 190, announces: true },
      { t: "created", id: "shot/gone", n: 1, task_id: "T" },
    ];
    expect(() => repairRecords(lose(removed, 1), INPUT)).toThrow(/no longer has that row/);
  });
});

describe("a damaged journal file", () => {
  it("is refused with its line, repaired in place with the damaged file kept, then opens", async () => {
    const dir = await mkdtemp(join(tmpdir(), "clapper-repair-"));
    try {
      const path = join(dir, "state.jsonl");
      const lines = RECORDS.map((r) => JSON.stringify(r));
      lines[8] = "<<<<<<< HEAD";
      await writeFile(path, `${lines.join("\n")}\n`);
      const options = { path, initial: initialState, apply: applyRecord };
      const refused = await Journal.read(options).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(JournalDamagedError);
      expect((refused as Error).message).toContain(`${path}:9:`);
      expect((refused as JournalDamagedError).lines).toEqual([9]);
      // A torn last line is a crash's, not damage: dropped as before.
      await writeFile(`${path}.torn`, `${text(RECORDS.slice(0, 3))}{"t":"jo`);
      await expect(Journal.read({ ...options, path: `${path}.torn` })).resolves.toBeDefined();

      const repaired = await repairJournalFile(path, INPUT);
      expect(repaired?.dropped).toEqual([9]);
      expect(await readFile(repaired?.copy as string, "utf8")).toContain("<<<<<<< HEAD");
      const state = await Journal.read<RunState, RunRecord>(options);
      expect(attempts(state)).toEqual(attempts(whole()));
      // Nothing to repair the second time.
      expect(await repairJournalFile(path, INPUT)).toBeUndefined();
      expect((await readdir(dir)).filter((f) => f.includes(".damaged-"))).toHaveLength(1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

function whole(): RunState {
  return stateOf(RECORDS);
}
