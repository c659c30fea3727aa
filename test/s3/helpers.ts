// Shared by the S3 suites: a real S3 protocol server (s3rver) on loopback with its files in a temp
// folder, a log of every request it answered, an SDK client of our own to look at what a run left
// there, and small materials (PNG frames) made at test time.
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import S3rver from "s3rver";

export const BUCKET = "clapper-out";
/** s3rver's built-in credentials. The runner finds them through the SDK's chain (the environment). */
export const S3_ENV = {
  AWS_ACCESS_KEY_ID: "S3RVER",
  AWS_SECRET_ACCESS_KEY: "S3RVER",
  AWS_REGION: "us-east-1",
};
Object.assign(process.env, S3_ENV);

export interface S3Request {
  method: string;
  /** Path-style: `/bucket/key`. */
  path: string;
  query: string;
  /** A CopyObject (a PUT naming a source). */
  copy: boolean;
  /** A presigned request (the signature in the query string), as the service fetches materials. */
  presigned: boolean;
  status: number;
}

/** A request as a hook sees it, before s3rver answers it. */
export interface HeldRequest {
  method: string;
  /** Path-style: `/bucket/key`. */
  path: string;
  /** A CopyObject's source (`/bucket/key`, decoded), or undefined. */
  copySource: string | undefined;
}

/**
 * Hooks on every request, for killing a client at an exact moment: `before` runs before the store
 * does anything (returning "drop" answers 503 and does nothing, as if the request never arrived),
 * `after` once the store has done it, before its answer leaves.
 */
export interface StoreHooks {
  before?: (r: HeldRequest) => Promise<"drop" | undefined> | "drop" | undefined;
  after?: (r: HeldRequest) => Promise<void> | void;
}

export interface Store {
  port: number;
  /** Set to hold requests at exact moments (StoreHooks); cleared with `{}`. */
  hooks: StoreHooks;
  /** Multipart uploads begun and neither completed nor aborted, under `prefix`. */
  uploads(prefix?: string): Promise<Array<{ key: string; uploadId: string }>>;
  endpoint: string;
  directory: string;
  /** Every request answered since the store started (across restarts). */
  requests: S3Request[];
  /** Our own client, to look at the store from outside the run. */
  client: S3Client;
  /** Stops at once: open connections (uploads under way) are cut. */
  kill(): Promise<void>;
  /** Starts again on the same port and folder. */
  restart(): Promise<void>;
  /** Every key under `prefix` with its size. */
  list(prefix?: string): Promise<Array<{ key: string; bytes: number }>>;
  /** An object downloaded whole and hashed, with its metadata; undefined when absent. */
  object(key: string): Promise<StoredObject | undefined>;
  head(key: string): Promise<{ bytes: number; metadata: Record<string, string> } | undefined>;
  put(key: string, body: Buffer | string, contentType?: string): Promise<void>;
  remove(key: string): Promise<void>;
  /** Body PUTs (not copies) whose key starts with `prefix`. */
  puts(prefix: string): S3Request[];
  close(): Promise<void>;
}

export interface StoredObject {
  bytes: number;
  sha256: string;
  metadata: Record<string, string>;
  contentType: string | undefined;
  text: string;
}

