// The one HTTP layer: the pure retry maths and error classification, then the retry loop, timeouts,
// aborts, idempotency keys and pagination over real HTTP, against scripted node:http servers for
// the answers the sandbox cannot give and against the sandbox for the list endpoints.
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import {
  AbortedError,
  AuthenticationError,
  BusinessError,
  BusyError,
  ClapperApiError,
  ConflictError,
  ConnectionError,
  createClients,
  errorFromResponse,
  HttpClient,
  type HttpClientOptions,
  InsufficientPointsError,
  isUnavailable,
  NotFoundError,
  PermissionError,
  parseRetryAfter,
  RateLimitError,
  type RetryPolicy,
  retryDelay,
  ServiceError,
  TimeoutError,
  ValidationError,
} from "../../src/api/index.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { errorBody, type Hit, ok, type Scripted, scripted, sequence } from "../fixtures/servers.js";
import { call, KEY, sandbox } from "../helpers/sandbox.js";

// ---------------------------------------------------------------------------------------------
// Pure: retryDelay, parseRetryAfter, errorFromResponse
// ---------------------------------------------------------------------------------------------

const POLICY: RetryPolicy = {
  maxRetries: 5,
  baseDelayMs: 100,
  maxDelayMs: 1000,
  maxRetryAfterMs: 30_000,
  retryAmbiguous: true,
};

describe("retryDelay", () => {
  it("doubles from the base delay and stops at the cap (upper jitter bound)", () => {
    const top = () => 1;
    expect([1, 2, 3, 4, 5, 6, 30].map((n) => retryDelay(POLICY, n, undefined, top))).toEqual([
      100, 200, 400, 800, 1000, 1000, 1000,
    ]);
  });

  it("never goes below half the exponential delay (lower jitter bound)", () => {
    const bottom = () => 0;
    expect([1, 2, 3, 4, 5, 6].map((n) => retryDelay(POLICY, n, undefined, bottom))).toEqual([
      50, 100, 200, 400, 500, 500,
    ]);
  });

  it("spreads delays inside [exp/2, exp] with the injected random", () => {
    for (const r of [0, 0.1, 0.25, 0.5, 0.75, 0.999]) {
      for (let n = 1; n <= 8; n++) {
        const exp = Math.min(1000, 100 * 2 ** (n - 1));
        const d = retryDelay(POLICY, n, undefined, () => r);
        expect(d).toBeGreaterThanOrEqual(exp / 2);
        expect(d).toBeLessThanOrEqual(exp);
        expect(d).toBe(Math.round(exp / 2 + (r * exp) / 2));
      }
    }
    // Different randoms give different delays: the jitter is real.
    expect(retryDelay(POLICY, 3, undefined, () => 0.1)).not.toBe(retryDelay(POLICY, 3, undefined, () => 0.9));
  });

  it("lets a server's Retry-After win over the backoff, even above the cap", () => {
    expect(retryDelay(POLICY, 1, 5000, () => 0)).toBe(5000);
    expect(retryDelay(POLICY, 7, 0, () => 1)).toBe(0);
    expect(retryDelay(POLICY, 2, 1234, () => 0.5)).toBe(1234);
  });

  it("stays finite for absurd retry numbers", () => {
    expect(retryDelay(POLICY, 5000, undefined, () => 1)).toBe(1000);
  });
});

describe("parseRetryAfter", () => {
  const now = Date.UTC(2030, 0, 1, 12, 0, 0);

  it("reads delta seconds, whole and decimal", () => {
    expect(parseRetryAfter({ "retry-after": "3" }, now)).toBe(3000);
    expect(parseRetryAfter({ "retry-after": " 2 " }, now)).toBe(2000);
    expect(parseRetryAfter({ "retry-after": "1.5" }, now)).toBe(1500);
    expect(parseRetryAfter({ "retry-after": "0" }, now)).toBe(0);
  });

  it("reads an HTTP date relative to now, and a date in the past as 0", () => {
    expect(parseRetryAfter({ "retry-after": new Date(now + 5000).toUTCString() }, now)).toBe(5000);
    expect(parseRetryAfter({ "retry-after": "Tue, 01 Jan 2030 12:01:00 GMT" }, now)).toBe(60_000);
    expect(parseRetryAfter({ "retry-after": "Wed, 21 Oct 2015 07:28:00 GMT" }, now)).toBe(0);
  });

  it("prefers retry-after-ms and rounds it up", () => {
    expect(parseRetryAfter({ "retry-after-ms": "250", "retry-after": "9" }, now)).toBe(250);
    expect(parseRetryAfter({ "retry-after-ms": "12.2" }, now)).toBe(13);
    // An unreadable retry-after-ms falls back to Retry-After.
    expect(parseRetryAfter({ "retry-after-ms": "soon", "retry-after": "2" }, now)).toBe(2000);
  });

  it("takes the first of repeated headers", () => {
    expect(parseRetryAfter({ "retry-after": ["4", "8"] }, now)).toBe(4000);
  });

  it("returns undefined when absent or unreadable, never 'retry now' for garbage", () => {
    expect(parseRetryAfter({}, now)).toBeUndefined();
    for (const garbage of ["", "soon", "-5", "abc 12", "Foo 1", "1e3", "0x10", "12 ab", "1,5"]) {
      expect(parseRetryAfter({ "retry-after": garbage }, now), garbage).toBeUndefined();
    }
    expect(parseRetryAfter({ "retry-after-ms": "-100" }, now)).toBeUndefined();
  });
});

