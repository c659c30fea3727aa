// What a route of the sandbox is: a method and path, the kind of caller it serves, the body it reads,
// and a handler that acts on the sandbox's services. The tables in this folder are lists of these.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { z } from "zod";
import { issuesFromZod } from "../../api/common.js";
import type { Faults, MediaControl } from "../faults.js";
import { ApiError } from "../http.js";
import type { BodySpec } from "../request.js";
import type { SpeechService } from "../speech.js";
import type { VideoService } from "../video.js";
import type { Org, World } from "../world.js";

/**
 * `api`: key, rate limit and faults apply; `media`: signed or public URLs, no key; `control`: the
 * /_sandbox/ endpoints, not counted in the stats.
 */
export type RouteKind = "api" | "media" | "control";

/** What the handlers act on: one of each for the life of the sandbox. */
export interface Services {
  world: World;
  video: VideoService;
  speech: SpeechService;
  faults: Faults;
  media: MediaControl;
  /** `--plain-videos`: one plain picture per size and length instead of each task's own. */
  plainVideos: boolean;
}

/** What a route handler receives. */
export interface Ctx {
  req: IncomingMessage;
  res: ServerResponse;
  params: Record<string, string | undefined>;
  query: URLSearchParams;
  org: Org;
  body: unknown;
  raw: Buffer;
}

/** Answers the JSON to send, or undefined when it wrote the response itself. */
type Handler = (c: Ctx, s: Services) => unknown;

export interface Route {
  method: "GET" | "POST" | "PUT" | "DELETE";
  /** find-my-way syntax: `:name` for a parameter. */
  path: string;
  kind: RouteKind;
  body?: BodySpec;
  handler: Handler;
}

export function param(c: Ctx, name: string): string {
  return c.params[name] ?? "";
}

/** Both services draw on one ledger: settle every task whose end has passed before reading or reserving. */
export function syncOrg(s: Services, org: Org): void {
  s.video.syncAll(org);
  s.speech.syncAll(org);
}

export function parseControl<T>(schema: z.ZodType<T>, body: unknown): T {
  const parsed = schema.safeParse(body);
  if (!parsed.success) throw ApiError.badRequest(issuesFromZod(parsed.error));
  return parsed.data;
}