async function listen(
  directory: string,
  port: number,
  log: S3Request[],
  hooks: () => StoreHooks,
): Promise<S3rver> {
  const server = new S3rver({
    port,
    address: "127.0.0.1",
    silent: true,
    directory,
    configureBuckets: [{ name: BUCKET }],
  });
  // s3rver implements multipart uploads but not their listing or abort (it answers NotImplemented
  // and 405). These two add them over s3rver's own store (one folder per upload, its key in a
  // file), answered in the S3 API's shapes, so the runner's clean-up is tested against real HTTP.
  server.middleware.unshift(async (ctx, next) => {
    const uploads = join(directory, BUCKET, "._S3rver_uploads");
    if (ctx.method === "GET" && ctx.path.replace(/\/$/, "") === `/${BUCKET}` && "uploads" in ctx.query) {
      const prefix = String(ctx.query.prefix ?? "");
      const ids = await readdir(uploads).catch(() => [] as string[]);
      const items: string[] = [];
      for (const id of ids) {
        const key = await readFile(join(uploads, id, "key"), "utf8").catch(() => undefined);
        if (key === undefined || !key.startsWith(prefix)) continue;
        const initiated = (await stat(join(uploads, id))).mtime.toISOString();
        items.push(
          `<Upload><Key>${key}</Key><UploadId>${id}</UploadId><Initiated>${initiated}</Initiated></Upload>`,
        );
      }
      ctx.type = "application/xml";
      ctx.body = `<?xml version="1.0" encoding="UTF-8"?><ListMultipartUploadsResult><Bucket>${BUCKET}</Bucket><Prefix>${prefix}</Prefix><IsTruncated>false</IsTruncated>${items.join("")}</ListMultipartUploadsResult>`;
      return;
    }
    if (
      ctx.method === "DELETE" &&
      ctx.path.startsWith(`/${BUCKET}/`) &&
      typeof ctx.query.uploadId === "string"
    ) {
      const dir = join(uploads, ctx.query.uploadId.replace(/[^0-9a-f]/g, ""));
      if (!existsSync(dir)) {
        ctx.status = 404;
        ctx.type = "application/xml";
        ctx.body = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchUpload</Code><Message>no such upload</Message></Error>`;
        return;
      }
      await rm(dir, { recursive: true, force: true });
      ctx.status = 204;
      return;
    }
    await next();
  });
  server.middleware.unshift(async (ctx, next) => {
    const h = hooks();
    if (!h.before && !h.after) return next();
    const source = ctx.headers["x-amz-copy-source"];
    const r: HeldRequest = {
      method: ctx.method,
      path: decodeURIComponent(ctx.path),
      copySource: typeof source === "string" ? decodeURIComponent(source) : undefined,
    };
    if ((await h.before?.(r)) === "drop") {
      ctx.status = 503;
      return;
    }
    await next();
    await h.after?.(r);
  });
  // First in the stack, so it sees every request before s3rver's router answers it.
  server.middleware.unshift(async (ctx, next) => {
    try {
      await next();
    } finally {
      log.push({
        method: ctx.method,
        path: decodeURIComponent(ctx.path),
        query: ctx.querystring,
        copy: ctx.headers["x-amz-copy-source"] !== undefined,
        presigned: /(^|&)X-Amz-Signature=/.test(ctx.querystring),
        status: ctx.status,
      });
    }
  });
  await server.run();
  return server;
}

async function stopServer(server: S3rver | undefined, abrupt: boolean): Promise<void> {
  if (!server?.httpServer?.listening) return;
  const closed = server.close();
  if (abrupt) server.httpServer.closeAllConnections();
  else server.httpServer.closeIdleConnections();
  await closed;
}

export async function startStore(): Promise<Store> {
  const directory = await mkdtemp(join(tmpdir(), "clapper-s3-"));
  const requests: S3Request[] = [];
  let hooks: StoreHooks = {};
  let server: S3rver | undefined = await listen(directory, 0, requests, () => hooks);
  const address = server.httpServer?.address();
  if (!address || typeof address === "string") throw new Error("s3rver is not listening");
  const port = address.port;
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({
    endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
  const head: Store["head"] = async (key) => {
    try {
      const res = await client.send(new HeadObjectCommand({ Bucket: BUCKET, Key: key }));
      return { bytes: res.ContentLength ?? -1, metadata: res.Metadata ?? {} };
    } catch (error) {
      if ((error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 404)
        return undefined;
      throw error;
    }
  };
  return {
    port,
    get hooks() {
      return hooks;
    },
    set hooks(h: StoreHooks) {
      hooks = h;
    },
    endpoint,
    directory,
    requests,
    client,
    async kill() {
      await stopServer(server, true);
      server = undefined;
    },
    async restart() {
      await stopServer(server, true);
      server = await listen(directory, port, requests, () => hooks);
    },
    async list(prefix = "") {
      const out: Array<{ key: string; bytes: number }> = [];
      let token: string | undefined;
      do {
        const page = await client.send(
          new ListObjectsV2Command({ Bucket: BUCKET, Prefix: prefix, ContinuationToken: token }),
        );
        for (const o of page.Contents ?? []) out.push({ key: o.Key ?? "", bytes: o.Size ?? -1 });
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      return out.sort((a, b) => a.key.localeCompare(b.key));
    },
    async object(key) {
      const found = await head(key);
      if (!found) return undefined;
      const res = await client.send(new GetObjectCommand({ Bucket: BUCKET, Key: key }));
      // Streamed and hashed: results can be large.
      const hash = createHash("sha256");
      const start: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of res.Body as Readable) {
        hash.update(chunk as Buffer);
        if (bytes < 1024 * 1024) start.push(chunk as Buffer);
        bytes += (chunk as Buffer).length;
      }
      return {
        bytes,
        sha256: hash.digest("hex"),
        metadata: res.Metadata ?? {},
        contentType: res.ContentType,
        text: bytes <= 1024 * 1024 ? Buffer.concat(start).toString("utf8") : "",
      };
    },
    head,
    async put(key, body, contentType) {
      await client.send(
        new PutObjectCommand({
          Bucket: BUCKET,
          Key: key,
          Body: body,
          ...(contentType ? { ContentType: contentType } : {}),
        }),
      );
    },
    async remove(key) {
      await client.send(new DeleteObjectCommand({ Bucket: BUCKET, Key: key }));
    },
    async uploads(prefix = "") {
      const res = await client.send(new ListMultipartUploadsCommand({ Bucket: BUCKET, Prefix: prefix }));
      return (res.Uploads ?? []).map((u) => ({ key: u.Key ?? "", uploadId: u.UploadId ?? "" }));
    },
    puts: (prefix) =>
      requests.filter((r) => r.method === "PUT" && !r.copy && r.path.startsWith(`/${BUCKET}/${prefix}`)),
    async close() {
      client.destroy();
      await stopServer(server, true);
      server = undefined;
      await rm(directory, { recursive: true, force: true });
    },
  };
}

export { png } from "../helpers/png.js";

export const sha256Of = (data: Buffer | string) => createHash("sha256").update(data).digest("hex");
