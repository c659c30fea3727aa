// Every method of both typed clients against the sandbox over HTTP, client-side validation that
// sends nothing, the cancel that tolerates its own retried success, and the reference-audio flow.
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { PointsPackageList, PointsSummary } from "../../src/api/common.js";
import {
  AuthenticationError,
  BusinessError,
  type Clients,
  ConnectionError,
  createClients,
  InsufficientPointsError,
  inspectReferenceAudio,
  NotFoundError,
  PermissionError,
  ReferenceAudioError,
  uploadReferenceAudio,
  ValidationError,
} from "../../src/api/index.js";
import { Asset, Pricing, SpeechTask, SpeechTaskList, UploadTicket, Voice } from "../../src/api/speech.js";
import { Skill, VideoTask, VideoTaskList } from "../../src/api/video.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/index.js";
import { type TempDir, tempDir } from "../fixtures/audio.js";
import { proxy } from "../fixtures/servers.js";
import { call, KEY, sandbox, until } from "../helpers/sandbox.js";

const FAST = { maxRetries: 4, baseDelayMs: 5, maxDelayMs: 20 };
const SPEECH = {
  text: "The light came on.",
  language: "EN" as const,
  voice: { source: "preset" as const, voice_id: "en_female_bright" },
};
const VIDEO = {
  model: "Vid-H3" as const,
  content: [{ type: "text" as const, text: "a lighthouse at dusk" }],
};

interface Stats {
  requests: Record<string, number>;
  tasks_created: { video: number; speech: number };
  idempotent_replays: number;
}

async function stats(s: Sandbox): Promise<Stats> {
  return (await call(s.url, "GET", "/_sandbox/stats", { key: null })).body;
}

function connect(url: string, apiKey = KEY): Clients {
  const c = createClients({ baseUrl: url, apiKey, policies: { read: FAST, create: FAST, write: FAST } });
  onTestFinished(() => c.close());
  return c;
}

async function fresh(options: SandboxOptions = {}): Promise<Sandbox> {
  const s = await sandbox(options);
  onTestFinished(() => s.close());
  return s;
}

async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected a failure, got a success");
}

let fast: Sandbox;
let files: TempDir;
beforeAll(async () => {
  fast = await sandbox();
  files = await tempDir();
});
afterAll(async () => {
  await fast.close();
  await files.remove();
});

