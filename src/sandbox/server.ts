// The sandbox's lifecycle: the world and its services built from the options, the HTTP server that
// routes each request through the key, rate and fault checks to the route tables in routes/, and close.
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { z } from "zod";
import { ApiAccess } from "./access.js";
import { CallbackSender } from "./callbacks.js";
import { Faults, type FaultVerdict, NO_MEDIA_CONTROL } from "./faults.js";
import { ApiError, renderError, sendJson } from "./http.js";
import { loadWorld, saveWorld } from "./persist.js";
import { readBody } from "./request.js";
import { API_ROUTES } from "./routes/api.js";
import { CONTROL_ROUTES } from "./routes/control.js";
import { MEDIA_ROUTES } from "./routes/media.js";
import type { RouteKind, Services } from "./routes/route.js";
import { RouteTable } from "./routes/table.js";
import { PRESET_VOICES, SpeechService } from "./speech.js";
import { OFFICIAL_SKILLS, VideoService } from "./video.js";
import { World } from "./world.js";

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
   * Every result video the same plain picture for its size and length, made once: for load tests,
   * where making each task's own picture would take CPU from the clients measured beside it.
   */
  plainVideos: z.boolean().default(false),
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

export async function startSandbox(input: SandboxOptions = {}): Promise<Sandbox> {
  const options = SandboxOptions.parse(input);
  const { services, callbacks } = openServices(options);
  const { world, video } = services;
  const access = new ApiAccess(world);
  const routes = new RouteTable([...API_ROUTES, ...MEDIA_ROUTES, ...CONTROL_ROUTES]);
  const save = () => {
    if (options.stateFile) saveWorld(options.stateFile, world, services.speech.pricing);
  };
  const sockets = new Set<Socket>();
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
    try {
      const { route, params } = routes.find(method, url.pathname);
      // Counted before any fault: a client's retries of injected failures show in the stats.
      if (route.kind !== "control") world.countRequest(route.template);
      const verdict: FaultVerdict = route.kind === "api" ? await apiFault(services.faults) : "serve";
      if (verdict === "drop") {
        req.socket.destroy();
        return;
      }
      const org =
        route.kind === "api" ? access.admit(req, services.faults.settings.rate_limit_rps) : undefined;
      if (!world.baseUrl) world.baseUrl = publicOr(server, options);
      const { body, raw } = route.body
        ? await readBody(req, route.body)
        : { body: undefined, raw: Buffer.alloc(0) };
      const ctx = { req, res, params, query: url.searchParams, org: org ?? world.org("default"), body, raw };
      const result = await route.handler(ctx, services);
      // What a client is about to be told exists must survive a crash of this process.
      if (changesState(method, route.kind)) save();
      if (verdict === "drop-after") {
        req.socket.destroy();
        return;
      }
      if (!res.headersSent && result !== undefined) sendJson(res, 200, result);
    } catch (error) {
      answerFailure(res, error, requestId);
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

/** The world with its keys, official skills and preset voices (and the state file's contents), and the services on it. */
function openServices(options: z.output<typeof SandboxOptions>): {
  services: Services;
  callbacks: CallbackSender;
} {
  const world = new World(
    { timeScale: options.timeScale, allowPrivateUrls: options.allowPrivateUrls, points: options.points },
    options.secret,
  );
  const callbacks = new CallbackSender(world);
  const video = new VideoService(world, callbacks);
  const speech = new SpeechService(world);
  if (options.stateFile) loadWorld(options.stateFile, world, speech.pricing);
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
  const faults = new Faults(options.rateLimit);
  return {
    services: {
      world,
      video,
      speech,
      faults,
      media: { ...NO_MEDIA_CONTROL },
      plainVideos: options.plainVideos,
    },
    callbacks,
  };
}

/** The injected fault an API request draws, after its injected latency. */
async function apiFault(faults: Faults): Promise<FaultVerdict> {
  const latency = faults.latency();
  if (latency) await latency;
  return faults.draws();
}

/** A request that threw: its error as the API answers it, or a cut connection once the answer has begun. */
function answerFailure(res: ServerResponse, error: unknown, requestId: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (error instanceof ApiError && error.type === "request_too_large") res.setHeader("connection", "close");
  renderError(res, error, requestId);
}

/** API changes (anything but GET and HEAD) and control POSTs; media GETs and HEADs change nothing. */
function changesState(method: string, kind: RouteKind): boolean {
  if (kind === "control") return method === "POST";
  return method !== "GET" && method !== "HEAD";
}

function publicOr(server: Server, options: { host: string; publicUrl?: string | undefined }): string {
  return options.publicUrl?.replace(/\/+$/, "") ?? baseUrlOf(server, options.host);
}

function baseUrlOf(server: Server, host: string): string {
  const address = server.address() as AddressInfo | null;
  const shown = host === "0.0.0.0" || host === "::" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  return `http://${shown}:${address?.port ?? 0}`;
}
