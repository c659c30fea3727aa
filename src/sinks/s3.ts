// S3 (or an S3-compatible store) as the run's output: each result streamed into a multipart upload
// (lib-storage), hashed and counted on the way; object metadata carries job, task, fingerprint and,
// once known, the sha256, so a later run on another machine can trust what it finds there.
import { randomBytes } from "node:crypto";
import { createRequire } from "node:module";
import { pipeline, type Readable } from "node:stream";
import type * as ClientS3 from "@aws-sdk/client-s3";
import type { S3Client } from "@aws-sdk/client-s3";
import type * as LibStorage from "@aws-sdk/lib-storage";
import type * as Presigner from "@aws-sdk/s3-request-presigner";
import { hashing } from "./local.js";
import { OutputError, type Sink, SizeMismatchError, type WriteOptions, type Written } from "./sink.js";

// The SDK warns on every start that future releases need Node 22; the lockfile pins a release
// that supports Node 20, so the warning tells a user nothing they can act on.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";

// The AWS SDK costs about a quarter of a second of CPU and 25 MB to load, and this module is
// reached by every run (the staging of materials imports it): it is loaded on first use, so a run
// to a local folder never loads it. Loaded by require (the SDK ships CommonJS, the very files an
// import would load) so that createS3Client stays synchronous.
const load = createRequire(import.meta.url);
let clientS3: typeof ClientS3 | undefined;
let libStorage: typeof LibStorage | undefined;
let presigner: typeof Presigner | undefined;

/** The SDK's commands, loaded on first use (the state store in S3 sends its own). */
export function sdk(): typeof ClientS3 {
  clientS3 ??= load("@aws-sdk/client-s3") as typeof ClientS3;
  return clientS3;
}

export interface S3Location {
  bucket: string;
  /** Key prefix without leading or trailing slashes ("" for the bucket root). */
  prefix: string;
}

export function parseS3Uri(uri: string): S3Location {
  const m = uri.match(/^s3:\/\/([^/]+)\/?(.*)$/i);
  if (!m?.[1]) throw new Error(`expected s3://bucket/prefix, got ${JSON.stringify(uri)}`);
  return { bucket: m[1], prefix: (m[2] ?? "").replace(/^\/+|\/+$/g, "") };
}

export interface S3ClientOptions {
  /** `--s3-endpoint`; otherwise the SDK's own configuration (AWS_ENDPOINT_URL_S3, profiles). */
  endpoint?: string;
  /** Path-style addressing, which S3-compatible stores usually need; on by default with an endpoint. */
  forcePathStyle?: boolean;
  region?: string;
}

/**
 * A client configured by the SDK's own chain (credentials, AWS_REGION, AWS_ENDPOINT_URL_S3) plus our
 * flags. Checksums only when required: with the default, a streamed PutObject to an S3-compatible
 * store can end up storing the chunk framing inside the object.
 */
export function createS3Client(options: S3ClientOptions = {}): S3Client {
  const endpoint = options.endpoint ?? process.env.AWS_ENDPOINT_URL_S3;
  const { S3Client } = sdk();
  return new S3Client({
    region: options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? "us-east-1",
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    forcePathStyle: options.forcePathStyle ?? endpoint !== undefined,
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    maxAttempts: 5,
  });
}

const PART_SIZE = 8 * 1024 * 1024;

export class S3Sink implements Sink {
  /** Keys whose upload failed in this process: their multipart uploads may be left open. */
  private readonly failedKeys = new Set<string>();

  constructor(
    private readonly client: S3Client,
    private readonly location: S3Location,
  ) {}

