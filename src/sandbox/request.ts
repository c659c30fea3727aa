// Reading a request: its headers, its API key, and its body within the route's size limit.
import type { IncomingMessage } from "node:http";
import { ApiError } from "./http.js";

export const MiB = 1024 * 1024;
export const KiB = 1024;

/** A JSON body expected, with its size limit; `raw` reads bytes without parsing. */
export interface BodySpec {
  limit: number;
  raw?: boolean;
}

export function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function bearer(req: IncomingMessage): string | undefined {
  const value = header(req, "authorization");
  const match = value?.match(/^Bearer\s+(\S+)\s*$/i);
  return match?.[1];
}

export async function readBody(
  req: IncomingMessage,
  spec: BodySpec,
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
