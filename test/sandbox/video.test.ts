// The video service of the sandbox over real HTTP, written from the spec
// (/work/shared/spec/video-generation-api.md) and the README's documented choices.
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BusinessErrorBody,
  PointsPackageList,
  PointsSummary,
  ValidationErrorBody,
} from "../../src/api/common.js";
import {
  SkillDeleteResponse,
  SkillList,
  SkillResponse,
  VideoCancelResponse,
  VideoCreateResponse,
  type VideoTask,
  VideoTaskList,
  VideoTaskResponse,
} from "../../src/api/video.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { png } from "../helpers/png.js";
import { type CallOptions, call, KEY, type Reply, sandbox, until } from "../helpers/sandbox.js";

// ---------------------------------------------------------------------------------------------
// Helpers

type Content = Record<string, unknown>;

const text = (t: string): Content => ({ type: "text", text: t });

const PNG_URL = `data:image/png;base64,${png(64, 36).toString("base64")}`;
// Content rules run before anything is fetched; these stand for a video and an audio material.
const MP4_URL = `data:video/mp4;base64,${Buffer.from("not really a video").toString("base64")}`;
const WAV_URL = `data:audio/wav;base64,${Buffer.from("not really audio").toString("base64")}`;

const image = (role?: string): Content => ({
  type: "image_url",
  image_url: { url: PNG_URL },
  ...(role ? { role } : {}),
});
const video = (): Content => ({ type: "video_url", video_url: { url: MP4_URL }, role: "reference_video" });
const audio = (): Content => ({ type: "audio_url", audio_url: { url: WAV_URL }, role: "reference_audio" });
const times = (n: number, make: () => Content): Content[] => Array.from({ length: n }, make);

function body(extra: Record<string, unknown> = {}, content: Content[] = [text("a lighthouse at dusk")]) {
  return { model: "Vid-H3", content, ...extra };
}

async function create(base: string, b: unknown, opts: CallOptions = {}): Promise<Reply> {
  return call(base, "POST", "/vid/v2/video_generation", { ...opts, body: b });
}

/** Creates a task and returns its id; fails the test on anything but 200 {task_id}. */
async function createOk(base: string, b: unknown, opts: CallOptions = {}): Promise<string> {
  const res = await create(base, b, opts);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.RetCode, res.body.Message).toBeUndefined();
  return VideoCreateResponse.parse(res.body).task_id;
}

async function getTask(base: string, id: string, key: string = KEY): Promise<VideoTask> {
  const res = await call(base, "GET", `/vid/v2/query/video_generation/${id}`, { key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.RetCode, res.body.Message).toBeUndefined();
  return VideoTaskResponse.parse(res.body).task;
}

async function waitFor(base: string, id: string, status: string, timeoutMs = 8000): Promise<VideoTask> {
  return until(
    () => getTask(base, id),
    (t) => t.status === status,
    timeoutMs,
  );
}

async function summary(base: string, key: string = KEY) {
  const res = await call(base, "GET", "/vid/v2/query/point_usage_summary", { key });
  expect(res.status).toBe(200);
  const parsed = PointsSummary.parse(res.body);
  // Exactly the spec's three fields.
  expect(Object.keys(res.body).sort()).toEqual(["available_points", "reserved_points", "total_points"]);
  return parsed;
}

async function packages(base: string, key: string = KEY) {
  const res = await call(base, "GET", "/vid/v2/query/point_packages", { key });
  expect(res.status).toBe(200);
  return PointsPackageList.parse(res.body);
}

async function list(base: string, query = "", key: string = KEY): Promise<Reply> {
  return call(base, "GET", `/vid/v2/query/video_generation${query}`, { key });
}

async function stats(base: string) {
  const res = await call(base, "GET", "/_sandbox/stats", { key: null });
  expect(res.status).toBe(200);
  return res.body as {
    tasks_created: { video: number; speech: number };
    idempotent_replays: number;
    callbacks: { delivered: number; failed: number };
  };
}

/** The spec's 400 shape, `error.http_code` a string, and every message part present. */
function expectBadRequest(res: Reply, ...parts: string[]): string {
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  const b = ValidationErrorBody.parse(res.body);
  expect(b.type).toBe("error");
  expect(b.error.type).toBe("bad_request_error");
  expect(b.error.http_code).toBe("400");
  expect(b.request_id).toMatch(/^req_/);
  for (const part of parts) expect(b.error.message).toContain(part);
  return b.error.message;
}

/** `{RetCode, Message, request_uuid}` with the given HTTP status and RetCode. */
function expectBusiness(res: Reply, status: number, retCode: number, ...parts: string[]): string {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  const b = BusinessErrorBody.parse(res.body);
  expect(Object.keys(res.body).sort()).toEqual(["Message", "RetCode", "request_uuid"]);
  expect(b.RetCode).toBe(retCode);
  expect(b.request_uuid).toMatch(/^req_/);
  for (const part of parts) expect(b.Message).toContain(part);
  return b.Message;
}

async function addPackage(base: string, org: string, pkg: Record<string, unknown>) {
  const res = await call(base, "POST", `/_sandbox/orgs/${org}/packages`, { key: null, body: pkg });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.RetCode, res.body.Message).toBeUndefined();
  return res.body;
}

const nowS = () => Math.floor(Date.now() / 1000);

