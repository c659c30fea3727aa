// Materials named in a manifest: local files (checked and hashed here, so the fingerprint follows
// content, not paths), https URLs (checked as the service would) and s3:// URIs.

import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { resolve } from "node:path";
import { checkPublicUrl, isDataUrl } from "../api/urls.js";
import { MATERIAL_BYTES, type MediaType } from "../api/video.js";

export type MaterialKind = MediaType;

const MiB = 1024 * 1024;

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

export async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
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
    if (isDataUrl(text)) return { source: "url", kind, url: text };
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
    if (facts.bytes > MATERIAL_BYTES[kind]) {
      return {
        error: `${text} is ${facts.bytes} bytes, over the ${kind} limit of ${MATERIAL_BYTES[kind] / MiB} MiB`,
      };
    }
    return { source: "local", kind, path, ...facts };
  }

  private async inspect(path: string): Promise<{ bytes: number; sha256: string } | { error: string }> {
    try {
      const info = await stat(path);
      if (!info.isFile()) return { error: `${path} is not a file` };
      if (info.size === 0) return { error: `${path} is empty` };
      return { bytes: info.size, sha256: await sha256File(path) };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      return { error: code === "ENOENT" ? `file not found: ${path}` : `${path} cannot be read (${code})` };
    }
  }
}
