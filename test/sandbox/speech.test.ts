// Integration tests of the sandbox's text-to-speech service over real HTTP on loopback, written
// from /work/shared/spec/text-to-speech-api.md and /work/shared/docs/sandbox-contract.md.
import { randomUUID } from "node:crypto";
import { parseBuffer } from "music-metadata";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import {
  BusinessErrorBody,
  PointsPackageList,
  PointsSummary,
  ValidationErrorBody,
} from "../../src/api/common.js";
import {
  AssetResponse,
  Pricing,
  SpeechCancelResponse,
  SpeechCreateResponse,
  SpeechDeleteResponse,
  type SpeechTask,
  SpeechTaskList,
  SpeechTaskResponse,
  UploadTicket,
  VoiceDeleteResponse,
  VoiceList,
  VoiceResponse,
} from "../../src/api/speech.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/index.js";
import { makeWav } from "../../src/sandbox/media.js";
import { call, download, KEY, type Reply, sandbox, until } from "../helpers/sandbox.js";

const ACME2 = "sk-ml-acme2"; // a second key of organization acme
const GLOBEX = "sk-ml-globex"; // a key of another organization
const KEYS = [`${KEY}=acme`, `${ACME2}=acme`, `${GLOBEX}=globex`];

const JOBS = "/audio/v1/speech/jobs";
const PRESET = { source: "preset", voice_id: "en_female_bright" } as const;
const VALID = { text: "Every night, the light came on at seven.", language: "EN", voice: PRESET };
const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