/** A material server that answers every request after `delayMs`: a PNG, or 404. */
async function slowMaterials(delayMs: number, status: 200 | 404) {
  let hits = 0;
  const server = createServer((_, res) => {
    hits += 1;
    setTimeout(() => {
      if (status === 404) res.writeHead(404).end();
      else res.writeHead(200, { "content-type": "image/png" }).end(png(32, 32));
    }, delayMs);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/image.png`,
    hits: () => hits,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

// ---------------------------------------------------------------------------------------------

describe("create: authentication and request format", () => {
  let s: Sandbox;
  beforeAll(async () => {
    s = await sandbox();
  });
  afterAll(() => s.close());

  it("answers 401 in the 400-error shape without a key or with an unknown key", async () => {
    for (const key of [null, "sk-ml-unknown"]) {
      const res = await create(s.url, body(), { key });
      expect(res.status).toBe(401);
      const b = ValidationErrorBody.parse(res.body);
      expect(b.error.type).toBe("authentication_error");
      expect(b.error.http_code).toBe("401");
    }
    expect((await stats(s.url)).tasks_created.video).toBe(0);
  });

  it("refuses a body that is not JSON, or not application/json", async () => {
    expectBadRequest(
      await call(s.url, "POST", "/vid/v2/video_generation", {
        rawBody: "{not json",
        headers: { "content-type": "application/json" },
      }),
      "not valid JSON",
    );
    expectBadRequest(
      await call(s.url, "POST", "/vid/v2/video_generation", {
        rawBody: JSON.stringify(body()),
        headers: { "content-type": "text/plain" },
      }),
      "Content-Type",
      "application/json",
    );
    expectBadRequest(
      await call(s.url, "POST", "/vid/v2/video_generation", {
        rawBody: "[1, 2]",
        headers: { "content-type": "application/json" },
      }),
      "JSON object",
    );
  });

  it("accepts a minimal text-to-video body with the spec's defaults, ignoring unknown fields", async () => {
    const id = await createOk(s.url, { ...body(), something_new: 1 });
    expect(id).toMatch(/^vtask_/);
    const task = await getTask(s.url, id);
    expect(task).toMatchObject({
      id,
      model: "Vid-H3",
      resolution: "768P",
      duration: 5,
      ratio: "16:9",
      task_type: "generation",
      modality: "video",
    });
    expect(task.usage).toMatchObject({ input_seconds: 0, input_image_count: 0, use_context_ir: false });
    expect(task).not.toHaveProperty("something_new");
  });
});

describe("create: field rules", () => {
  let s: Sandbox;
  beforeAll(async () => {
    s = await sandbox();
  });
  afterAll(() => s.close());

  it("model is required and is Vid-H3 or vid-h3-lite (case-sensitive)", async () => {
    expectBadRequest(await create(s.url, { content: [text("x")] }), "model: is required");
    expectBadRequest(
      await create(s.url, body({ model: "vid-h3" })),
      "model: ",
      '"Vid-H3"',
      '"vid-h3-lite"',
      'got "vid-h3"',
    );
    expectBadRequest(await create(s.url, body({ model: "Vid-H4" })), "model: ", 'got "Vid-H4"');
    for (const model of ["Vid-H3", "vid-h3-lite"]) {
      const task = await getTask(s.url, await createOk(s.url, body({ model })));
      expect(task.model).toBe(model);
    }
  });

  it("content is a non-empty array of well-formed elements", async () => {
    expectBadRequest(await create(s.url, { model: "Vid-H3" }), "content: is required");
    expectBadRequest(await create(s.url, body({ content: [] })), "content: ", "at least 1");
    expectBadRequest(await create(s.url, body({ content: "hello" })), "content: ");
    expectBadRequest(
      await create(s.url, body({ content: [{ type: "html", text: "x" }] })),
      "content[0].type",
      '"html"',
    );
    expectBadRequest(await create(s.url, body({ content: [{ type: "text" }] })), "content[0].text");
    expectBadRequest(
      await create(s.url, body({ content: [{ type: "image_url", url: PNG_URL }] })),
      "content[0].image_url",
    );
    expectBadRequest(
      await create(s.url, body({ content: [{ type: "image_url", image_url: { url: "not a url" } }] })),
      "content[0].image_url.url",
    );
    expectBadRequest(
      await create(s.url, body({ content: [{ ...image(), role: "reference_video" }] })),
      "content[0].role",
      '"reference_video" is for video_url elements',
    );
  });

  it("rule 1: pure text-to-video needs a non-empty text; frame and reference modes may omit it", async () => {
    expectBadRequest(await create(s.url, body({}, [text("   ")])), "content[0].text", "non-empty");
    expectBadRequest(
      await create(s.url, body({}, [text(""), text(" \n ")])),
      "content[0].text",
      "1 more empty text element",
    );
    await createOk(s.url, body({}, [image()]));
    await createOk(s.url, body({}, [image("reference_image")]));
    await createOk(s.url, body({}, [text(""), image("last_frame")]));
  });

  it("rule 2: texts joined with line feeds are at most 7000 characters", async () => {
    expectBadRequest(
      await create(s.url, body({}, [text("x".repeat(7001))])),
      "content[0].text",
      "at most 7000 characters",
      "got 7001",
    );
    // 3500 + "\n" + 3500 = 7001: the joining line feed counts.
    expectBadRequest(
      await create(s.url, body({}, [text("a".repeat(3500)), text("b".repeat(3500))])),
      "content[1].text",
      "got 7001",
    );
    await createOk(s.url, body({}, [text("a".repeat(3500)), text("b".repeat(3499))]));
    await createOk(s.url, body({}, [text("x".repeat(7000))]));
    // Characters are code points: 7000 emoji are 7000 characters, 14000 UTF-16 units.
    await createOk(s.url, body({}, [text("🎬".repeat(7000))]));
  });

  it("rule 3: at most one first frame and one last frame, either alone or both", async () => {
    expectBadRequest(
      await create(s.url, body({}, [image(), image()])),
      "content[1].role",
      "at most 1 first frame",
      "an omitted image role means first_frame",
    );
    expectBadRequest(
      await create(s.url, body({}, [image("last_frame"), image("last_frame")])),
      "content[1].role",
      "at most 1 last frame",
    );
    const both = await getTask(
      s.url,
      await createOk(s.url, body({}, [image("first_frame"), image("last_frame")])),
    );
    expect(both.usage.input_image_count).toBe(2);
    await createOk(s.url, body({}, [image("first_frame")]));
    await createOk(s.url, body({}, [image("last_frame")]));
  });

  it("rule 4: at most 9 reference images, 3 videos, 3 audios and 12 reference items", async () => {
    expectBadRequest(
      await create(
        s.url,
        body(
          {},
          times(10, () => image("reference_image")),
        ),
      ),
      "content[9]",
      "at most 9 reference images, got 10",
    );
    expectBadRequest(
      await create(s.url, body({}, times(4, video))),
      "content[3]",
      "at most 3 reference videos, got 4",
    );
    expectBadRequest(
      await create(s.url, body({}, [video(), ...times(4, audio)])),
      "content[4]",
      "at most 3 reference audios, got 4",
    );
    expectBadRequest(
      await create(
        s.url,
        body({}, [...times(9, () => image("reference_image")), ...times(3, video), audio()]),
      ),
      "content[12]",
      "at most 12 reference items in total, got 13",
    );
    // Exactly at every limit: accepted (12 items, text included).
    const id = await createOk(
      s.url,
      body({}, [text("<Picture 1> walks"), ...times(9, () => image("reference_image")), ...times(3, video)]),
    );
    expect((await getTask(s.url, id)).usage.input_image_count).toBe(9);
    await createOk(
      s.url,
      body({}, [...times(6, () => image("reference_image")), ...times(3, video), ...times(3, audio)]),
    );
  });

  it("rule 5: a reference audio needs a reference image or video with it", async () => {
    expectBadRequest(
      await create(s.url, body({}, [text("sing"), audio()])),
      "content[1]",
      "cannot be used alone",
    );
    await createOk(s.url, body({}, [text("sing"), audio(), video()]));
    await createOk(s.url, body({}, [text("sing"), image("reference_image"), audio()]));
  });

  it("rule 6: first/last frames cannot be mixed with reference material", async () => {
    expectBadRequest(
      await create(s.url, body({}, [image("first_frame"), image("reference_image")])),
      "content[0].role",
      "a first frame cannot be mixed with reference images, videos or audios",
      "content[1] is a reference image",
    );
    expectBadRequest(
      await create(s.url, body({}, [video(), image("last_frame")])),
      "content[1].role",
      "a last frame cannot be mixed",
      "content[0] is a reference video",
    );
    expectBadRequest(
      await create(s.url, body({}, [image("first_frame"), audio(), video()])),
      "content[0].role",
      "cannot be mixed",
    );
  });

  it("rule 7: in all-reference mode an image without role is a first frame", async () => {
    expectBadRequest(
      await create(s.url, body({}, [image(), video()])),
      "content[0].role",
      "an omitted image role means first_frame",
      "role=reference_image",
    );
    await createOk(s.url, body({}, [image("reference_image"), video()]));
  });

  it("reports several problems in one answer", async () => {
    const message = expectBadRequest(
      await create(s.url, body({ duration: 3, ratio: "2:1" }, [image(), image()])),
      "duration",
      "ratio",
      "content[1].role",
    );
    expect(message.split("; ").length).toBeGreaterThanOrEqual(3);
  });

  it("duration is an integer from 4 to 30, default 5", async () => {
    for (const bad of [3, 31, 0, -5, 4.5, "5", null]) {
      expectBadRequest(await create(s.url, body({ duration: bad })), "duration: ", "from 4 to 30");
    }
    for (const ok of [4, 30]) {
      expect((await getTask(s.url, await createOk(s.url, body({ duration: ok })))).duration).toBe(ok);
    }
  });

  it("ratio is one of the seven values, default 16:9", async () => {
    for (const bad of ["2:1", "16/9", "ADAPTIVE", 1.77]) {
      expectBadRequest(await create(s.url, body({ ratio: bad })), "ratio: ");
    }
    for (const ratio of ["adaptive", "21:9", "16:9", "4:3", "1:1", "3:4", "9:16"]) {
      expect((await getTask(s.url, await createOk(s.url, body({ ratio })))).ratio).toBe(ratio);
    }
  });

  it("resolution is a string; the five exact values are tiers, anything else is native 768P", async () => {
    expectBadRequest(await create(s.url, body({ resolution: 1080 })), "resolution: ", "1080");
    const cases: Array<[string, string]> = [
      ["480P", "480P"],
      ["768P", "768P"],
      ["1080P", "1080P"],
      ["2K", "2K"],
      ["4K", "4K"],
      ["1080p", "768P"],
      ["4k", "768P"],
      ["720P", "768P"],
      ["1K", "768P"],
    ];
    for (const [resolution, reported] of cases) {
      const task = await getTask(s.url, await createOk(s.url, body({ resolution })));
      expect(task.resolution, resolution).toBe(reported);
    }
  });

  it("callback_url: absolute http(s), at most 1024 characters, no user information", async () => {
    const before = (await stats(s.url)).tasks_created.video;
    for (const bad of ["/hook", "ftp://example.com/hook", "hook.example.com", "https://"]) {
      expectBadRequest(await create(s.url, body({ callback_url: bad })), "callback_url: ");
    }
    const long = `http://127.0.0.1:9/${"a".repeat(1025 - "http://127.0.0.1:9/".length)}`;
    expect(long.length).toBe(1025);
    expectBadRequest(
      await create(s.url, body({ callback_url: long })),
      "callback_url: ",
      "at most 1024 characters, got 1025",
    );
    // Even with private addresses allowed (this sandbox), user information is refused; the password is not echoed.
    const message = expectBadRequest(
      await create(s.url, body({ callback_url: "http://user:hunter2@127.0.0.1:9/hook" })),
      "callback_url: ",
      "user information",
    );
    expect(message).not.toContain("hunter2");
    expect((await stats(s.url)).tasks_created.video).toBe(before);
    await createOk(s.url, body({ callback_url: long.slice(0, 1024) }));
  });

  it("callback_token: at most 512 characters and only with callback_url", async () => {
    expectBadRequest(
      await create(s.url, body({ callback_token: "secret" })),
      "callback_token: requires callback_url",
    );
    expectBadRequest(
      await create(s.url, body({ callback_url: "http://127.0.0.1:9/hook", callback_token: "t".repeat(513) })),
      "callback_token: ",
      "at most 512 characters, got 513",
    );
    expectBadRequest(
      await create(s.url, body({ callback_token: 42, callback_url: "http://127.0.0.1:9/h" })),
      "callback_token",
    );
    await createOk(s.url, body({ callback_url: "http://127.0.0.1:9/hook", callback_token: "t".repeat(512) }));
  });

  it("booleans are booleans", async () => {
    for (const field of ["use_context_ir", "mute_audio", "aigc_watermark"]) {
      expectBadRequest(await create(s.url, body({ [field]: "true" })), `${field}: `);
      expectBadRequest(await create(s.url, body({ [field]: 1 })), `${field}: `);
    }
    const id = await createOk(s.url, body({ use_context_ir: true, mute_audio: true, aigc_watermark: true }));
    expect((await getTask(s.url, id)).usage.use_context_ir).toBe(true);
    const plain = await createOk(s.url, body({ use_context_ir: false, mute_audio: false }));
    expect((await getTask(s.url, plain)).usage.use_context_ir).toBe(false);
  });

  it("skill_id requires use_context_ir=true; an unknown skill is a business 404", async () => {
    const skill = "skill_official_camera_language";
    expectBadRequest(
      await create(s.url, body({ skill_id: skill })),
      "skill_id: requires use_context_ir=true",
      "not set",
    );
    expectBadRequest(
      await create(s.url, body({ skill_id: skill, use_context_ir: false })),
      "skill_id: requires use_context_ir=true",
      "use_context_ir=false",
    );
    expectBadRequest(await create(s.url, body({ skill_id: 7, use_context_ir: true })), "skill_id: ");
    const before = (await stats(s.url)).tasks_created.video;
    expectBusiness(
      await create(s.url, body({ skill_id: "skill_nope", use_context_ir: true })),
      404,
      40401,
      "skill",
      "skill_nope",
    );
    expect((await stats(s.url)).tasks_created.video).toBe(before);
    await createOk(s.url, body({ skill_id: skill, use_context_ir: true }));
  });
});