describe("VideoClient", () => {
  it("creates, gets and lists a task, each answer matching its schema", async () => {
    const c = connect(fast.url);
    const id = await c.video.createTask({ ...VIDEO, duration: 4, resolution: "480P" });
    expect(id).toMatch(/\S/);
    const task = await c.video.getTask(id);
    expect(VideoTask.parse(task)).toMatchObject({ id, duration: 4, resolution: "480P", model: "Vid-H3" });
    const done = await until(
      () => c.video.getTask(id),
      (t) => t.status === "succeeded",
    );
    expect(done.content?.url).toMatch(/^http/);
    const page = await c.video.listPage(1, { pageSize: 5, status: "succeeded" });
    expect(VideoTaskList.parse(page).items.map((t) => t.id)).toContain(id);
    const all: string[] = [];
    for await (const t of c.video.listTasks({ status: "succeeded", model: "Vid-H3" })) all.push(t.id);
    expect(all).toContain(id);
  });

  it("a create with a stable idempotency key returns the same task", async () => {
    const s = await fresh();
    const c = connect(s.url);
    const a = await c.video.createTask(VIDEO, { idempotencyKey: "shot-1" });
    const b = await c.video.createTask({ ...VIDEO, duration: 9 }, { idempotencyKey: "shot-1" });
    expect(b).toBe(a);
    expect((await stats(s)).tasks_created.video).toBe(1);
  });

  it("reads points packages and the summary", async () => {
    const c = connect(fast.url);
    const packages = await c.video.listPackages();
    expect(PointsPackageList.parse(packages).items.length).toBeGreaterThan(0);
    expect(packages.items[0]).toMatchObject({ status: "active" });
    const summary = await c.video.pointsSummary();
    expect(PointsSummary.parse(summary).total_points).toBeGreaterThan(0);
    expect(summary.available_points).toBe(summary.total_points - summary.reserved_points);
  });

  it("lists, creates, updates and deletes skills", async () => {
    const s = await fresh();
    const c = connect(s.url);
    const official: string[] = [];
    for await (const skill of c.video.listSkills()) official.push(Skill.parse(skill).id);
    expect(official).toContain("skill_official_camera_language");

    const created = await c.video.createSkill({
      name: "noir",
      description: "dark",
      content: "# Noir\nLow key.",
    });
    expect(Skill.parse(created)).toMatchObject({ name: "noir", description: "dark", official: false });
    const updated = await c.video.updateSkill(created.id, { name: "noir", content: "# Noir\nHarder light." });
    expect(updated.content).toBe("# Noir\nHarder light.");
    const found: Skill[] = [];
    for await (const skill of c.video.listSkills({ keyword: "noir" })) found.push(skill);
    expect(found.map((k) => k.id)).toEqual([created.id]);
    expect(await c.video.deleteSkill(created.id)).toBe(created.id);
    expect(await failure(c.video.deleteSkill(created.id))).toBeInstanceOf(NotFoundError);
    const refused = await failure(c.video.deleteSkill("skill_official_camera_language"));
    expect(refused).toBeInstanceOf(PermissionError);
  });

  it("walks more than 100 skills", async () => {
    const s = await fresh();
    const c = connect(s.url);
    await Promise.all(
      Array.from({ length: 105 }, (_, i) => c.video.createSkill({ name: `s${i}`, content: "x" })),
    );
    let n = 0;
    for await (const _ of c.video.listSkills()) n++;
    expect(n).toBe(105 + 3);
  });

  it("reports an unknown task as NotFoundError with the service's request id", async () => {
    const c = connect(fast.url);
    const e = await failure(c.video.getTask("vid_missing"));
    expect(e).toBeInstanceOf(NotFoundError);
    expect((e as NotFoundError).requestId).toMatch(/^req_/);
    expect(e.message).toContain("vid_missing");
  });

  it("reports a points shortage (HTTP 200, non-zero RetCode) as InsufficientPointsError", async () => {
    const s = await fresh({ points: 10 });
    const c = connect(s.url);
    const e = await failure(c.video.createTask(VIDEO));
    expect(e).toBeInstanceOf(InsufficientPointsError);
    expect((e as InsufficientPointsError).status).toBe(200);
    expect((await stats(s)).tasks_created.video).toBe(0);
  });

  it("reports a refused key as AuthenticationError", async () => {
    const c = connect(fast.url, "sk-ml-wrong");
    const e = await failure(c.video.pointsSummary());
    expect(e).toBeInstanceOf(AuthenticationError);
    expect(e.message).toContain("the API key was refused");
    expect(e.message).not.toContain("sk-ml-wrong");
  });

  it("reports a request the service refuses as ValidationError with its message", async () => {
    const c = connect(fast.url);
    // Valid for the client's schema; the sandbox cannot fetch the material.
    const e = await failure(
      c.video.createTask({
        model: "Vid-H3",
        content: [
          { type: "image_url", image_url: { url: "http://127.0.0.1:9/missing.png" }, role: "first_frame" },
        ],
      }),
    );
    expect(e).toBeInstanceOf(ValidationError);
    expect((e as ValidationError).status).toBe(400);
    expect(e.message).toContain("content[0]");
  });
});

