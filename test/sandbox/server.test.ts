// Server-wide behaviour of the sandbox over real HTTP on loopback: authentication, routing, bodies,
// control endpoints, injected faults, rate limits and the `clapper sandbox` CLI
// (/work/shared/docs/sandbox-contract.md and the Errors/Authentication parts of both specs).
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { request } from "undici";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import {
  PointsPackage,
  PointsPackageList,
  PointsSummary,
  ValidationErrorBody,
} from "../../src/api/common.js";
import { Pricing, SpeechCreateResponse } from "../../src/api/speech.js";
import { type Sandbox, type SandboxOptions, startSandbox } from "../../src/sandbox/index.js";
import { call, download, KEY, type Reply, sandbox, until } from "../helpers/sandbox.js";

const ACME2 = "sk-ml-acme2";
const GLOBEX = "sk-ml-globex";
const KEYS = [`${KEY}=acme`, `${ACME2}=acme`, `${GLOBEX}=globex`];
const SPEECH = {
  text: "The light came on.",
  language: "EN",
  voice: { source: "preset", voice_id: "en_female_bright" },
};
const ROOT = fileURLToPath(new URL("../../", import.meta.url));

async function fresh(options: SandboxOptions = {}): Promise<Sandbox> {
  const s = await sandbox({ keys: KEYS, ...options });
  onTestFinished(() => s.close());
  return s;
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Asserts the `{type: "error", error: {type, message, http_code}, request_id}` shape. */
function expectError(res: Reply, status: number, type: string, ...parts: string[]) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  const body = ValidationErrorBody.parse(res.body);
  expect(body.type).toBe("error");
  expect(body.error.type).toBe(type);
  expect(body.error.http_code).toBe(String(status));
  expect(typeof body.error.http_code).toBe("string");
  expect(body.request_id).toMatch(/\S/);
  expect(body.request_id).toBe(res.headers["x-request-id"]);
  for (const part of parts) expect(body.error.message).toContain(part);
  return body;
}

const control = (s: Sandbox, method: string, path: string, body?: unknown) =>
  call(s.url, method, `/_sandbox${path}`, { key: null, ...(body === undefined ? {} : { body }) });