describe("create: Idempotency-Key", () => {
  let s: Sandbox;
  beforeAll(async () => {
    s = await sandbox();
  });
  afterAll(() => s.close());

  it("is at most 128 characters", async () => {
    const before = await stats(s.url);
    expectBadRequest(await create(s.url, body(), { idem: "k".repeat(129) }), "Idempotency-Key", "got 129");
    expect((await stats(s.url)).tasks_created.video).toBe(before.tasks_created.video);
    await createOk(s.url, body(), { idem: "k".repeat(128) });
    expect((await stats(s.url)).tasks_created.video).toBe(before.tasks_created.video + 1);
  });

  it("the same key returns the first task and creates nothing, whatever the body", async () => {
    const before = await stats(s.url);
    const first = await createOk(s.url, body(), { idem: "replay-1" });
    const again = await createOk(s.url, body(), { idem: "replay-1" });
    const other = await createOk(s.url, body({ duration: 9, model: "vid-h3-lite" }), { idem: "replay-1" });
    expect(again).toBe(first);
    expect(other).toBe(first);
    const after = await stats(s.url);
    expect(after.tasks_created.video).toBe(before.tasks_created.video + 1);
    expect(after.idempotent_replays).toBe(before.idempotent_replays + 2);
    expect((await getTask(s.url, first)).duration).toBe(5);
    // A new key is a new task.
    expect(await createOk(s.url, body(), { idem: "replay-2" })).not.toBe(first);
  });

  it("concurrent creates with one key make one task", async () => {
    // The first create is still fetching its material when the others arrive.
    const slow = await slowMaterials(150, 200);
    try {
      const before = await stats(s.url);
      const content = [text("concurrent"), { type: "image_url", image_url: { url: slow.url } }];
      const first = createOk(s.url, body({}, content), { idem: "race" });
      await until(
        async () => slow.hits(),
        (n) => n === 1,
      );
      const others = Array.from({ length: 5 }, () => createOk(s.url, body({}, content), { idem: "race" }));
      const ids = await Promise.all([first, ...others]);
      expect(new Set(ids).size).toBe(1);
      expect(slow.hits()).toBe(1);
      const after = await stats(s.url);
      expect(after.tasks_created.video).toBe(before.tasks_created.video + 1);
      expect(after.idempotent_replays).toBe(before.idempotent_replays + 5);
    } finally {
      await slow.close();
    }
  });

  it("a create that waited on a refused one with the same key is then handled on its own", async () => {
    // The first create's material answers 404 after a while; the second (valid) one arrives meanwhile.
    const slow = await slowMaterials(150, 404);
    try {
      const before = await stats(s.url);
      const refused = create(s.url, body({}, [{ type: "image_url", image_url: { url: slow.url } }]), {
        idem: "second-chance",
      });
      await until(
        async () => slow.hits(),
        (n) => n === 1,
      );
      const corrected = create(s.url, body({ duration: 6 }), { idem: "second-chance" });
      const [a, b] = await Promise.all([refused, corrected]);
      expectBadRequest(a, "content[0].image_url.url", "HTTP 404");
      expect(b.status, JSON.stringify(b.body)).toBe(200);
      const id = VideoCreateResponse.parse(b.body).task_id;
      expect((await getTask(s.url, id)).duration).toBe(6);
      // From now on the key belongs to that task.
      expect(await createOk(s.url, body(), { idem: "second-chance" })).toBe(id);
      const after = await stats(s.url);
      expect(after.tasks_created.video).toBe(before.tasks_created.video + 1);
      expect(after.idempotent_replays).toBe(before.idempotent_replays + 1);
    } finally {
      await slow.close();
    }
  });

  it("a refused create leaves the key free", async () => {
    const before = await stats(s.url);
    expectBadRequest(await create(s.url, body({ duration: 2 }), { idem: "fix-me" }), "duration");
    const id = await createOk(s.url, body(), { idem: "fix-me" });
    expect((await getTask(s.url, id)).duration).toBe(5);
    const after = await stats(s.url);
    expect(after.tasks_created.video).toBe(before.tasks_created.video + 1);
    expect(after.idempotent_replays).toBe(before.idempotent_replays);
  });
});