describe("SpeechClient", () => {
  it("creates, gets, lists and deletes a task", async () => {
    const c = connect(fast.url);
    const id = await c.speech.createTask(SPEECH);
    expect(SpeechTask.parse(await c.speech.getTask(id)).task_id).toBe(id);
    const done = await until(
      () => c.speech.getTask(id),
      (t) => t.status === "succeeded",
    );
    expect(done.output_url).toMatch(/^http/);
    const page = await c.speech.listPage(0, { taskId: id, statuses: ["succeeded"], limit: 5 });
    expect(SpeechTaskList.parse(page).items.map((t) => t.task_id)).toEqual([id]);
    const listed: string[] = [];
    for await (const t of c.speech.listTasks({ statuses: ["succeeded"], startTime: done.created_at }))
      listed.push(t.task_id);
    expect(listed).toContain(id);
    await c.speech.deleteTask(id);
    expect(await failure(c.speech.getTask(id))).toBeInstanceOf(NotFoundError);
  });

  it("repeats a create with the same idempotency key into one task", async () => {
    const s = await fresh();
    const c = connect(s.url);
    const a = await c.speech.createTask(SPEECH, { idempotencyKey: "line-1" });
    const b = await c.speech.createTask(SPEECH, { idempotencyKey: "line-1" });
    const d = await c.speech.createTask(SPEECH);
    expect(b).toBe(a);
    expect(d).not.toBe(a);
    const after = await stats(s);
    expect(after.tasks_created.speech).toBe(2);
    expect(after.idempotent_replays).toBe(1);
  });

  it("lists preset and custom voices", async () => {
    const c = connect(fast.url);
    // One answer, whole: its items, its total and whether they agree.
    const { items: preset, ...whole } = await c.speech.listVoices();
    expect(whole).toEqual({ total: 7, complete: true });
    expect(preset.length).toBe(7);
    for (const v of preset) expect(Voice.parse(v).kind).toBe("preset");
    expect(Array.isArray((await c.speech.listVoices("custom")).items)).toBe(true);
  });

  it("reads pricing and balance", async () => {
    const c = connect(fast.url);
    const pricing = await c.speech.pricing();
    expect(Pricing.parse(pricing)).toMatchObject({ enabled: true, unit_characters: 10 });
  });

  it("reports disabled billing (HTTP 200 with a RetCode) as a BusinessError", async () => {
    const s = await fresh();
    await call(s.url, "POST", "/_sandbox/pricing", { key: null, body: { enabled: false } });
    const c = connect(s.url);
    const e = await failure(c.speech.createTask(SPEECH));
    expect(e).toBeInstanceOf(BusinessError);
    expect((e as BusinessError).status).toBe(200);
    expect(e.message).toContain("billing is disabled");
  });

  it("refuses to delete a preset voice and an unknown one", async () => {
    const c = connect(fast.url);
    expect(await failure(c.speech.deleteVoice("en_female_bright"))).toBeInstanceOf(PermissionError);
    expect(await failure(c.speech.deleteVoice("voice_nope"))).toBeInstanceOf(NotFoundError);
  });

  it("requests an upload URL, uploads, registers the asset, makes and deletes a voice", async () => {
    const s = await fresh();
    const c = connect(s.url);
    const path = await files.wav("take.wav", 2000);
    const size = (await import("node:fs")).statSync(path).size;
    const ticket = await c.speech.requestUpload({
      file_name: "take.wav",
      content_type: "audio/wav",
      file_size: size,
    });
    expect(UploadTicket.parse(ticket).upload_url).toContain("signature=");
    const { createReadStream } = await import("node:fs");
    await c.http.upload(ticket.upload_url, () => createReadStream(path), size, "audio/wav", {
      what: "upload",
    });
    const asset = await c.speech.registerAsset({
      object_key: ticket.object_key,
      file_name: "take.wav",
      content_type: "audio/wav",
      file_size: size,
      duration_ms: 2000,
    });
    expect(Asset.parse(asset)).toMatchObject({ file_size: size, duration_ms: 2000 });
    const voice = await c.speech.createVoice(
      { asset_id: asset.asset_id, name: "Narrator" },
      { idempotencyKey: "v-1" },
    );
    expect(Voice.parse(voice)).toMatchObject({ kind: "custom", name: "Narrator" });
    const again = await c.speech.createVoice(
      { asset_id: asset.asset_id, name: "Narrator" },
      { idempotencyKey: "v-1" },
    );
    expect(again.voice_id).toBe(voice.voice_id);
    expect((await c.speech.listVoices("custom")).items.map((v) => v.voice_id)).toEqual([voice.voice_id]);
    // A task can speak with the asset or the voice.
    await c.speech.createTask({ ...SPEECH, voice: { source: "asset", asset_id: asset.asset_id } });
    const t = await c.speech.createTask({ ...SPEECH, voice: { source: "custom", voice_id: voice.voice_id } });
    await until(
      () => c.speech.getTask(t),
      (task) => task.status === "succeeded",
    );
    await c.speech.deleteVoice(voice.voice_id);
    expect((await c.speech.listVoices("custom")).items).toEqual([]);
  });
});