describe("errorFromResponse", () => {
  const what = "do the thing";
  const classify = (status: number, body: unknown, headerId?: string, retryAfterMs?: number) =>
    errorFromResponse(status, body, headerId, retryAfterMs, what);

  it("400 is a ValidationError with the service's message, type and request id", () => {
    const e = classify(
      400,
      errorBody(400, "bad_request_error", "duration: expected 4 to 30, got 99", "req_400"),
    );
    expect(e).toBeInstanceOf(ValidationError);
    expect(e?.status).toBe(400);
    expect(e?.code).toBe("bad_request_error");
    expect(e?.requestId).toBe("req_400");
    expect(e?.message).toContain("duration: expected 4 to 30, got 99");
    expect(e?.message).toContain("do the thing");
    expect(e?.message).toContain("req_400");
  });

  it("401 is an AuthenticationError saying the key was refused", () => {
    const e = classify(401, errorBody(401, "authentication_error", "the API key was refused", "req_401"));
    expect(e).toBeInstanceOf(AuthenticationError);
    expect(e?.message).toContain("the API key was refused");
    expect(e?.requestId).toBe("req_401");
    // Even with no body at all.
    const bare = classify(401, undefined, "hdr_401");
    expect(bare).toBeInstanceOf(AuthenticationError);
    expect(bare?.message).toContain("the API key was refused");
    expect(bare?.requestId).toBe("hdr_401");
  });

  it("403 is a PermissionError, in either shape", () => {
    expect(classify(403, errorBody(403, "permission_error", "no", "r"))).toBeInstanceOf(PermissionError);
    const business = classify(403, {
      RetCode: 40301,
      Message: "official skill x cannot be deleted",
      request_uuid: "u",
    });
    expect(business).toBeInstanceOf(PermissionError);
    expect(business?.code).toBe(40301);
  });

  it("404 and business not-found are NotFoundErrors", () => {
    const shaped = classify(404, errorBody(404, "not_found_error", "no such endpoint", "req_404"));
    expect(shaped).toBeInstanceOf(NotFoundError);
    expect(shaped?.requestId).toBe("req_404");
    const business = classify(404, {
      RetCode: 40401,
      Message: "job not found: vid_1",
      request_uuid: "uuid_404",
    });
    expect(business).toBeInstanceOf(NotFoundError);
    expect(business?.code).toBe(40401);
    expect(business?.requestId).toBe("uuid_404");
    expect(business?.message).toContain("job not found: vid_1");
    // A business not-found in an HTTP 200 (the status is not all that tells).
    const in200 = classify(200, { RetCode: 1004, Message: "task does not exist", request_uuid: "u200" });
    expect(in200).toBeInstanceOf(NotFoundError);
    expect(in200?.status).toBe(200);
  });

  it("429 is a RateLimitError carrying the wait", () => {
    const e = classify(429, errorBody(429, "rate_limit_error", "slow down", "req_429"), undefined, 3000);
    expect(e).toBeInstanceOf(RateLimitError);
    expect((e as RateLimitError).retryAfterMs).toBe(3000);
    expect(e?.requestId).toBe("req_429");
    const unknownWait = classify(429, undefined, "h429");
    expect(unknownWait).toBeInstanceOf(RateLimitError);
    expect((unknownWait as RateLimitError).retryAfterMs).toBeUndefined();
  });

  it("a business insufficient-points answer is an InsufficientPointsError, also as HTTP 200", () => {
    const body = {
      RetCode: 40201,
      Message: "insufficient points: the task needs 50, available 10",
      request_uuid: "req_points",
    };
    for (const status of [200, 400, 402]) {
      const e = classify(status, body);
      expect(e, String(status)).toBeInstanceOf(InsufficientPointsError);
      expect(e?.requestId).toBe("req_points");
      expect(e?.code).toBe(40201);
      expect(e?.message).toContain("available 10");
    }
  });

  it("only an explicit points shortage is InsufficientPoints, not every message naming the balance", () => {
    const e = classify(500, { RetCode: 50001, Message: "balance service unreachable", request_uuid: "u" });
    expect(e).toBeInstanceOf(ServiceError);
  });

  it("HTTP 200 with a non-zero RetCode is an error; RetCode 0 and plain 2xx are not", () => {
    const e = classify(200, {
      RetCode: 40202,
      Message: "speech points billing is disabled",
      request_uuid: "u1",
    });
    expect(e).toBeInstanceOf(BusinessError);
    expect(e?.status).toBe(200);
    expect(e?.code).toBe(40202);
    expect(e?.requestId).toBe("u1");
    expect(classify(200, { RetCode: 0, Message: "ok", request_uuid: "u2" })).toBeUndefined();
    expect(classify(200, { task_id: "t" })).toBeUndefined();
    expect(classify(204, undefined)).toBeUndefined();
  });

  it("a business error with a 4xx status that is not a known case is a BusinessError", () => {
    const e = classify(400, { RetCode: 40901, Message: "task t is generating", request_uuid: "u" });
    expect(e).toBeInstanceOf(BusinessError);
    expect(e?.status).toBe(400);
  });

  it("5xx is a ServiceError, in JSON, business or plain-text bodies", () => {
    for (const status of [500, 502, 503, 504]) {
      expect(classify(status, errorBody(status, "internal_error", "boom", "r"))).toBeInstanceOf(ServiceError);
    }
    const html = classify(502, "<html><body>502 Bad Gateway</body></html>", "hdr_502");
    expect(html).toBeInstanceOf(ServiceError);
    expect(html?.status).toBe(502);
    expect(html?.message).toContain("502 Bad Gateway");
    expect(html?.requestId).toBe("hdr_502");
    const business = classify(503, {
      RetCode: 50301,
      Message: "downstream overloaded",
      request_uuid: "u503",
    });
    expect(business).toBeInstanceOf(ServiceError);
    expect(business?.requestId).toBe("u503");
  });

  it("non-JSON bodies are cut to a readable length", () => {
    const e = classify(500, "x".repeat(5000), "h");
    expect(e).toBeInstanceOf(ServiceError);
    expect(e!.message.length).toBeLessThan(400);
  });

  it("408 is a TimeoutError and 409 a ConflictError", () => {
    const t = classify(408, errorBody(408, "timeout_error", "slow", "req_408"));
    expect(t).toBeInstanceOf(TimeoutError);
    expect(t?.status).toBe(408);
    expect(t?.requestId).toBe("req_408");
    const c = classify(409, errorBody(409, "conflict_error", "busy", "req_409"));
    expect(c).toBeInstanceOf(ConflictError);
  });

  it("every error carries the request id: request_id, request_uuid, or the header", () => {
    const cases: Array<[number, unknown]> = [
      [400, errorBody(400, "bad_request_error", "m", "ID")],
      [401, errorBody(401, "authentication_error", "m", "ID")],
      [403, errorBody(403, "permission_error", "m", "ID")],
      [404, errorBody(404, "not_found_error", "m", "ID")],
      [404, { RetCode: 40401, Message: "not found", request_uuid: "ID" }],
      [408, errorBody(408, "timeout", "m", "ID")],
      [409, errorBody(409, "conflict", "m", "ID")],
      [429, errorBody(429, "rate_limit_error", "m", "ID")],
      [200, { RetCode: 40201, Message: "insufficient points", request_uuid: "ID" }],
      [200, { RetCode: 7, Message: "weird", request_uuid: "ID" }],
      [500, errorBody(500, "internal", "m", "ID")],
      [502, { RetCode: 50201, Message: "bad", request_uuid: "ID" }],
      [418, errorBody(418, "teapot", "m", "ID")],
      // A body id that does not follow the validation shape exactly is still found.
      [
        400,
        {
          type: "error",
          error: { type: "bad_request_error", message: "m", http_code: 400 },
          request_id: "ID",
        },
      ],
      [500, { message: "boom", request_id: "ID" }],
    ];
    for (const [status, body] of cases) {
      const e = classify(status, body, "HEADER");
      expect(e, `${status} ${JSON.stringify(body)}`).toBeInstanceOf(ClapperApiError);
      expect(e?.requestId, `${status} ${JSON.stringify(body)}`).toBe("ID");
      expect(e?.message).toContain("(request ID)");
    }
    for (const status of [400, 401, 403, 404, 408, 409, 429, 500, 502, 503]) {
      expect(classify(status, "plain text", "HEADER")?.requestId, String(status)).toBe("HEADER");
      expect(classify(status, undefined, "HEADER")?.requestId, String(status)).toBe("HEADER");
    }
  });

  it("keeps the service's message even when the error body is slightly off the documented shape", () => {
    const e = classify(400, {
      type: "error",
      error: { type: "bad_request_error", message: "text: is required", http_code: 400 },
      request_id: "r",
    });
    expect(e).toBeInstanceOf(ValidationError);
    expect(e?.message).toContain("text: is required");
  });
});