describe("state machine", () => {
  let s: Sandbox;
  beforeAll(async () => {
    s = await sandbox();
  });
  afterAll(() => s.close());

  it("goes queued -> running -> succeeded; content.url and usage seconds only at the end", async () => {
    // [sandbox:slow]: queue 50 ms, generation 550 ms at this time scale.
    const id = await createOk(s.url, body({ duration: 5 }, [text("[sandbox:slow] a lighthouse"), image()]));
    const seen: VideoTask[] = [];
    const final = await until(
      async () => {
        const t = await getTask(s.url, id);
        seen.push(t);
        return t;
      },
      (t) => t.status === "succeeded",
    );
    const order = seen.map((t) => t.status).filter((st, i, all) => st !== all[i - 1]);
    expect(order).toEqual(["queued", "running", "succeeded"]);
    for (const t of seen) {
      expect(t.usage.input_image_count).toBe(1);
      expect(t.usage.input_seconds).toBe(0);
      expect(t.usage.use_context_ir).toBe(false);
      if (t.status === "succeeded") continue;
      expect(t.content?.url).toBeUndefined();
      expect(t.usage.total_seconds).toBeUndefined();
      expect(t.usage.output_seconds).toBeUndefined();
      expect(t.estimated_remaining_seconds).toBeGreaterThanOrEqual(1);
      expect(t.error).toBeUndefined();
    }
    expect(final.content?.url).toMatch(new RegExp(`^${s.url}/_media/videos/${id}\\.mp4\\?`));
    expect(final.usage).toEqual({
      input_seconds: 0,
      input_image_count: 1,
      use_context_ir: false,
      total_seconds: 5,
      output_seconds: 5,
    });
    expect(final.estimated_remaining_seconds).toBe(0);
    expect(final.error).toBeUndefined();
    expect(final.updated_at).toBeGreaterThanOrEqual(final.created_at);
  });

  it("[sandbox:fail] ends failed with error.code and error.message", async () => {
    const id = await createOk(s.url, body({}, [text("[sandbox:fail] a storm")]));
    const task = await waitFor(s.url, id, "failed");
    expect(task.error).toEqual({ code: "generation_failed", message: expect.stringContaining("failed") });
    expect(task.content).toBeUndefined();
    expect(task.estimated_remaining_seconds).toBe(0);
    expect(task.usage.total_seconds).toBeUndefined();
    expect(task.usage.output_seconds).toBeUndefined();
  });

  it("[sandbox:upscale-fail] at 1080P/2K/4K delivers 768P; at 480P/768P it changes nothing", async () => {
    for (const resolution of ["1080P", "2K", "4K"]) {
      const id = await createOk(s.url, body({ resolution }, [text("[sandbox:upscale-fail] city")]));
      const running = await getTask(s.url, id);
      expect(running.resolution).toBe(resolution);
      const done = await waitFor(s.url, id, "succeeded");
      expect(done.resolution, resolution).toBe("768P");
      expect(done.usage.total_seconds).toBe(5);
      expect(done.content?.url).toBeDefined();
    }
    for (const resolution of ["480P", "768P"]) {
      const id = await createOk(s.url, body({ resolution }, [text("[sandbox:upscale-fail] city")]));
      expect((await waitFor(s.url, id, "succeeded")).resolution).toBe(resolution);
    }
    // Without the marker the upscale works.
    const ok = await createOk(s.url, body({ resolution: "2K" }));
    expect((await waitFor(s.url, ok, "succeeded")).resolution).toBe("2K");
  });

  it("a single-task query carries content.url; list items never do", async () => {
    const id = await createOk(s.url, body());
    await waitFor(s.url, id, "succeeded");
    const res = await list(s.url, "?page_size=100");
    const items = VideoTaskList.parse(res.body).items;
    expect(items.some((t) => t.status === "succeeded")).toBe(true);
    for (const item of items) expect(item).not.toHaveProperty("content");
    const mine = items.find((t) => t.id === id);
    expect(mine?.usage.total_seconds).toBe(5);
  });

  it("unknown task: business 404 about a missing job", async () => {
    expectBusiness(
      await call(s.url, "GET", "/vid/v2/query/video_generation/vtask_doesnotexist"),
      404,
      40401,
      "job not found",
      "vtask_doesnotexist",
    );
  });
});

describe("estimated_remaining_seconds and updated_at over a task's life", () => {
  it("falls through the stages to 0; updated_at moves", async () => {
    // 4 s at 768P: queue 5 s + generation 50 s + upload 2.4 s = 57.4 s, i.e. 2.87 s at 0.05.
    const s = await sandbox({ timeScale: 0.05 });
    try {
      const id = await createOk(s.url, body({ duration: 4 }));
      const seen: VideoTask[] = [];
      await until(
        async () => {
          const t = await getTask(s.url, id);
          seen.push(t);
          await new Promise((r) => setTimeout(r, 40));
          return t;
        },
        (t) => t.status === "succeeded",
      );
      const first = seen[0]!;
      const last = seen.at(-1)!;
      expect(first.status).toBe("queued");
      expect(first.estimated_remaining_seconds).toBe(3);
      const estimates = seen.map((t) => t.estimated_remaining_seconds);
      for (let i = 1; i < estimates.length; i++) expect(estimates[i]!).toBeLessThanOrEqual(estimates[i - 1]!);
      expect(new Set(estimates.slice(0, -1))).toEqual(new Set([3, 2, 1]));
      expect(last.estimated_remaining_seconds).toBe(0);
      // Every non-terminal estimate is at least 1.
      expect(estimates.slice(0, -1).every((e) => e >= 1)).toBe(true);
      expect(last.updated_at - last.created_at).toBeGreaterThanOrEqual(2);
      expect(last.updated_at - last.created_at).toBeLessThanOrEqual(4);
      expect(first.updated_at).toBe(first.created_at);
      const running = seen.find((t) => t.status === "running")!;
      expect(running.updated_at).toBeGreaterThanOrEqual(first.created_at);
      expect(running.updated_at).toBeLessThanOrEqual(last.updated_at);
    } finally {
      await s.close();
    }
  });
});

describe("stage plan (time scale 1: estimates at creation are the documented stage lengths)", () => {
  let s: Sandbox;
  beforeAll(async () => {
    s = await sandbox({ timeScale: 1 });
  });
  afterAll(() => s.close());

  const estimate = async (extra: Record<string, unknown>, prompt = "a lighthouse") =>
    (await getTask(s.url, await createOk(s.url, body(extra, [text(prompt)])))).estimated_remaining_seconds;

  it("queue 5 s, generation 30 s + 5 s/s, upload 2 s + 0.1 s/s", async () => {
    expect(await estimate({})).toBe(63); // 5 + 55 + 2.5 = 62.5
    expect(await estimate({ duration: 10 })).toBe(88); // 5 + 80 + 3
  });

  it("prompt optimization adds 8 s when use_context_ir (with or without a skill)", async () => {
    expect(await estimate({ use_context_ir: true })).toBe(71);
    expect(await estimate({ use_context_ir: true, skill_id: "skill_official_prompt_polish" })).toBe(71);
  });

  it("upscale adds 10 s + 2 s/s at 1080P, 2K and 4K only", async () => {
    expect(await estimate({ resolution: "1080P" })).toBe(83);
    expect(await estimate({ resolution: "4K" })).toBe(83);
    expect(await estimate({ resolution: "1080p" })).toBe(63);
    expect(await estimate({ resolution: "480P" })).toBe(63);
  });

  it("vid-h3-lite runs its stages 40% faster (not the queue)", async () => {
    expect(await estimate({ model: "vid-h3-lite" })).toBe(40); // 5 + 0.6 * 57.5
  });

  it("[sandbox:slow] multiplies every stage, the queue included, by ten", async () => {
    expect(await estimate({}, "[sandbox:slow] x")).toBe(625);
    // Lite as well: the queue is 50 s, the rest 10 * 0.6 * 57.5 s.
    expect(await estimate({ model: "vid-h3-lite" }, "[sandbox:slow] x")).toBe(395);
  });
});

