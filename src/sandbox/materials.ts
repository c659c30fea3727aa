// Fetches and checks material URLs as the video service would before accepting a task: public
// address, reachable, within the size limit of its kind. Data URLs are decoded and checked the same way.

import { lookup } from "node:dns/promises";
import { imageSize } from "image-size";
import { parseBuffer } from "music-metadata";
import { request } from "undici";
import type { Issue } from "../api/common.js";
import { checkPublicUrl, classifyHostLiteral, isDataUrl, parseDataUrl } from "../api/urls.js";
import { MATERIAL_BYTES, type MediaType } from "../api/video.js";
import { mp4Seconds } from "../media/mp4.js";

export type MaterialKind = MediaType;

const MiB = 1024 * 1024;

export interface Material {
  kind: MaterialKind;
  bytes: number;
  /** Pixel size of images, when the format is recognised. */
  width?: number;
  height?: number;
  /** Seconds, for videos whose container declares a duration. */
  seconds?: number;
}

interface FetchOptions {
  allowPrivate: boolean;
  signal?: AbortSignal;
  timeoutMs?: number;
}

const MAX_REDIRECTS = 3;

/** Resolves a host name and refuses it when any address is not public (the service's rule). */
export async function checkResolvedHost(host: string, allowPrivate: boolean): Promise<string | null> {
  if (allowPrivate) return null;
  const bare = host.replace(/^\[|\]$/g, "");
  if (classifyHostLiteral(bare) !== "name") return null;
  let addresses: { address: string }[];
  try {
    addresses = await lookup(bare, { all: true });
  } catch {
    return `host ${JSON.stringify(bare)} could not be resolved`;
  }
  for (const { address } of addresses) {
    const kind = classifyHostLiteral(address);
    if (kind !== "public") return `host ${JSON.stringify(bare)} resolves to a ${kind} address (${address})`;
  }
  return null;
}

async function fetchLimited(
  url: string,
  limit: number,
  opts: FetchOptions,
): Promise<{ ok: true; data: Buffer; contentType?: string } | { ok: false; reason: string }> {
  let current = url;
  for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
    const urlProblem = checkPublicUrl(current, { allowPrivate: opts.allowPrivate });
    if (urlProblem) return { ok: false, reason: urlProblem };
    const hostProblem = await checkResolvedHost(new URL(current).hostname, opts.allowPrivate);
    if (hostProblem) return { ok: false, reason: hostProblem };
    let res: Awaited<ReturnType<typeof request>>;
    try {
      res = await request(current, {
        method: "GET",
        headersTimeout: opts.timeoutMs ?? 10_000,
        bodyTimeout: opts.timeoutMs ?? 10_000,
        ...(opts.signal ? { signal: opts.signal } : {}),
      });
    } catch (error) {
      return { ok: false, reason: `could not be fetched: ${(error as Error).message}` };
    }
    if (res.statusCode >= 300 && res.statusCode < 400 && typeof res.headers.location === "string") {
      await res.body.dump();
      current = new URL(res.headers.location, current).toString();
      continue;
    }
    if (res.statusCode !== 200) {
      await res.body.dump();
      return { ok: false, reason: `could not be fetched: HTTP ${res.statusCode}` };
    }
    const declared = Number(res.headers["content-length"]);
    if (Number.isFinite(declared) && declared > limit) {
      res.body.destroy();
      return { ok: false, reason: `is ${declared} bytes, over the limit of ${limit / MiB} MiB` };
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > limit) {
          res.body.destroy();
          return { ok: false, reason: `is over the limit of ${limit / MiB} MiB` };
        }
        chunks.push(chunk as Buffer);
      }
    } catch (error) {
      return { ok: false, reason: `could not be fetched: ${(error as Error).message}` };
    }
    const type = res.headers["content-type"];
    return {
      ok: true,
      data: Buffer.concat(chunks),
      ...(typeof type === "string" ? { contentType: type } : {}),
    };
  }
  return { ok: false, reason: `could not be fetched: more than ${MAX_REDIRECTS} redirects` };
}

async function describe(kind: MaterialKind, data: Buffer, mime?: string): Promise<Material> {
  const material: Material = { kind, bytes: data.length };
  if (kind === "image") {
    try {
      const { width, height } = imageSize(data);
      if (width && height) Object.assign(material, { width, height });
    } catch {
      // Unrecognised image formats are the model's problem, not a request error (spec is silent).
    }
  } else if (kind === "video") {
    try {
      const meta = await parseBuffer(data, mime ? { mimeType: mime } : undefined, { duration: true });
      const seconds = meta.format.duration ?? mp4Seconds(data);
      if (seconds !== undefined) material.seconds = seconds;
    } catch {
      // Same as above: an unparseable video still counts 0 input seconds.
    }
  }
  return material;
}

/** Loads one material; the issue (if any) names the URL's field path. */
export async function loadMaterial(
  kind: MaterialKind,
  url: string,
  path: ReadonlyArray<string | number>,
  opts: FetchOptions,
): Promise<{ material: Material } | { issue: Issue }> {
  const limit = MATERIAL_BYTES[kind];
  if (isDataUrl(url)) {
    const parsed = parseDataUrl(url);
    if (!parsed)
      return { issue: { path, message: "is not a valid Data URL (expected data:<mime>;base64,<data>)" } };
    if (parsed.data.length > limit) {
      return {
        issue: {
          path,
          message: `${kind} is ${parsed.data.length} bytes, over the limit of ${limit / MiB} MiB`,
        },
      };
    }
    return { material: await describe(kind, parsed.data, parsed.mime) };
  }
  const fetched = await fetchLimited(url, limit, opts);
  if (!fetched.ok) return { issue: { path, message: `${kind} ${fetched.reason}` } };
  return { material: await describe(kind, fetched.data, fetched.contentType) };
}