// ---------------------------------------------------------------------------------------------
// The retry loop against scripted servers
// ---------------------------------------------------------------------------------------------

const FAST = { maxRetries: 3, baseDelayMs: 5, maxDelayMs: 20 };
const Echo = z.looseObject({ ok: z.literal(true) });
const Created = z.looseObject({ task_id: z.string() });

interface LogLine {
  level: "debug" | "warn";
  obj: Record<string, unknown>;
  msg: string | undefined;
}

function collectingLogger() {
  const lines: LogLine[] = [];
  return {
    lines,
    attempts: () => lines.filter((l) => l.msg === "http attempt"),
    logger: {
      debug: (obj: object, msg?: string) =>
        lines.push({ level: "debug", obj: obj as Record<string, unknown>, msg }),
      warn: (obj: object, msg?: string) =>
        lines.push({ level: "warn", obj: obj as Record<string, unknown>, msg }),
    },
  };
}

async function server(script: (n: number, hit: Hit) => Parameters<typeof sequence>[0]): Promise<Scripted> {
  const s = await scripted(script);
  onTestFinished(() => s.close());
  return s;
}

function client(url: string, options: Partial<HttpClientOptions> = {}): HttpClient {
  const http = new HttpClient({
    baseUrl: url,
    apiKey: KEY,
    timeoutMs: 2000,
    policies: { read: FAST, create: FAST, write: FAST },
    ...options,
  });
  onTestFinished(() => http.close());
  return http;
}