describe("points", () => {
  it("reserves at creation at the resolution table's prices and releases on cancel", async () => {
    const s = await sandbox({ timeScale: 1, points: 1000 });
    try {
      expect(await summary(s.url)).toEqual({
        total_points: 1000,
        reserved_points: 0,
        available_points: 1000,
      });
      const a = await createOk(s.url, body({ duration: 5 })); // 768P: 50
      expect(await summary(s.url)).toEqual({
        total_points: 1000,
        reserved_points: 50,
        available_points: 950,
      });
      const pkg = (await packages(s.url)).items[0]!;
      expect(pkg).toMatchObject({
        status: "active",
        total_points: 1000,
        remaining_points: 1000,
        reserved_points: 50,
        available_points: 950,
      });
      const b = await createOk(s.url, body({ resolution: "1080p", duration: 5 })); // lowercase: 768P, 50
      const c = await createOk(s.url, body({ resolution: "480P", duration: 4 })); // 20
      const d = await createOk(s.url, body({ resolution: "4K", duration: 4 })); // 88
      const e = await createOk(s.url, body({ resolution: "1080P", duration: 6 })); // 114
      const f = await createOk(s.url, body({ resolution: "2K", duration: 7 })); // 140
      expect(await summary(s.url)).toEqual({
        total_points: 1000,
        reserved_points: 462,
        available_points: 538,
      });
      // Cancelling a queued task releases exactly its reservation.
      const cancel = await call(s.url, "DELETE", `/vid/v2/video_generation/${d}`);
      expect(VideoCancelResponse.parse(cancel.body)).toEqual({
        task_id: d,
        action: "delete",
        status: "cancelled",
      });
      expect(await summary(s.url)).toEqual({
        total_points: 1000,
        reserved_points: 374,
        available_points: 626,
      });
      for (const id of [a, b, c, e, f]) {
        expect((await call(s.url, "DELETE", `/vid/v2/video_generation/${id}`)).body.status).toBe("cancelled");
      }
      expect(await summary(s.url)).toEqual({
        total_points: 1000,
        reserved_points: 0,
        available_points: 1000,
      });
      expect((await packages(s.url)).items[0]).toMatchObject({ remaining_points: 1000, reserved_points: 0 });
    } finally {
      await s.close();
    }
  });

  it("deducts on success at 5/10/19/20/22 points per second; lowercase 1080p costs 10/s", async () => {
    const s = await sandbox({ points: 10_000 });
    try {
      const cases: Array<[string, number, number]> = [
        ["480P", 4, 20],
        ["768P", 5, 50],
        ["1080P", 6, 114],
        ["2K", 7, 140],
        ["4K", 8, 176],
        ["1080p", 5, 50],
        ["720P", 30, 300],
      ];
      let total = 10_000;
      for (const [resolution, duration, cost] of cases) {
        const id = await createOk(s.url, body({ resolution, duration }));
        await waitFor(s.url, id, "succeeded");
        total -= cost;
        expect(await summary(s.url), `${resolution} ${duration}s`).toEqual({
          total_points: total,
          reserved_points: 0,
          available_points: total,
        });
      }
      // Default resolution and duration: 768P, 5 s.
      const id = await createOk(s.url, { model: "vid-h3-lite", content: [text("x")] });
      await waitFor(s.url, id, "succeeded");
      expect((await summary(s.url)).total_points).toBe(total - 50);
      expect((await packages(s.url)).items[0]).toMatchObject({
        total_points: 10_000,
        remaining_points: total - 50,
        reserved_points: 0,
        available_points: total - 50,
      });
    } finally {
      await s.close();
    }
  });

  it("releases on failure, and charges only the base 10/s when the upscale fails", async () => {
    const s = await sandbox({ points: 10_000 });
    try {
      const failed = await createOk(
        s.url,
        body({ resolution: "4K", duration: 4 }, [text("[sandbox:slow] [sandbox:fail]")]),
      );
      expect(await summary(s.url)).toEqual({
        total_points: 10_000,
        reserved_points: 88,
        available_points: 9912,
      });
      await waitFor(s.url, failed, "failed");
      expect(await summary(s.url)).toEqual({
        total_points: 10_000,
        reserved_points: 0,
        available_points: 10_000,
      });

      // Reserved at the full upscale price (19/20/22 per second), charged 10 per second.
      const ids: string[] = [];
      let reserved = 0;
      for (const [resolution, price] of [
        ["1080P", 95],
        ["2K", 100],
        ["4K", 110],
      ] as const) {
        ids.push(
          await createOk(s.url, body({ resolution }, [text("[sandbox:slow] [sandbox:upscale-fail]")])),
        );
        reserved += price;
        expect(await summary(s.url), resolution).toEqual({
          total_points: 10_000,
          reserved_points: reserved,
          available_points: 10_000 - reserved,
        });
      }
      for (const id of ids) expect((await waitFor(s.url, id, "succeeded")).resolution).toBe("768P");
      expect(await summary(s.url)).toEqual({
        total_points: 9850,
        reserved_points: 0,
        available_points: 9850,
      });
      expect((await packages(s.url)).items[0]).toMatchObject({ remaining_points: 9850, reserved_points: 0 });
    } finally {
      await s.close();
    }
  });

  it("insufficient points: a business error, nothing created, balance unchanged", async () => {
    const s = await sandbox({ points: 100 });
    try {
      const before = await stats(s.url);
      const res = await create(s.url, body({ duration: 11 }), { idem: "short" });
      expectBusiness(res, 200, 40201, "insufficient points", "needs 110", "available 100");
      expect(await summary(s.url)).toEqual({ total_points: 100, reserved_points: 0, available_points: 100 });
      expect((await stats(s.url)).tasks_created.video).toBe(before.tasks_created.video);
      expect(VideoTaskList.parse((await list(s.url)).body).total).toBe(0);
      // Exactly the balance is enough (and the refused key is free again).
      const id = await createOk(s.url, body({ duration: 10 }), { idem: "short" });
      expect(await summary(s.url)).toEqual({ total_points: 100, reserved_points: 100, available_points: 0 });
      expectBusiness(
        await create(s.url, body({ resolution: "480P", duration: 4 })),
        200,
        40201,
        "needs 20",
        "available 0",
      );
      await waitFor(s.url, id, "succeeded");
      expect(await summary(s.url)).toEqual({ total_points: 0, reserved_points: 0, available_points: 0 });
      const pkg = (await packages(s.url)).items[0]!;
      expect(pkg).toMatchObject({ status: "exhausted", remaining_points: 0, available_points: 0 });
    } finally {
      await s.close();
    }
  });

  it("a task that ended while nobody polled has settled its points before the next create reserves", async () => {
    const s = await sandbox({ points: 40 });
    try {
      // All 40 points; fails at the end of generation (~55 ms at this time scale). Not polled.
      await createOk(s.url, body({ duration: 4 }, [text("[sandbox:fail] storm")]));
      await new Promise((r) => setTimeout(r, 250));
      const next = await createOk(s.url, body({ duration: 4 }));
      await waitFor(s.url, next, "succeeded");
      expect(await summary(s.url)).toEqual({ total_points: 0, reserved_points: 0, available_points: 0 });
    } finally {
      await s.close();
    }
    const u = await sandbox({ points: 95 });
    try {
      // 95 reserved, 50 charged when the upscale fails: 45 left. Not polled.
      await createOk(u.url, body({ resolution: "1080P" }, [text("[sandbox:upscale-fail] city")]));
      await new Promise((r) => setTimeout(r, 250));
      const next = await createOk(u.url, body({ resolution: "480P", duration: 9 })); // 45
      await waitFor(u.url, next, "succeeded");
      expect(await summary(u.url)).toEqual({ total_points: 0, reserved_points: 0, available_points: 0 });
    } finally {
      await u.close();
    }
  });

  it("several packages: newest first with every field; pending and expired give nothing; soonest expiry is used first", async () => {
    const s = await sandbox({ points: 1000 });
    try {
      const t0 = nowS();
      const promo = await addPackage(s.url, "acme", {
        total_points: 30,
        expires_at: t0 + 3600,
        code: "promo-30",
        name: "Promo 30",
        order_no: "ORD-0001",
        total_price: 990,
      });
      const pending = await addPackage(s.url, "acme", { total_points: 500, status: "pending", code: "p500" });
      const expired = await addPackage(s.url, "acme", { total_points: 300, expires_at: t0 - 10 });
      expect(pending).toMatchObject({ status: "pending", available_points: 0 });
      expect(expired).toMatchObject({ status: "expired", available_points: 0 });

      const listed = await packages(s.url);
      expect(listed.total).toBe(4);
      expect(listed.items.map((p) => p.id)).toEqual([expired.id, pending.id, promo.id, listed.items[3]!.id]);
      const [ex, pe, pr, def] = listed.items as [any, any, any, any];
      expect(pr).toEqual({
        id: promo.id,
        code: "promo-30",
        name: "Promo 30",
        status: "active",
        total_points: 30,
        remaining_points: 30,
        reserved_points: 0,
        available_points: 30,
        purchased_at: expect.any(Number),
        expires_at: t0 + 3600,
        created_at: expect.any(Number),
        order_no: "ORD-0001",
        total_price: 990,
      });
      expect(pr.purchased_at).toBeGreaterThanOrEqual(t0);
      expect(pr.created_at).toBeGreaterThanOrEqual(t0);
      // Pending: not activated, so no purchased_at / expires_at; free: no order_no / total_price.
      expect(Object.keys(pe).sort()).toEqual(
        [
          "available_points",
          "code",
          "created_at",
          "id",
          "name",
          "remaining_points",
          "reserved_points",
          "status",
          "total_points",
        ].sort(),
      );
      expect(pe).toMatchObject({
        status: "pending",
        total_points: 500,
        remaining_points: 500,
        available_points: 0,
      });
      expect(ex).toMatchObject({
        status: "expired",
        total_points: 300,
        available_points: 0,
        expires_at: t0 - 10,
      });
      expect(def).toMatchObject({ status: "active", total_points: 1000, available_points: 1000 });
      expect(def).not.toHaveProperty("order_no");
      expect(def).not.toHaveProperty("total_price");
      expect(def.expires_at - def.purchased_at).toBe(365 * 24 * 3600);
      for (const p of listed.items)
        expect(p.available_points).toBe(p.status === "active" ? p.remaining_points - p.reserved_points : 0);

      // Only the two active packages count.
      expect(await summary(s.url)).toEqual({
        total_points: 1030,
        reserved_points: 0,
        available_points: 1030,
      });

      // 50 points: 30 from the promo (expires first), 20 from the default package.
      const id = await createOk(s.url, body({}, [text("[sandbox:slow] x")]));
      const during = await packages(s.url);
      expect(during.items.find((p) => p.id === promo.id)).toMatchObject({
        reserved_points: 30,
        available_points: 0,
      });
      expect(during.items.find((p) => p.id === def.id)).toMatchObject({
        reserved_points: 20,
        available_points: 980,
      });
      expect(await summary(s.url)).toEqual({
        total_points: 1030,
        reserved_points: 50,
        available_points: 980,
      });
      await waitFor(s.url, id, "succeeded");
      const after = await packages(s.url);
      expect(after.items.find((p) => p.id === promo.id)).toMatchObject({
        status: "exhausted",
        remaining_points: 0,
        reserved_points: 0,
        available_points: 0,
      });
      expect(after.items.find((p) => p.id === def.id)).toMatchObject({
        status: "active",
        remaining_points: 980,
        reserved_points: 0,
        available_points: 980,
      });
      expect(await summary(s.url)).toEqual({ total_points: 980, reserved_points: 0, available_points: 980 });
    } finally {
      await s.close();
    }
  });

  it("the control endpoint refuses a malformed package", async () => {
    const s = await sandbox();
    try {
      const res = await call(s.url, "POST", "/_sandbox/orgs/acme/packages", {
        key: null,
        body: { total_points: -1 },
      });
      expectBadRequest(res, "total_points");
      expect((await packages(s.url)).total).toBe(1);
    } finally {
      await s.close();
    }
  });
});