describe("client-side validation", () => {
  it("refuses bad requests with field-naming messages and sends nothing", async () => {
    const s = await fresh();
    const c = connect(s.url);
    const before = await stats(s);
    const cases: Array<[Promise<unknown>, string]> = [
      [c.video.createTask({ ...VIDEO, duration: 99 }), "duration"],
      [c.video.createTask({ model: "Vid-H3", content: [] }), "content"],
      [c.video.createTask({ ...VIDEO, skill_id: "skill_x" }), "skill_id"],
      [c.video.createSkill({ name: " ", content: "x" }), "name"],
      [c.video.updateSkill("skill_1", { name: "n", content: "" }), "content"],
      [c.speech.createTask({ ...SPEECH, text: "!!!" }), "text"],
      [c.speech.createTask({ ...SPEECH, speed: 3 }), "speed"],
      [c.speech.createTask({ ...SPEECH, extra: 1 } as never), "extra"],
      [
        c.speech.requestUpload({ file_name: "a.wav", content_type: "audio/mpeg", file_size: 10 }),
        "content_type",
      ],
      [
        c.speech.requestUpload({
          file_name: "a.wav",
          content_type: "audio/wav",
          file_size: 16 * 1024 * 1024,
        }),
        "file_size",
      ],
      [
        c.speech.registerAsset({
          object_key: "k",
          file_name: "a.wav",
          content_type: "audio/wav",
          file_size: 9,
          duration_ms: 100,
        }),
        "duration_ms",
      ],
      [c.speech.createVoice({ asset_id: "asset_1", name: "" }), "name"],
    ];
    for (const [promise, field] of cases) {
      const e = await failure(promise);
      expect(e, field).toBeInstanceOf(ValidationError);
      expect((e as ValidationError).status, field).toBeUndefined();
      expect(e.message, field).toContain(field);
    }
    expect(await stats(s)).toEqual(before);
  });

  it("refuses an Idempotency-Key the service would refuse, before sending", async () => {
    const s = await fresh();
    const c = connect(s.url);
    for (const key of ["k".repeat(129), "   "]) {
      expect(await failure(c.video.createTask(VIDEO, { idempotencyKey: key }))).toBeInstanceOf(
        ValidationError,
      );
      expect(await failure(c.speech.createTask(SPEECH, { idempotencyKey: key }))).toBeInstanceOf(
        ValidationError,
      );
    }
    expect((await stats(s)).requests).toEqual({});
  });
});

describe("cancel", () => {
  // Realistic durations: tasks stay queued long enough to be cancelled.
  let slow: Sandbox;
  beforeAll(async () => {
    slow = await sandbox({ timeScale: 1 });
  });
  afterAll(() => slow.close());

  it("cancels queued tasks of both services", async () => {
    const c = connect(slow.url);
    const v = await c.video.createTask(VIDEO);
    expect(await c.video.cancelTask(v)).toEqual({ task_id: v, action: "delete", status: "cancelled" });
    const sp = await c.speech.createTask(SPEECH);
    expect(await c.speech.cancelTask(sp)).toEqual({ task_id: sp, status: "cancelled" });
    expect((await c.speech.getTask(sp)).status).toBe("cancelled");
  });

  it("a retried cancel whose first attempt worked still reports cancelled", async () => {
    const c0 = connect(slow.url);
    const v = await c0.video.createTask(VIDEO);
    const sp = await c0.speech.createTask(SPEECH);
    // The first cancel of each reaches the service, then its answer is lost.
    const seen = new Set<string>();
    const p = await proxy(slow.url, (_n, hit) => {
      if (!(hit.method === "DELETE" || hit.url.endsWith("/cancel")) || seen.has(hit.url)) return undefined;
      seen.add(hit.url);
      return "after";
    });
    onTestFinished(() => p.close());
    const c = connect(p.url);
    expect(await c.video.cancelTask(v)).toMatchObject({ task_id: v, status: "cancelled" });
    expect(await c.speech.cancelTask(sp)).toMatchObject({ task_id: sp, status: "cancelled" });
    const cancels = p.hits.filter((h) => h.method === "DELETE" || h.url.endsWith("/cancel"));
    expect(cancels).toHaveLength(4);
    expect((await c0.video.getTask(v)).status).toBe("cancelled");
  });

  it("a refused cancel of a task that is not cancelled is still an error", async () => {
    const c = connect(fast.url);
    const v = await c.video.createTask(VIDEO);
    await until(
      () => c.video.getTask(v),
      (t) => t.status === "succeeded",
    );
    const e = await failure(c.video.cancelTask(v));
    expect(e).toBeInstanceOf(BusinessError);
    expect(e.message).toContain("already ended");
  });
});

