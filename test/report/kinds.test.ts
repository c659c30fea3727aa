// The reports' table keyed by kind: each kind's function gets the job as its own type.
import { describe, expect, it } from "vitest";
import type { Job } from "../../src/manifest/index.js";
import { byKind, KINDS } from "../../src/report/kinds.js";

describe("kinds", () => {
  it("calls the function of the job's kind, with the job", () => {
    const video = { kind: "video", id: "shot/s01", tier: "1080P" } as Job;
    const speech = { kind: "speech", id: "line/n01" } as Job;
    const table = {
      video: (j: { tier: string }) => `video ${j.tier}`,
      speech: (j: { id: string }) => `speech ${j.id}`,
    };
    expect(byKind(video, table)).toBe("video 1080P");
    expect(byKind(speech, table)).toBe("speech line/n01");
  });

  it("plays a video in a video element and a line in an audio element", () => {
    expect(KINDS.video.media).toBe("video");
    expect(KINDS.speech.media).toBe("audio");
  });
});
