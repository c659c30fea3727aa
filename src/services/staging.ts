// Materials named in a manifest must be somewhere the service can fetch them. With S3, a local
// file is uploaded once per content hash under a staging prefix and passed as a presigned GET URL
// valid for the task's whole queue time; s3:// URIs are presigned as they are. Without S3, local
// files travel inside the request as Data URLs (the request body limit then applies).
import { extname } from "node:path";
import type { S3Client } from "@aws-sdk/client-s3";
import { openRegularFile, readRegularFile } from "../manifest/files.js";
import type { MaterialRef } from "../manifest/index.js";
import { S3Sink } from "../sinks/s3.js";

const MIME: Record<string, string> = {
  ".png": "image/png",
  ".jpg": "image/jpeg",
  ".jpeg": "image/jpeg",
  ".webp": "image/webp",
  ".gif": "image/gif",
  ".bmp": "image/bmp",
  ".mp4": "video/mp4",
  ".mov": "video/quicktime",
  ".webm": "video/webm",
  ".mp3": "audio/mpeg",
  ".wav": "audio/wav",
  ".m4a": "audio/mp4",
  ".flac": "audio/flac",
  ".ogg": "audio/ogg",
};

function mimeOf(path: string): string {
  return MIME[extname(path).toLowerCase()] ?? "application/octet-stream";
}

export class MaterialError extends Error {
  override name = "MaterialError";
}

export interface MaterialStager {
  /** The URL the service should fetch for this material. */
  url(ref: MaterialRef, signal?: AbortSignal): Promise<string>;
  /** True when URLs are Data URLs whose size counts toward the request body. */
  readonly inline: boolean;
}

/** No object store: local files become Data URLs; s3:// URIs cannot be reached. */
export class InlineStager implements MaterialStager {
  readonly inline = true;

  async url(ref: MaterialRef): Promise<string> {
    if (ref.source === "url") return ref.url;
    if (ref.source === "s3") {
      throw new MaterialError(
        `${ref.uri}: an s3:// material needs S3 configured (--output s3://... or --staging s3://...)`,
      );
    }
    // Read as the plan checked it: a regular file of the size it had (not a FIFO swapped in since).
    const { data } = await readRegularFile(ref.path, {
      maxBytes: ref.bytes,
      what: "this material as planned",
    });
    return `data:${mimeOf(ref.path)};base64,${data.toString("base64")}`;
  }
}

/** Uploads local materials once per content hash; presigns every S3 material for `ttlSeconds`. */
export class S3Stager implements MaterialStager {
  readonly inline = false;
  private readonly uploads = new Map<string, Promise<void>>();

  constructor(
    private readonly client: S3Client,
    private readonly staging: S3Sink,
    private readonly ttlSeconds = 24 * 3600,
  ) {}

  async url(ref: MaterialRef, signal?: AbortSignal): Promise<string> {
    if (ref.source === "url") return ref.url;
    if (ref.source === "s3") {
      return new S3Sink(this.client, { bucket: ref.bucket, prefix: "" }).presign(ref.key, this.ttlSeconds);
    }
    const key = `${ref.sha256}${extname(ref.path).toLowerCase()}`;
    let upload = this.uploads.get(key);
    if (!upload) {
      upload = (async () => {
        const found = await this.staging.stat(key);
        if (found && found.bytes === ref.bytes) return;
        const file = await openRegularFile(ref.path);
        // The handle is closed when its stream ends or is destroyed (autoClose).
        await this.staging.write(key, file.handle.createReadStream(), {
          expectedBytes: ref.bytes,
          contentType: mimeOf(ref.path),
          metadata: { sha256: ref.sha256 },
          ...(signal ? { signal } : {}),
        });
      })();
      this.uploads.set(key, upload);
      upload.catch(() => this.uploads.delete(key));
    }
    await upload;
    return this.staging.presign(key, this.ttlSeconds);
  }
}
