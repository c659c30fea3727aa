import { describe, expect, it } from "vitest";
import type { SpeechTask } from "../../src/api/speech.js";
import type { VideoTask } from "../../src/api/video.js";
import type { SpeechJob, VideoJob } from "../../src/manifest/index.js";
import { byKind, jobsOf, serviceFor } from "../../src/services/index.js";

const shot = {
  kind: "video",
  id: "shot/s01",
  rowId: "s01",
  tier: "1080P",
  duration: 5,
  points: 75,
  request: { model: "vid-h3", content: [{ type: "text", text: "a cat" }], resolution: "1080P", duration: 5 },
} as unknown as VideoJob;
const line = {
  kind: "speech",
  id: "line/n01",
  rowId: "n01",
  shot: "s01",
  countedChars: 12,
  points: 3,
  request: { text: "hello there." },
} as unknown as SpeechJob;

describe("serviceFor", () => {
  it("charges a video its price, or the base price when its upscale fell back to 768P", () => {
    const video = serviceFor("video");
    const task = { id: "t1", status: "succeeded", resolution: "1080P", duration: 5 } as VideoTask;
    expect(video.cost(shot, task)).toBe(75);
    expect(video.cost(shot, { ...task, resolution: "768P" })).toBe(50);
    expect(video.delivered({ ...task, resolution: "768P" })).toBe("768P");
    expect(video.requested(shot)).toBe("1080P");
    expect(video.statedCost(task)).toBeUndefined();
  });

  it("takes a speech task's own cost, unless it is one that cannot be", () => {
    const speech = serviceFor("speech");
    const task = { task_id: "t2", status: "succeeded", point_cost: 4 } as SpeechTask;
    expect(speech.cost(line, task)).toBe(4);
    expect(speech.statedCost(task)).toBe(4);
    expect(speech.cost(line, { ...task, point_cost: -1 })).toBeUndefined();
    expect(speech.cost(line, { ...task, point_cost: 2.5 })).toBeUndefined();
    expect(speech.requested(line)).toBeUndefined();
  });

  it("reads each service's failure, id and result URL", () => {
    const failedVideo = { id: "v", status: "failed", error: { code: "E1", message: "bad" } } as VideoTask;
    expect(serviceFor("video").failure(failedVideo)).toEqual({ code: "E1", message: "bad" });
    expect(serviceFor("video").failure({ id: "v", status: "failed" } as VideoTask)).toEqual({
      code: "task_failed",
      message: "the task failed",
    });
    const failedLine = { task_id: "s", status: "failed", error_message: "" } as SpeechTask;
    expect(serviceFor("speech").failure(failedLine)).toEqual({
      code: "task_failed",
      message: "the task failed",
    });
    expect(serviceFor("video").id(failedVideo)).toBe("v");
    expect(serviceFor("speech").id(failedLine)).toBe("s");
    expect(serviceFor("speech").resultUrl({ ...failedLine, output_url: "https://x/a.wav" })).toBe(
      "https://x/a.wav",
    );
  });

  it("groups a shot and the lines that name it, and names rows as the manifest does", () => {
    expect(serviceFor("video").shot(shot)).toBe("s01");
    expect(serviceFor("speech").shot(line)).toBe("s01");
    expect(serviceFor("video").row).toBe("shot");
    expect(serviceFor("speech").row).toBe("line");
    expect(serviceFor("video").fallbackPoints(shot)).toBe(50);
    expect(serviceFor("speech").fallbackPoints(line)).toBeUndefined();
  });
});

describe("byKind and jobsOf", () => {
  it("look a job's kind up in a table, and keep the jobs of one kind in order", () => {
    const table = { video: (j: VideoJob) => j.tier, speech: (j: SpeechJob) => j.countedChars };
    expect(byKind<string | number>(shot, table)).toBe("1080P");
    expect(byKind<string | number>(line, table)).toBe(12);
    expect(jobsOf([line, shot, line], "speech")).toEqual([line, line]);
  });
});
