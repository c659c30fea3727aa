// The journal's record of kept versions through the reducer: appended oldest first, pending until
// the new result is stored, kept when the row is edited, a --fresh keeping the output it no longer
// trusts as the file to set aside, a relocation renaming rather than adding; and a repaired journal
// (its job's declaration lost) still holding them.
import { describe, expect, it } from "vitest";
import { repairRecords } from "../../src/state/repair.js";
import { applyRecord, initialState, type RunRecord, type RunState } from "../../src/state/run-state.js";

const output = (sha256: string, uri = "/out/ep/lines/n02.wav") => ({
  uri,
  bytes: 100,
  sha256,
  fingerprint: `fp-${sha256}`,
});
const version = (n: number, sha256: string, folder = "/out/ep/lines") => ({
  uri: `${folder}/n02.v${n}.wav`,
  sha256,
  bytes: 100,
  at: 1_000 * n,
});

function replay(records: RunRecord[]): RunState {
  const state = initialState();
  for (const r of records) applyRecord(state, r);
  return state;
}

const START: RunRecord[] = [
  { t: "run", id: "r1", name: "ep", manifest: "ep.yaml", started_at: "2026-11-28T00:00:00Z" },
  { t: "job", id: "line/n02", kind: "speech", fingerprint: "fp-a", estimate: 6 },
  { t: "stored", id: "line/n02", output: output("a") },
];

describe("kept versions in the state", () => {
  it("are appended oldest first, pending until the new result is stored, and survive an edit", () => {
    const state = replay([
      ...START,
      { t: "job", id: "line/n02", kind: "speech", fingerprint: "fp-b", estimate: 6 },
      { t: "version", id: "line/n02", version: version(1, "a") },
    ]);
    const job = state.jobs["line/n02"];
    expect(job?.versions).toEqual([version(1, "a")]);
    expect(job?.keeping).toBe(version(1, "a").uri);
    applyRecord(state, { t: "stored", id: "line/n02", output: output("b") });
    expect(job?.keeping).toBeUndefined();
    // Edited again: a new declaration keeps what is on disk under the job's name.
    applyRecord(state, { t: "job", id: "line/n02", kind: "speech", fingerprint: "fp-c", estimate: 6 });
    applyRecord(state, { t: "version", id: "line/n02", version: version(2, "b") });
    expect(state.jobs["line/n02"]?.versions?.map((v) => v.sha256)).toEqual(["a", "b"]);
  });

  it("a --fresh keeps the output it stops trusting as the file a new result sets aside", () => {
    const state = replay([...START, { t: "fresh", epoch: "e2", jobs: ["line/n02"] }]);
    expect(state.jobs["line/n02"]?.output).toBeUndefined();
    expect(state.jobs["line/n02"]?.former).toEqual(output("a"));
    applyRecord(state, { t: "stored", id: "line/n02", output: output("b") });
    expect(state.jobs["line/n02"]?.former).toBeUndefined();
  });

  it("a version of the same name names the same file where it now is: renamed, not added", () => {
    const state = replay([
      ...START,
      { t: "version", id: "line/n02", version: version(1, "a") },
      { t: "stored", id: "line/n02", output: output("b") },
      { t: "version", id: "line/n02", version: version(1, "a", "/moved/ep/lines") },
    ]);
    expect(state.jobs["line/n02"]?.versions).toEqual([version(1, "a", "/moved/ep/lines")]);
    expect(state.jobs["line/n02"]?.keeping).toBeUndefined();
  });

  it("a repaired journal keeps them, its lost declaration written again", () => {
    const records: RunRecord[] = [
      START[0] as RunRecord,
      { t: "version", id: "line/n02", version: version(1, "a") },
      { t: "stored", id: "line/n02", output: output("b") },
    ];
    const lines = records.map((r) => JSON.stringify(r));
    // The declaration's line damaged.
    const text = [lines[0], "<<<<<<< HEAD", ...lines.slice(1), ""].join("\n");
    const repaired = repairRecords(text, {
      jobs: new Map([["line/n02", { kind: "speech" as const, fingerprint: "fp-b", estimate: 6 }]]),
      keyOf: (epoch, id, fp, n) => `${epoch}:${id}:${fp}:${n}`,
    });
    expect(repaired.dropped).toEqual([2]);
    expect(repaired.rebuilt).toEqual(["the declaration of line/n02"]);
    const state = replay(repaired.records as RunRecord[]);
    expect(state.jobs["line/n02"]?.versions).toEqual([version(1, "a")]);
    expect(state.jobs["line/n02"]?.output?.sha256).toBe("b");
  });
});