async function faults(s: Sandbox, body: unknown) {
  const res = await control(s, "POST", "/faults", body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

async function stats(s: Sandbox) {
  const res = await control(s, "GET", "/stats");
  expect(res.status).toBe(200);
  return res.body as {
    requests: Record<string, number>;
    tasks_created: { video: number; speech: number };
    idempotent_replays: number;
    callbacks: { delivered: number; failed: number };
  };
}

/** Raw request with full control of the headers and body. */
async function raw(
  s: Sandbox,
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: string | Buffer | AsyncIterable<Buffer>,
): Promise<Reply> {
  const res = await request(`${s.url}${path}`, { method: method as "POST", headers, body: body as any });
  const text = await res.body.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.statusCode, headers: res.headers, body: parsed };
}

let sb: Sandbox;

beforeAll(async () => {
  sb = await sandbox({ keys: KEYS });
});

afterAll(async () => {
  await sb?.close();
});

// ---------------------------------------------------------------------------------------------
// authentication
// ---------------------------------------------------------------------------------------------

describe("authentication", () => {
  const endpoints: [string, string][] = [
    ["GET", "/audio/v1/pricing"],
    ["GET", "/audio/v1/speech/jobs"],
    ["GET", "/audio/v1/speech/jobs/stask_1"],
    ["GET", "/audio/v1/voices"],
    ["GET", "/vid/v2/query/point_packages"],
    ["GET", "/vid/v2/query/point_usage_summary"],
    ["GET", "/vid/v2/query/video_generation"],
    ["DELETE", "/vid/v2/video_generation/task_1"],
    ["GET", "/vid/v2/skills"],
  ];

  it.each(endpoints)("%s %s without a key is HTTP 401", async (method, path) => {
    expectError(
      await call(sb.url, method, path, { key: null }),
      401,
      "authentication_error",
      "missing API key",
    );
  });

  it.each(endpoints)("%s %s with an unknown key is HTTP 401", async (method, path) => {
    expectError(
      await call(sb.url, method, path, { key: "sk-ml-unknown" }),
      401,
      "authentication_error",
      "refused",
    );
  });

  it("refuses other schemes and malformed headers", async () => {
    for (const authorization of [
      `Basic ${KEY}`,
      KEY,
      "Bearer",
      "Bearer ",
      `Bearer ${KEY} extra`,
      `Token ${KEY}`,
    ]) {
      const res = await raw(sb, "GET", "/audio/v1/pricing", { authorization });
      expectError(res, 401, "authentication_error");
    }
  });

  it("accepts the scheme case-insensitively", async () => {
    const res = await raw(sb, "GET", "/audio/v1/pricing", { authorization: `bearer ${KEY}` });
    expect(res.status).toBe(200);
    Pricing.parse(res.body);
  });

  it("checks the key before the body", async () => {
    const res = await call(sb.url, "POST", "/audio/v1/speech/jobs", { key: null, body: { nonsense: true } });
    expectError(res, 401, "authentication_error");
    const bad = await raw(sb, "POST", "/vid/v2/skills", { authorization: "Bearer sk-ml-nope" }, "not json");
    expectError(bad, 401, "authentication_error");
  });

  it("needs no key for control endpoints and media", async () => {
    expect((await control(sb, "GET", "/health")).status).toBe(200);
    const preview = await download(`${sb.url}/_media/voices/en_female_bright`);
    expect(preview.status).toBe(200);
    expect(preview.headers["content-type"]).toBe("audio/wav");
  });
});

describe("startSandbox keys", () => {
  it.each(["sk-test-1", "abc", "sk-ml-", "SK-ML-upper", "sk-ml-a=b=c", "sk-ml-a b", "sk-ml-a=", " sk-ml-a"])(
    "rejects %j",
    async (key) => {
      await expect(startSandbox({ port: 0, keys: [key] })).rejects.toThrow(/sk-ml-KEY/);
    },
  );

  it("puts a key without an organization in organization default, like the default key", async () => {
    const s = await startSandbox({ port: 0, timeScale: 0.001, keys: ["sk-ml-solo", "sk-ml-also=default"] });
    onTestFinished(() => s.close());
    const id = SpeechCreateResponse.parse(
      (
        await call(s.url, "POST", "/audio/v1/speech/jobs", {
          key: "sk-ml-solo",
          body: SPEECH,
          idem: randomUUID(),
        })
      ).body,
    ).task_id;
    const seen = await call(s.url, "GET", `/audio/v1/speech/jobs/${id}`, { key: "sk-ml-also" });
    expect(seen.status).toBe(200);

    const d = await startSandbox({ port: 0 });
    onTestFinished(() => d.close());
    expect((await call(d.url, "GET", "/audio/v1/pricing", { key: "sk-ml-sandbox" })).status).toBe(200);
    expectError(await call(d.url, "GET", "/audio/v1/pricing", { key: KEY }), 401, "authentication_error");
  });
});

// ---------------------------------------------------------------------------------------------
// routing and bodies
// ---------------------------------------------------------------------------------------------

describe("routing", () => {
  it.each([
    ["GET", "/nope"],
    ["GET", "/audio/v2/pricing"],
    ["POST", "/audio/v1/speech/jobs/stask_1/retry"],
    ["GET", "/_sandbox/nope"],
  ])("%s %s is HTTP 404", async (method, path) => {
    expectError(
      await call(sb.url, method, path),
      404,
      "not_found_error",
      `no such endpoint: ${method} ${path}`,
    );
  });

  it.each([
    ["DELETE", "/audio/v1/pricing", "GET"],
    ["PUT", "/audio/v1/speech/jobs", "GET, POST"],
    ["GET", "/audio/v1/speech/jobs/stask_1/cancel", "POST"],
    ["PATCH", "/vid/v2/skills/skill_1", "PUT, DELETE"],
    ["POST", "/_sandbox/health", "GET"],
    ["GET", "/_sandbox/faults", "POST"],
  ])("%s %s is HTTP 405 with Allow: %s", async (method, path, allow) => {
    const res = await call(sb.url, method, path);
    expectError(res, 405, "method_not_allowed_error", `${method} is not allowed on ${path}`);
    expect(res.headers.allow).toBe(allow);
  });

  it("ignores a trailing slash", async () => {
    expect((await call(sb.url, "GET", "/audio/v1/pricing/")).status).toBe(200);
  });
});

describe("JSON bodies", () => {
  const speech = (headers: Record<string, string>, body?: string | Buffer) =>
    raw(
      sb,
      "POST",
      "/audio/v1/speech/jobs",
      { authorization: `Bearer ${KEY}`, "idempotency-key": randomUUID(), ...headers },
      body,
    );

  it("refuses a wrong or missing Content-Type", async () => {
    const json = JSON.stringify(SPEECH);
    expectError(
      await speech({ "content-type": "text/plain" }, json),
      400,
      "bad_request_error",
      'Content-Type: expected application/json, got "text/plain"',
    );
    expectError(
      await speech({ "content-type": "application/x-www-form-urlencoded" }, "a=b"),
      400,
      "bad_request_error",
      "expected application/json",
    );
    expectError(
      await speech({}, json),
      400,
      "bad_request_error",
      "Content-Type: expected application/json, got nothing",
    );
  });

  it("accepts application/json with parameters and in any case", async () => {
    const json = JSON.stringify(SPEECH);
    expect((await speech({ "content-type": "application/json; charset=utf-8" }, json)).status).toBe(200);
    expect((await speech({ "content-type": "Application/JSON" }, json)).status).toBe(200);
  });

  it.each([
    ["{", "request body is not valid JSON"],
    ["", "request body is not valid JSON"],
    ["{'a': 1}", "request body is not valid JSON"],
    ["null", "request body must be a JSON object"],
    ["[1,2]", "request body must be a JSON object"],
    ['"text"', "request body must be a JSON object"],
    ["42", "request body must be a JSON object"],
  ])("refuses the body %j", async (body, part) => {
    expectError(await speech({ "content-type": "application/json" }, body), 400, "bad_request_error", part);
  });

  it("limits skill bodies to 64 KiB", async () => {
    const skill = (size: number) => {
      const base = JSON.stringify({ name: "big", content: "" });
      return JSON.stringify({ name: "big", content: "x".repeat(size - base.length) });
    };
    const headers = { authorization: `Bearer ${KEY}`, "content-type": "application/json" };
    const exact = skill(64 * 1024);
    expect(Buffer.byteLength(exact)).toBe(65_536);
    const ok = await raw(sb, "POST", "/vid/v2/skills", headers, exact);
    expect(ok.status, JSON.stringify(ok.body).slice(0, 300)).toBe(200);

    const over = await raw(sb, "POST", "/vid/v2/skills", headers, skill(64 * 1024 + 1));
    expectError(over, 400, "request_too_large", "request body exceeds the limit of 64 KiB");
    const update = await raw(sb, "PUT", `/vid/v2/skills/${ok.body.skill.id}`, headers, skill(100_000));
    expectError(update, 400, "request_too_large", "64 KiB");
    // The server still answers afterwards.
    expect((await call(sb.url, "GET", "/vid/v2/skills")).status).toBe(200);
  });

  it("limits a chunked skill body without Content-Length to 64 KiB too", async () => {
    async function* chunks() {
      for (let i = 0; i < 10; i++) yield Buffer.alloc(10 * 1024, 0x20);
    }
    const res = await raw(
      sb,
      "POST",
      "/vid/v2/skills",
      { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
      chunks(),
    );
    expectError(res, 400, "request_too_large", "64 KiB");
  });

  it("limits speech bodies to 1 MiB", async () => {
    const body = JSON.stringify({ ...SPEECH, emotion_description: "x".repeat(1024 * 1024) });
    expectError(
      await speech({ "content-type": "application/json" }, body),
      400,
      "request_too_large",
      "1 MiB",
    );
  });
});

// ---------------------------------------------------------------------------------------------
// control endpoints
// ---------------------------------------------------------------------------------------------

describe("control endpoints", () => {
  it("GET /_sandbox/health answers {ok: true}", async () => {
    const res = await control(sb, "GET", "/health");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true });
    expect(String(res.headers["content-type"])).toMatch(/^application\/json/);
  });

  it("GET /_sandbox/stats counts requests by method and path template", async () => {
    const s = await fresh();
    const initial = await stats(s);
    expect(initial).toEqual({
      requests: {},
      tasks_created: { video: 0, speech: 0 },
      idempotent_replays: 0,
      callbacks: { delivered: 0, failed: 0 },
    });
    await call(s.url, "GET", "/audio/v1/speech/jobs/stask_a");
    await call(s.url, "GET", "/audio/v1/speech/jobs/stask_b");
    await call(s.url, "POST", "/audio/v1/speech/jobs/stask_b/cancel");
    await call(s.url, "DELETE", "/vid/v2/skills/skill_x");
    await call(s.url, "GET", "/audio/v1/pricing");
    const idem = randomUUID();
    await call(s.url, "POST", "/audio/v1/speech/jobs", { body: SPEECH, idem });
    await call(s.url, "POST", "/audio/v1/speech/jobs", { body: SPEECH, idem });
    const now = await stats(s);
    expect(now.requests).toMatchObject({
      "GET /audio/v1/speech/jobs/{task_id}": 2,
      "POST /audio/v1/speech/jobs/{task_id}/cancel": 1,
      "DELETE /vid/v2/skills/{skill_id}": 1,
      "GET /audio/v1/pricing": 1,
      "POST /audio/v1/speech/jobs": 2,
    });
    expect(Object.keys(now.requests).some((k) => k.includes("stask_"))).toBe(false);
    expect(now.tasks_created).toEqual({ video: 0, speech: 1 });
    expect(now.idempotent_replays).toBe(1);
  });

  it("POST /_sandbox/orgs/{org}/packages adds a package the organization sees", async () => {
    const s = await fresh({ points: 1000 });
    const now = Math.floor(Date.now() / 1000);
    const res = await control(s, "POST", "/orgs/acme/packages", {
      total_points: 500,
      code: "gift-500",
      name: "Gift",
      order_no: "ORD-1",
      total_price: 990,
      expires_at: now + 3600,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const pkg = PointsPackage.parse(res.body);
    expect(pkg).toMatchObject({
      code: "gift-500",
      name: "Gift",
      status: "active",
      total_points: 500,
      remaining_points: 500,
      reserved_points: 0,
      available_points: 500,
      expires_at: now + 3600,
      order_no: "ORD-1",
      total_price: 990,
    });
    expect(pkg.purchased_at).toBeGreaterThanOrEqual(now);

    const list = PointsPackageList.parse((await call(s.url, "GET", "/vid/v2/query/point_packages")).body);
    expect(list.total).toBe(2);
    expect(list.items[0]).toEqual(pkg); // newest first
    expect(list.items[1]).toMatchObject({ total_points: 1000, status: "active" });
    expect(list.items[1]).not.toHaveProperty("order_no");
    expect(list.items[1]).not.toHaveProperty("total_price");
    const summary = PointsSummary.parse((await call(s.url, "GET", "/vid/v2/query/point_usage_summary")).body);
    expect(summary).toEqual({ total_points: 1500, reserved_points: 0, available_points: 1500 });
    // Only acme got it.
    const other = PointsPackageList.parse(
      (await call(s.url, "GET", "/vid/v2/query/point_packages", { key: GLOBEX })).body,
    );
    expect(other.total).toBe(1);
  });

  it.each([
    [{}, "total_points: is required"],
    [{ total_points: -1 }, "total_points"],
    [{ total_points: 1.5 }, "total_points"],
    [{ total_points: "100" }, "total_points"],
    [{ total_points: 100, status: "used_up" }, "status"],
    [{ total_points: 100, expires_at: "tomorrow" }, "expires_at"],
  ])("POST /_sandbox/orgs/{org}/packages refuses %j", async (body, part) => {
    expectError(await control(sb, "POST", "/orgs/acme/packages", body), 400, "bad_request_error", part);
  });
});

describe("one balance for both services", () => {
  it("releases the points of a failed speech task that nobody polled before reserving a video", async () => {
    const s = await fresh({ points: 40 });
    const speech = await call(s.url, "POST", "/audio/v1/speech/jobs", {
      body: { ...SPEECH, text: "[sandbox:fail] x" }, // 12 counted -> 3 points
      idem: randomUUID(),
    });
    expect(speech.status).toBe(200);
    // Not polled on purpose: at time-scale 0.001 the task has failed after ~10 ms.
    await sleep(100);
    const video = await call(s.url, "POST", "/vid/v2/video_generation", {
      body: { model: "Vid-H3", content: [{ type: "text", text: "A lighthouse." }], duration: 4 }, // 40 points
    });
    expect(video.status, JSON.stringify(video.body)).toBe(200);
    expect(video.body.RetCode).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------
// faults
// ---------------------------------------------------------------------------------------------

describe("injected faults", () => {
  it("answers every Nth API request with 503 when error_every is N", async () => {
    const s = await fresh();
    await faults(s, { error_every: 3 });
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await call(s.url, "GET", "/audio/v1/pricing")).status);
    expect(statuses).toEqual([200, 200, 503, 200, 200, 503]);
    await faults(s, { error_every: 0 });
    expect((await call(s.url, "GET", "/audio/v1/pricing")).status).toBe(200);
  });

  it("draws its faults from a seeded generator when given a seed: the same faults in the same order", async () => {
    const sequence = async (seed: number | undefined) => {
      const s = await fresh();
      await faults(s, { error_rate: 0.5, ...(seed !== undefined ? { seed } : {}) });
      const out: number[] = [];
      for (let i = 0; i < 24; i++) out.push((await call(s.url, "GET", "/audio/v1/pricing")).status);
      return out.join(",");
    };
    const first = await sequence(11);
    expect(first).toContain("503");
    expect(first).toContain("200");
    expect(await sequence(11)).toBe(first);
    expect(await sequence(12)).not.toBe(first);
  });

  it("echoes the fault settings and validates them", async () => {
    const s = await fresh();
    // The paging faults (test/sandbox/paging.test.ts) are echoed beside the others.
    const paging = { page_cap: 0, page_placement: "served", page_repeat: false };
    expect(await faults(s, {})).toEqual({
      error_rate: 0,
      error_every: 0,
      drop_rate: 0,
      latency_ms: 0,
      rate_limit_rps: null,
      ...paging,
    });
    expect(await faults(s, { latency_ms: 5, rate_limit_rps: 50 })).toEqual({
      error_rate: 0,
      error_every: 0,
      drop_rate: 0,
      latency_ms: 5,
      rate_limit_rps: 50,
      ...paging,
    });
    // Omitted fields keep their values; null turns the rate limit off.
    expect(await faults(s, { rate_limit_rps: null })).toMatchObject({ latency_ms: 5, rate_limit_rps: null });
    for (const body of [
      { error_rate: 1.5 },
      { error_rate: -0.1 },
      { drop_rate: 2 },
      { latency_ms: -1 },
      { latency_ms: 1.5 },
      { rate_limit_rps: 0 },
      { error_rate: "0.5" },
      { error_every: -1 },
      { error_every: 2.5 },
    ]) {
      expectError(await control(s, "POST", "/faults", body), 400, "bad_request_error", Object.keys(body)[0]!);
    }
  });

  it("error_rate 1 answers API requests with 503 but not /_sandbox/ or media", async () => {
    const s = await fresh();
    await faults(s, { error_rate: 1 });
    expectError(await call(s.url, "GET", "/audio/v1/pricing"), 503, "service_unavailable_error", "injected");
    const create = await call(s.url, "POST", "/audio/v1/speech/jobs", { body: SPEECH, idem: randomUUID() });
    expectError(create, 503, "service_unavailable_error");
    expectError(await call(s.url, "GET", "/vid/v2/skills"), 503, "service_unavailable_error");
    expect((await stats(s)).tasks_created.speech).toBe(0);
    expect((await control(s, "GET", "/health")).status).toBe(200);
    expect((await download(`${s.url}/_media/voices/en_female_bright`)).status).toBe(200);

    await faults(s, { error_rate: 0 });
    expect((await call(s.url, "GET", "/audio/v1/pricing")).status).toBe(200);
  });

  it("counts requests answered with an injected 503 in /_sandbox/stats", async () => {
    const s = await fresh();
    await faults(s, { error_rate: 1 });
    expect((await call(s.url, "GET", "/audio/v1/pricing")).status).toBe(503);
    expect((await call(s.url, "GET", "/audio/v1/pricing")).status).toBe(503);
    await faults(s, { error_rate: 0 });
    expect((await call(s.url, "GET", "/audio/v1/pricing")).status).toBe(200);
    expect((await stats(s)).requests["GET /audio/v1/pricing"]).toBe(3);
  });

  it("error_rate 0.5 fails about half of the requests", async () => {
    const s = await fresh();
    await faults(s, { error_rate: 0.5 });
    const statuses = [];
    for (let i = 0; i < 60; i++) statuses.push((await call(s.url, "GET", "/audio/v1/pricing")).status);
    const failed = statuses.filter((x) => x === 503).length;
    expect(statuses.filter((x) => x !== 503 && x !== 200)).toEqual([]);
    expect(failed).toBeGreaterThan(10);
    expect(failed).toBeLessThan(50);
  });

  it("drop_rate 1 closes connections without an answer; a retry with the same key creates one task", async () => {
    const s = await fresh();
    await faults(s, { drop_rate: 1 });
    await expect(call(s.url, "GET", "/audio/v1/pricing")).rejects.toThrow();
    const idem = randomUUID();
    await expect(call(s.url, "POST", "/audio/v1/speech/jobs", { body: SPEECH, idem })).rejects.toThrow();
    expect((await control(s, "GET", "/health")).status).toBe(200);

    await faults(s, { drop_rate: 0 });
    const retry = await call(s.url, "POST", "/audio/v1/speech/jobs", { body: SPEECH, idem });
    expect(retry.status).toBe(200);
    expect((await stats(s)).tasks_created.speech).toBe(1);
    expect((await call(s.url, "GET", "/audio/v1/pricing")).status).toBe(200);
  });

  it("latency_ms delays API answers until reset", async () => {
    const s = await fresh();
    await faults(s, { latency_ms: 300 });
    let t = Date.now();
    expect((await call(s.url, "GET", "/audio/v1/pricing")).status).toBe(200);
    expect(Date.now() - t).toBeGreaterThanOrEqual(290);
    t = Date.now();
    expect((await control(s, "GET", "/health")).status).toBe(200);
    expect(Date.now() - t).toBeLessThan(250);

    await faults(s, { latency_ms: 0 });
    t = Date.now();
    expect((await call(s.url, "GET", "/audio/v1/pricing")).status).toBe(200);
    expect(Date.now() - t).toBeLessThan(250);
  });
});

// ---------------------------------------------------------------------------------------------
// rate limits
// ---------------------------------------------------------------------------------------------

describe("rate limit", () => {
  /** `n` requests sent at once, so they all arrive well within one refill interval. */
  async function burst(s: Sandbox, n: number, key = KEY) {
    return Promise.all(Array.from({ length: n }, () => call(s.url, "GET", "/audio/v1/pricing", { key })));
  }
  const count = (replies: Reply[], status: number) => replies.filter((r) => r.status === status).length;

  it("answers requests above --rate-limit with 429 and Retry-After, per key, and recovers", async () => {
    const s = await fresh({ rateLimit: 5 });
    const start = Date.now();
    const first = await burst(s, 8);
    expect(count(first, 200)).toBe(5);
    expect(count(first, 429)).toBe(3);
    const limited = first.find((r) => r.status === 429)!;
    expectError(limited, 429, "rate_limit_error", "rate limit of 5 requests per second exceeded");
    const retryAfter = limited.headers["retry-after"];
    expect(retryAfter).toMatch(/^\d+$/);
    expect(Number(retryAfter)).toBe(1);

    // Another key, even of the same organization, has its own allowance.
    expect(count(await burst(s, 5, ACME2), 200)).toBe(5);
    expect((await call(s.url, "GET", "/audio/v1/pricing", { key: GLOBEX })).status).toBe(200);
    // Control endpoints are not limited; unknown keys are refused, not limited.
    expect((await control(s, "GET", "/health")).status).toBe(200);
    expectError(
      await call(s.url, "GET", "/audio/v1/pricing", { key: "sk-ml-x" }),
      401,
      "authentication_error",
    );

    const back = await until(
      () => call(s.url, "GET", "/audio/v1/pricing"),
      (r) => r.status === 200,
      1500,
    );
    expect(back.status).toBe(200);
    // Token bucket: 5 at once, then one every 200 ms, so the 6th success comes >= 200 ms after the start.
    expect(Date.now() - start).toBeGreaterThanOrEqual(195);
  });

  it("is switched on and off through /_sandbox/faults", async () => {
    const s = await fresh();
    expect(count(await burst(s, 10), 200)).toBe(10);
    await faults(s, { rate_limit_rps: 3 });
    const limited = await burst(s, 5);
    expect(count(limited, 200)).toBe(3);
    expect(count(limited, 429)).toBe(2);
    await faults(s, { rate_limit_rps: null });
    expect(count(await burst(s, 10), 200)).toBe(10);
  });

  it("counts a 429 under the API endpoint and creates nothing", async () => {
    const s = await fresh({ rateLimit: 1 });
    expect(
      (await call(s.url, "POST", "/audio/v1/speech/jobs", { body: SPEECH, idem: randomUUID() })).status,
    ).toBe(200);
    const res = await call(s.url, "POST", "/audio/v1/speech/jobs", { body: SPEECH, idem: randomUUID() });
    expectError(res, 429, "rate_limit_error");
    expect((await stats(s)).tasks_created.speech).toBe(1);
  });

  it("allows one request every two seconds at 0.5 requests per second", async () => {
    const s = await fresh({ rateLimit: 0.5 });
    expect((await call(s.url, "GET", "/audio/v1/pricing")).status).toBe(200);
    const limited = await call(s.url, "GET", "/audio/v1/pricing");
    expectError(limited, 429, "rate_limit_error");
    expect(Number(limited.headers["retry-after"])).toBe(2);
  });
});

// ---------------------------------------------------------------------------------------------
// the CLI
// ---------------------------------------------------------------------------------------------

describe("clapper sandbox (CLI)", () => {
  const BIN = `${ROOT}bin/clapper.js`;

  function start(args: string[]) {
    const child = spawn(process.execPath, [BIN, "sandbox", ...args], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    onTestFinished(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const exited = once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>;
    return { child, exited, stderr: () => stderr };
  }

  async function firstLine(child: ChildProcess): Promise<string> {
    const lines = createInterface({ input: child.stdout! });
    const line = await Promise.race([
      once(lines, "line").then(([l]) => l as string),
      once(child, "exit").then(() => {
        throw new Error("the sandbox exited before printing a line");
      }),
    ]);
    return line;
  }

  it("has a built CLI to run", () => {
    expect(existsSync(`${ROOT}dist/cli/main.js`)).toBe(true);
  });

  it("prints its address first, serves the keys and points given, and exits 0 on SIGTERM", async () => {
    const { child, exited } = start([
      "--port",
      "0",
      "--time-scale",
      "0.001",
      "--key",
      "sk-ml-a=o1",
      "--points",
      "500",
    ]);
    const line = await firstLine(child);
    const match = /^clapper sandbox listening on http:\/\/127\.0\.0\.1:(\d+)$/.exec(line);
    expect(match, line).not.toBeNull();
    const url = `http://127.0.0.1:${match![1]}`;
    expect(Number(match![1])).toBeGreaterThan(0);

    const health = await call(url, "GET", "/_sandbox/health", { key: null });
    expect(health.body).toEqual({ ok: true });
    const pricing = Pricing.parse((await call(url, "GET", "/audio/v1/pricing", { key: "sk-ml-a" })).body);
    expect(pricing.balance).toEqual({ total_points: 500, reserved_points: 0, available_points: 500 });
    const pkgs = PointsPackageList.parse(
      (await call(url, "GET", "/vid/v2/query/point_packages", { key: "sk-ml-a" })).body,
    );
    expect(pkgs.items.map((p) => [p.status, p.total_points])).toEqual([["active", 500]]);
    // --key replaces the default key.
    expect((await call(url, "GET", "/audio/v1/pricing", { key: "sk-ml-sandbox" })).status).toBe(401);

    // Time scale 0.001: a speech task ends within moments.
    const id = (
      await call(url, "POST", "/audio/v1/speech/jobs", { key: "sk-ml-a", body: SPEECH, idem: randomUUID() })
    ).body.task_id as string;
    const done = await until(
      () => call(url, "GET", `/audio/v1/speech/jobs/${id}`, { key: "sk-ml-a" }),
      (r) => r.body.task?.status === "succeeded",
      3000,
    );
    expect(done.body.task.point_cost).toBe(3);

    child.kill("SIGTERM");
    const [code, signal] = await exited;
    expect(signal).toBeNull();
    expect(code).toBe(0);
  });

  it("applies --rate-limit per key", async () => {
    const { child, exited } = start([
      "--port",
      "0",
      "--key",
      "sk-ml-a=o1",
      "--key",
      "sk-ml-b=o1",
      "--rate-limit",
      "2",
    ]);
    const url = (await firstLine(child)).replace("clapper sandbox listening on ", "");
    const replies = await Promise.all(
      [1, 2, 3].map(() => call(url, "GET", "/audio/v1/pricing", { key: "sk-ml-a" })),
    );
    expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 429]);
    expect((await call(url, "GET", "/audio/v1/pricing", { key: "sk-ml-b" })).status).toBe(200);
    child.kill("SIGTERM");
    expect((await exited)[0]).toBe(0);
  });

  it("refuses a key without the sk-ml- prefix with exit code 2", async () => {
    const { exited, stderr } = start(["--port", "0", "--key", "sk-live-a=o1"]);
    const [code] = await exited;
    expect(code).toBe(2);
    expect(stderr()).toContain("sk-ml-");
  });

  it("exits 0 on SIGINT as well", async () => {
    const { child, exited } = start(["--port", "0"]);
    expect(await firstLine(child)).toMatch(/^clapper sandbox listening on http:\/\/127\.0\.0\.1:\d+$/);
    child.kill("SIGINT");
    expect(await exited).toEqual([0, null]);
  });
});
