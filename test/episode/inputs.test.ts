// The episode's inputs chosen from a run's state: each job's part (a video job is a shot, a speech
// job a line) decides where it goes, and every input not stored for its current version is refused.
import { describe, expect, it } from "vitest";
import { chooseInputs } from "../../src/episode/inputs.js";
import { isLine, isShot, PART } from "../../src/episode/parts.js";
import { DEFAULT_ASSEMBLE } from "../../src/episode/settings.js";
import type { Job } from "../../src/manifest/index.js";
import type { RunState } from "../../src/state/run-state.js";

const shot = (rowId: string, take?: number): Job =>
  ({
    kind: "video",
    rowId,
    id: `shot/${rowId}${take ? `/take-${take}` : ""}`,
    fingerprint: `f-${rowId}-${take ?? 1}`,
    ...(take ? { take } : {}),
  }) as Job;
const line = (rowId: string, on?: string): Job =>
  ({
    kind: "speech",
    rowId,
    id: `line/${rowId}`,
    fingerprint: `f-${rowId}`,
    ...(on ? { shot: on } : {}),
  }) as Job;
const stored = (job: Job) => ({
  fingerprint: job.fingerprint,
  status: "stored",
  output: { fingerprint: job.fingerprint, uri: `/out/${job.rowId}`, bytes: 10, sha256: `h-${job.rowId}` },
});

describe("the episode's inputs", () => {
  it("tells a shot from a line by one table", () => {
    expect(PART).toEqual({ video: "shot", speech: "line" });
    expect([isShot(shot("s01")), isLine(shot("s01")), isShot(line("n01")), isLine(line("n01"))]).toEqual([
      true,
      false,
      false,
      true,
    ]);
  });

  it("takes the take assemble.takes names, places lines on their shot, refuses what is not stored", () => {
    const jobs = [
      shot("s01", 1),
      shot("s01", 2),
      shot("s02"),
      line("n01", "s01"),
      line("n02"),
      line("n03", "s02"),
    ];
    const [, take2, s02, n01, , n03] = jobs as [Job, Job, Job, Job, Job, Job];
    const state = {
      jobs: {
        [take2.id]: stored(take2),
        [n01.id]: stored(n01),
        [s02.id]: { ...stored(s02), output: { ...stored(s02).output, fingerprint: "older" } },
        [n03.id]: { fingerprint: n03.fingerprint, status: "failed" },
      },
    } as unknown as RunState;
    const chosen = chooseInputs(jobs, state, { ...DEFAULT_ASSEMBLE, takes: { s01: 2 } });
    expect(chosen.shots.map((s) => [s.job, s.take, s.lines.map((l) => l.job)])).toEqual([
      ["shot/s01/take-2", 2, ["line/n01"]],
    ]);
    expect(chosen.unplaced).toEqual(["n02"]);
    expect(chosen.refusals).toEqual([
      { job: "line/n03", reason: "line n03 (line/n03) is not stored yet (failed)" },
      { job: "shot/s02", reason: "shot s02 (shot/s02) was edited in the manifest since its output was made" },
    ]);
  });
});
