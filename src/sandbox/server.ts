// The sandbox's HTTP front: routing, authentication, rate limits, injected faults, body limits,
// the /_sandbox/ control endpoints and the media URLs. Services do the rest.
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import FindMyWay from "find-my-way";
import { z } from "zod";
import { issuesFromZod, PackageStatus } from "../api/common.js";
import { CallbackSender } from "./callbacks.js";
import { ApiError, renderError, sendJson } from "./http.js";
import { makeMp4, makeWav } from "./media.js";
import { NO_PAGING_FAULTS, PagingFaults } from "./paging.js";
import { loadWorld, saveWorld } from "./persist.js";
import { packageProblem } from "./points.js";
import { seeded } from "./random.js";
import { PRESET_VOICES, SpeechService } from "./speech.js";
import { OFFICIAL_SKILLS, VideoService } from "./video.js";
import { type Org, World } from "./world.js";

export const SandboxOptions = z.object({
  host: z.string().default("127.0.0.1"),
  port: z.number().int().min(0).max(65535).default(8787),
  /** `KEY` or `KEY=ORG`; keys must start with `sk-ml-`. */
  keys: z
    .array(z.string().regex(/^sk-ml-[^=\s]+(=[^=\s]+)?$/, "expected sk-ml-KEY or sk-ml-KEY=ORG"))
    .default(["sk-ml-sandbox=default"]),
  points: z.number().int().min(0).default(100_000),
  timeScale: z.number().positive().default(1),
  rateLimit: z.number().positive().nullable().default(null),
  allowPrivateUrls: z.boolean().default(false),
  /**
   * The address clients use, when it is not the one listened on (a container reached by its name
   * on a Docker network, a published port): result and upload URLs name it, so they can be fetched.
   */
  publicUrl: z
    .string()
    .regex(/^https?:\/\/[^/?#\s]+\/?$/, "expected http(s)://HOST[:PORT]")
    .optional(),
  /** Keep the state in this file (loaded at start, saved after every change). */
  stateFile: z.string().optional(),
  /**
   * Secret for signing result and upload URLs. Given with a state file so URLs handed out before a
   * restart stay valid; random otherwise.
   */
  secret: z.string().optional(),
});
export type SandboxOptions = z.input<typeof SandboxOptions>;

export interface Sandbox {
  /** `http://HOST:PORT`, no trailing slash. */
  url: string;
  port: number;
  world: World;
  close(): Promise<void>;
}

const MiB = 1024 * 1024;
const METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE"] as const;
const KiB = 1024;

interface Faults extends PagingFaults {
  error_rate: number;
  /** Every Nth API request answers 503: faults a test can count on (0: off). */
  error_every: number;
  drop_rate: number;
  latency_ms: number;
  rate_limit_rps: number | null;
}

const FaultsBody = z.object({
  error_rate: z.number().min(0).max(1).optional(),
  error_every: z.number().int().min(0).optional(),
  drop_rate: z.number().min(0).max(1).optional(),
  latency_ms: z.number().int().min(0).max(600_000).optional(),
  rate_limit_rps: z.number().positive().nullable().optional(),
  seed: z.number().int().nullable().optional(),
  ...PagingFaults.partial().shape,
});

const PackageBody = z.object({
  total_points: z.number().int().min(0),
  status: PackageStatus.optional(),
  expires_at: z.number().int().optional(),
  code: z.string().optional(),
  name: z.string().optional(),
  order_no: z.string().optional(),
  total_price: z.number().int().min(0).optional(),
});

const MediaBody = z.object({
  /** Bytes appended to every video result as a trailing `free` box: large files for streaming tests. */
  video_pad_bytes: z
    .number()
    .int()
    .min(0)
    .max(8 * 1024 * 1024 * 1024)
    .optional(),
  /**
   * Video result URLs answer this HTTP status instead of the file (0: off): a result store that
   * fails after the task succeeded and was paid. API requests are not affected.
   */
  video_error_status: z.number().int().min(0).max(599).optional(),
  /** How many video result requests fail so before they serve again (null: every one). */
  video_error_count: z.number().int().min(0).nullable().optional(),
});

const PricingBody = z.object({
  enabled: z.boolean().optional(),
  text_to_speech: z.number().int().min(0).optional(),
});

/** What a route handler receives. */
interface Ctx {
  req: IncomingMessage;
  res: ServerResponse;
  params: Record<string, string | undefined>;
  query: URLSearchParams;
  org: Org;
  body: unknown;
  raw: Buffer;
}

type Handler = (ctx: Ctx) => unknown;

/** Test-only shaping of result downloads (`POST /_sandbox/media`). */
interface MediaControl {
  video_pad_bytes: number;
  video_error_status: number;
  video_error_count: number | null;
}

interface RouteStore {
  template: string;
  kind: "api" | "media" | "control";
  /** JSON body expected, with its size limit; `raw` reads bytes without parsing. */
  body?: { limit: number; raw?: boolean };
  handler: Handler;
}

/** Token bucket per API key: `rps` requests a second with a burst of one second's worth. */
class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  take(key: string, rps: number): number {
    const now = Date.now();
    // A burst of at least one request, so rates below 1/s still let a request through now and then.
    const capacity = Math.max(1, rps);
    const bucket = this.buckets.get(key) ?? { tokens: capacity, at: now };
    bucket.tokens = Math.min(capacity, bucket.tokens + ((now - bucket.at) / 1000) * rps);
    bucket.at = now;
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / rps));
  }
}