describe("reference audio", () => {
  async function uploads(s: Sandbox) {
    const r = (await stats(s)).requests;
    return {
      urls: r["POST /audio/v1/upload_urls"] ?? 0,
      puts: r["PUT /_uploads/{id}"] ?? 0,
      assets: r["POST /audio/v1/assets"] ?? 0,
    };
  }

  it("turns a good WAV into a registered asset in one call", async () => {
    const s = await fresh();
    const c = connect(s.url);
    const path = await files.wav("voice.wav", 3000);
    const asset = await uploadReferenceAudio(c.http, c.speech, path);
    expect(Asset.parse(asset)).toMatchObject({
      file_name: "voice.wav",
      content_type: "audio/wav",
      duration_ms: 3000,
      file_size: 44 + 3 * 24000 * 2,
    });
    expect(await uploads(s)).toEqual({ urls: 1, puts: 1, assets: 1 });
  });

  it("starts the flow over when the registration's answer is lost, leaving one usable asset", async () => {
    const s = await fresh();
    let registrations = 0;
    const p = await proxy(s.url, (_n, hit) =>
      hit.url === "/audio/v1/assets" && ++registrations === 1 ? "after" : undefined,
    );
    onTestFinished(() => p.close());
    const c = connect(p.url);
    const asset = await uploadReferenceAudio(c.http, c.speech, await files.wav("retry.wav", 1000));
    expect(asset.duration_ms).toBe(1000);
    expect(await uploads(s)).toEqual({ urls: 2, puts: 2, assets: 2 });
    const voice = await c.speech.createVoice({ asset_id: asset.asset_id, name: "Retried" });
    expect(voice.kind).toBe("custom");
  });

  it("gives up after a bounded number of flows", async () => {
    const s = await fresh();
    const p = await proxy(s.url, (_n, hit) => (hit.url === "/audio/v1/assets" ? "before" : undefined));
    onTestFinished(() => p.close());
    const c = connect(p.url);
    const e = await failure(uploadReferenceAudio(c.http, c.speech, await files.wav("lost.wav", 1000)));
    expect(e).toBeInstanceOf(ConnectionError);
    expect(await uploads(s)).toEqual({ urls: 4, puts: 4, assets: 0 });
  });

  it("accepts the boundaries 0.5 s and 15 s and an upper-case extension", async () => {
    expect((await inspectReferenceAudio(await files.wav("short.WAV", 500))).durationMs).toBe(500);
    expect((await inspectReferenceAudio(await files.wav("long.wav", 15_000))).durationMs).toBe(15_000);
  });

  it("refuses files the service would refuse before anything is uploaded", async () => {
    const s = await fresh();
    const c = connect(s.url);
    const cases: Array<[string, RegExp]> = [
      [await files.file("voice.txt", "hello"), /expected a \.wav, \.mp3, \.flac, \.ogg, \.m4a file/],
      [await files.file("noext", "hello"), /expected a/],
      [await files.file("empty.wav", ""), /size from 1 to 15728640 bytes.*got 0/],
      [await files.sparse("huge.wav", 15 * 1024 * 1024 + 1), /got 15728641/],
      [await files.wav("blip.wav", 400), /duration from 0\.5 to 15 s, got 0\.40 s/],
      [await files.wav("speech.wav", 16_000), /duration from 0\.5 to 15 s, got 16\.00 s/],
      [await files.file("noise.wav", Buffer.alloc(4000, 7)), /not a readable|duration/],
      [`${files.path}/absent.wav`, /absent.wav: file not found/],
    ];
    for (const [path, message] of cases) {
      const e = await failure(uploadReferenceAudio(c.http, c.speech, path));
      expect(e, path).toBeInstanceOf(ReferenceAudioError);
      expect(e.message, path).toMatch(message);
    }
    expect(await uploads(s)).toEqual({ urls: 0, puts: 0, assets: 0 });
  });
});