  async probe(): Promise<void> {
    const { DeleteObjectCommand, PutObjectCommand } = sdk();
    const Key = this.key(`.clapper-probe-${process.pid}-${randomBytes(4).toString("hex")}`);
    try {
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.location.bucket,
          Key,
          Body: new Uint8Array(0),
          ContentLength: 0,
        }),
      );
    } catch (error) {
      const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
      const wrapped = storeError(error, `writing a test object to ${this.uri("")}`);
      // Refused for credentials or permissions: a setting to fix. Anything else: the store's state.
      const setting = status === 403 || status === 404 || status === 400 || status === 301;
      throw new OutputError(wrapped.message, !setting, { cause: error });
    }
    // A store that lets us write but not delete keeps an empty object: not worth failing for.
    await this.client
      .send(new DeleteObjectCommand({ Bucket: this.location.bucket, Key }))
      .catch(() => undefined);
  }

  /**
   * Aborts the multipart uploads under this run's prefix that no live writer will complete: those
   * begun before `before` (by a process of this run that was killed; the caller holds the run's
   * lock) and those of this process whose upload failed. Incomplete uploads are billed and
   * invisible; a lifecycle rule (AbortIncompleteMultipartUpload) on the bucket is the safety net.
   * Also removes the objects killed writers left aside (`.partial/`), which are billed too.
   */
  async cleanup(before: Date): Promise<{ aborted: number; removed: number }> {
    const { AbortMultipartUploadCommand, ListMultipartUploadsCommand } = sdk();
    const Bucket = this.location.bucket;
    const Prefix = this.location.prefix ? `${this.location.prefix}/` : "";
    let aborted = 0;
    let KeyMarker: string | undefined;
    let UploadIdMarker: string | undefined;
    // Bounded: a thousand uploads a page, at most fifty pages.
    for (let page = 0; page < 50; page++) {
      const list = await this.client
        .send(
          new ListMultipartUploadsCommand({
            Bucket,
            Prefix,
            ...(KeyMarker ? { KeyMarker } : {}),
            ...(UploadIdMarker ? { UploadIdMarker } : {}),
          }),
        )
        .catch((error: unknown) => {
          throw storeError(error, `listing incomplete uploads under ${this.uri("")}`);
        });
      for (const upload of list.Uploads ?? []) {
        if (!upload.Key || !upload.UploadId) continue;
        const stale = upload.Initiated !== undefined && upload.Initiated < before;
        if (!stale && !this.failedKeys.has(upload.Key)) continue;
        await this.client
          .send(new AbortMultipartUploadCommand({ Bucket, Key: upload.Key, UploadId: upload.UploadId }))
          .catch((error: unknown) => {
            throw storeError(error, `aborting an incomplete upload of s3://${Bucket}/${upload.Key}`);
          });
        aborted += 1;
      }
      if (!list.IsTruncated) break;
      KeyMarker = list.NextKeyMarker;
      UploadIdMarker = list.NextUploadIdMarker;
    }
    this.failedKeys.clear();
    return { aborted, removed: await this.removeAside(before) };
  }

  /**
   * Objects uploaded aside before `before` by writers that are gone (killed before the copy). A live
   * writer copies its object within seconds of the upload: one older than ASIDE_STALE_MS is no
   * live writer's, even one of another shard writing under the same prefix.
   */
  private async removeAside(before: Date): Promise<number> {
    const stale = Math.min(before.getTime(), Date.now() - ASIDE_STALE_MS);
    const { DeleteObjectCommand, ListObjectsV2Command } = sdk();
    const Bucket = this.location.bucket;
    const list = await this.client
      .send(new ListObjectsV2Command({ Bucket, Prefix: `${this.key(ASIDE)}/`, MaxKeys: 1000 }))
      .catch((error: unknown) => {
        throw storeError(error, `listing ${this.uri(ASIDE)}`);
      });
    let removed = 0;
    for (const object of list.Contents ?? []) {
      if (!object.Key || !object.LastModified || object.LastModified.getTime() >= stale) continue;
      await this.client.send(new DeleteObjectCommand({ Bucket, Key: object.Key })).then(
        () => {
          removed += 1;
        },
        () => undefined,
      );
    }
    return removed;
  }

  key(key: string): string {
    return this.location.prefix ? `${this.location.prefix}/${key}` : key;
  }

  uri(key: string): string {
    return `s3://${this.location.bucket}/${this.key(key)}`;
  }

  async write(key: string, body: Readable, options: WriteOptions = {}): Promise<Written> {
    const { CopyObjectCommand, DeleteObjectCommand } = sdk();
    libStorage ??= load("@aws-sdk/lib-storage") as typeof LibStorage;
    const { stream, result } = hashing(options.observe);
    // pipeline() hears every stream's errors (an aborted download among them) and destroys the rest.
    const source = pipeline(body, stream, () => {});
    // What went wrong on the way in (a result refused by its check, or over its size limit): that,
    // not the upload failing because of it, is the error to report.
    let sourceError: Error | undefined;
    source.once("error", (error) => {
      sourceError = error;
    });
    const Key = this.key(key);
    // An object that may replace another is uploaded aside: the one in place is kept first.
    const Staged = options.beforeReplace ? this.key(asideKey(key)) : Key;
    const metadata = options.metadata ? s3Metadata(options.metadata) : {};
    // Parts of PART_SIZE are buffered two at a time: memory stays flat whatever the file size.
    const upload = new libStorage.Upload({
      client: this.client,
      params: {
        Bucket: this.location.bucket,
        Key: Staged,
        Body: source,
        ...(options.contentType ? { ContentType: options.contentType } : {}),
        Metadata: metadata,
      },
      partSize: PART_SIZE,
      queueSize: 2,
      leavePartsOnError: false,
    });
    const abort = () => void upload.abort().catch(() => undefined);
    options.signal?.addEventListener("abort", abort, { once: true });
    try {
      await upload.done();
    } catch (error) {
      // A failed or aborted upload stops reading, but nothing closes its source: without this the
      // body (a download from the service) would go on draining, or stay open on its connection.
      source.destroy();
      body.destroy();
      // lib-storage aborts the multipart upload itself; when the store is unreachable that abort
      // fails too, and the parts are kept (and billed): cleanup() tries again for these keys.
      this.failedKeys.add(Staged);
      if (sourceError && sourceError.name !== "AbortError" && !options.signal?.aborted) throw sourceError;
      throw storeError(error, `writing ${this.uri(key)}`);
    } finally {
      options.signal?.removeEventListener("abort", abort);
    }
    const written = result();
    try {
      if (options.expectedBytes !== undefined && written.bytes !== options.expectedBytes) {
        throw new SizeMismatchError(
          `${key}: received ${written.bytes} bytes, Content-Length said ${options.expectedBytes}`,
        );
      }
      await options.check?.(undefined);
      await options.beforeReplace?.();
    } catch (error) {
      // A multipart upload cannot be withheld once complete: what failed its checks is removed.
      await this.client
        .send(new DeleteObjectCommand({ Bucket: this.location.bucket, Key: Staged }))
        .catch(() => undefined);
      throw error;
    }
    // The hash is known only now: a metadata-only copy (onto itself, or from aside to its name)
    // records it with the object.
    await this.client
      .send(
        new CopyObjectCommand({
          Bucket: this.location.bucket,
          Key,
          CopySource: copySource(this.location.bucket, Staged),
          MetadataDirective: "REPLACE",
          Metadata: { ...metadata, sha256: written.sha256 },
          ...(options.contentType ? { ContentType: options.contentType } : {}),
        }),
      )
      .catch((error: unknown) => {
        throw storeError(error, `labelling ${this.uri(key)} with its sha256`);
      });
    if (Staged !== Key)
      await this.client
        .send(new DeleteObjectCommand({ Bucket: this.location.bucket, Key: Staged }))
        .catch(() => undefined);
    return { uri: this.uri(key), ...written };
  }

  async keep(from: string, to: string): Promise<void> {
    const { CopyObjectCommand } = sdk();
    if (await this.stat(to))
      throw new OutputError(`${this.uri(to)} exists: a kept version is never replaced`);
    await this.client
      .send(
        new CopyObjectCommand({
          Bucket: this.location.bucket,
          Key: this.key(to),
          CopySource: copySource(this.location.bucket, this.key(from)),
          MetadataDirective: "COPY",
        }),
      )
      .catch((error: unknown) => {
        throw storeError(error, `keeping ${this.uri(from)} as ${this.uri(to)}`);
      });
  }

  async writeText(key: string, text: string, contentType = "text/plain; charset=utf-8"): Promise<string> {
    const { PutObjectCommand } = sdk();
    await this.client
      .send(
        new PutObjectCommand({
          Bucket: this.location.bucket,
          Key: this.key(key),
          Body: text,
          ContentType: contentType,
        }),
      )
      .catch((error: unknown) => {
        throw storeError(error, `writing ${this.uri(key)}`);
      });
    return this.uri(key);
  }

  async stat(key: string): Promise<{ bytes: number; metadata?: Record<string, string> } | undefined> {
    const { HeadObjectCommand, NotFound, S3ServiceException } = sdk();
    try {
      const head = await this.client.send(
        new HeadObjectCommand({ Bucket: this.location.bucket, Key: this.key(key) }),
      );
      return { bytes: head.ContentLength ?? 0, ...(head.Metadata ? { metadata: head.Metadata } : {}) };
    } catch (error) {
      if (
        error instanceof NotFound ||
        (error instanceof S3ServiceException && error.$metadata.httpStatusCode === 404)
      ) {
        return undefined;
      }
      throw storeError(error, `looking for ${this.uri(key)}`);
    }
  }

  async readHead(key: string, bytes: number): Promise<Buffer | undefined> {
    const { GetObjectCommand, NoSuchKey, S3ServiceException } = sdk();
    try {
      const res = await this.client.send(
        new GetObjectCommand({
          Bucket: this.location.bucket,
          Key: this.key(key),
          Range: `bytes=0-${bytes - 1}`,
        }),
      );
      const chunks: Buffer[] = [];
      let got = 0;
      // A store that ignores Range sends the whole object: read no more than asked.
      for await (const chunk of (res.Body as Readable | undefined) ?? []) {
        chunks.push(chunk as Buffer);
        got += (chunk as Buffer).length;
        if (got >= bytes) {
          (res.Body as Readable).destroy();
          break;
        }
      }
      return Buffer.concat(chunks).subarray(0, bytes);
    } catch (error) {
      if (
        error instanceof NoSuchKey ||
        (error instanceof S3ServiceException && error.$metadata.httpStatusCode === 404)
      )
        return undefined;
      throw storeError(error, `reading ${this.uri(key)}`);
    }
  }

  async readText(key: string, maxBytes: number): Promise<string | undefined> {
    try {
      return await readBoundedText(this.client, this.location.bucket, this.key(key), maxBytes);
    } catch (error) {
      if (error instanceof ObjectTooLargeError) throw new OutputError(`${this.uri(key)} is ${error.message}`);
      throw storeError(error, `reading ${this.uri(key)}`);
    }
  }

  async folders(prefix: string, max: number): Promise<string[]> {
    const { ListObjectsV2Command } = sdk();
    const base = `${this.key(prefix).replace(/\/+$/, "")}/`;
    const names: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.client
        .send(
          new ListObjectsV2Command({
            Bucket: this.location.bucket,
            Prefix: base,
            Delimiter: "/",
            ...(token ? { ContinuationToken: token } : {}),
          }),
        )
        .catch((error: unknown) => {
          throw storeError(error, `listing ${this.uri(prefix)}`);
        });
      for (const p of page.CommonPrefixes ?? []) {
        const name = p.Prefix?.slice(base.length).replace(/\/$/, "");
        if (name) names.push(name);
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token && names.length < max);
    return names.slice(0, max);
  }

  /** A GET URL valid for `seconds`, for the services to fetch a staged material. */
  presign(key: string, seconds: number): Promise<string> {
    const { GetObjectCommand } = sdk();
    presigner ??= load("@aws-sdk/s3-request-presigner") as typeof Presigner;
    return presigner.getSignedUrl(
      this.client,
      new GetObjectCommand({ Bucket: this.location.bucket, Key: this.key(key) }),
      {
        expiresIn: seconds,
      },
    );
  }

  async presignMany(keys: readonly string[], seconds: number): Promise<{ urls: string[]; expiresAt: Date }> {
    // Temporary credentials (a role, SSO) sign links that die with them, whatever expiresIn says.
    const credentials = await this.client.config.credentials().catch(() => undefined);
    const until = Date.now() + seconds * 1000;
    const expiration = credentials?.expiration?.getTime();
    const urls = await Promise.all(keys.map((key) => this.presign(key, seconds)));
    return { urls, expiresAt: new Date(expiration !== undefined && expiration < until ? expiration : until) };
  }

  /** Reads an object (verification of media stored in S3 reads its headers from here). */
  async read(key: string): Promise<Readable> {
    const { GetObjectCommand } = sdk();
    const res = await this.client.send(
      new GetObjectCommand({ Bucket: this.location.bucket, Key: this.key(key) }),
    );
    return res.Body as Readable;
  }
}

