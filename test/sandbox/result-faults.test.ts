// The test-only control that makes video result URLs fail (`POST /_sandbox/media`): a result store
// that breaks after the task succeeded and was paid, while the API itself keeps serving.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/sandbox/index.js";
import { call, download, sandbox, until } from "../helpers/sandbox.js";

let sb: Sandbox;
beforeAll(async () => {
  sb = await sandbox();
});
afterAll(async () => {
  await sb?.close();
});

const control = (body: unknown) => call(sb.url, "POST", "/_sandbox/media", { key: null, body });

async function succeededVideo(): Promise<string> {
  const created = await call(sb.url, "POST", "/vid/v2/video_generation", {
    body: { model: "Vid-H3", content: [{ type: "text", text: "a lighthouse" }], duration: 4 },
  });
  expect(created.status).toBe(200);
  const task = await until(
    async () =>
      (await call(sb.url, "GET", `/vid/v2/query/video_generation/${created.body.task_id}`)).body.task,
    (t) => t.status === "succeeded",
  );
  return task.content.url as string;
}

describe("POST /_sandbox/media video_error_status", () => {
  it("answers that status for the given number of video result requests, then serves again", async () => {
    const url = await succeededVideo();
    const set = await control({ video_error_status: 500, video_error_count: 2 });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ video_error_status: 500, video_error_count: 2 });
    for (let i = 0; i < 2; i++) {
      const res = await download(url);
      expect(res.status).toBe(500);
      expect(JSON.parse(res.data.toString("utf8"))).toMatchObject({
        type: "error",
        error: { type: "internal_error", http_code: "500" },
      });
    }
    const served = await download(url);
    expect(served.status).toBe(200);
    expect(served.headers["content-type"]).toBe("video/mp4");
  });

  it("fails every request until turned off, and leaves the API alone", async () => {
    const url = await succeededVideo();
    await control({ video_error_status: 503, video_error_count: null });
    for (let i = 0; i < 3; i++) expect((await download(url)).status).toBe(503);
    // The API answers as ever: a task's URL is still handed out.
    expect(await succeededVideo()).toMatch(/^http/);
    const stats = await call(sb.url, "GET", "/_sandbox/stats", { key: null });
    expect(stats.body.requests["GET /_media/videos/{file}"]).toBeGreaterThanOrEqual(3);
    await control({ video_error_status: 0 });
    expect((await download(url)).status).toBe(200);
  });

  it("refuses a status that is not one", async () => {
    expect((await control({ video_error_status: 600 })).status).toBe(400);
    expect((await control({ video_error_count: -1 })).status).toBe(400);
  });
});