describe("cancel", () => {
  let s: Sandbox;
  beforeAll(async () => {
    s = await sandbox();
  });
  afterAll(() => s.close());

  it("a queued task is cancelled at once and its points released", async () => {
    const slow = await sandbox({ timeScale: 1, points: 500 });
    try {
      const id = await createOk(slow.url, body({ resolution: "2K", duration: 5 }));
      expect((await summary(slow.url)).reserved_points).toBe(100);
      const res = await call(slow.url, "DELETE", `/vid/v2/video_generation/${id}`);
      expect(res.status).toBe(200);
      expect(VideoCancelResponse.parse(res.body)).toEqual({
        task_id: id,
        action: "delete",
        status: "cancelled",
      });
      const task = await getTask(slow.url, id);
      expect(task.status).toBe("cancelled");
      expect(task.estimated_remaining_seconds).toBe(0);
      expect(task.content).toBeUndefined();
      expect(task.usage.total_seconds).toBeUndefined();
      expect(await summary(slow.url)).toEqual({
        total_points: 500,
        reserved_points: 0,
        available_points: 500,
      });
      // The history record stays.
      const listed = VideoTaskList.parse((await list(slow.url, "?filter.status=cancelled")).body);
      expect(listed.items.map((t) => t.id)).toEqual([id]);
      expectBusiness(
        await call(slow.url, "DELETE", `/vid/v2/video_generation/${id}`),
        400,
        40901,
        "already ended",
        "cancelled",
      );
    } finally {
      await slow.close();
    }
  });

  it("a running task answers running, then becomes cancelled; points released", async () => {
    const id = await createOk(s.url, body({ resolution: "1080P" }, [text("[sandbox:slow] long one")]));
    const before = await summary(s.url);
    expect(before.reserved_points).toBe(95);
    await waitFor(s.url, id, "running");
    const res = await call(s.url, "DELETE", `/vid/v2/video_generation/${id}`);
    expect(res.status).toBe(200);
    expect(VideoCancelResponse.parse(res.body)).toEqual({ task_id: id, action: "delete", status: "running" });
    const task = await waitFor(s.url, id, "cancelled");
    expect(task.estimated_remaining_seconds).toBe(0);
    expect(task.content).toBeUndefined();
    expect(await summary(s.url)).toEqual({
      total_points: before.total_points,
      reserved_points: 0,
      available_points: before.total_points,
    });
    // A second cancel of the same task, now ended, is refused.
    expectBusiness(
      await call(s.url, "DELETE", `/vid/v2/video_generation/${id}`),
      400,
      40901,
      "already ended",
    );
  });

  it("an ended task cannot be cancelled (business error); an unknown one is a 404", async () => {
    const ok = await createOk(s.url, body());
    await waitFor(s.url, ok, "succeeded");
    const total = (await summary(s.url)).total_points;
    expectBusiness(
      await call(s.url, "DELETE", `/vid/v2/video_generation/${ok}`),
      400,
      40901,
      ok,
      "succeeded",
    );
    expect((await getTask(s.url, ok)).status).toBe("succeeded");
    expect((await summary(s.url)).total_points).toBe(total);

    const failed = await createOk(s.url, body({}, [text("[sandbox:fail]")]));
    await waitFor(s.url, failed, "failed");
    expectBusiness(await call(s.url, "DELETE", `/vid/v2/video_generation/${failed}`), 400, 40901, "failed");

    expectBusiness(
      await call(s.url, "DELETE", "/vid/v2/video_generation/vtask_nope"),
      404,
      40401,
      "not found",
      "vtask_nope",
    );
  });
});