function copySource(bucket: string, key: string): string {
  return `${bucket}/${encodeURIComponent(key).replace(/%2F/g, "/")}`;
}

/**
 * Where an object that may replace another is uploaded before it takes its name: under one folder
 * of its own (`.partial/shots/s02.mp4.RANDOM`), so a run's start finds what killed writers left there
 * with a listing of that folder alone.
 */
const ASIDE = ".partial";
const ASIDE_STALE_MS = 10 * 60_000;

function asideKey(key: string): string {
  return `${ASIDE}/${key}.${randomBytes(6).toString("hex")}`;
}

/** An object larger than its reader allows: not one clapper wrote. */
export class ObjectTooLargeError extends Error {
  override name = "ObjectTooLargeError";
}

/**
 * An object's text, read up to `limit` bytes (the length announced is checked, then the bytes as
 * they come, since neither is trusted); undefined when there is none. `signal` bounds the call.
 */
export async function readBoundedText(
  client: S3Client,
  bucket: string,
  key: string,
  limit: number,
  signal?: AbortSignal,
): Promise<string | undefined> {
  const { GetObjectCommand, NoSuchKey, S3ServiceException } = sdk();
  let body: Readable | undefined;
  try {
    const res = await client.send(
      new GetObjectCommand({ Bucket: bucket, Key: key }),
      signal ? { abortSignal: signal } : {},
    );
    body = res.Body as Readable | undefined;
    if ((res.ContentLength ?? 0) > limit) {
      body?.destroy();
      throw new ObjectTooLargeError(`${res.ContentLength} bytes, over the ${limit} it may have`);
    }
  } catch (error) {
    const notFound =
      error instanceof NoSuchKey ||
      (error instanceof S3ServiceException && error.$metadata.httpStatusCode === 404);
    if (notFound) return undefined;
    throw error;
  }
  if (!body) return "";
  const stream = body;
  const stop = () => stream.destroy(new Error("the read was stopped"));
  signal?.addEventListener("abort", stop, { once: true });
  const chunks: Buffer[] = [];
  let bytes = 0;
  try {
    for await (const chunk of stream) {
      bytes += (chunk as Buffer).length;
      if (bytes > limit) {
        stream.destroy();
        throw new ObjectTooLargeError(`over the ${limit} bytes it may have`);
      }
      chunks.push(chunk as Buffer);
    }
  } finally {
    signal?.removeEventListener("abort", stop);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** A store that cannot be reached or refuses a request; the SDK's error is the cause. */
export class S3StoreError extends Error {
  override name = "S3StoreError";
}

/**
 * Says what was being done to which object. The SDK's own messages can be bare: an error answer to
 * a HEAD has no body, so it arrives as "UnknownError" with nothing but its HTTP status.
 */
export function storeError(error: unknown, doing: string): Error {
  if (!(error instanceof Error) || error.name === "AbortError") return error as Error;
  const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
  const bare = !error.message || error.message === error.name || error.message === "UnknownError";
  let detail = bare && status !== undefined ? `HTTP ${status}` : error.message || error.name;
  if (status === 403) detail += " (access denied: check the credentials and the bucket's permissions)";
  return new S3StoreError(`S3: ${doing} failed: ${detail}`, { cause: error });
}

/** S3 user metadata is ASCII only: other characters are percent-encoded. */
function s3Metadata(values: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(values)) out[k] = /^[\x20-\x7e]*$/.test(v) ? v : encodeURIComponent(v);
  return out;
}