export async function startSandbox(input: SandboxOptions = {}): Promise<Sandbox> {
  const options = SandboxOptions.parse(input);
  const world = new World(
    { timeScale: options.timeScale, allowPrivateUrls: options.allowPrivateUrls, points: options.points },
    options.secret,
  );
  const callbacks = new CallbackSender(world);
  const video = new VideoService(world, callbacks);
  const speech = new SpeechService(world);
  if (options.stateFile) loadWorld(options.stateFile, world, speech.pricing);
  const save = () => {
    if (options.stateFile) saveWorld(options.stateFile, world, speech.pricing);
  };
  for (const entry of options.keys) {
    const [key, org = "default"] = entry.split("=") as [string, string?];
    world.keys.set(key, org);
    world.org(org);
  }
  const bootS = world.nowS();
  for (const skill of OFFICIAL_SKILLS) {
    world.officialSkills.set(skill.id, { ...skill, official: true, created_at: bootS, updated_at: bootS });
  }
  for (const voice of PRESET_VOICES) world.presetVoices.set(voice.voice_id, { ...voice, created_at: bootS });

  /** Both services draw on one ledger: settle every task whose end has passed before reading or reserving. */
  const syncOrg = (org: Org) => {
    video.syncAll(org);
    speech.syncAll(org);
  };
  const faults: Faults = {
    error_rate: 0,
    error_every: 0,
    drop_rate: 0,
    latency_ms: 0,
    rate_limit_rps: options.rateLimit,
    ...NO_PAGING_FAULTS,
  };
  // `seed` (not echoed with the settings): the faults' draws from a seeded generator, so a test gets
  // the same faults in the same order; null goes back to Math.random.
  let draw: () => number = Math.random;
  let apiRequests = 0;
  const limiter = new RateLimiter();
  const media: MediaControl = {
    video_pad_bytes: 0,
    video_error_status: 0,
    video_error_count: null,
  };

  const router = FindMyWay<FindMyWay.HTTPVersion.V1>({ ignoreTrailingSlash: true });
  const route = (
    method: "GET" | "POST" | "PUT" | "DELETE",
    path: string,
    kind: RouteStore["kind"],
    handler: Handler,
    body?: RouteStore["body"],
  ) => {
    const template = `${method} ${path.replace(/:(\w+)/g, "{$1}")}`;
    const store: RouteStore = { template, kind, handler, ...(body ? { body } : {}) };
    router.on(method, path, () => undefined, store);
    // Result and upload URLs answer HEAD too, so a client can learn a size without the body.
    if (method === "GET" && kind === "media") {
      router.on("HEAD", path, () => undefined, { ...store, template: `HEAD ${template.slice(4)}` });
    }
  };
  const json = (limit: number) => ({ limit });

  // ---- video service ----
  route(
    "POST",
    "/vid/v2/video_generation",
    "api",
    (c) => {
      // Tasks that ended unobserved give their reservations back before a new one is taken.
      syncOrg(c.org);
      return video.create(c.org, header(c.req, "idempotency-key"), c.body);
    },
    json(72 * MiB),
  );
  route("GET", "/vid/v2/query/video_generation/:task_id", "api", (c) =>
    video.get(c.org, param(c, "task_id")),
  );
  route("GET", "/vid/v2/query/video_generation", "api", (c) => video.list(c.org, c.query, faults));
  route("DELETE", "/vid/v2/video_generation/:task_id", "api", (c) =>
    video.cancel(c.org, param(c, "task_id")),
  );
  route("GET", "/vid/v2/query/point_packages", "api", (c) => {
    syncOrg(c.org);
    const items = c.org.ledger.list();
    return { items, total: items.length };
  });
  route("GET", "/vid/v2/query/point_usage_summary", "api", (c) => {
    syncOrg(c.org);
    return c.org.ledger.summary();
  });
  route("GET", "/vid/v2/skills", "api", (c) => video.listSkills(c.org, c.query, faults));
  route("POST", "/vid/v2/skills", "api", (c) => video.createSkill(c.org, c.body), json(64 * KiB));
  route(
    "PUT",
    "/vid/v2/skills/:skill_id",
    "api",
    (c) => video.updateSkill(c.org, param(c, "skill_id"), c.body),
    json(64 * KiB),
  );
  route("DELETE", "/vid/v2/skills/:skill_id", "api", (c) => video.deleteSkill(c.org, param(c, "skill_id")));

  // ---- speech service ----
  route(
    "POST",
    "/audio/v1/speech/jobs",
    "api",
    (c) => {
      syncOrg(c.org);
      return speech.create(c.org, header(c.req, "idempotency-key"), c.body);
    },
    json(MiB),
  );
  route("GET", "/audio/v1/speech/jobs/:task_id", "api", (c) => speech.get(c.org, param(c, "task_id")));
  route("GET", "/audio/v1/speech/jobs", "api", (c) => speech.list(c.org, c.query, faults));
  route("POST", "/audio/v1/speech/jobs/:task_id/cancel", "api", (c) =>
    speech.cancel(c.org, param(c, "task_id")),
  );
  route("DELETE", "/audio/v1/speech/jobs/:task_id", "api", (c) => speech.delete(c.org, param(c, "task_id")));
  route("GET", "/audio/v1/voices", "api", (c) => speech.listVoices(c.org, c.query));
  route(
    "POST",
    "/audio/v1/voices",
    "api",
    (c) => speech.createVoice(c.org, header(c.req, "idempotency-key"), c.body),
    json(MiB),
  );
  route("DELETE", "/audio/v1/voices/:voice_id", "api", (c) =>
    speech.deleteVoice(c.org, param(c, "voice_id")),
  );
  route("POST", "/audio/v1/upload_urls", "api", (c) => speech.uploadUrl(c.org, c.body), json(MiB));
  route("POST", "/audio/v1/assets", "api", (c) => speech.registerAsset(c.org, c.body), json(MiB));
  route("GET", "/audio/v1/pricing", "api", (c) => {
    video.syncAll(c.org);
    return speech.pricingJson(c.org);
  });

  // ---- media: signed or public URLs, no API key ----
  route("GET", "/_media/videos/:file", "media", (c) => {
    const file = param(c, "file");
    if (world.verify(`/_media/videos/${file}`, c.query) !== "ok")
      return denied(c, "signature invalid or expired");
    const task = video.media(file.replace(/\.mp4$/, ""));
    if (task?.status !== "succeeded") return missing(c);
    if (injectedMediaFault(c, media)) return undefined;
    const mp4 = makeMp4(task.duration, task.width, task.height);
    if (media.video_pad_bytes >= 8) return sendPadded(c, mp4, media.video_pad_bytes);
    return sendMedia(c, mp4, "video/mp4");
  });
  route("GET", "/_media/speech/:file", "media", (c) => {
    const file = param(c, "file");
    if (world.verify(`/_media/speech/${file}`, c.query) !== "ok")
      return denied(c, "signature invalid or expired");
    const task = speech.media(file.replace(/\.wav$/, ""));
    if (!task) return missing(c);
    return sendMedia(c, makeWav(task.audioMs), "audio/wav");
  });
  route(
    "PUT",
    "/_uploads/:id",
    "media",
    (c) => {
      const id = param(c, "id");
      const upload = speech.upload(id);
      const check = world.verify(`/_uploads/${id}`, c.query);
      if (!upload || check !== "ok") {
        return denied(c, check === "expired" ? "the upload URL has expired" : "signature invalid");
      }
      const type = (c.req.headers["content-type"] ?? "").split(";")[0]?.trim();
      if (type !== upload.content_type) {
        return denied(
          c,
          `Content-Type must be ${upload.content_type} as requested, got ${type || "nothing"}`,
        );
      }
      upload.data = c.raw;
      c.res.writeHead(200, { etag: `"${id}"`, "content-length": 0 });
      c.res.end();
      return undefined;
    },
    { limit: 15 * MiB, raw: true },
  );
  route("GET", "/_media/uploads/:id", "media", (c) => {
    const upload = speech.upload(param(c, "id"));
    if (!upload?.data) return missing(c);
    return sendMedia(c, upload.data, upload.content_type);
  });
  route("GET", "/_media/assets/:id", "media", (c) => {
    const asset = speech.asset(param(c, "id"));
    if (!asset) return missing(c);
    return sendMedia(c, asset.data, asset.content_type);
  });
  route("GET", "/_media/voices/:id", "media", (c) => {
    const voice = speech.voiceAudio(param(c, "id"));
    if (!voice) return missing(c);
    return sendMedia(c, voice.audio ?? makeWav(2500), voice.audioContentType ?? "audio/wav");
  });

  // ---- control ----
  route("GET", "/_sandbox/health", "control", () => ({ ok: true }));
  route("GET", "/_sandbox/stats", "control", () => world.stats);
  route(
    "POST",
    "/_sandbox/orgs/:org/packages",
    "control",
    (c) => {
      const body = parseControl(PackageBody, c.body);
      const problem = packageProblem(body, world.nowS());
      if (problem) throw ApiError.badRequest(problem);
      const org = world.org(param(c, "org"));
      const pkg = org.ledger.add(body);
      return org.ledger.list().find((p) => p.id === pkg.id);
    },
    json(MiB),
  );
  route(
    "POST",
    "/_sandbox/faults",
    "control",
    (c) => {
      const body = parseControl(FaultsBody, c.body);
      const { seed, ...settings } = body;
      Object.assign(faults, Object.fromEntries(Object.entries(settings).filter(([, v]) => v !== undefined)));
      if (seed !== undefined) draw = seed === null ? Math.random : seeded(seed);
      return { ...faults };
    },
    json(MiB),
  );
  route(
    "POST",
    "/_sandbox/media",
    "control",
    (c) => {
      const body = parseControl(MediaBody, c.body);
      if (body.video_pad_bytes !== undefined) media.video_pad_bytes = body.video_pad_bytes;
      if (body.video_error_status !== undefined) media.video_error_status = body.video_error_status;
      if (body.video_error_count !== undefined) media.video_error_count = body.video_error_count;
      return { ...media };
    },
    json(MiB),
  );
  route(
    "POST",
    "/_sandbox/pricing",
    "control",
    (c) => {
      const body = parseControl(PricingBody, c.body);
      if (body.enabled !== undefined) speech.pricing.enabled = body.enabled;
      if (body.text_to_speech !== undefined && body.text_to_speech !== speech.pricing.text_to_speech) {
        speech.pricing.text_to_speech = body.text_to_speech;
        speech.pricing.pricing_version += 1;
      }
      return { ...speech.pricing };
    },
    json(MiB),
  );

  const sockets = new Set<import("node:net").Socket>();
  const server: Server = createServer((req, res) => {
    void handle(req, res);
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = `req_${randomBytes(12).toString("hex")}`;
    res.setHeader("x-request-id", requestId);
    const url = new URL(req.url ?? "/", "http://sandbox.invalid");
    const method = req.method ?? "GET";
    const found = router.find(method as FindMyWay.HTTPMethod, url.pathname);
    const store = found?.store as RouteStore | undefined;
    try {
      if (!found || !store) {
        const allowed = METHODS.filter((m) => m !== method && router.find(m, url.pathname));
        if (allowed.length > 0) {
          throw new ApiError(405, "method_not_allowed_error", `${method} is not allowed on ${url.pathname}`, {
            allow: allowed.join(", "),
          });
        }
        throw new ApiError(404, "not_found_error", `no such endpoint: ${method} ${url.pathname}`);
      }
      // Counted before any fault: a client's retries of injected failures show in the stats.
      if (store.kind !== "control") world.countRequest(store.template);
      let dropAfter = false;
      if (store.kind === "api") {
        if (faults.latency_ms > 0) await delay(faults.latency_ms);
        if (faults.drop_rate > 0 && draw() < faults.drop_rate) {
          // Half the drops happen after the work is done: the hard case for clients (did it happen?).
          if (draw() < 0.5) {
            req.socket.destroy();
            return;
          }
          dropAfter = true;
        }
        apiRequests += 1;
        const every = faults.error_every > 0 && apiRequests % faults.error_every === 0;
        if (!dropAfter && (every || (faults.error_rate > 0 && draw() < faults.error_rate))) {
          throw new ApiError(
            503,
            "service_unavailable_error",
            "the service is temporarily unavailable (injected fault)",
          );
        }
      }
      let org: Org | undefined;
      if (store.kind === "api") {
        const key = bearer(req);
        const orgId = key === undefined ? undefined : world.keys.get(key);
        if (key === undefined || orgId === undefined) {
          throw new ApiError(
            401,
            "authentication_error",
            key === undefined
              ? "missing API key: send Authorization: Bearer <API_KEY>"
              : "the API key was refused",
          );
        }
        if (faults.rate_limit_rps !== null) {
          const wait = limiter.take(key, faults.rate_limit_rps);
          if (wait > 0) {
            throw new ApiError(
              429,
              "rate_limit_error",
              `rate limit of ${faults.rate_limit_rps} requests per second exceeded`,
              { "retry-after": String(wait) },
            );
          }
        }
        org = world.org(orgId);
      }
      if (!world.baseUrl) world.baseUrl = publicOr(server, options);
      const { body, raw } = store.body
        ? await readBody(req, store.body)
        : { body: undefined, raw: Buffer.alloc(0) };
      const result = await store.handler({
        req,
        res,
        params: found.params,
        query: url.searchParams,
        org: org ?? world.org("default"),
        body,
        raw,
      });
      // What a client is about to be told exists must survive a crash of this process.
      if (method !== "GET" && method !== "HEAD" && store.kind !== "control") save();
      else if (store.kind === "control" && method === "POST") save();
      if (dropAfter) {
        req.socket.destroy();
        return;
      }
      if (!res.headersSent && result !== undefined) sendJson(res, 200, result);
    } catch (error) {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (error instanceof ApiError && error.type === "request_too_large")
        res.setHeader("connection", "close");
      renderError(res, error, requestId);
    }
  }

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port, options.host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  server.keepAliveTimeout = 10_000;
  world.baseUrl = publicOr(server, options);
  const port = (server.address() as AddressInfo).port;

  let closing: Promise<void> | undefined;
  return {
    url: world.baseUrl,
    port,
    world,
    close() {
      closing ??= (async () => {
        // No save here: every change was saved when it happened, and a sandbox that changed nothing
        // must not overwrite a file another process may be using.
        video.close();
        await callbacks.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeIdleConnections();
          for (const socket of sockets) socket.destroy();
        });
      })();
      return closing;
    },
  };
}