const read = (http: HttpClient, extra: { signal?: AbortSignal } = {}) =>
  http.request({ method: "GET", path: "/thing", schema: Echo, policy: "read", what: "read thing", ...extra });

async function failure(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error("expected a failure, got a success");
}

describe("HttpClient retries", () => {
  for (const status of [408, 409, 429, 500, 502, 503, 504]) {
    it(`retries a ${status} and then succeeds`, async () => {
      const s = await server(
        sequence({ status, json: errorBody(status, "x", "transient") }, ok({ ok: true })),
      );
      await expect(read(client(s.url))).resolves.toEqual({ ok: true });
      expect(s.hits).toHaveLength(2);
    });
  }

  it("retries a dropped connection and then succeeds", async () => {
    const s = await server(sequence("drop", "drop", ok({ ok: true })));
    await expect(read(client(s.url))).resolves.toEqual({ ok: true });
    expect(s.hits).toHaveLength(3);
  });

  it("gives up after maxRetries retries with the last failure", async () => {
    const s = await server(() => ({
      status: 503,
      json: errorBody(503, "unavailable", "down for now", "req_503"),
    }));
    const e = await failure(read(client(s.url)));
    expect(e).toBeInstanceOf(ServiceError);
    expect((e as ServiceError).status).toBe(503);
    expect((e as ServiceError).requestId).toBe("req_503");
    expect(e.message).toContain("down for now");
    expect(s.hits).toHaveLength(FAST.maxRetries + 1);
  });

  it("maxRetries 0 makes exactly one attempt", async () => {
    const s = await server(() => ({ status: 500, json: errorBody(500, "x", "boom") }));
    const http = client(s.url, { policies: { read: { ...FAST, maxRetries: 0 } } });
    await expect(read(http)).rejects.toBeInstanceOf(ServiceError);
    expect(s.hits).toHaveLength(1);
  });

  it('a create answered "busy" (HTTP 200 with a RetCode) is sent again with the same key; an unknown refusal is not', async () => {
    const busy = {
      status: 200,
      json: { RetCode: 50301, Message: "system busy, please retry", request_uuid: "u1" },
    };
    const s = await server(
      sequence(busy, { status: 200, json: { RetCode: 1, Message: "系统繁忙" } }, ok({ task_id: "t1" })),
    );
    const http = client(s.url);
    const create = () =>
      http.request({
        method: "POST",
        path: "/create",
        body: { x: 1 },
        schema: Created,
        policy: "create",
        idempotencyKey: "key-1",
        what: "create thing",
      });
    await expect(create()).resolves.toEqual({ task_id: "t1" });
    expect(s.hits.map((h) => h.headers["idempotency-key"])).toEqual(["key-1", "key-1", "key-1"]);
    // Busy for ever: unavailable after the retries (a run stops for it, exit 6), not a refusal.
    const always = await server(() => busy);
    const e = await failure(
      client(always.url).request({
        method: "POST",
        path: "/c",
        body: {},
        schema: Created,
        policy: "create",
        idempotencyKey: "k",
        what: "create thing",
      }),
    );
    expect(e).toBeInstanceOf(BusyError);
    expect(isUnavailable(e)).toBe(true);
    expect(always.hits).toHaveLength(FAST.maxRetries + 1);
    // A refusal in words the client does not know is answered once: it is not "later".
    const refused = await server(() => ({
      status: 200,
      json: { RetCode: 40011, Message: "voice id rejected" },
    }));
    const r = await failure(
      client(refused.url).request({
        method: "POST",
        path: "/c",
        body: {},
        schema: Created,
        policy: "create",
        idempotencyKey: "k",
        what: "create thing",
      }),
    );
    expect(r).toBeInstanceOf(BusinessError);
    expect(r).not.toBeInstanceOf(BusyError);
    expect(refused.hits).toHaveLength(1);
  });

  it("a dropped connection every time ends in a ConnectionError after the retries", async () => {
    const s = await server(() => "drop");
    const e = await failure(read(client(s.url)));
    expect(e).toBeInstanceOf(ConnectionError);
    expect(e).not.toBeInstanceOf(TimeoutError);
    expect(e.message).toContain("read thing");
    expect(s.hits).toHaveLength(FAST.maxRetries + 1);
  });

  for (const status of [400, 401, 403, 404, 422]) {
    it(`does not retry a ${status}`, async () => {
      const s = await server(() => ({ status, json: errorBody(status, "x", "no") }));
      await expect(read(client(s.url))).rejects.toBeInstanceOf(ClapperApiError);
      expect(s.hits).toHaveLength(1);
    });
  }

  it("retries a non-JSON 502 and reports its text when the retries run out", async () => {
    const s = await server(() => ({
      status: 502,
      text: "<html>502 Bad Gateway (nginx)</html>",
      headers: { "x-request-id": "gw_1" },
    }));
    const e = await failure(read(client(s.url)));
    expect(e).toBeInstanceOf(ServiceError);
    expect(e.message).toContain("502 Bad Gateway (nginx)");
    expect((e as ServiceError).requestId).toBe("gw_1");
    expect(s.hits).toHaveLength(FAST.maxRetries + 1);
  });

  it("does not retry an HTTP 200 with a non-zero RetCode on a read", async () => {
    const s = await server(() =>
      ok({ RetCode: 50017, Message: "downstream refused", request_uuid: "uuid_200" }),
    );
    const e = await failure(read(client(s.url)));
    expect(e).toBeInstanceOf(BusinessError);
    expect((e as BusinessError).status).toBe(200);
    expect((e as BusinessError).requestId).toBe("uuid_200");
    expect(s.hits).toHaveLength(1);
  });

  it("refuses an answer that does not match the schema, without retrying", async () => {
    const s = await server(() => ok({ ok: "yes" }, { "x-request-id": "req_shape" }));
    const e = await failure(read(client(s.url)));
    expect(e).toBeInstanceOf(ServiceError);
    expect(e.message).toContain("documented shape");
    expect(e.message).toContain("ok");
    expect((e as ServiceError).requestId).toBe("req_shape");
    expect(s.hits).toHaveLength(1);
  });

  it("refuses a 200 whose body is not JSON", async () => {
    const s = await server(() => ({ status: 200, text: "<html>login</html>" }));
    await expect(read(client(s.url))).rejects.toBeInstanceOf(ServiceError);
  });

  it("tolerates fields the service may add", async () => {
    const s = await server(() => ok({ ok: true, shiny_new_field: { nested: 1 } }));
    await expect(read(client(s.url))).resolves.toMatchObject({ ok: true, shiny_new_field: { nested: 1 } });
  });

  it("sends the key as a Bearer token, JSON headers, and the query", async () => {
    const s = await server(() => ok({ ok: true }));
    await client(s.url).request({
      method: "GET",
      path: "/list",
      query: { page_num: 2, keyword: "a b", missing: undefined, statuses: ["queued", "failed"] },
      schema: Echo,
      policy: "read",
      what: "list",
    });
    expect(s.hits[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(s.hits[0]?.headers.accept).toBe("application/json");
    expect(s.hits[0]?.url).toBe("/list?page_num=2&keyword=a+b&statuses=queued&statuses=failed");
    // Reads carry no Idempotency-Key.
    expect(s.hits[0]?.headers["idempotency-key"]).toBeUndefined();
  });
});

describe("requests that cannot be sent", () => {
  it("are refused at once, not retried, and do not echo the header", async () => {
    const s = await server(() => ok({ ok: true }));
    const http = client(s.url, {
      apiKey: "sk-ml-first\nsecond",
      policies: { read: { ...POLICY, baseDelayMs: 1000 } },
    });
    const started = Date.now();
    const e = await failure(read(http));
    expect(Date.now() - started).toBeLessThan(500);
    expect(e).toBeInstanceOf(ConnectionError);
    expect(e.message).toContain("could not be sent");
    expect(e.message).not.toContain("first");
    expect(s.hits).toHaveLength(0);
  });
});

describe("Retry-After", () => {
  it("waits as long as a 429's Retry-After says", async () => {
    const s = await server(
      sequence(
        { status: 429, json: errorBody(429, "rate_limit_error", "slow"), headers: { "retry-after": "1" } },
        ok({ ok: true }),
      ),
    );
    await expect(read(client(s.url))).resolves.toEqual({ ok: true });
    expect(s.hits).toHaveLength(2);
    const waited = s.hits[1]!.at - s.hits[0]!.at;
    expect(waited).toBeGreaterThanOrEqual(950);
    expect(waited).toBeLessThan(1800);
  });

  it("honours retry-after-ms and a Retry-After on a 503 too", async () => {
    const s = await server(
      sequence(
        {
          status: 429,
          json: errorBody(429, "rate_limit_error", "slow"),
          headers: { "retry-after-ms": "300" },
        },
        { status: 503, json: errorBody(503, "unavailable", "later"), headers: { "retry-after-ms": "400" } },
        ok({ ok: true }),
      ),
    );
    await expect(read(client(s.url))).resolves.toEqual({ ok: true });
    expect(s.hits).toHaveLength(3);
    expect(s.hits[1]!.at - s.hits[0]!.at).toBeGreaterThanOrEqual(290);
    expect(s.hits[2]!.at - s.hits[1]!.at).toBeGreaterThanOrEqual(390);
  });

  it("throws a long Retry-After at once as a RateLimitError with the wait", async () => {
    const s = await server(() => ({
      status: 429,
      json: errorBody(429, "rate_limit_error", "come back later", "req_long"),
      headers: { "retry-after": "120" },
    }));
    const started = Date.now();
    const e = await failure(read(client(s.url)));
    expect(Date.now() - started).toBeLessThan(500);
    expect(e).toBeInstanceOf(RateLimitError);
    expect((e as RateLimitError).retryAfterMs).toBe(120_000);
    expect((e as RateLimitError).requestId).toBe("req_long");
    // Why it gave up at once, in words: what was asked against what a request waits.
    expect(e.message).toMatch(
      /come back later \(request req_long\); the service asks to wait 2 min \(Retry-After\), longer than the 30 s a request waits$/,
    );
    expect(s.hits).toHaveLength(1);
  });

  it("the bound is the policy's maxRetryAfterMs", async () => {
    const s = await server(() => ({
      status: 429,
      json: errorBody(429, "rate_limit_error", "x"),
      headers: { "retry-after": "1" },
    }));
    const http = client(s.url, { policies: { read: { ...FAST, maxRetryAfterMs: 500 } } });
    const started = Date.now();
    const e = await failure(read(http));
    expect(Date.now() - started).toBeLessThan(500);
    expect((e as RateLimitError).retryAfterMs).toBe(1000);
    expect(s.hits).toHaveLength(1);
  });
});

describe("timeouts and aborts", () => {
  it("times out each attempt of a server that never answers, then gives up", async () => {
    const s = await server(() => "hang");
    const http = client(s.url, { timeoutMs: 150, policies: { read: { ...FAST, maxRetries: 2 } } });
    const started = Date.now();
    const e = await failure(read(http));
    const elapsed = Date.now() - started;
    expect(e).toBeInstanceOf(TimeoutError);
    expect(e.message).toContain("150 ms");
    expect(s.hits).toHaveLength(3);
    expect(elapsed).toBeGreaterThanOrEqual(3 * 150 - 20);
    expect(elapsed).toBeLessThan(3 * 150 + 700);
  });

  it("the timeout covers the body too, not only the headers", async () => {
    const s = await server(() => "stall");
    const http = client(s.url, { timeoutMs: 150, policies: { read: { ...FAST, maxRetries: 1 } } });
    const started = Date.now();
    await expect(read(http)).rejects.toBeInstanceOf(TimeoutError);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(s.hits).toHaveLength(2);
  });

  it("an abort during a request ends it promptly with AbortedError", async () => {
    const s = await server(() => "hang");
    const http = client(s.url, { timeoutMs: 10_000 });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    const e = await failure(read(http, { signal: controller.signal }));
    expect(e).toBeInstanceOf(AbortedError);
    expect(Date.now() - started).toBeLessThan(500);
    expect(s.hits).toHaveLength(1);
  });

  it("an abort during a backoff sleep ends it promptly with AbortedError", async () => {
    const s = await server(() => ({
      status: 503,
      json: errorBody(503, "x", "later"),
      headers: { "retry-after": "10" },
    }));
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 150);
    const started = Date.now();
    const e = await failure(read(client(s.url), { signal: controller.signal }));
    expect(e).toBeInstanceOf(AbortedError);
    expect(Date.now() - started).toBeLessThan(600);
    expect(s.hits).toHaveLength(1);
  });

  it("an already-aborted signal sends nothing", async () => {
    const s = await server(() => ok({ ok: true }));
    await expect(read(client(s.url), { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(AbortedError);
    expect(s.hits).toHaveLength(0);
  });
});

describe("creates and writes", () => {
  const create = (http: HttpClient, idempotencyKey?: string) =>
    http.request({
      method: "POST",
      path: "/create",
      body: { a: 1 },
      schema: Created,
      policy: "create",
      what: "create",
      ...(idempotencyKey ? { idempotencyKey } : {}),
    });
  const write = (http: HttpClient) =>
    http.request({
      method: "POST",
      path: "/write",
      body: { a: 1 },
      schema: Created,
      policy: "write",
      what: "write",
    });

  it("a create always carries an Idempotency-Key, and every retry repeats it", async () => {
    const s = await server(
      sequence({ status: 503, json: errorBody(503, "x", "later") }, "drop", "hang", ok({ task_id: "t1" })),
    );
    const http = client(s.url, { timeoutMs: 200 });
    await expect(create(http)).resolves.toEqual({ task_id: "t1" });
    expect(s.hits).toHaveLength(4);
    const keys = s.hits.map((h) => h.headers["idempotency-key"]);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(keys)).toEqual(new Set([keys[0]]));
    expect(s.hits.every((h) => h.body === '{"a":1}')).toBe(true);
    expect(s.hits[0]?.headers["content-type"]).toBe("application/json");
  });

  it("uses the caller's key verbatim, and a new key per create otherwise", async () => {
    const s = await server(
      sequence({ status: 500, json: errorBody(500, "x", "boom") }, ok({ task_id: "t" })),
    );
    const http = client(s.url);
    await create(http, "shot-0001");
    await create(http);
    await create(http);
    const keys = s.hits.map((h) => h.headers["idempotency-key"]);
    expect(keys.slice(0, 2)).toEqual(["shot-0001", "shot-0001"]);
    expect(keys[2]).not.toBe(keys[3]);
  });

  it("a write does not retry a 503: the service may have done the work", async () => {
    const s = await server(
      sequence({ status: 503, json: errorBody(503, "x", "later") }, ok({ task_id: "t" })),
    );
    await expect(write(client(s.url))).rejects.toBeInstanceOf(ServiceError);
    expect(s.hits).toHaveLength(1);
  });

  it("a write does not retry a dropped connection", async () => {
    const s = await server(sequence("drop", ok({ task_id: "t" })));
    await expect(write(client(s.url))).rejects.toBeInstanceOf(ConnectionError);
    expect(s.hits).toHaveLength(1);
  });

  it("a write does retry a 429: the limiter refused it before any work", async () => {
    const s = await server(
      sequence(
        { status: 429, json: errorBody(429, "rate_limit_error", "x"), headers: { "retry-after-ms": "20" } },
        ok({ task_id: "t" }),
      ),
    );
    await expect(write(client(s.url))).resolves.toEqual({ task_id: "t" });
    expect(s.hits).toHaveLength(2);
  });

  it("a write does retry a refused connection: nothing was sent", async () => {
    const s = await server(() => ok({ task_id: "t" }));
    const url = s.url;
    await s.close();
    const log = collectingLogger();
    const http = client(url, { logger: log.logger, policies: { write: { ...FAST, maxRetries: 2 } } });
    const e = await failure(write(http));
    expect(e).toBeInstanceOf(ConnectionError);
    expect(e.message).toContain("ECONNREFUSED");
    expect(log.attempts().map((l) => l.obj.attempt)).toEqual([1, 2, 3]);
  });
});

describe("attempt logging", () => {
  it("logs one line per attempt with method, path, status, duration, attempt and request id", async () => {
    const s = await server(
      sequence(
        { status: 503, json: errorBody(503, "x", "later", "req_a") },
        "drop",
        ok({ ok: true }, { "x-request-id": "req_c" }),
      ),
    );
    const log = collectingLogger();
    await read(client(s.url, { logger: log.logger }));
    const lines = log.attempts().map((l) => l.obj);
    expect(lines).toHaveLength(3);
    for (const [i, line] of lines.entries()) {
      expect(line).toMatchObject({ method: "GET", path: "/thing", attempt: i + 1 });
      expect(typeof line.durationMs).toBe("number");
    }
    expect(lines[0]).toMatchObject({ status: 503, requestId: "req_a" });
    expect(lines[1]?.status).toBeUndefined();
    expect(lines[1]?.error).toBeTruthy();
    expect(lines[2]).toMatchObject({ status: 200, requestId: "req_c" });
    expect(JSON.stringify(log.lines)).not.toContain(KEY);
  });

  it("uploads send no API key and log only the path, never the signature", async () => {
    const s = await server(() => ({ status: 200, text: "" }));
    const log = collectingLogger();
    const http = client(s.url, { logger: log.logger });
    const { Readable } = await import("node:stream");
    await http.upload(
      `${s.url}/_uploads/u1?expires=9&signature=secret-sig`,
      () => Readable.from([Buffer.from("abc")]),
      3,
      "audio/wav",
      {
        what: "upload",
      },
    );
    expect(s.hits[0]?.headers.authorization).toBeUndefined();
    expect(s.hits[0]?.headers["content-type"]).toBe("audio/wav");
    expect(s.hits[0]?.body).toBe("abc");
    expect(log.attempts()[0]?.obj).toMatchObject({
      method: "PUT",
      path: "/_uploads/u1",
      status: 200,
      attempt: 1,
    });
    expect(JSON.stringify(log.lines)).not.toContain("secret-sig");
  });

  it("an upload is retried with a fresh stream", async () => {
    const s = await server(sequence({ status: 503, text: "busy" }, { status: 200, text: "" }));
    const http = client(s.url);
    const { Readable } = await import("node:stream");
    let opened = 0;
    await http.upload(
      `${s.url}/_uploads/u2`,
      () => {
        opened++;
        return Readable.from([Buffer.from("hello")]);
      },
      5,
      "audio/wav",
      { what: "upload" },
    );
    expect(opened).toBe(2);
    expect(s.hits.map((h) => h.body)).toEqual(["hello", "hello"]);
  });
});

// ---------------------------------------------------------------------------------------------
// Pagination (the walker's own tests, moved with it, are in test/api/listing.test.ts)
// ---------------------------------------------------------------------------------------------

describe("pagination over the sandbox", () => {
  let s: Sandbox;
  const N = 130;
  const stats = async () => (await call(s.url, "GET", "/_sandbox/stats", { key: null })).body;

  beforeAll(async () => {
    s = await sandbox();
    const c = createClients({ baseUrl: s.url, apiKey: KEY });
    await Promise.all(
      Array.from({ length: N }, (_, i) =>
        Promise.all([
          c.video.createTask({ model: "Vid-H3", content: [{ type: "text", text: `shot ${i}` }] }),
          c.speech.createTask({
            text: `line ${i}`,
            language: "EN",
            voice: { source: "preset", voice_id: "en_female_bright" },
          }),
        ]),
      ),
    );
    await c.close();
  });
  afterAll(() => s.close());

  function clients() {
    const c = createClients({ baseUrl: s.url, apiKey: KEY });
    onTestFinished(() => c.close());
    return c;
  }

  it("walks all video tasks past the 100 page limit, each exactly once", async () => {
    const c = clients();
    const before = (await stats()).requests["GET /vid/v2/query/video_generation"] ?? 0;
    const ids: string[] = [];
    for await (const t of c.video.listTasks()) ids.push(t.id);
    expect(ids).toHaveLength(N);
    expect(new Set(ids).size).toBe(N);
    expect((await stats()).requests["GET /vid/v2/query/video_generation"] - before).toBe(2);
  });

  it("walks all speech tasks past the 100 limit, each exactly once", async () => {
    const c = clients();
    const before = (await stats()).requests["GET /audio/v1/speech/jobs"] ?? 0;
    const ids: string[] = [];
    for await (const t of c.speech.listTasks()) ids.push(t.task_id);
    expect(ids).toHaveLength(N);
    expect(new Set(ids).size).toBe(N);
    expect((await stats()).requests["GET /audio/v1/speech/jobs"] - before).toBe(2);
  });

  it("walks small pages of both lists in the same order as one big page", async () => {
    const c = clients();
    const small: string[] = [];
    for await (const t of c.video.listTasks({ pageSize: 7 })) small.push(t.id);
    const big = (await c.video.listPage(1, { pageSize: 100 })).items.map((t) => t.id);
    expect(small).toHaveLength(N);
    expect(small.slice(0, 100)).toEqual(big);
    const smallSpeech: string[] = [];
    for await (const t of c.speech.listTasks({ limit: 9 })) smallSpeech.push(t.task_id);
    expect(smallSpeech).toHaveLength(N);
    expect(new Set(smallSpeech).size).toBe(N);
  });

  it("stops fetching when the consumer breaks early", async () => {
    const c = clients();
    const before = await stats();
    let n = 0;
    for await (const _ of c.video.listTasks({ pageSize: 4 })) if (++n === 10) break;
    let m = 0;
    for await (const _ of c.speech.listTasks({ limit: 4 })) if (++m === 5) break;
    const after = await stats();
    const delta = (k: string) => (after.requests[k] ?? 0) - (before.requests[k] ?? 0);
    expect(delta("GET /vid/v2/query/video_generation")).toBe(3);
    expect(delta("GET /audio/v1/speech/jobs")).toBe(2);
  });

  it("keeps page sizes within what the service accepts", async () => {
    const c = clients();
    let n = 0;
    for await (const _ of c.video.listTasks({ pageSize: 500 })) n++;
    for await (const _ of c.speech.listTasks({ limit: 1000 })) n++;
    expect(n).toBe(2 * N);
    let first = 0;
    for await (const _ of c.speech.listTasks({ limit: 0 })) if (++first === 3) break;
    expect(first).toBe(3);
  });

  it("passes filters through while paging", async () => {
    const c = clients();
    let n = 0;
    for await (const t of c.speech.listTasks({
      statuses: ["succeeded", "queued", "generating"],
      limit: 50,
    })) {
      expect(["succeeded", "queued", "generating"]).toContain(t.status);
      n++;
    }
    expect(n).toBe(N);
    for await (const t of c.video.listTasks({ model: "vid-h3-lite" })) throw new Error(`unexpected ${t.id}`);
  });
});
