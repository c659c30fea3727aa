// The one place the manifest tells a video job from a speech job: a table keyed by kind.
import { describe, expect, it } from "vitest";
import { type Job, perKind } from "../../src/manifest/job.js";
import { unfitted } from "../../src/manifest/timing.js";

describe("perKind", () => {
  it("answers each job from its own kind's entry, with that kind's fields", () => {
    const what = perKind<string>({
      video: (shot) => `shot ${shot.rowId} take ${shot.take ?? 1}`,
      speech: (line) => `line ${line.rowId} of ${line.shot ?? "no shot"}`,
    });
    expect(what({ kind: "video", rowId: "s01", take: 2 } as Job)).toBe("shot s01 take 2");
    expect(what({ kind: "speech", rowId: "n01", shot: "s01" } as Job)).toBe("line n01 of s01");
  });
});

describe("unfitted", () => {
  it("is an auto shot not fitted yet, never a line or a shot of given length", () => {
    const auto = {
      lines: [],
      timing: { lead: 0, gap: 0, tail: 0 },
      estimated: 5,
      maxPoints: 0,
      basis: { request: {} },
    };
    expect(unfitted({ kind: "video", auto } as unknown as Job)).toBe(true);
    expect(unfitted({ kind: "video", auto: { ...auto, fitted: 6 } } as unknown as Job)).toBe(false);
    expect(unfitted({ kind: "video" } as Job)).toBe(false);
    expect(unfitted({ kind: "speech", shot: "s01" } as Job)).toBe(false);
  });
});