/** A sandbox that lives for one test only. */
async function fresh(options: SandboxOptions = {}): Promise<Sandbox> {
  const s = await sandbox({ keys: KEYS, ...options });
  onTestFinished(() => s.close());
  return s;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

function expectValidation(res: Reply, ...parts: string[]): void {
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  const body = ValidationErrorBody.parse(res.body);
  expect(body.type).toBe("error");
  expect(body.error.type).toBe("bad_request_error");
  expect(body.error.http_code).toBe("400");
  expect(body.request_id).toBe(res.headers["x-request-id"]);
  for (const part of parts) expect(body.error.message).toContain(part);
}

function expectBusiness(res: Reply, status: number, retCode: number, ...parts: string[]): void {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  const body = BusinessErrorBody.parse(res.body);
  expect(Object.keys(body).sort()).toEqual(["Message", "RetCode", "request_uuid"]);
  expect(body.RetCode).toBe(retCode);
  expect(body.request_uuid).toBe(res.headers["x-request-id"]);
  for (const part of parts) expect(body.Message).toContain(part);
}

function client(s: Sandbox, key: string = KEY) {
  const api = (method: string, path: string, opts: Parameters<typeof call>[3] = {}) =>
    call(s.url, method, path, { key, ...opts });
  /** `idem: null` sends no Idempotency-Key. */
  const createRaw = (body: unknown, idem: string | null = randomUUID()) =>
    api("POST", JOBS, idem === null ? { body } : { body, idem });
  const create = async (body: unknown, idem: string = randomUUID()): Promise<string> => {
    const res = await createRaw(body, idem);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return SpeechCreateResponse.parse(res.body).task_id;
  };
  const get = async (id: string): Promise<SpeechTask> => {
    const res = await api("GET", `${JOBS}/${id}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return SpeechTaskResponse.parse(res.body).task;
  };
  const settle = (id: string) =>
    until(
      () => get(id),
      (t) => TERMINAL.has(t.status),
    );
  const waitFor = (id: string, status: string) =>
    until(
      () => get(id),
      (t) => t.status === status,
    );
  const list = async (query = ""): Promise<SpeechTaskList> => {
    const res = await api("GET", `${JOBS}${query}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return SpeechTaskList.parse(res.body);
  };
  const pricing = async (): Promise<Pricing> => {
    const res = await api("GET", "/audio/v1/pricing");
    expect(res.status).toBe(200);
    return Pricing.parse(res.body);
  };
  const summary = async (): Promise<PointsSummary> => {
    const res = await api("GET", "/vid/v2/query/point_usage_summary");
    expect(res.status).toBe(200);
    return PointsSummary.parse(res.body);
  };
  const packages = async (): Promise<PointsPackageList> => {
    const res = await api("GET", "/vid/v2/query/point_packages");
    expect(res.status).toBe(200);
    return PointsPackageList.parse(res.body);
  };
  const voices = async (kind?: string): Promise<VoiceList> => {
    const res = await api("GET", `/audio/v1/voices${kind === undefined ? "" : `?kind=${kind}`}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return VoiceList.parse(res.body);
  };
  const ticket = async (fileName: string, contentType: string, size: number) => {
    const res = await api("POST", "/audio/v1/upload_urls", {
      body: { file_name: fileName, content_type: contentType, file_size: size },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return UploadTicket.parse(res.body);
  };
  /** upload_urls -> PUT -> assets. */
  const uploadAsset = async (
    opts: { bytes?: Buffer; fileName?: string; contentType?: string; durationMs?: number } = {},
  ) => {
    const bytes = opts.bytes ?? makeWav(1500);
    const fileName = opts.fileName ?? "reference.wav";
    const contentType = opts.contentType ?? "audio/wav";
    const t = await ticket(fileName, contentType, bytes.length);
    const up = await put(t.upload_url, bytes, contentType);
    expect(up.status, up.text).toBe(200);
    const reg = await api("POST", "/audio/v1/assets", {
      body: {
        object_key: t.object_key,
        file_name: fileName,
        content_type: contentType,
        file_size: bytes.length,
        duration_ms: opts.durationMs ?? 1500,
      },
    });
    expect(reg.status, JSON.stringify(reg.body)).toBe(200);
    return { ticket: t, asset: AssetResponse.parse(reg.body).asset, bytes };
  };
  const createVoice = async (assetId: string, name: string, idem: string = randomUUID()) => {
    const res = await api("POST", "/audio/v1/voices", { body: { asset_id: assetId, name }, idem });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return VoiceResponse.parse(res.body).voice;
  };
  return {
    api,
    createRaw,
    create,
    get,
    settle,
    waitFor,
    list,
    pricing,
    summary,
    packages,
    voices,
    ticket,
    uploadAsset,
    createVoice,
  };
}

async function put(url: string, data: Buffer, contentType?: string, headers: Record<string, string> = {}) {
  const res = await request(url, {
    method: "PUT",
    headers: { ...(contentType === undefined ? {} : { "content-type": contentType }), ...headers },
    body: data,
  });
  const text = await res.body.text();
  return {
    status: res.statusCode,
    headers: res.headers,
    text,
    json: text ? (JSON.parse(text) as any) : undefined,
  };
}

async function stats(s: Sandbox) {
  const res = await call(s.url, "GET", "/_sandbox/stats", { key: null });
  expect(res.status).toBe(200);
  return res.body as {
    requests: Record<string, number>;
    tasks_created: { video: number; speech: number };
    idempotent_replays: number;
  };
}

async function setPricing(s: Sandbox, body: unknown) {
  const res = await call(s.url, "POST", "/_sandbox/pricing", { key: null, body });
  return res;
}

async function addPackage(s: Sandbox, org: string, body: unknown) {
  const res = await call(s.url, "POST", `/_sandbox/orgs/${org}/packages`, { key: null, body });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

/** The fields of a canonical 44-byte PCM WAV header. */
function wavInfo(data: Buffer) {
  expect(data.length).toBeGreaterThanOrEqual(44);
  expect(data.toString("ascii", 0, 4)).toBe("RIFF");
  expect(data.readUInt32LE(4)).toBe(data.length - 8);
  expect(data.toString("ascii", 8, 12)).toBe("WAVE");
  expect(data.toString("ascii", 12, 16)).toBe("fmt ");
  expect(data.toString("ascii", 36, 40)).toBe("data");
  const channels = data.readUInt16LE(22);
  const sampleRate = data.readUInt32LE(24);
  const bits = data.readUInt16LE(34);
  const dataBytes = data.readUInt32LE(40);
  expect(dataBytes).toBe(data.length - 44);
  return {
    format: data.readUInt16LE(20),
    channels,
    sampleRate,
    bits,
    durationMs: (dataBytes / (channels * (bits / 8)) / sampleRate) * 1000,
  };
}

/** Waits for the start of a wall-clock second, so a URL that expires at a whole second gets ~1 s. */
async function atSecondStart(): Promise<void> {
  await sleep(1005 - (Date.now() % 1000));
}

// ---------------------------------------------------------------------------------------------
// shared sandboxes
// ---------------------------------------------------------------------------------------------

/** time-scale 0.001: a plain task ends within a few tens of milliseconds. */
let sb: Sandbox;
/** time-scale 0.02: a `[sandbox:slow]` task waits 200 ms in the queue and generates for >= 400 ms. */
let slowSb: Sandbox;
/** time-scale 0.01: upload URLs stay valid 9 s. */
let upSb: Sandbox;
let c: ReturnType<typeof client>;
let slow: ReturnType<typeof client>;
let up: ReturnType<typeof client>;

beforeAll(async () => {
  [sb, slowSb, upSb] = await Promise.all([
    sandbox({ keys: KEYS }),
    sandbox({ keys: KEYS, timeScale: 0.02 }),
    sandbox({ keys: KEYS, timeScale: 0.01 }),
  ]);
  c = client(sb);
  slow = client(slowSb);
  up = client(upSb);
});

afterAll(async () => {
  await Promise.all([sb?.close(), slowSb?.close(), upSb?.close()]);
});

// ---------------------------------------------------------------------------------------------
// create: validation
// ---------------------------------------------------------------------------------------------

const V8 = (...v: number[]) => [...v, ...Array(8 - v.length).fill(0)];
const ASSET_VOICE = { source: "asset", asset_id: "asset_does_not_matter" };

interface BadCase {
  name: string;
  body: Record<string, unknown>;
  parts: string[];
}

const BAD: BadCase[] = [
  { name: "text missing", body: { text: undefined }, parts: ["text: is required"] },
  {
    name: "text empty",
    body: { text: "" },
    parts: ['text: expected at least one letter, Han character or digit, got ""'],
  },
  {
    name: "text only CJK punctuation",
    body: { text: "，。！？……" },
    parts: ["text: expected at least one letter", "(only whitespace, punctuation or symbols)"],
  },
  {
    name: "text only whitespace",
    body: { text: " \t\n  " },
    parts: ["only whitespace, punctuation or symbols"],
  },
  {
    name: "text only emoji and symbols",
    body: { text: "😀🎉 +-=" },
    parts: ["text: expected at least one letter"],
  },
  {
    name: "text over 2000 characters",
    body: { text: "a".repeat(2001) },
    parts: ["text: expected at most 2000 characters, got 2001"],
  },
  {
    name: "text over 2000 code points of emoji",
    body: { text: `a${"😀".repeat(2000)}` },
    parts: ["text: expected at most 2000 characters, got 2001"],
  },
  { name: "text not a string", body: { text: 123 }, parts: ["text: expected a string, got 123"] },
  {
    name: "language lowercase",
    body: { language: "zh" },
    parts: ['language: expected one of "ZH", "EN", "JA", "ES", "AR", got "zh"'],
  },
  {
    name: "language unknown",
    body: { language: "FR" },
    parts: ['language: expected one of "ZH"', 'got "FR"'],
  },
  {
    name: "speed below 0.5",
    body: { speed: 0.4 },
    parts: ["speed: expected 0 (meaning 1.0) or a number from 0.5 to 2.0, got 0.4"],
  },
  { name: "speed above 2.0", body: { speed: 2.01 }, parts: ["speed: expected 0 (meaning 1.0)", "got 2.01"] },
  { name: "speed negative", body: { speed: -1 }, parts: ["speed: expected 0 (meaning 1.0)", "got -1"] },
  { name: "speed as string", body: { speed: "1" }, parts: ['speed: expected a number, got "1"'] },
  {
    name: "auto_emotion not boolean",
    body: { auto_emotion: "yes" },
    parts: ['auto_emotion: expected a boolean, got "yes"'],
  },
  {
    name: "emotion_description over 200",
    body: { emotion_description: "x".repeat(201) },
    parts: ["emotion_description: expected at most 200 characters, got 201"],
  },
  {
    name: "emotion_strength above 1",
    body: { emotion_strength: 1.01 },
    parts: ["emotion_strength: expected a number from 0 to 1, got 1.01"],
  },
  {
    name: "emotion_strength negative",
    body: { emotion_strength: -0.1 },
    parts: ["emotion_strength: expected a number from 0 to 1, got -0.1"],
  },
  {
    name: "emotion_vector with 7 elements",
    body: { auto_emotion: false, emotion_vector: [0.1, 0, 0, 0, 0, 0, 0] },
    parts: ["emotion_vector: expected exactly 8 elements", "got 7"],
  },
  {
    name: "emotion_vector with 9 elements",
    body: { auto_emotion: false, emotion_vector: [...V8(0.1), 0] },
    parts: ["emotion_vector: expected exactly 8 elements", "got 9"],
  },
  {
    name: "emotion_vector element above 0.8",
    body: { auto_emotion: false, emotion_vector: V8(0.81) },
    parts: ["emotion_vector[0]: expected a number from 0 to 0.8, got 0.81"],
  },
  {
    name: "emotion_vector element negative",
    body: { auto_emotion: false, emotion_vector: V8(0.5, -0.1) },
    parts: ["emotion_vector[1]: expected a number from 0 to 0.8, got -0.1"],
  },
  {
    name: "emotion_vector element null",
    body: { auto_emotion: false, emotion_vector: [0.2, 0, null, 0, 0, 0, 0, 0] },
    parts: ["emotion_vector[2]: expected a number from 0 to 0.8, got null"],
  },
  {
    name: "emotion_vector all zero",
    body: { auto_emotion: false, emotion_vector: V8() },
    parts: ["emotion_vector: expected the elements to sum to more than 0 and at most 0.8, got 0"],
  },
  {
    name: "emotion_vector sum above 0.8",
    body: { auto_emotion: false, emotion_vector: V8(0.5, 0.4) },
    parts: ["emotion_vector: expected the elements to sum to more than 0 and at most 0.8, got 0.9"],
  },
  {
    name: "emotion_vector without auto_emotion=false",
    body: { emotion_vector: V8(0.5) },
    parts: ["auto_emotion: must be sent as false when emotion_vector is given, got nothing"],
  },
  {
    name: "emotion_vector with auto_emotion=true",
    body: { auto_emotion: true, emotion_vector: V8(0.5) },
    parts: ["auto_emotion: must be sent as false when emotion_vector is given, got true"],
  },
  {
    name: "emotion_vector with a description",
    body: { auto_emotion: false, emotion_vector: V8(0.5), emotion_description: "wistful" },
    parts: ['emotion_description: must be omitted or empty when emotion_vector is given, got "wistful"'],
  },
  {
    name: "emotion_vector_mode without a vector",
    body: { emotion_vector_mode: "mixed" },
    parts: ['emotion_vector_mode: is only allowed together with emotion_vector, got "mixed"'],
  },
  {
    name: "single mode with two non-zero elements",
    body: { auto_emotion: false, emotion_vector: V8(0.3, 0.3), emotion_vector_mode: "single" },
    parts: ['emotion_vector_mode: "single" requires exactly one non-zero element in emotion_vector, got 2'],
  },
  {
    name: "unknown emotion_vector_mode",
    body: { auto_emotion: false, emotion_vector: V8(0.3), emotion_vector_mode: "blend" },
    parts: ['emotion_vector_mode: expected one of "single", "mixed", got "blend"'],
  },
  {
    name: "pronunciation word not in text",
    body: { pronunciations: [{ word: "lamp", kind: "alias", value: "lamp" }] },
    parts: ['pronunciations[0].word: must occur in text, got "lamp"'],
  },
  {
    name: "pronunciation words not unique",
    body: {
      pronunciations: [
        { word: "light", kind: "alias", value: "lite" },
        { word: " light ", kind: "cmu", value: "L AY1 T" },
      ],
    },
    parts: ['pronunciations[1].word: must be unique within the request, got "light" again'],
  },
  {
    name: "pinyin for a non-Han word",
    body: { pronunciations: [{ word: "light", kind: "pinyin", value: "deng1" }] },
    parts: ['pronunciations[0].word: expected only Han characters for kind "pinyin", got "light"'],
  },
  {
    name: "pinyin with too few syllables",
    body: {
      text: "灯塔亮了。",
      language: "ZH",
      pronunciations: [{ word: "灯塔", kind: "pinyin", value: "deng1" }],
    },
    parts: [
      'pronunciations[0].value: expected 2 pinyin syllables separated by spaces (one per Han character of "灯塔"), found 1',
    ],
  },
  {
    name: "pinyin with too many syllables",
    body: {
      text: "灯塔亮了。",
      language: "ZH",
      pronunciations: [{ word: "灯塔", kind: "pinyin", value: "deng1 ta3 liang4" }],
    },
    parts: ["pronunciations[0].value: expected 2 pinyin syllables", "found 3"],
  },
  {
    name: "pinyin syllable without a tone",
    body: {
      text: "灯塔亮了。",
      language: "ZH",
      pronunciations: [{ word: "灯塔", kind: "pinyin", value: "deng ta3" }],
    },
    parts: ["pronunciations[0].value: expected every syllable to carry a tone", 'got "deng"'],
  },
  {
    name: "cmu with an unknown phoneme",
    body: { pronunciations: [{ word: "light", kind: "cmu", value: "L AY1 XX" }] },
    parts: ["pronunciations[0].value: expected CMU/ARPAbet phonemes", 'unknown "XX"'],
  },
  {
    name: "kana with latin letters",
    body: {
      text: "ライトが灯る",
      language: "JA",
      pronunciations: [{ word: "ライト", kind: "kana", value: "らいとx" }],
    },
    parts: ["pronunciations[0].value: expected only hiragana or katakana", '"x" is not kana'],
  },
  {
    name: "pronunciation word with <",
    body: { text: "see a<b here", pronunciations: [{ word: "a<b", kind: "alias", value: "a less than b" }] },
    parts: ['pronunciations[0].word: must not contain control characters or "<", ">", "|"'],
  },
  {
    name: "pronunciation value with |",
    body: { pronunciations: [{ word: "light", kind: "alias", value: "lite|light" }] },
    parts: ['pronunciations[0].value: must not contain control characters or "<", ">", "|"', 'contains "|"'],
  },
  {
    name: "pronunciation value with a control character",
    body: { pronunciations: [{ word: "light", kind: "alias", value: "li\u0007te" }] },
    parts: ["pronunciations[0].value: must not contain", "control character U+0007"],
  },
  {
    name: "pronunciation word blank",
    body: { pronunciations: [{ word: "   ", kind: "alias", value: "x" }] },
    parts: ["pronunciations[0].word: expected 1 to 64 characters after trimming, got 0"],
  },
  {
    name: "pronunciation word over 64",
    body: {
      text: `${"w".repeat(65)} now`,
      pronunciations: [{ word: "w".repeat(65), kind: "alias", value: "x" }],
    },
    parts: ["pronunciations[0].word: expected 1 to 64 characters after trimming, got 65"],
  },
  {
    name: "pronunciation value over 512",
    body: { pronunciations: [{ word: "light", kind: "alias", value: "v".repeat(513) }] },
    parts: ["pronunciations[0].value: expected 1 to 512 characters after trimming, got 513"],
  },
  {
    name: "pronunciation kind unknown",
    body: { pronunciations: [{ word: "light", kind: "ipa", value: "laɪt" }] },
    parts: ['pronunciations[0].kind: expected one of "pinyin", "alias", "cmu", "kana", got "ipa"'],
  },
  {
    name: "pronunciation rule with an unsupported field",
    body: { pronunciations: [{ word: "light", kind: "alias", value: "lite", note: "x" }] },
    parts: ['pronunciations[0]: unsupported field "note"'],
  },
  {
    name: "101 pronunciation rules",
    body: {
      text: Array.from({ length: 101 }, (_, i) => `w${i}`).join(" "),
      pronunciations: Array.from({ length: 101 }, (_, i) => ({ word: `w${i}`, kind: "alias", value: "x" })),
    },
    parts: ["pronunciations: expected at most 100 elements, got 101"],
  },
  {
    name: "unsupported body field",
    body: { callback_url: "http://x" },
    parts: ['unsupported field "callback_url"'],
  },
  { name: "voice missing", body: { voice: undefined }, parts: ["voice: is required"] },
  {
    name: "voice source unknown",
    body: { voice: { source: "robot", voice_id: "x" } },
    parts: ["voice", 'expected one of "preset", "custom", "asset", got "robot"'],
  },
  {
    name: "preset voice with an asset_id",
    body: { voice: { ...PRESET, asset_id: "asset_1" } },
    parts: ['voice: unsupported field "asset_id"'],
  },
  {
    name: "asset voice without asset_id",
    body: { voice: { source: "asset" } },
    parts: ["voice.asset_id: is required"],
  },
  {
    name: "blank voice_id",
    body: { voice: { source: "preset", voice_id: "  " } },
    parts: ['voice.voice_id: expected a non-empty ID, got "  "'],
  },
  {
    name: "save_voice with a preset voice",
    body: { save_voice: true, voice_name: "Mine" },
    parts: ['save_voice: may be true only when voice.source is "asset", got voice.source "preset"'],
  },
  {
    name: "save_voice without voice_name",
    body: { voice: ASSET_VOICE, save_voice: true },
    parts: ["voice_name: is required when save_voice is true"],
  },
  {
    name: "voice_name blank",
    body: { voice: ASSET_VOICE, save_voice: true, voice_name: "   " },
    parts: ["voice_name: expected 1 to 64 characters after trimming, got 0"],
  },
  {
    name: "voice_name over 64",
    body: { voice: ASSET_VOICE, save_voice: true, voice_name: "n".repeat(65) },
    parts: ["voice_name: expected 1 to 64 characters after trimming, got 65"],
  },
  {
    name: "several problems at once",
    body: { language: "zh", speed: 5 },
    parts: ['language: expected one of "ZH"', "speed: expected 0 (meaning 1.0)"],
  },
];

describe("POST /audio/v1/speech/jobs validation", () => {
  it.each(BAD)("refuses $name with HTTP 400 and creates nothing", async ({ body, parts }) => {
    const before = (await stats(sb)).tasks_created.speech;
    const res = await c.createRaw({ ...VALID, ...body });
    expectValidation(res, ...parts);
    expect((await stats(sb)).tasks_created.speech).toBe(before);
  });

  it("refuses a body that is not a JSON object", async () => {
    expectValidation(await c.createRaw([VALID]), "request body must be a JSON object");
    expectValidation(await c.createRaw("text"), "request body must be a JSON object");
  });

  it("accepts text of exactly 2000 code points even when it is 3999 UTF-16 units", async () => {
    const text = `a${"😀".repeat(1999)}`;
    expect(text.length).toBe(3999);
    const id = await c.create({ ...VALID, text });
    const task = await c.get(id);
    expect(task.input.text).toBe(text);
    expect(task.point_cost).toBe(1); // one counted letter
  });

  it("accepts 2000 letters and 200-character descriptions", async () => {
    const id = await c.create({ ...VALID, text: "a".repeat(2000), emotion_description: "d".repeat(200) });
    const task = await c.get(id);
    expect(task.input.emotion_description).toHaveLength(200);
    expect(task.point_cost).toBe(400);
  });

  it.each(["ZH", "EN", "JA", "ES", "AR"])("accepts language %s", async (language) => {
    const task = await c.get(await c.create({ ...VALID, language }));
    expect(task.input.language).toBe(language);
  });

  it.each([
    [0, 1],
    [0.5, 0.5],
    [1.25, 1.25],
    [2, 2],
  ])("accepts speed %s (normalized to %s)", async (speed, effective) => {
    const task = await c.get(await c.create({ ...VALID, speed }));
    expect(task.input.speed).toBe(effective);
  });

  it("keeps an explicit emotion_strength of 0 and the bounds 1", async () => {
    expect((await c.get(await c.create({ ...VALID, emotion_strength: 0 }))).input.emotion_strength).toBe(0);
    expect((await c.get(await c.create({ ...VALID, emotion_strength: 1 }))).input.emotion_strength).toBe(1);
  });

  it("accepts emotion vectors and infers the mode", async () => {
    const single = await c.get(
      await c.create({ ...VALID, auto_emotion: false, emotion_vector: V8(0, 0, 0.8) }),
    );
    expect(single.input.emotion_vector).toEqual(V8(0, 0, 0.8));
    expect(single.input.emotion_vector_mode).toBe("single");
    expect(single.input.auto_emotion).toBe(false);

    // 0.1 x 8 sums to 0.8000000000000002 in floating point: still "at most 0.8".
    const eight = Array(8).fill(0.1);
    const mixed = await c.get(
      await c.create({ ...VALID, auto_emotion: false, emotion_vector: eight, emotion_description: "" }),
    );
    expect(mixed.input.emotion_vector_mode).toBe("mixed");

    const explicit = await c.get(
      await c.create({
        ...VALID,
        auto_emotion: false,
        emotion_vector: V8(0.2),
        emotion_vector_mode: "mixed",
      }),
    );
    expect(explicit.input.emotion_vector_mode).toBe("mixed");
    const single2 = await c.get(
      await c.create({
        ...VALID,
        auto_emotion: false,
        emotion_vector: V8(0, 0.4),
        emotion_vector_mode: "single",
      }),
    );
    expect(single2.input.emotion_vector_mode).toBe("single");

    // auto_emotion=false alone: the reference voice's own expression.
    const plain = await c.get(await c.create({ ...VALID, auto_emotion: false }));
    expect(plain.input.auto_emotion).toBe(false);
    expect(plain.input.emotion_vector).toBeUndefined();
  });

  it("accepts every pronunciation kind, trims words and values and normalizes kana to katakana", async () => {
    const text = "灯塔 light ライト 阿 tomato";
    const task = await c.get(
      await c.create({
        text,
        voice: PRESET,
        pronunciations: [
          { word: " 灯塔 ", kind: "pinyin", value: " deng1  ta3 " },
          { word: "light", kind: "cmu", value: "l ay1 t" },
          { word: "ライト", kind: "kana", value: "らいと" },
          { word: "阿", kind: "pinyin", value: "ā" },
          { word: "tomato", kind: "alias", value: "to-MAH-to" },
        ],
      }),
    );
    expect(task.input.pronunciations).toEqual([
      { word: "灯塔", kind: "pinyin", value: "deng1  ta3" },
      { word: "light", kind: "cmu", value: "l ay1 t" },
      { word: "ライト", kind: "kana", value: "ライト" },
      { word: "阿", kind: "pinyin", value: "ā" },
      { word: "tomato", kind: "alias", value: "to-MAH-to" },
    ]);
    // Pronunciation rules are not billed: 2 + 5 + 3 + 1 + 6 = 17 counted characters.
    expect(task.point_cost).toBe(4);
  });

  it("accepts exactly 100 pronunciation rules", async () => {
    const text = Array.from({ length: 100 }, (_, i) => `w${i}`).join(" ");
    const pronunciations = Array.from({ length: 100 }, (_, i) => ({
      word: `w${i}`,
      kind: "alias",
      value: "x",
    }));
    const task = await c.get(await c.create({ text, voice: PRESET, pronunciations }));
    expect(task.input.pronunciations).toHaveLength(100);
  });

  it("accepts voice_name without save_voice and echoes save_voice=false", async () => {
    const task = await c.get(await c.create({ ...VALID, save_voice: false, voice_name: "unused" }));
    expect(task.input.save_voice).toBe(false);
  });
});

// ---------------------------------------------------------------------------------------------
// create: idempotency
// ---------------------------------------------------------------------------------------------

describe("Idempotency-Key on speech creation", () => {
  it("is required", async () => {
    const res = await c.createRaw(VALID, null);
    expectValidation(
      res,
      "Idempotency-Key: is required for this endpoint (1 to 128 characters after trimming)",
    );
  });

  it("must not be blank", async () => {
    expectValidation(await c.createRaw(VALID, "   "), "Idempotency-Key: is required");
  });

  it("allows 128 characters and refuses 129", async () => {
    expectValidation(
      await c.createRaw(VALID, "k".repeat(129)),
      "Idempotency-Key: expected 1 to 128 characters after trimming, got 129",
    );
    const res = await c.createRaw(VALID, "k".repeat(128));
    expect(res.status).toBe(200);
    SpeechCreateResponse.parse(res.body);
  });

  it("replays the same task without creating another, even with different parameters", async () => {
    const idem = randomUUID();
    const before = await stats(sb);
    const first = await c.create(VALID, idem);
    const afterFirst = await stats(sb);
    expect(afterFirst.tasks_created.speech).toBe(before.tasks_created.speech + 1);
    expect(afterFirst.idempotent_replays).toBe(before.idempotent_replays);

    expect(await c.create(VALID, idem)).toBe(first);
    const other = { ...VALID, text: "A completely different line.", speed: 2 };
    expect(await c.create(other, idem)).toBe(first);
    // A second key of the same organization shares the idempotency namespace.
    expect(await client(sb, ACME2).create(VALID, idem)).toBe(first);

    const after = await stats(sb);
    expect(after.tasks_created.speech).toBe(before.tasks_created.speech + 1);
    expect(after.idempotent_replays).toBe(before.idempotent_replays + 3);
    const task = await c.get(first);
    expect(task.input.text).toBe(VALID.text);
    expect(task.input.speed).toBe(1);
    expect((await c.list(`?task_id=${first}`)).total).toBe(1);
  });

  it("is scoped to the creation endpoint", async () => {
    const idem = randomUUID();
    const { asset } = await up.uploadAsset();
    const task = await up.create(VALID, idem);
    const voice = await up.createVoice(asset.asset_id, "Same key", idem);
    expect(voice.voice_id).not.toBe(task);
    expect((await up.get(task)).task_id).toBe(task);
  });

  it("is scoped to the organization", async () => {
    const idem = randomUUID();
    const mine = await c.create(VALID, idem);
    const theirs = await client(sb, GLOBEX).create(VALID, idem);
    expect(theirs).not.toBe(mine);
  });

  it("is not used up by a refused request", async () => {
    const idem = randomUUID();
    expectValidation(await c.createRaw({ ...VALID, speed: 9 }, idem), "speed");
    expectBusiness(
      await c.createRaw({ ...VALID, voice: { source: "preset", voice_id: "nope" } }, idem),
      404,
      40401,
    );
    const before = (await stats(sb)).tasks_created.speech;
    const id = await c.create(VALID, idem);
    expect((await stats(sb)).tasks_created.speech).toBe(before + 1);
    expect((await c.get(id)).input.speed).toBe(1);
  });

  it("answers concurrent requests with one key with one task", async () => {
    const idem = randomUUID();
    const before = (await stats(sb)).tasks_created.speech;
    const ids = await Promise.all(Array.from({ length: 5 }, () => c.create(VALID, idem)));
    expect(new Set(ids).size).toBe(1);
    expect((await stats(sb)).tasks_created.speech).toBe(before + 1);
  });
});

describe("unknown voices and assets", () => {
  it("answers an unknown preset voice with a business 404", async () => {
    const res = await c.createRaw({ ...VALID, voice: { source: "preset", voice_id: "xx_nobody" } });
    expectBusiness(res, 404, 40401, "preset voice not found: xx_nobody");
  });

  it("answers an unknown custom voice with a business 404", async () => {
    const res = await c.createRaw({ ...VALID, voice: { source: "custom", voice_id: "voice_missing" } });
    expectBusiness(res, 404, 40401, "custom voice not found: voice_missing");
  });

  it("does not accept a preset voice ID as a custom voice", async () => {
    const res = await c.createRaw({ ...VALID, voice: { source: "custom", voice_id: "en_female_bright" } });
    expectBusiness(res, 404, 40401, "custom voice not found");
  });

  it("answers an unknown asset with a business 404", async () => {
    const res = await c.createRaw({ ...VALID, voice: { source: "asset", asset_id: "asset_missing" } });
    expectBusiness(res, 404, 40401, "asset not found: asset_missing");
  });

  it("answers an unknown task with a business 404 on get, cancel and delete", async () => {
    expectBusiness(await c.api("GET", `${JOBS}/stask_nope`), 404, 40401, "task not found: stask_nope");
    expectBusiness(await c.api("POST", `${JOBS}/stask_nope/cancel`), 404, 40401, "stask_nope");
    expectBusiness(await c.api("DELETE", `${JOBS}/stask_nope`), 404, 40401, "stask_nope");
  });
});

// ---------------------------------------------------------------------------------------------
// state machine
// ---------------------------------------------------------------------------------------------

describe("speech task life", () => {
  it("goes queued -> generating -> succeeded, reserving then consuming points", async () => {
    const text = "[sandbox:slow] The light came on at seven.";
    const created = Date.now();
    const id = await slow.create({ text, voice: PRESET, language: "EN" });
    const first = await slow.get(id);
    expect(first).toMatchObject({
      task_id: id,
      type: "text_to_speech",
      status: "queued",
      attempt: 0,
      max_attempts: 3,
      point_status: "reserved",
      error_message: "",
      output_url: "",
      output_size: 0,
      started_at: 0,
      finished_at: 0,
    });
    expect(first.created_at).toBeGreaterThanOrEqual(Math.floor(created / 1000));
    expect(first.created_at).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000));

    const seen: SpeechTask[] = [first];
    const done = await until(
      async () => {
        const t = await slow.get(id);
        seen.push(t);
        return t;
      },
      (t) => TERMINAL.has(t.status),
    );
    const order = [...new Set(seen.map((t) => t.status))];
    expect(order).toEqual(["queued", "generating", "succeeded"]);
    const generating = seen.find((t) => t.status === "generating") as SpeechTask;
    expect(generating.attempt).toBe(1);
    expect(generating.started_at).toBeGreaterThanOrEqual(first.created_at);
    expect(generating.finished_at).toBe(0);
    expect(generating.output_url).toBe("");
    expect(generating.point_status).toBe("reserved");

    expect(done.status).toBe("succeeded");
    expect(done.attempt).toBe(1);
    expect(done.max_attempts).toBe(3);
    expect(done.error_message).toBe("");
    expect(done.point_status).toBe("consumed");
    expect(done.started_at).toBe(generating.started_at);
    expect(done.finished_at).toBeGreaterThanOrEqual(done.started_at);
    expect(done.output_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\//);
    expect(done.output_size).toBeGreaterThan(44);
    // A slow task waits 10 x 1 s x 0.02 = 200 ms in the queue and generates for at least 400 ms.
    expect(Date.now() - created).toBeGreaterThanOrEqual(600);
  });

  it("waits 1 s in the queue and generates 2 s + 15 ms per counted character per attempt (scaled)", async () => {
    // time-scale 0.05, 100 counted characters: queue 50 ms, attempt (2000 + 1500) x 0.05 = 175 ms.
    const s = await fresh({ timeScale: 0.05 });
    const k = client(s);
    const watch = async (text: string) => {
      const t0 = Date.now();
      const id = await k.create({ ...VALID, text });
      const t1 = Date.now();
      const firstSeen: Record<string, number> = {};
      const end = await until(
        async () => {
          const t = await k.get(id);
          firstSeen[t.status] ??= Date.now();
          return t;
        },
        (t) => TERMINAL.has(t.status),
      );
      return { t0, t1, firstSeen, end };
    };
    const once = await watch("a".repeat(100));
    expect(once.end.attempt).toBe(1);
    expect(once.firstSeen.generating! - once.t0).toBeGreaterThanOrEqual(50);
    expect(once.firstSeen.generating! - once.t1).toBeLessThan(50 + 400);
    expect(once.firstSeen.succeeded! - once.t0).toBeGreaterThanOrEqual(225);
    expect(once.firstSeen.succeeded! - once.t1).toBeLessThan(225 + 400);

    // Two attempts: at least 50 + 175 + 175 ms.
    const twice = await watch(`[sandbox:fail-once] ${"a".repeat(83)}`); // 17 + 83 = 100 counted
    expect(twice.end.attempt).toBe(2);
    expect(twice.firstSeen.succeeded! - twice.t0).toBeGreaterThanOrEqual(400);
    expect(twice.firstSeen.succeeded! - twice.t1).toBeLessThan(400 + 600);
  });

  it("echoes the normalized input with the effective defaults", async () => {
    const id = await c.create({
      text: "夜幕降临，灯塔亮了起来。",
      voice: { source: "preset", voice_id: "zh_female_warm" },
    });
    const task = await c.get(id);
    expect(task.input).toEqual({
      text: "夜幕降临，灯塔亮了起来。",
      language: "ZH",
      voice: { source: "preset", voice_id: "zh_female_warm" },
      speed: 1,
      auto_emotion: true,
      emotion_strength: 0.8,
      save_voice: false,
    });
  });

  it("retries a [sandbox:fail-once] task and succeeds on attempt 2 of 3", async () => {
    const id = await c.create({ ...VALID, text: "[sandbox:fail-once] Second time lucky." });
    const task = await c.settle(id);
    expect(task).toMatchObject({
      status: "succeeded",
      attempt: 2,
      max_attempts: 3,
      error_message: "",
      point_status: "consumed",
    });
    expect(task.output_url).not.toBe("");
    expect(task.output_size).toBeGreaterThan(44);
  });

  it("fails a [sandbox:fail] task after 3 attempts and releases its points", async () => {
    const s = await fresh();
    const k = client(s);
    const before = await k.summary();
    const id = await k.create({ ...VALID, text: "[sandbox:fail] Never works." });
    const task = await k.settle(id);
    expect(task).toMatchObject({
      status: "failed",
      attempt: 3,
      max_attempts: 3,
      point_status: "released",
      output_url: "",
      output_size: 0,
    });
    expect(task.error_message.trim()).not.toBe("");
    expect(task.finished_at).toBeGreaterThanOrEqual(task.started_at);
    expect(task.started_at).toBeGreaterThan(0);
    expect(task.point_cost).toBe(5); // "sandboxfailNeverworks" = 21 counted characters -> ceil(4.2)
    expect(await k.summary()).toEqual(before);
  });
});

// ---------------------------------------------------------------------------------------------
// points
// ---------------------------------------------------------------------------------------------

describe("speech points", () => {
  it.each([
    ["你好，世界！", 4, 1],
    ["Hello, world! 42", 12, 3],
    ["灯塔 lighthouse 1990年。😀🎉", 17, 4],
    ["١٢٣ مرحبا", 8, 2],
    ["ｶﾀｶﾅ ３！", 5, 1],
    ["a", 1, 1],
    ["abcde fghij", 10, 2],
    ["[sandbox:fail-once] ok", 17, 4],
  ])("bills %j (%i counted characters) %i points at the default price", async (text, _counted, cost) => {
    const task = await c.get(await c.create({ ...VALID, text }));
    expect(task.point_cost).toBe(cost);
  });

  it("reports pricing, and a changed price bills at ceil(chars x price / 10)", async () => {
    const s = await fresh();
    const k = client(s);
    const initial = await k.pricing();
    expect(initial).toEqual({
      enabled: true,
      pricing_version: initial.pricing_version,
      unit_characters: 10,
      costs: { text_to_speech: 2 },
      balance: { total_points: 100_000, reserved_points: 0, available_points: 100_000 },
    });

    const changed = await setPricing(s, { text_to_speech: 7 });
    expect(changed.status).toBe(200);
    const p = await k.pricing();
    expect(p.costs.text_to_speech).toBe(7);
    expect(p.pricing_version).toBe(initial.pricing_version + 1);
    // 12 counted characters x 7 / 10 = 8.4 -> 9
    expect((await k.get(await k.create({ ...VALID, text: "Hello, world! 42" }))).point_cost).toBe(9);

    // Sending the same price again is no new version.
    await setPricing(s, { text_to_speech: 7 });
    expect((await k.pricing()).pricing_version).toBe(initial.pricing_version + 1);

    await setPricing(s, { text_to_speech: 0 });
    const free = await k.settle(await k.create(VALID));
    expect(free.point_cost).toBe(0);
    expect(free.status).toBe("succeeded");

    expectValidation(await setPricing(s, { text_to_speech: -1 }), "text_to_speech");
    expectValidation(await setPricing(s, { text_to_speech: 1.5 }), "text_to_speech");
    expectValidation(await setPricing(s, { enabled: "no" }), "enabled");
  });

  it("reserves from and consumes the balance shared with video", async () => {
    const s = await fresh({ timeScale: 0.02 });
    const k = client(s);
    const text = "[sandbox:slow] Shared balance, twenty-five letters.";
    // sandboxslow(11) Sharedbalance(13) twentyfiveletters(17) = 41 -> ceil(8.2) = 9
    const id = await k.create({ ...VALID, text });
    const reserved = await k.get(id);
    expect(reserved.status).toBe("queued");
    expect(reserved.point_cost).toBe(9);

    const balance = { total_points: 100_000, reserved_points: 9, available_points: 99_991 };
    expect((await k.pricing()).balance).toEqual(balance);
    expect(await k.summary()).toEqual(balance);
    const pkgs = await k.packages();
    expect(pkgs.total).toBe(1);
    expect(pkgs.items[0]).toMatchObject({
      status: "active",
      total_points: 100_000,
      remaining_points: 100_000,
      reserved_points: 9,
      available_points: 99_991,
    });
    // Another key of the organization sees the same balance.
    expect(await client(s, ACME2).summary()).toEqual(balance);

    // A video task draws on the same balance: 4 s at 768P = 40 points.
    const video = await k.api("POST", "/vid/v2/video_generation", {
      body: { model: "Vid-H3", content: [{ type: "text", text: "A lighthouse at dusk." }], duration: 4 },
    });
    expect(video.status, JSON.stringify(video.body)).toBe(200);
    expect((await k.pricing()).balance.available_points).toBe(99_951);

    await k.settle(id);
    await until(
      () => k.summary(),
      (sum) => sum.reserved_points === 0,
    );
    const end = { total_points: 99_951, reserved_points: 0, available_points: 99_951 };
    expect(await k.summary()).toEqual(end);
    expect((await k.pricing()).balance).toEqual(end);
    expect((await k.packages()).items[0]).toMatchObject({ remaining_points: 99_951, reserved_points: 0 });
    // Another organization's balance is untouched.
    expect((await client(s, GLOBEX).summary()).total_points).toBe(100_000);
  });

  it("refuses a task the balance cannot cover and creates nothing", async () => {
    const s = await fresh({ points: 3 });
    const k = client(s);
    const idem = randomUUID();
    // 20 counted characters -> 4 points
    const res = await k.createRaw({ ...VALID, text: "abcdefghij klmnopqrst" }, idem);
    expectBusiness(res, 200, 40201, "insufficient points", "needs 4", "available 3");
    expect((await stats(s)).tasks_created.speech).toBe(0);
    expect((await k.list()).total).toBe(0);
    expect(await k.summary()).toEqual({ total_points: 3, reserved_points: 0, available_points: 3 });

    // Exactly the balance is enough (15 counted characters -> 3 points), also with the same key.
    const id = await k.create({ ...VALID, text: "abcdefghij klmno" }, idem);
    expect((await k.get(id)).point_cost).toBe(3);
    expect((await k.pricing()).balance.available_points).toBe(0);
    expectBusiness(await k.createRaw({ ...VALID, text: "a" }), 200, 40201, "available 0");
  });

  it("releases the points of a failed task that nobody polled before reserving for the next", async () => {
    const s = await fresh({ points: 5 });
    const k = client(s);
    const failing = await k.create({ ...VALID, text: "[sandbox:fail] abc" }); // 14 counted -> 3 points
    // Not polled on purpose: at time-scale 0.001 the task has failed after ~10 ms.
    await sleep(100);
    const res = await k.createRaw({ ...VALID, text: "abcdefghij klmno" }); // 15 counted -> 3 points
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.RetCode, res.body.Message).toBeUndefined();
    const next = SpeechCreateResponse.parse(res.body).task_id;
    expect((await k.get(failing)).status).toBe("failed");
    expect((await k.settle(next)).status).toBe("succeeded");
    expect(await k.summary()).toEqual({ total_points: 2, reserved_points: 0, available_points: 2 });
  });

  it("releases the points of a failed video task that nobody polled before reserving", async () => {
    const s = await fresh({ points: 40 });
    const k = client(s);
    const video = await k.api("POST", "/vid/v2/video_generation", {
      body: { model: "Vid-H3", content: [{ type: "text", text: "[sandbox:fail] A storm." }], duration: 4 },
    });
    expect(video.status, JSON.stringify(video.body)).toBe(200); // 4 s x 10 = all 40 points
    // Not polled on purpose: at time-scale 0.001 the video task has failed after ~60 ms.
    await sleep(300);
    const res = await k.createRaw(VALID);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.RetCode, res.body.Message).toBeUndefined();
  });

  it("refuses every task while billing is disabled", async () => {
    const s = await fresh();
    const k = client(s);
    const off = await setPricing(s, { enabled: false });
    expect(off.status).toBe(200);
    expect(off.body).toMatchObject({ enabled: false });
    expect((await k.pricing()).enabled).toBe(false);
    expectBusiness(await k.createRaw(VALID), 200, 40202, "billing is disabled");
    expect((await stats(s)).tasks_created.speech).toBe(0);
    expect((await k.summary()).reserved_points).toBe(0);

    await setPricing(s, { enabled: true });
    expect((await k.pricing()).enabled).toBe(true);
    await k.create(VALID);
  });

  it("counts a pending package as unusable", async () => {
    const s = await fresh({ points: 0 });
    const k = client(s);
    const pkg = (await addPackage(s, "acme", { total_points: 1000, status: "pending", code: "p1" })) as any;
    expect(pkg).toMatchObject({ status: "pending", total_points: 1000, available_points: 0, code: "p1" });
    expect(pkg.purchased_at).toBeUndefined();
    expect(pkg.expires_at).toBeUndefined();
    const pkgs = await k.packages();
    expect(pkgs.total).toBe(2);
    expect(pkgs.items[0]).toMatchObject({ id: pkg.id, status: "pending", available_points: 0 });
    expect(pkgs.items[1]).toMatchObject({ status: "exhausted", total_points: 0, available_points: 0 });
    expect((await k.pricing()).balance).toEqual({ total_points: 0, reserved_points: 0, available_points: 0 });
    expectBusiness(await k.createRaw(VALID), 200, 40201, "insufficient points");
  });

  it("counts a package whose expires_at has passed as expired", async () => {
    const s = await fresh({ points: 0 });
    const k = client(s);
    const past = Math.floor(Date.now() / 1000) - 60;
    const pkg = (await addPackage(s, "acme", { total_points: 1000, expires_at: past })) as any;
    expect(pkg).toMatchObject({ status: "expired", available_points: 0, expires_at: past });
    expect((await k.summary()).total_points).toBe(0);
    expectBusiness(await k.createRaw(VALID), 200, 40201, "insufficient points");

    // An active package makes the org usable again.
    await addPackage(s, "acme", { total_points: 50, expires_at: past + 3600 });
    expect((await k.summary()).available_points).toBe(50);
    await k.create(VALID);
  });
});

// ---------------------------------------------------------------------------------------------
// cancel and delete
// ---------------------------------------------------------------------------------------------

describe("cancel", () => {
  it("cancels a queued task and releases its points", async () => {
    const before = await slow.summary();
    const id = await slow.create({ ...VALID, text: "[sandbox:slow] Cancel me." });
    const res = await slow.api("POST", `${JOBS}/${id}/cancel`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(SpeechCancelResponse.parse(res.body)).toEqual({ task_id: id, status: "cancelled" });
    const task = await slow.get(id);
    expect(task).toMatchObject({
      status: "cancelled",
      error_message: "",
      attempt: 0,
      point_status: "released",
      output_url: "",
      output_size: 0,
      started_at: 0,
    });
    expect(task.finished_at).toBeGreaterThan(0);
    const after = await slow.summary();
    expect(after.reserved_points).toBe(before.reserved_points);
    // Stays cancelled: the queue never picks it up.
    await sleep(250);
    expect((await slow.get(id)).status).toBe("cancelled");
    expectBusiness(await slow.api("POST", `${JOBS}/${id}/cancel`), 400, 40901, "is cancelled");
  });

  it("refuses to cancel a generating task, which then finishes normally", async () => {
    const id = await slow.create({ ...VALID, text: "[sandbox:slow] Too late to cancel." });
    await slow.waitFor(id, "generating");
    const res = await slow.api("POST", `${JOBS}/${id}/cancel`);
    expectBusiness(res, 400, 40901, `task ${id} is generating`, "only queued tasks can be cancelled");
    const task = await slow.get(id);
    expect(task.status).toBe("generating");
    expect(task.point_status).toBe("reserved");
    expectBusiness(await slow.api("DELETE", `${JOBS}/${id}`), 400, 40901, "is generating");
    expect((await slow.settle(id)).status).toBe("succeeded");
  });

  it("refuses to cancel ended tasks", async () => {
    const ok = await c.settle(await c.create(VALID));
    expectBusiness(await c.api("POST", `${JOBS}/${ok.task_id}/cancel`), 400, 40901, "is succeeded");
    const failed = await c.settle(await c.create({ ...VALID, text: "[sandbox:fail] x" }));
    expectBusiness(await c.api("POST", `${JOBS}/${failed.task_id}/cancel`), 400, 40901, "is failed");
    expect((await c.get(failed.task_id)).status).toBe("failed");
  });

  it("does not reach another organization's task", async () => {
    const id = await slow.create({ ...VALID, text: "[sandbox:slow] Mine." });
    const other = client(slowSb, GLOBEX);
    expectBusiness(await other.api("POST", `${JOBS}/${id}/cancel`), 404, 40401);
    expectBusiness(await other.api("DELETE", `${JOBS}/${id}`), 404, 40401);
    expect((await slow.get(id)).status).toBe("queued");
    // The other key of acme can cancel it.
    const res = await client(slowSb, ACME2).api("POST", `${JOBS}/${id}/cancel`);
    expect(res.status).toBe(200);
  });
});

describe("delete", () => {
  it("refuses a queued task", async () => {
    const id = await slow.create({ ...VALID, text: "[sandbox:slow] Not yet." });
    expectBusiness(
      await slow.api("DELETE", `${JOBS}/${id}`),
      400,
      40901,
      `task ${id} is queued`,
      "only succeeded, failed or cancelled tasks",
    );
    expect((await slow.get(id)).status).toBe("queued");
  });

  it("deletes a succeeded task and its file; consumed points stay spent", async () => {
    const s = await fresh();
    const k = client(s);
    const task = await k.settle(await k.create(VALID));
    expect(task.status).toBe("succeeded");
    expect((await download(task.output_url)).status).toBe(200);
    const spent = await k.summary();

    const res = await k.api("DELETE", `${JOBS}/${task.task_id}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(SpeechDeleteResponse.parse(res.body)).toEqual({ task_id: task.task_id, deleted: true });

    expectBusiness(await k.api("GET", `${JOBS}/${task.task_id}`), 404, 40401, "task not found");
    const gone = await download(task.output_url);
    expect(gone.status).toBe(404);
    expect((await k.list()).total).toBe(0);
    expect((await k.list()).status_counts).toEqual({});
    expect(await k.summary()).toEqual(spent);
    expectBusiness(await k.api("DELETE", `${JOBS}/${task.task_id}`), 404, 40401);
  });

  it("deletes failed and cancelled tasks", async () => {
    const failed = await c.settle(await c.create({ ...VALID, text: "[sandbox:fail] x" }));
    expect((await c.api("DELETE", `${JOBS}/${failed.task_id}`)).status).toBe(200);
    expectBusiness(await c.api("GET", `${JOBS}/${failed.task_id}`), 404, 40401);

    const id = await slow.create({ ...VALID, text: "[sandbox:slow] Cancelled then deleted." });
    expect((await slow.api("POST", `${JOBS}/${id}/cancel`)).status).toBe(200);
    const res = await slow.api("DELETE", `${JOBS}/${id}`);
    expect(res.status).toBe(200);
    expect(SpeechDeleteResponse.parse(res.body).deleted).toBe(true);
    expect((await slow.list(`?task_id=${id}`)).total).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------
// list
// ---------------------------------------------------------------------------------------------

describe("GET /audio/v1/speech/jobs", () => {
  let ls: Sandbox;
  let k: ReturnType<typeof client>;
  /** Creation order: 21 succeeded, 2 failed, 1 cancelled. */
  const ids: string[] = [];
  let succeeded: string[];
  let failed: string[];
  let cancelled: string;

  beforeAll(async () => {
    ls = await sandbox({ keys: KEYS, timeScale: 0.02 });
    k = client(ls);
    for (let i = 0; i < 21; i++) ids.push(await k.create({ ...VALID, text: `Line number ${i}.` }));
    succeeded = [...ids];
    failed = [
      await k.create({ ...VALID, text: "[sandbox:fail] a" }),
      await k.create({ ...VALID, text: "[sandbox:fail] b" }),
    ];
    ids.push(...failed);
    cancelled = await k.create({ ...VALID, text: "[sandbox:slow] cancelled" });
    ids.push(cancelled);
    const res = await k.api("POST", `${JOBS}/${cancelled}/cancel`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await Promise.all(ids.map((id) => k.settle(id)));
  });

  afterAll(async () => {
    await ls?.close();
  });

  it("lists newest first with a default limit of 20 and counts every status", async () => {
    const page = await k.list();
    expect(page.total).toBe(24);
    expect(page.items).toHaveLength(20);
    expect(page.items.map((t) => t.task_id)).toEqual([...ids].reverse().slice(0, 20));
    expect(page.status_counts).toEqual({ succeeded: 21, failed: 2, cancelled: 1 });
    for (let i = 1; i < page.items.length; i++) {
      expect(page.items[i - 1]!.created_at).toBeGreaterThanOrEqual(page.items[i]!.created_at);
    }
  });

  it("pages with offset and limit", async () => {
    const all = await k.list("?limit=100");
    expect(all.items.map((t) => t.task_id)).toEqual([...ids].reverse());
    const pages: string[] = [];
    for (let offset = 0; offset < 24; offset += 7) {
      const page = await k.list(`?offset=${offset}&limit=7`);
      expect(page.total).toBe(24);
      expect(page.items.length).toBe(Math.min(7, 24 - offset));
      pages.push(...page.items.map((t) => t.task_id));
    }
    expect(pages).toEqual(all.items.map((t) => t.task_id));
    expect((await k.list("?limit=1")).items).toHaveLength(1);
    const beyond = await k.list("?offset=24");
    expect(beyond.items).toEqual([]);
    expect(beyond.total).toBe(24);
  });

  it.each([
    ["?limit=0", 'limit: expected an integer from 1 to 100, got "0"'],
    ["?limit=101", 'limit: expected an integer from 1 to 100, got "101"'],
    ["?limit=abc", 'limit: expected an integer from 1 to 100, got "abc"'],
    ["?limit=2.5", "limit: expected an integer from 1 to 100"],
    ["?offset=-1", 'offset: expected an integer >= 0, got "-1"'],
    ["?offset=1&offset=2", "offset: expected a single value"],
    [
      "?statuses=done",
      'statuses[0]: expected one of "queued", "generating", "succeeded", "failed", "cancelled", got "done"',
    ],
    ["?start_time=yesterday", "start_time: expected a Unix time in seconds"],
    ["?start_time=200&end_time=100", "end_time: expected a time >= start_time 200, got 100"],
  ])("refuses %s with HTTP 400", async (query, part) => {
    expectValidation(await k.api("GET", `${JOBS}${query}`), part);
  });

  it("filters by task_id", async () => {
    const one = await k.list(`?task_id=${failed[0]}`);
    expect(one.total).toBe(1);
    expect(one.items.map((t) => t.task_id)).toEqual([failed[0]]);
    expect(one.items[0]!.status).toBe("failed");
    // status_counts honour the task ID filter.
    expect(one.status_counts).toEqual({ failed: 1 });
    const none = await k.list("?task_id=stask_unknown");
    expect(none).toEqual({ items: [], total: 0, status_counts: {} });
  });

  it("filters by repeated statuses; status_counts ignore that filter", async () => {
    const res = await k.list("?statuses=failed&statuses=cancelled");
    expect(res.total).toBe(3);
    expect(res.items.map((t) => t.task_id)).toEqual([cancelled, failed[1], failed[0]]);
    expect(res.status_counts).toEqual({ succeeded: 21, failed: 2, cancelled: 1 });

    const ok = await k.list("?statuses=succeeded&limit=5&offset=3");
    expect(ok.total).toBe(21);
    expect(ok.items.map((t) => t.task_id)).toEqual([...succeeded].reverse().slice(3, 8));
    expect(ok.status_counts).toEqual({ succeeded: 21, failed: 2, cancelled: 1 });

    const none = await k.list("?statuses=queued&statuses=generating");
    expect(none.total).toBe(0);
    expect(none.items).toEqual([]);
    expect(none.status_counts).toEqual({ succeeded: 21, failed: 2, cancelled: 1 });
  });

  it("filters by inclusive start_time and end_time", async () => {
    const all = (await k.list("?limit=100")).items;
    const times = all.map((t) => t.created_at);
    const min = Math.min(...times);
    const max = Math.max(...times);
    expect((await k.list(`?start_time=${min}&end_time=${max}`)).total).toBe(24);
    expect((await k.list(`?start_time=${max}&end_time=${max}`)).total).toBe(
      times.filter((t) => t === max).length,
    );
    expect((await k.list(`?start_time=${min}`)).total).toBe(24);
    expect((await k.list(`?end_time=${max}`)).total).toBe(24);
    expect((await k.list("?start_time=0&end_time=0")).total).toBe(24);

    const later = await k.list(`?start_time=${max + 1}`);
    expect(later).toEqual({ items: [], total: 0, status_counts: {} });
    const earlier = await k.list(`?end_time=${min - 1}`);
    expect(earlier).toEqual({ items: [], total: 0, status_counts: {} });
    // end_time 0 means unbounded even with a start_time.
    expect((await k.list(`?start_time=${min}&end_time=0`)).total).toBe(24);
  });

  it("shares tasks between keys of one organization and hides them from others", async () => {
    const same = await client(ls, ACME2).list("?limit=100");
    expect(same.total).toBe(24);
    expect(same.items.map((t) => t.task_id)).toEqual([...ids].reverse());

    const other = client(ls, GLOBEX);
    expect(await other.list()).toEqual({ items: [], total: 0, status_counts: {} });
    expect((await other.list(`?task_id=${ids[0]}`)).total).toBe(0);
    expectBusiness(await other.api("GET", `${JOBS}/${ids[0]}`), 404, 40401);
    const mine = await other.create(VALID);
    expect((await other.list()).items.map((t) => t.task_id)).toEqual([mine]);
    expect((await k.list(`?task_id=${mine}`)).total).toBe(0);
  });
});

// ---------------------------------------------------------------------------------------------
// the result file
// ---------------------------------------------------------------------------------------------

describe("the WAV result", () => {
  async function result(text: string, speed?: number) {
    const task = await c.settle(
      await c.create({ ...VALID, text, ...(speed === undefined ? {} : { speed }) }),
    );
    expect(task.status).toBe("succeeded");
    const file = await download(task.output_url); // no API key
    expect(file.status).toBe(200);
    expect(file.headers["content-type"]).toBe("audio/wav");
    expect(file.data.length).toBe(task.output_size);
    return { task, data: file.data, info: wavInfo(file.data) };
  }

  it("is a real 24 kHz mono PCM WAV that a parser reads", async () => {
    const { data, info } = await result("Every night, the light came on at seven.");
    expect(info).toMatchObject({ format: 1, channels: 1, sampleRate: 24_000, bits: 16 });
    const meta = await parseBuffer(data, { mimeType: "audio/wav" });
    expect(meta.format.sampleRate).toBe(24_000);
    expect(meta.format.numberOfChannels).toBe(1);
    expect(meta.format.duration).toBeCloseTo(info.durationMs / 1000, 3);
    // A tone, not silence.
    const samples = new Int16Array(data.buffer, data.byteOffset + 44, (data.length - 44) / 2);
    expect(Math.max(...samples.subarray(0, 24_000))).toBeGreaterThan(100);
  });

  it("lasts longer for longer text and is shorter at speed 2.0 than at 1.0", async () => {
    const short = (await result("The light came on.")).info.durationMs;
    const long = (await result("The light came on at seven, every night, for forty years.")).info.durationMs;
    expect(long).toBeGreaterThan(short * 1.5);

    const text = "Every night, the light came on at seven.";
    const normal = (await result(text, 1)).info.durationMs;
    const fast = (await result(text, 2)).info.durationMs;
    const slowest = (await result(text, 0.5)).info.durationMs;
    const zero = (await result(text, 0)).info.durationMs;
    expect(fast).toBeLessThan(normal);
    expect(fast / normal).toBeCloseTo(0.5, 2);
    expect(slowest / normal).toBeCloseTo(2, 2);
    expect(zero).toBe(normal); // speed 0 means 1.0
  });

  it("serves byte ranges and refuses a tampered signature", async () => {
    const { task, data } = await result("Ranges please.");
    const part = await download(task.output_url, { range: "bytes=0-43" });
    expect(part.status).toBe(206);
    expect(part.headers["content-range"]).toBe(`bytes 0-43/${data.length}`);
    expect(part.data.equals(data.subarray(0, 44))).toBe(true);

    const url = new URL(task.output_url);
    url.searchParams.set("signature", "0".repeat(32));
    const forged = await download(url.toString());
    expect(forged.status).toBe(403);
    expect(ValidationErrorBody.parse(JSON.parse(forged.data.toString())).error.http_code).toBe("403");
    url.search = "";
    expect((await download(url.toString())).status).toBe(403);
  });

  it("is kept 7 days after the task ends, then disappears", async () => {
    // 7 days x 0.000001 = 605 ms
    const s = await fresh({ timeScale: 0.000001 });
    const k = client(s);
    const t0 = Date.now();
    const task = await k.settle(await k.create(VALID));
    const settledAt = Date.now();
    expect(task.status).toBe("succeeded");
    expect((await download(task.output_url)).status).toBe(200);
    const gone = await until(
      () => download(task.output_url),
      (r) => r.status !== 200,
      3000,
    );
    const goneAt = Date.now();
    // The retention clock starts when the task ends (between t0 and settledAt).
    expect(goneAt - t0).toBeGreaterThanOrEqual(600);
    expect(goneAt - settledAt).toBeLessThan(605 + 500);
    // 404 (result dropped) or 403 (the URL's whole-second expiry passed too).
    expect([403, 404]).toContain(gone.status);
    const after = await k.get(task.task_id);
    expect(after.status).toBe("succeeded");
    expect(after.output_url).toBe("");
  });
});

// ---------------------------------------------------------------------------------------------
// voices, uploads, assets
// ---------------------------------------------------------------------------------------------

describe("GET /audio/v1/voices", () => {
  it("lists the preset voices by default", async () => {
    const list = await c.voices();
    expect(list.total).toBe(list.items.length);
    expect(list.total).toBeGreaterThanOrEqual(5);
    for (const v of list.items) {
      expect(v.kind).toBe("preset");
      expect(Array.isArray(v.style_tags)).toBe(true);
      expect(v.audio_url).toMatch(/^http:\/\//);
    }
    expect(list.items.map((v) => v.voice_id)).toContain("en_female_bright");
    expect(await c.voices("preset")).toEqual(list);
    // "omitted when unset"
    const calm = list.items.find((v) => v.voice_id === "zh_male_calm");
    expect(calm).toBeDefined();
    expect(calm).not.toHaveProperty("description");
    expect(calm).not.toHaveProperty("sample_text");
    const arabic = list.items.find((v) => v.voice_id === "ar_female_clear");
    expect(arabic?.style_tags).toEqual([]);
    const preview = await download(list.items[0]!.audio_url);
    expect(preview.status).toBe(200);
    expect(wavInfo(preview.data).sampleRate).toBe(24_000);
  });

  it("refuses an unknown kind", async () => {
    expectValidation(
      await c.api("GET", "/audio/v1/voices?kind=system"),
      'kind: expected one of "preset", "custom", got "system"',
    );
    expectValidation(await c.api("GET", "/audio/v1/voices?kind=Preset"), "kind");
  });

  it("lists no custom voices for a new organization", async () => {
    const s = await fresh();
    expect(await client(s).voices("custom")).toEqual({ items: [], total: 0 });
  });
});

describe("POST /audio/v1/upload_urls", () => {
  it("returns an upload ticket", async () => {
    const before = Math.floor(Date.now() / 1000);
    const t = await up.ticket("take 1.wav", "audio/wav", 2048);
    expect(t.authorization).toBe("");
    expect(t.object_key).toContain("take 1.wav");
    expect(t.bucket).not.toBe("");
    expect(t.region).not.toBe("");
    expect(new URL(t.upload_url).searchParams.get("signature")).toBeTruthy();
    // 15 minutes x 0.01 = 9 s
    expect(t.expires_at).toBeGreaterThanOrEqual(before + 8);
    expect(t.expires_at).toBeLessThanOrEqual(before + 11);
  });

  it.each([
    ["a.wav", "audio/wav"],
    ["a.WAV", "audio/x-wav"],
    ["a.wav", "audio/wave"],
    ["a.wav", "audio/vnd.wave"],
    ["a.mp3", "audio/mpeg"],
    ["a.flac", "audio/flac"],
    ["a.flac", "audio/x-flac"],
    ["a.ogg", "audio/ogg"],
    ["a.m4a", "audio/mp4"],
    ["a.m4a", "audio/x-m4a"],
  ])("accepts %s as %s", async (name, type) => {
    await up.ticket(name, type, 100);
  });

  it("accepts the size limit 15728640 and a 255-character name", async () => {
    await up.ticket("a.wav", "audio/wav", 15_728_640);
    await up.ticket(`${"n".repeat(251)}.wav`, "audio/wav", 1);
  });

  it.each([
    [
      { content_type: "audio/mpeg" },
      'content_type: expected one of "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave" for a .wav file, got "audio/mpeg"',
    ],
    [
      { file_name: "a.mp3", content_type: "audio/wav" },
      'content_type: expected one of "audio/mpeg" for a .mp3 file',
    ],
    [{ content_type: "AUDIO/WAV" }, 'got "AUDIO/WAV"'],
    [
      { file_name: "a.txt", content_type: "text/plain" },
      "file_name: expected a name ending in .wav, .mp3, .flac, .ogg or .m4a",
    ],
    [{ file_name: "a" }, "file_name: expected a name ending in"],
    [
      { file_name: "dir/a.wav" },
      "file_name: must not contain directory separators or control characters",
      'contains "/"',
    ],
    [{ file_name: "dir\\a.wav" }, "file_name: must not contain directory separators"],
    [{ file_name: "a\u0001.wav" }, "control character U+0001"],
    [{ file_name: "" }, "file_name: expected 1 to 255 characters, got 0"],
    [{ file_name: `${"n".repeat(252)}.wav` }, "file_name: expected 1 to 255 characters, got 256"],
    [{ file_size: 0 }, "file_size: expected an integer from 1 to 15728640, got 0"],
    [{ file_size: 15_728_641 }, "file_size: expected an integer from 1 to 15728640, got 15728641"],
    [{ file_size: 10.5 }, "file_size: expected an integer from 1 to 15728640, got 10.5"],
    [{ file_size: undefined }, "file_size: is required"],
    [{ file_name: undefined }, "file_name: is required"],
    [{ content_type: undefined }, "content_type: is required"],
    [{ bucket: "mine" }, 'unsupported field "bucket"'],
  ] as [Record<string, unknown>, ...string[]][])("refuses %j", async (patch, ...parts) => {
    const body = { file_name: "a.wav", content_type: "audio/wav", file_size: 100, ...patch };
    expectValidation(await up.api("POST", "/audio/v1/upload_urls", { body }), ...parts);
  });
});

describe("PUT to the upload URL", () => {
  it("takes the file without an API key when the Content-Type matches", async () => {
    const bytes = makeWav(800);
    const t = await up.ticket("ref.wav", "audio/wav", bytes.length);
    const wrong = await put(t.upload_url, bytes, "audio/mpeg");
    expect(wrong.status).toBe(403);
    expect(wrong.json.error.message).toContain("Content-Type must be audio/wav as requested, got audio/mpeg");
    expect(wrong.json.error.http_code).toBe("403");
    const none = await put(t.upload_url, bytes);
    expect(none.status).toBe(403);
    expect(none.json.error.message).toContain("got nothing");
    // Nothing was stored by the refused PUTs.
    expect((await download(t.public_url)).status).toBe(404);

    const ok = await put(t.upload_url, bytes, "audio/wav; charset=binary");
    expect(ok.status).toBe(200);
    const staged = await download(t.public_url);
    expect(staged.status).toBe(200);
    expect(staged.data.equals(bytes)).toBe(true);
  });

  it("refuses a tampered or missing signature", async () => {
    const t = await up.ticket("ref.wav", "audio/wav", 10);
    const url = new URL(t.upload_url);
    url.searchParams.set("signature", "f".repeat(32));
    const forged = await put(url.toString(), Buffer.alloc(10), "audio/wav");
    expect(forged.status).toBe(403);
    expect(forged.json.error.message).toContain("signature invalid");
    url.search = "";
    expect((await put(url.toString(), Buffer.alloc(10), "audio/wav")).status).toBe(403);
  });

  it("refuses an expired upload URL", async () => {
    // 15 minutes x 0.000001 = 0.9 ms; the URL carries whole seconds.
    const s = await fresh({ timeScale: 0.000001 });
    const t = await client(s).ticket("ref.wav", "audio/wav", 10);
    await until(
      async () => Date.now(),
      (now) => now > t.expires_at * 1000,
      3000,
    );
    const res = await put(t.upload_url, Buffer.alloc(10), "audio/wav");
    expect(res.status).toBe(403);
    expect(res.json.error.message).toContain("expired");
  });
});

describe("POST /audio/v1/assets", () => {
  async function staged(size = 1000, fileName = "ref.wav", type = "audio/wav", upload = size) {
    const t = await up.ticket(fileName, type, size);
    if (upload > 0) expect((await put(t.upload_url, Buffer.alloc(upload, 7), type)).status).toBe(200);
    const body = {
      object_key: t.object_key,
      file_name: fileName,
      content_type: type,
      file_size: size,
      duration_ms: 1200,
    };
    return { t, body };
  }
  const register = (body: unknown, key = KEY) => call(upSb.url, "POST", "/audio/v1/assets", { key, body });

  it("registers an uploaded file once", async () => {
    const { body } = await staged(1000);
    const before = Math.floor(Date.now() / 1000);
    const res = await register(body);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const { asset } = AssetResponse.parse(res.body);
    expect(asset).toMatchObject({
      purpose: "speech_reference",
      file_name: "ref.wav",
      content_type: "audio/wav",
      file_size: 1000,
      duration_ms: 1200,
    });
    expect(asset.created_at).toBeGreaterThanOrEqual(before);
    const file = await download(asset.public_url);
    expect(file.status).toBe(200);
    expect(file.data.equals(Buffer.alloc(1000, 7))).toBe(true);

    expectBusiness(await register(body), 400, 40904, "already registered");
  });

  it("refuses information that does not match the upload request", async () => {
    const { body } = await staged(1000, "ref.wav", "audio/wav");
    expectBusiness(
      await register({ ...body, file_name: "other.wav" }),
      400,
      40903,
      "mismatch",
      'file_name "ref.wav"',
    );
    expectBusiness(
      await register({ ...body, content_type: "audio/x-wav" }),
      400,
      40903,
      "mismatch",
      'content_type "audio/wav"',
    );
    expectBusiness(await register({ ...body, file_size: 999 }), 400, 40903, "mismatch", "file_size 1000");
    // None of these used up the upload record.
    expect((await register(body)).status).toBe(200);
  });

  it("refuses a file whose actual size differs from the declared one", async () => {
    const { body } = await staged(1000, "ref.mp3", "audio/mpeg", 900);
    expectBusiness(await register(body), 400, 40903, "900 bytes", "1000 were declared");
  });

  it("refuses a record that was never uploaded", async () => {
    const { body } = await staged(1000, "ref.ogg", "audio/ogg", 0);
    expectBusiness(await register(body), 400, 40903, "no file was uploaded");
  });

  it("refuses an unknown object key and another organization's upload", async () => {
    const { body } = await staged(100);
    expectBusiness(
      await register({ ...body, object_key: "speech-references/acme/nope/ref.wav" }),
      404,
      40401,
    );
    expectBusiness(await register(body, GLOBEX), 404, 40401, "upload record not found");
    // Another key of acme may register it.
    expect((await register(body, ACME2)).status).toBe(200);
  });

  it.each([
    [499, "duration_ms: expected an integer from 500 to 15000, got 499"],
    [15_001, "duration_ms: expected an integer from 500 to 15000, got 15001"],
    [1000.5, "duration_ms: expected an integer from 500 to 15000, got 1000.5"],
    [undefined, "duration_ms: is required"],
  ])("refuses duration_ms %s with HTTP 400", async (duration, part) => {
    const { body } = await staged(100);
    expectValidation(await register({ ...body, duration_ms: duration }), part);
    expectValidation(await register({ ...body, extra: 1 }), 'unsupported field "extra"');
    // The bounds are fine and the record is still registrable.
    expect((await register({ ...body, duration_ms: duration === 499 ? 500 : 15_000 })).status).toBe(200);
  });
});

describe("custom voices", () => {
  it("requires an Idempotency-Key and replays the same voice", async () => {
    const { asset } = await up.uploadAsset();
    const body = { asset_id: asset.asset_id, name: "  Narrator  " };
    expectValidation(await up.api("POST", "/audio/v1/voices", { body }), "Idempotency-Key: is required");
    expectValidation(
      await up.api("POST", "/audio/v1/voices", { body, idem: " " }),
      "Idempotency-Key: is required",
    );
    expectValidation(
      await up.api("POST", "/audio/v1/voices", { body, idem: "v".repeat(129) }),
      "Idempotency-Key: expected 1 to 128 characters after trimming, got 129",
    );

    const idem = randomUUID();
    const before = await stats(upSb);
    const voice = await up.createVoice(asset.asset_id, "  Narrator  ", idem);
    expect(voice).toMatchObject({ kind: "custom", name: "Narrator", style_tags: [] });
    const again = await up.createVoice(asset.asset_id, "Another name", idem);
    expect(again).toEqual(voice);
    expect((await stats(upSb)).idempotent_replays).toBe(before.idempotent_replays + 1);
    const custom = await up.voices("custom");
    expect(custom.items.filter((v) => v.voice_id === voice.voice_id)).toHaveLength(1);
    // Only under kind=custom, and only for acme.
    expect((await up.voices()).items.map((v) => v.voice_id)).not.toContain(voice.voice_id);
    expect((await client(upSb, ACME2).voices("custom")).items.map((v) => v.voice_id)).toContain(
      voice.voice_id,
    );
    expect((await client(upSb, GLOBEX).voices("custom")).items).toEqual([]);
    // Its preview is the uploaded reference audio.
    const preview = await download(voice.audio_url);
    expect(preview.status).toBe(200);
    expect(preview.data.length).toBe(asset.file_size);
  });

  it("validates the body", async () => {
    const { asset } = await up.uploadAsset();
    const voices = (body: unknown) => up.api("POST", "/audio/v1/voices", { body, idem: randomUUID() });
    expectValidation(
      await voices({ asset_id: asset.asset_id, name: "  " }),
      "name: expected 1 to 64 characters after trimming, got 0",
    );
    expectValidation(await voices({ asset_id: asset.asset_id, name: "n".repeat(65) }), "got 65");
    expectValidation(await voices({ asset_id: asset.asset_id }), "name: is required");
    expectValidation(await voices({ name: "x" }), "asset_id: is required");
    expectValidation(
      await voices({ asset_id: asset.asset_id, name: "x", kind: "custom" }),
      'unsupported field "kind"',
    );
    expectBusiness(
      await voices({ asset_id: "asset_missing", name: "x" }),
      404,
      40401,
      "asset not found: asset_missing",
    );
    expectBusiness(
      await client(upSb, GLOBEX).api("POST", "/audio/v1/voices", {
        body: { asset_id: asset.asset_id, name: "stolen" },
        idem: randomUUID(),
      }),
      404,
      40401,
    );
    expect((await voices({ asset_id: asset.asset_id, name: "n".repeat(64) })).status).toBe(200);
  });

  it("speaks with a custom voice and with an asset", async () => {
    const { asset } = await up.uploadAsset();
    const voice = await up.createVoice(asset.asset_id, "Mine");
    const viaVoice = await up.settle(
      await up.create({ ...VALID, voice: { source: "custom", voice_id: voice.voice_id } }),
    );
    expect(viaVoice.status).toBe("succeeded");
    expect(viaVoice.input.voice).toEqual({ source: "custom", voice_id: voice.voice_id });
    const viaAsset = await up.settle(
      await up.create({ ...VALID, voice: { source: "asset", asset_id: asset.asset_id } }),
    );
    expect(viaAsset.status).toBe("succeeded");
    expect(viaAsset.input.voice).toEqual({ source: "asset", asset_id: asset.asset_id });
    // Another organization can use neither.
    const other = client(upSb, GLOBEX);
    expectBusiness(
      await other.createRaw({ ...VALID, voice: { source: "custom", voice_id: voice.voice_id } }),
      404,
      40401,
    );
    expectBusiness(
      await other.createRaw({ ...VALID, voice: { source: "asset", asset_id: asset.asset_id } }),
      404,
      40401,
    );
  });

  it("save_voice=true creates a custom voice when the task succeeds", async () => {
    const { asset } = await up.uploadAsset();
    const before = (await up.voices("custom")).total;
    const id = await up.create({
      ...VALID,
      voice: { source: "asset", asset_id: asset.asset_id },
      save_voice: true,
      voice_name: " Saved voice ",
    });
    const task = await up.settle(id);
    expect(task.status).toBe("succeeded");
    expect(task.input.save_voice).toBe(true);
    const after = await up.voices("custom");
    expect(after.total).toBe(before + 1);
    expect(after.items.filter((v) => v.name === "Saved voice")).toHaveLength(1);
  });

  it("save_voice=true creates nothing when the task fails", async () => {
    const { asset } = await up.uploadAsset();
    const before = (await up.voices("custom")).total;
    const task = await up.settle(
      await up.create({
        ...VALID,
        text: "[sandbox:fail] no voice",
        voice: { source: "asset", asset_id: asset.asset_id },
        save_voice: true,
        voice_name: "Never saved",
      }),
    );
    expect(task.status).toBe("failed");
    const after = await up.voices("custom");
    expect(after.total).toBe(before);
    expect(after.items.map((v) => v.name)).not.toContain("Never saved");
  });

  it("cannot delete a voice that a queued or generating task uses, then can", async () => {
    const { asset } = await slow.uploadAsset();
    const voice = await slow.createVoice(asset.asset_id, "Busy");
    const id = await slow.create({
      ...VALID,
      text: "[sandbox:slow] busy",
      voice: { source: "custom", voice_id: voice.voice_id },
    });
    expectBusiness(
      await slow.api("DELETE", `/audio/v1/voices/${voice.voice_id}`),
      400,
      40902,
      `voice ${voice.voice_id} is used by queued task ${id}`,
    );
    await slow.waitFor(id, "generating");
    expectBusiness(
      await slow.api("DELETE", `/audio/v1/voices/${voice.voice_id}`),
      400,
      40902,
      "generating task",
    );
    expect((await slow.settle(id)).status).toBe("succeeded");

    // Another organization cannot delete it.
    expectBusiness(
      await client(slowSb, GLOBEX).api("DELETE", `/audio/v1/voices/${voice.voice_id}`),
      404,
      40401,
    );
    const res = await slow.api("DELETE", `/audio/v1/voices/${voice.voice_id}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(VoiceDeleteResponse.parse(res.body)).toEqual({ voice_id: voice.voice_id, deleted: true });
    expect((await slow.voices("custom")).items.map((v) => v.voice_id)).not.toContain(voice.voice_id);
    expectBusiness(
      await slow.api("DELETE", `/audio/v1/voices/${voice.voice_id}`),
      404,
      40401,
      "voice not found",
    );
    expectBusiness(
      await slow.createRaw({ ...VALID, voice: { source: "custom", voice_id: voice.voice_id } }),
      404,
      40401,
    );
  });

  it("refuses to delete a preset voice", async () => {
    const res = await c.api("DELETE", "/audio/v1/voices/en_female_bright");
    expectBusiness(res, 403, 40302, "preset voice");
    expect((await c.voices()).items.map((v) => v.voice_id)).toContain("en_female_bright");
  });
});

describe("asset retention", () => {
  it("drops an unused asset after 7 days but keeps custom voices made from assets", async () => {
    // 7 days x 0.000001 = 605 ms; upload URLs last until the end of the wall-clock second.
    const s = await fresh({ timeScale: 0.000001 });
    const k = client(s);
    await atSecondStart();
    const t0 = Date.now();
    const unused = await k.uploadAsset({ bytes: Buffer.alloc(600, 1) });
    const kept = await k.uploadAsset({ bytes: Buffer.alloc(700, 2) });
    const voice = await k.createVoice(kept.asset.asset_id, "Kept");
    expect((await download(unused.asset.public_url)).status).toBe(200);

    await until(
      () => download(unused.asset.public_url),
      (r) => r.status === 404,
      3000,
    );
    expect(Date.now() - t0).toBeGreaterThanOrEqual(600);
    expectBusiness(
      await k.createRaw({ ...VALID, voice: { source: "asset", asset_id: unused.asset.asset_id } }),
      404,
      40401,
      "asset not found",
    );
    const res = await k.api("POST", "/audio/v1/voices", {
      body: { asset_id: unused.asset.asset_id, name: "late" },
      idem: randomUUID(),
    });
    expectBusiness(res, 404, 40401, "asset not found");

    // The custom voice is an independent copy.
    const voices = await k.voices("custom");
    expect(voices.items.map((v) => v.voice_id)).toEqual([voice.voice_id]);
    const preview = await download(voice.audio_url);
    expect(preview.status).toBe(200);
    expect(preview.data.equals(Buffer.alloc(700, 2))).toBe(true);
    const task = await k.settle(
      await k.create({ ...VALID, voice: { source: "custom", voice_id: voice.voice_id } }),
    );
    expect(task.status).toBe("succeeded");
  });
});
