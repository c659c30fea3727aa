// Materials named in a manifest: local files (checked and hashed here, so the fingerprint follows
// content, not paths), https URLs (checked as the service would), Data URLs (checked against the
// same size limits as files) and s3:// URIs.

import { resolve } from "node:path";
import { checkPublicUrl, isDataUrl } from "../api/urls.js";
import { MATERIAL_BYTES, type MediaType } from "../api/video.js";
import { FileError, formatBytes, hashOpenedFile, hashRegularFile, openRegularFile } from "./files.js";

export type MaterialKind = MediaType;

/** Over this, a file is over every kind's limit: it is refused without being read. */
const LARGEST_MATERIAL = Math.max(...Object.values(MATERIAL_BYTES));

export type MaterialRef =
  | { source: "local"; kind: MaterialKind; path: string; bytes: number; sha256: string }
  | { source: "url"; kind: MaterialKind; url: string }
  | { source: "s3"; kind: MaterialKind; uri: string; bucket: string; key: string };

/** What the fingerprint sees: content for local files, the address otherwise. */
export function materialIdentity(ref: MaterialRef): string {
  switch (ref.source) {
    case "local":
      return `sha256:${ref.sha256}`;
    case "url":
      return ref.url;
    case "s3":
      return ref.uri;
  }
}

/** The sha256 of a regular file of at most `maxBytes` (skills, reference voices). */
export async function sha256File(path: string, maxBytes = LARGEST_MATERIAL): Promise<string> {
  return (await hashRegularFile(path, { maxBytes, what: "this file" })).sha256;
}

/**
 * How many bytes a Data URL holds, from the length of its payload (decoding tens of MiB to learn
 * a length would be waste): base64 makes 3 bytes of every 4 characters, less its padding; percent
 * escapes are one byte each.
 */
export function dataUrlBytes(url: string): number {
  const comma = url.indexOf(",");
  const meta = url.slice(0, comma);
  let payload = url.slice(comma + 1);
  if (/;\s*base64\s*$/i.test(meta)) {
    if (/[\t\n\f\r ]/.test(payload)) payload = payload.replace(/[\t\n\f\r ]/g, "");
    const padding = payload.endsWith("==") ? 2 : payload.endsWith("=") ? 1 : 0;
    return Math.floor(((payload.length - padding) * 3) / 4);
  }
  const escapes = payload.match(/%[0-9a-f]{2}/gi)?.length ?? 0;
  return Buffer.byteLength(payload, "utf8") - 2 * escapes;
}

function overLimit(what: string, bytes: number, kind: MaterialKind): string | undefined {
  if (bytes <= MATERIAL_BYTES[kind]) return undefined;
  return `${what} is ${bytes} bytes, over the ${kind} limit of ${formatBytes(MATERIAL_BYTES[kind])}`;
}

/** Resolves local files once per plan however many rows name them. */
export class MaterialResolver {
  private readonly cache = new Map<string, Promise<{ bytes: number; sha256: string } | { error: string }>>();

  constructor(private readonly baseDir: string) {}

  async resolve(raw: string, kind: MaterialKind): Promise<MaterialRef | { error: string }> {
    const text = raw.trim();
    if (/^https?:\/\//i.test(text)) {
      const problem = checkPublicUrl(text, {});
      return problem ? { error: problem } : { source: "url", kind, url: text };
    }
    if (isDataUrl(text)) {
      // Written in the manifest, sent as it is: the service's per-kind limits apply all the same.
      const tooBig = overLimit("the Data URL", dataUrlBytes(text), kind);
      return tooBig ? { error: tooBig } : { source: "url", kind, url: text };
    }
    if (/^s3:\/\//i.test(text)) {
      const m = text.match(/^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])\/(.+)$/);
      if (!m) {
        return {
          error: `expected s3://bucket/key (a bucket name of 3 to 63 lowercase letters, digits, "." or "-"), got ${JSON.stringify(text)}`,
        };
      }
      return { source: "s3", kind, uri: text, bucket: m[1] as string, key: m[2] as string };
    }
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
      return { error: `expected a local path, an https URL or an s3:// URI, got ${JSON.stringify(text)}` };
    }
    const path = resolve(this.baseDir, text);
    let entry = this.cache.get(path);
    if (!entry) {
      entry = this.inspect(path);
      this.cache.set(path, entry);
    }
    const facts = await entry;
    // Messages name the file as the manifest wrote it.
    if ("error" in facts) return { error: facts.error.replace(path, text) };
    const tooBig = overLimit(text, facts.bytes, kind);
    if (tooBig) return { error: tooBig };
    return { source: "local", kind, path, ...facts };
  }

  /** Size and hash of a regular file outside /proc, /dev and /sys (a FIFO or a device would never end). */
  private async inspect(path: string): Promise<{ bytes: number; sha256: string } | { error: string }> {
    try {
      const file = await openRegularFile(path);
      try {
        if (file.size === 0) return { error: `${path} is empty` };
        // Over every limit: refused by size in resolve, no need to read it.
        if (file.size > LARGEST_MATERIAL) return { bytes: file.size, sha256: "" };
        return await hashOpenedFile(file, { maxBytes: LARGEST_MATERIAL, what: "a material" });
      } finally {
        await file.handle.close();
      }
    } catch (error) {
      if (!(error instanceof FileError)) return { error: `${path} cannot be read (${error})` };
      switch (error.problem) {
        case "missing":
          return { error: `file not found: ${path}` };
        case "folder":
          return { error: `${path} is not a file` };
        case "special":
        case "system":
          return { error: `${path} is ${error.message}` };
        default:
          return { error: `${path}: ${error.message}` };
      }
    }
  }
}