describe("list", () => {
  let s: Sandbox;
  const ids: string[] = [];
  beforeAll(async () => {
    s = await sandbox();
    // 25 tasks: 18 Vid-H3 that succeed, 4 lite that succeed, 3 that fail.
    for (let i = 0; i < 25; i++) {
      const model = i % 6 === 1 ? "vid-h3-lite" : "Vid-H3";
      const prompt = i % 8 === 3 ? `[sandbox:fail] ${i}` : `shot ${i}`;
      ids.push(await createOk(s.url, body({ model }, [text(prompt)])));
    }
    await until(
      () => list(s.url, "?page_size=100"),
      (r) => r.body.items.every((t: VideoTask) => t.status === "succeeded" || t.status === "failed"),
    );
  });
  afterAll(() => s.close());

  it("pages newest first with page_num 1 and page_size 20 by default", async () => {
    const first = VideoTaskList.parse((await list(s.url)).body);
    expect(first.total).toBe(25);
    expect(first.items.map((t) => t.id)).toEqual([...ids].reverse().slice(0, 20));
    const second = VideoTaskList.parse((await list(s.url, "?page_num=2")).body);
    expect(second.total).toBe(25);
    expect(second.items.map((t) => t.id)).toEqual([...ids].reverse().slice(20));
    const small = VideoTaskList.parse((await list(s.url, "?page_num=3&page_size=7")).body);
    expect(small.items.map((t) => t.id)).toEqual([...ids].reverse().slice(14, 21));
    const beyond = VideoTaskList.parse((await list(s.url, "?page_num=9")).body);
    expect(beyond).toEqual({ items: [], total: 25 });
    const all = VideoTaskList.parse((await list(s.url, "?page_size=100")).body);
    expect(all.items).toHaveLength(25);
    for (const item of all.items) expect(item.content).toBeUndefined();
  });

  it("refuses page_size over 100 and other malformed paging", async () => {
    expectBadRequest(await list(s.url, "?page_size=101"), "page_size: ", "from 1 to 100", '"101"');
    expectBadRequest(await list(s.url, "?page_size=0"), "page_size: ");
    expectBadRequest(await list(s.url, "?page_num=0"), "page_num: ");
    expectBadRequest(await list(s.url, "?page_num=abc"), "page_num: ", '"abc"');
    expectBadRequest(await list(s.url, "?page_size=-1"), "page_size: ");
  });

  it("filters by status, model and task_type; total counts the matches", async () => {
    const failed = VideoTaskList.parse((await list(s.url, "?filter.status=failed")).body);
    const failing = ids.filter((_, i) => i % 8 === 3);
    expect(failed.total).toBe(failing.length);
    expect(failed.items.map((t) => t.id).sort()).toEqual([...failing].sort());
    expect(failed.items.every((t) => t.status === "failed" && t.error?.code === "generation_failed")).toBe(
      true,
    );

    const succeeded = VideoTaskList.parse((await list(s.url, "?filter.status=succeeded&page_size=100")).body);
    expect(succeeded.total).toBe(25 - failing.length);

    const lite = VideoTaskList.parse((await list(s.url, "?filter.model=vid-h3-lite")).body);
    const liteIds = ids.filter((_, i) => i % 6 === 1);
    expect(lite.total).toBe(liteIds.length);
    expect(lite.items.every((t) => t.model === "vid-h3-lite")).toBe(true);

    const both = VideoTaskList.parse((await list(s.url, "?filter.model=Vid-H3&filter.status=failed")).body);
    expect(both.total).toBe(failing.filter((id) => !liteIds.includes(id)).length);

    const generation = VideoTaskList.parse(
      (await list(s.url, "?filter.task_type=generation&page_size=5")).body,
    );
    expect(generation.total).toBe(25);
    expect(generation.items).toHaveLength(5);

    expect(VideoTaskList.parse((await list(s.url, "?filter.status=queued")).body)).toEqual({
      items: [],
      total: 0,
    });
  });

  it("refuses unknown filter values and filter.task_ids", async () => {
    expectBadRequest(await list(s.url, "?filter.status=done"), "filter.status: ", '"done"');
    expectBadRequest(await list(s.url, "?filter.model=vid-h3"), "filter.model: ");
    expectBadRequest(await list(s.url, "?filter.task_type=edit"), "filter.task_type: ");
    expectBadRequest(await list(s.url, `?filter.task_ids=${ids[0]}`), "filter.task_ids", "not supported");
    expectBadRequest(await list(s.url, `?filter.task_ids[]=${ids[0]}`), "filter.task_ids");
  });
});

describe("organizations", () => {
  let s: Sandbox;
  beforeAll(async () => {
    s = await sandbox({ keys: ["sk-ml-a=one", "sk-ml-b=one", "sk-ml-c=two"], points: 1000 });
  });
  afterAll(() => s.close());

  it("keys of one company share tasks; another company sees none", async () => {
    const id = await createOk(s.url, body({}, [text("[sandbox:slow] shared")]), { key: "sk-ml-a" });
    expect((await getTask(s.url, id, "sk-ml-b")).id).toBe(id);
    expect(VideoTaskList.parse((await list(s.url, "", "sk-ml-b")).body).items.map((t) => t.id)).toContain(id);
    expect(VideoTaskList.parse((await list(s.url, "", "sk-ml-c")).body)).toEqual({ items: [], total: 0 });
    expectBusiness(
      await call(s.url, "GET", `/vid/v2/query/video_generation/${id}`, { key: "sk-ml-c" }),
      404,
      40401,
    );
    expectBusiness(
      await call(s.url, "DELETE", `/vid/v2/video_generation/${id}`, { key: "sk-ml-c" }),
      404,
      40401,
    );
    // Points are shared within the company only.
    expect((await summary(s.url, "sk-ml-b")).reserved_points).toBe(50);
    expect(await summary(s.url, "sk-ml-c")).toEqual({
      total_points: 1000,
      reserved_points: 0,
      available_points: 1000,
    });
    // b may cancel a's task.
    expect((await call(s.url, "DELETE", `/vid/v2/video_generation/${id}`, { key: "sk-ml-b" })).status).toBe(
      200,
    );
    await until(
      () => getTask(s.url, id, "sk-ml-a"),
      (t) => t.status === "cancelled",
    );
    expect((await summary(s.url, "sk-ml-a")).reserved_points).toBe(0);
  });

  it("skills are shared within a company; another company can neither see nor use them", async () => {
    const created = await call(s.url, "POST", "/vid/v2/skills", {
      key: "sk-ml-a",
      body: { name: "House style", content: "Always golden hour." },
    });
    const skill = SkillResponse.parse(created.body).skill;
    const forB = SkillList.parse((await call(s.url, "GET", "/vid/v2/skills", { key: "sk-ml-b" })).body);
    expect(forB.items.map((k) => k.id)).toContain(skill.id);
    const forC = SkillList.parse((await call(s.url, "GET", "/vid/v2/skills", { key: "sk-ml-c" })).body);
    expect(forC.items.map((k) => k.id)).not.toContain(skill.id);
    expect(forC.total).toBe(3);
    await createOk(s.url, body({ skill_id: skill.id, use_context_ir: true }), { key: "sk-ml-b" });
    expectBusiness(
      await create(s.url, body({ skill_id: skill.id, use_context_ir: true }), { key: "sk-ml-c" }),
      404,
      40401,
      skill.id,
    );
    expectBusiness(
      await call(s.url, "PUT", `/vid/v2/skills/${skill.id}`, {
        key: "sk-ml-c",
        body: { name: "x", content: "y" },
      }),
      404,
      40401,
    );
    expectBusiness(await call(s.url, "DELETE", `/vid/v2/skills/${skill.id}`, { key: "sk-ml-c" }), 404, 40401);
    expect((await call(s.url, "DELETE", `/vid/v2/skills/${skill.id}`, { key: "sk-ml-b" })).status).toBe(200);
  });

  it("idempotency keys are per company", async () => {
    const a = await createOk(s.url, body(), { key: "sk-ml-a", idem: "same-key" });
    const b = await createOk(s.url, body(), { key: "sk-ml-b", idem: "same-key" });
    const c = await createOk(s.url, body(), { key: "sk-ml-c", idem: "same-key" });
    expect(b).toBe(a);
    expect(c).not.toBe(a);
    expect((await getTask(s.url, c, "sk-ml-c")).id).toBe(c);
  });
});