function publicOr(server: Server, options: { host: string; publicUrl?: string | undefined }): string {
  return options.publicUrl?.replace(/\/+$/, "") ?? baseUrlOf(server, options.host);
}

function baseUrlOf(server: Server, host: string): string {
  const address = server.address() as AddressInfo | null;
  const shown = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  return `http://${shown}:${address?.port ?? 0}`;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function param(c: Ctx, name: string): string {
  return c.params[name] ?? "";
}

function bearer(req: IncomingMessage): string | undefined {
  const value = header(req, "authorization");
  const match = value?.match(/^Bearer\s+(\S+)\s*$/i);
  return match?.[1];
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function parseControl<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw ApiError.badRequest(issuesFromZod(parsed.error));
  return parsed.data;
}

async function readBody(
  req: IncomingMessage,
  spec: NonNullable<RouteStore["body"]>,
): Promise<{ body: unknown; raw: Buffer }> {
  const declared = Number(req.headers["content-length"]);
  const tooLarge = () =>
    new ApiError(400, "request_too_large", `request body exceeds the limit of ${formatBytes(spec.limit)}`);
  if (Number.isFinite(declared) && declared > spec.limit) {
    req.resume();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > spec.limit) {
      req.resume();
      throw tooLarge();
    }
    chunks.push(chunk as Buffer);
  }
  const raw = Buffer.concat(chunks);
  if (spec.raw) return { body: undefined, raw };
  const type = (header(req, "content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (type !== "application/json") {
    throw ApiError.badRequest({
      path: ["Content-Type"],
      message: `expected application/json, got ${type ? JSON.stringify(type) : "nothing"}`,
    });
  }
  let body: unknown;
  try {
    body = JSON.parse(raw.toString("utf8"));
  } catch (error) {
    throw ApiError.badRequest({
      path: [],
      message: `request body is not valid JSON: ${(error as Error).message}`,
    });
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw ApiError.badRequest({ path: [], message: "request body must be a JSON object" });
  }
  return { body, raw };
}

function formatBytes(n: number): string {
  return n >= MiB ? `${n / MiB} MiB` : `${n / KiB} KiB`;
}

function denied(c: Ctx, message: string): undefined {
  sendJson(c.res, 403, { type: "error", error: { type: "permission_error", message, http_code: "403" } });
  return undefined;
}

function missing(c: Ctx): undefined {
  sendJson(c.res, 404, {
    type: "error",
    error: { type: "not_found_error", message: "no such file", http_code: "404" },
  });
  return undefined;
}

/**
 * Answers a video result request with the injected status while the fault lasts; false when the
 * file is to be served. A status below 400 is not an error a store would give, so it means off.
 */
function injectedMediaFault(c: Ctx, media: MediaControl): boolean {
  const status = media.video_error_status;
  if (status < 400 || media.video_error_count === 0) return false;
  if (media.video_error_count !== null) media.video_error_count -= 1;
  sendJson(c.res, status, {
    type: "error",
    error: {
      type: "internal_error",
      message: "the result store failed (injected fault)",
      http_code: String(status),
    },
  });
  return true;
}

/** Serves a whole file or one byte range of it, so interrupted downloads can resume. */
function sendMedia(c: Ctx, data: Buffer, contentType: string): undefined {
  const range = c.req.headers.range?.match(/^bytes=(\d*)-(\d*)$/);
  if (range && (range[1] || range[2])) {
    const size = data.length;
    let start = range[1] ? Number(range[1]) : size - Number(range[2]);
    let end = range[1] && range[2] ? Number(range[2]) : size - 1;
    start = Math.max(0, start);
    end = Math.min(size - 1, end);
    if (start > end || start >= size) {
      c.res.writeHead(416, { "content-range": `bytes */${size}` });
      c.res.end();
      return undefined;
    }
    c.res.writeHead(206, {
      "content-type": contentType,
      "content-length": end - start + 1,
      "content-range": `bytes ${start}-${end}/${size}`,
      "accept-ranges": "bytes",
    });
    c.res.end(c.req.method === "HEAD" ? undefined : data.subarray(start, end + 1));
    return undefined;
  }
  c.res.writeHead(200, {
    "content-type": contentType,
    "content-length": data.length,
    "accept-ranges": "bytes",
  });
  c.res.end(data);
  return undefined;
}

/**
 * A video followed by a `free` box of `pad` bytes (a valid MP4 still), streamed from one reused
 * zero-filled chunk with backpressure: gigabytes cost the sandbox no memory.
 */
function sendPadded(c: Ctx, mp4: Buffer, pad: number): undefined {
  const size = mp4.length + pad;
  c.res.writeHead(200, { "content-type": "video/mp4", "content-length": size });
  if (c.req.method === "HEAD") {
    c.res.end();
    return undefined;
  }
  const header = Buffer.alloc(8);
  const big = pad > 0xffffffff;
  header.writeUInt32BE(big ? 1 : pad, 0);
  header.write("free", 4, "latin1");
  c.res.write(mp4);
  c.res.write(header);
  let left = pad - 8;
  if (big) {
    const large = Buffer.alloc(8);
    large.writeBigUInt64BE(BigInt(pad), 0);
    c.res.write(large);
    left -= 8;
  }
  const zeros = Buffer.alloc(Math.min(1024 * 1024, Math.max(0, left)));
  const pump = () => {
    while (left > 0) {
      const chunk = left >= zeros.length ? zeros : zeros.subarray(0, left);
      left -= chunk.length;
      if (!c.res.write(chunk)) {
        c.res.once("drain", pump);
        return;
      }
    }
    c.res.end();
  };
  c.res.on("close", () => {
    left = 0;
  });
  pump();
  return undefined;
}