describe("skills", () => {
  let s: Sandbox;
  beforeAll(async () => {
    s = await sandbox();
  });
  afterAll(() => s.close());

  const skills = (query = "") => call(s.url, "GET", `/vid/v2/skills${query}`);
  const createSkill = (b: unknown) => call(s.url, "POST", "/vid/v2/skills", { body: b });

  it("lists the three official skills with every field", async () => {
    const res = SkillList.parse((await skills()).body);
    expect(res.total).toBe(3);
    expect(res.items.map((k) => k.id).sort()).toEqual([
      "skill_official_camera_language",
      "skill_official_narrative_continuity",
      "skill_official_prompt_polish",
    ]);
    for (const k of res.items) {
      expect(k.official).toBe(true);
      expect(k.name).not.toBe("");
      expect(k.content).not.toBe("");
      expect(typeof k.description).toBe("string");
      expect(Number.isInteger(k.created_at) && Number.isInteger(k.updated_at)).toBe(true);
    }
  });

  it("creates, updates (an omitted description clears it) and deletes a custom skill", async () => {
    const t0 = nowS();
    const created = await createSkill({
      name: "Noir",
      description: "High contrast",
      content: "# Noir\n- hard light\n",
    });
    expect(created.status).toBe(200);
    const skill = SkillResponse.parse(created.body).skill;
    expect(skill).toEqual({
      id: expect.stringMatching(/^skill_/),
      name: "Noir",
      description: "High contrast",
      content: "# Noir\n- hard light\n",
      official: false,
      created_at: expect.any(Number),
      updated_at: expect.any(Number),
    });
    expect(skill.created_at).toBeGreaterThanOrEqual(t0);

    const listed = SkillList.parse((await skills()).body);
    expect(listed.total).toBe(4);
    expect(listed.items.find((k) => k.id === skill.id)).toEqual(skill);

    const updated = await call(s.url, "PUT", `/vid/v2/skills/${skill.id}`, {
      body: { name: "Noir 2", content: "# Noir\n- harder light\n" },
    });
    expect(updated.status).toBe(200);
    const after = SkillResponse.parse(updated.body).skill;
    expect(after).toMatchObject({
      id: skill.id,
      name: "Noir 2",
      content: "# Noir\n- harder light\n",
      official: false,
    });
    expect(after).not.toHaveProperty("description");
    expect(after.created_at).toBe(skill.created_at);
    expect(after.updated_at).toBeGreaterThanOrEqual(skill.updated_at!);
    expect(SkillList.parse((await skills()).body).items.find((k) => k.id === skill.id)).toEqual(after);

    const deleted = await call(s.url, "DELETE", `/vid/v2/skills/${skill.id}`);
    expect(deleted.status).toBe(200);
    expect(SkillDeleteResponse.parse(deleted.body)).toEqual({ skill_id: skill.id });
    expect(SkillList.parse((await skills()).body).total).toBe(3);
    expectBusiness(await call(s.url, "DELETE", `/vid/v2/skills/${skill.id}`), 404, 40401, skill.id);
    expectBusiness(
      await call(s.url, "PUT", `/vid/v2/skills/${skill.id}`, { body: { name: "x", content: "y" } }),
      404,
      40401,
    );
    // A deleted skill cannot be used by a task.
    expectBusiness(
      await create(s.url, body({ skill_id: skill.id, use_context_ir: true })),
      404,
      40401,
      skill.id,
    );
  });

  it("a skill without description omits it", async () => {
    const skill = SkillResponse.parse((await createSkill({ name: "Bare", content: "rules" })).body).skill;
    expect(skill).not.toHaveProperty("description");
    const empty = SkillResponse.parse(
      (await createSkill({ name: "Empty", description: "", content: "r" })).body,
    ).skill;
    expect(empty).not.toHaveProperty("description");
    await call(s.url, "DELETE", `/vid/v2/skills/${skill.id}`);
    await call(s.url, "DELETE", `/vid/v2/skills/${empty.id}`);
  });

  it("official skills cannot be updated or deleted; unknown skills are 404", async () => {
    const id = "skill_official_camera_language";
    expectBusiness(
      await call(s.url, "PUT", `/vid/v2/skills/${id}`, { body: { name: "mine", content: "now" } }),
      403,
      40301,
      id,
      "cannot be updated",
    );
    expectBusiness(await call(s.url, "DELETE", `/vid/v2/skills/${id}`), 403, 40301, "cannot be deleted");
    const official = SkillList.parse((await skills()).body).items.find((k) => k.id === id);
    expect(official?.name).toBe("Camera language");
    expectBusiness(
      await call(s.url, "PUT", "/vid/v2/skills/skill_unknown", { body: { name: "a", content: "b" } }),
      404,
      40401,
      "skill_unknown",
    );
    expectBusiness(await call(s.url, "DELETE", "/vid/v2/skills/skill_unknown"), 404, 40401);
  });

  it("validates the body: name and content required, JSON only, at most 64 KiB", async () => {
    expectBadRequest(await createSkill({ content: "x" }), "name: is required");
    expectBadRequest(await createSkill({ name: "   ", content: "x" }), "name: ", "non-empty");
    expectBadRequest(await createSkill({ name: "n" }), "content: is required");
    expectBadRequest(await createSkill({ name: "n", content: "" }), "content: ", "non-empty");
    expectBadRequest(await createSkill({ name: "n", content: "x", description: 5 }), "description: ");
    expectBadRequest(
      await call(s.url, "POST", "/vid/v2/skills", {
        rawBody: '{"name":"n","content":"x"}',
        headers: { "content-type": "text/markdown" },
      }),
      "Content-Type",
    );
    const big = await createSkill({ name: "big", content: "x".repeat(64 * 1024) });
    expect(big.status).toBe(400);
    expect(ValidationErrorBody.parse(big.body).error).toMatchObject({
      type: "request_too_large",
      http_code: "400",
      message: expect.stringContaining("64 KiB"),
    });
    // Just under the limit is fine.
    const fits = await createSkill({ name: "fits", content: "x".repeat(64 * 1024 - 40) });
    expect(fits.status).toBe(200);
    const fitsId = SkillResponse.parse(fits.body).skill.id;
    const bigPut = await call(s.url, "PUT", `/vid/v2/skills/${fitsId}`, {
      body: { name: "big", content: "y".repeat(64 * 1024) },
    });
    expect(ValidationErrorBody.parse(bigPut.body).error.type).toBe("request_too_large");
    expectBadRequest(
      await call(s.url, "PUT", `/vid/v2/skills/${fitsId}`, { body: { name: "x" } }),
      "content: ",
    );
    await call(s.url, "DELETE", `/vid/v2/skills/${fitsId}`);
    expect(SkillList.parse((await skills()).body).total).toBe(3);
  });

  it("keyword is trimmed and matches name or description, any case", async () => {
    const mine = SkillResponse.parse(
      (await createSkill({ name: "Rain scenes", description: "wet CAMERA lenses", content: "x" })).body,
    ).skill;
    const camera = SkillList.parse((await skills("?keyword=%20%20camera%20%20")).body);
    expect(camera.items.map((k) => k.id).sort()).toEqual([mine.id, "skill_official_camera_language"].sort());
    expect(camera.total).toBe(2);
    expect(SkillList.parse((await skills("?keyword=RAIN")).body).items.map((k) => k.id)).toEqual([mine.id]);
    expect(SkillList.parse((await skills("?keyword=%20%20")).body).total).toBe(4);
    expect(SkillList.parse((await skills("?keyword=zzz-nothing")).body)).toEqual({ items: [], total: 0 });
    await call(s.url, "DELETE", `/vid/v2/skills/${mine.id}`);
  });

  it("pages; page_size above 100 is treated as 100", async () => {
    const made = await Promise.all(
      Array.from({ length: 101 }, (_, i) => createSkill({ name: `bulk ${i}`, content: "x" })),
    );
    expect(made.every((r) => r.status === 200)).toBe(true);
    const big = SkillList.parse((await skills("?page_size=500")).body);
    expect(big.total).toBe(104);
    expect(big.items).toHaveLength(100);
    const second = SkillList.parse((await skills("?page_size=500&page_num=2")).body);
    expect(second.items).toHaveLength(4);
    const def = SkillList.parse((await skills()).body);
    expect(def.items).toHaveLength(20);
    const page = SkillList.parse((await skills("?page_size=3&page_num=2")).body);
    expect(page.items.map((k) => k.id)).toEqual(big.items.slice(3, 6).map((k) => k.id));
    expectBadRequest(await skills("?page_num=0"), "page_num: ");
    expectBadRequest(await skills("?page_size=abc"), "page_size: ");
    await Promise.all(made.map((r) => call(s.url, "DELETE", `/vid/v2/skills/${r.body.skill.id}`)));
    expect(SkillList.parse((await skills()).body).total).toBe(3);
  });

  it("a task with skill_id and use_context_ir runs, with use_context_ir in its usage", async () => {
    const skill = SkillResponse.parse(
      (await createSkill({ name: "Dolly", content: "Use dolly moves." })).body,
    ).skill;
    for (const skill_id of [skill.id, "skill_official_narrative_continuity"]) {
      const id = await createOk(s.url, body({ skill_id, use_context_ir: true }));
      const queued = await getTask(s.url, id);
      expect(queued.usage.use_context_ir).toBe(true);
      const done = await waitFor(s.url, id, "succeeded");
      expect(done.usage).toMatchObject({ use_context_ir: true, total_seconds: 5 });
    }
  });
});
