// `clapper review`'s server: the review page built afresh from the run's state on each load, the
// stored media it links (a folder's files with byte ranges, so a player can seek; S3 objects by a
// redirect to a presigned link), and the picks, written to picks.yaml as they are chosen.
//
// It listens on 127.0.0.1 only, and still trusts nothing: a request must name the server itself
// as its Host (a page of another site could otherwise reach it through DNS rebinding), a pick must
// carry the page's token (another page cannot read it, so cannot forge a pick), and a body is
// a few hundred bytes at most.
import { randomBytes, timingSafeEqual } from "node:crypto";
import { createReadStream } from "node:fs";
import { open } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { z } from "zod";
import { versionProblem } from "../episode/takes.js";
import type { Job } from "../manifest/index.js";
import type { Report, ReportJob } from "../report/model.js";
import type { Sink } from "../sinks/sink.js";
import { renderReviewPage } from "./page.js";
import { pageInput } from "./page-input.js";
import { group, takeNo } from "./page-model.js";
import { picksAsWritten, readPicks, writePicks } from "./picks.js";
import { keyIn } from "./stills.js";

/** A pick is `{"shot":"s02","take":2}`: a few dozen bytes. */
const MAX_BODY_BYTES = 4096;
/** A presigned media link lives an hour: a review session, not a week. */
const MEDIA_LINK_SECONDS = 60 * 60;
/** How long a client may take to send a request's head and body. */
const REQUEST_TIMEOUT_MS = 30_000;

const PickBody = z.strictObject({
  shot: z.string().min(1).max(200),
  take: z.number().int().min(1).max(1000),
  /** A kept version of the take (the N of `.vN`), picked instead of its current output. */
  version: z.number().int().min(1).max(100_000).optional(),
});

const TYPES: Record<string, string> = {
  mp4: "video/mp4",
  wav: "audio/wav",
  mp3: "audio/mpeg",
  m4a: "audio/mp4",
  vtt: "text/vtt; charset=utf-8",
  srt: "text/plain; charset=utf-8",
  jpg: "image/jpeg",
};

interface ReviewServerOptions {
  /** 0: any free port. */
  port: number;
  /** The run's report and the manifest's jobs as they stand now (read again on each page load). */
  load: () => Promise<{ report: Report; jobs: readonly Job[] }>;
  sink: Sink;
  /** picks.yaml beside the manifest. */
  picksFile: string;
  /** What could not be shown (a still, the picks). */
  onWarning?: (message: string) => void;
}

interface ReviewServer {
  url: string;
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
  });
  res.end(text);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const declared = Number(req.headers["content-length"] ?? 0);
  if (declared > MAX_BODY_BYTES) throw new HttpError(413, `a body of at most ${MAX_BODY_BYTES} bytes`);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, `a body of at most ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

/** `bytes=START-END` (one range) against a file of `size` bytes; undefined when none is asked. */
function byteRange(header: string | undefined, size: number): { start: number; end: number } | undefined {
  if (!header) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) throw new HttpError(416, "one byte range, bytes=START-END");
  let start: number;
  let end: number;
  if (m[1] === "") {
    // The last N bytes.
    start = Math.max(0, size - Number(m[2]));
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start >= size || start > end) throw new HttpError(416, `no such range in ${size} bytes`);
  return { start, end };
}

/** A stored file of the review: a folder's with byte ranges, an S3 object by a presigned redirect. */
async function media(
  sink: Sink,
  served: ReadonlySet<string>,
  req: IncomingMessage,
  res: ServerResponse,
  path: string,
): Promise<void> {
  let key: string;
  try {
    key = path.slice("/media/".length).split("/").map(decodeURIComponent).join("/");
  } catch {
    throw new HttpError(400, "a malformed path");
  }
  if (!served.has(key)) throw new HttpError(404, "not a file of this review");
  if (!sink.localPath) {
    if (!sink.presignMany) throw new HttpError(404, "this output cannot be linked");
    const url = (await sink.presignMany([key], MEDIA_LINK_SECONDS)).urls[0];
    if (!url) throw new HttpError(404, "not stored");
    res.writeHead(302, { location: url, "cache-control": "no-store" });
    res.end();
    return;
  }
  const file = sink.localPath(key);
  const size = await open(file, "r")
    .then(async (h) => {
      try {
        return (await h.stat()).size;
      } finally {
        await h.close();
      }
    })
    .catch(() => {
      throw new HttpError(404, "not stored");
    });
  const range = byteRange(req.headers.range, size);
  const type = TYPES[key.split(".").pop()?.toLowerCase() ?? ""] ?? "application/octet-stream";
  const head = { "content-type": type, "accept-ranges": "bytes", "cache-control": "no-store" };
  if (range) {
    res.writeHead(206, {
      ...head,
      "content-range": `bytes ${range.start}-${range.end}/${size}`,
      "content-length": range.end - range.start + 1,
    });
  } else {
    res.writeHead(200, { ...head, "content-length": size });
  }
  if (req.method === "HEAD") return void res.end();
  const stream = createReadStream(file, range ?? {});
  stream.on("error", () => res.destroy());
  res.on("close", () => stream.destroy());
  stream.pipe(res);
}

/** A pick's body, from a request that carries the page's token; refused otherwise. */
async function pickBody(req: IncomingMessage, token: string): Promise<z.infer<typeof PickBody>> {
  const given = Buffer.from(String(req.headers["x-clapper-token"] ?? ""));
  const expected = Buffer.from(token);
  if (given.length !== expected.length || !timingSafeEqual(given, expected))
    throw new HttpError(403, "this page's token is needed");
  if (!String(req.headers["content-type"] ?? "").startsWith("application/json"))
    throw new HttpError(415, "a JSON body");
  const text = await readBody(req);
  try {
    return PickBody.parse(JSON.parse(text));
  } catch {
    throw new HttpError(400, 'a body {"shot": ID, "take": N} (and "version": N for a kept version)');
  }
}

/** Refuses a pick of a take with nothing to pick: no video, or not the kept version named. */
function checkPickable(row: ReportJob, body: z.infer<typeof PickBody>): void {
  const what = `take ${body.take} of shot ${body.shot}`;
  if (body.version === undefined) {
    if (!row.output) throw new HttpError(400, `${what} has no video to pick`);
    return;
  }
  const wrong = versionProblem(row.versions ?? [], body.take, body.shot, body.version);
  if (wrong !== undefined) throw new HttpError(400, wrong);
}

export async function startReviewServer(o: ReviewServerOptions): Promise<ReviewServer> {
  const token = randomBytes(24).toString("base64url");
  let port = 0;
  /** The media keys the current page links: nothing else of the output is served. */
  let served = new Set<string>();
  let report: Report | undefined;
  let jobs: readonly Job[] = [];
  let picking: Promise<unknown> = Promise.resolve();

  const refresh = async () => {
    ({ report, jobs } = await o.load());
    const keys = new Set<string>(["episode.mp4"]);
    for (const j of report.jobs) {
      for (const uri of [j.output?.uri, ...(j.versions ?? []).map((v) => v.uri)]) {
        const key = uri ? keyIn(o.sink, uri) : undefined;
        if (key) keys.add(key);
      }
    }
    served = keys;
    return report;
  };

  const page = async (res: ServerResponse) => {
    const current = await refresh();
    const { input, warnings } = await pageInput(o.sink, current, {
      jobs,
      folder: "reports",
      picksFile: o.picksFile,
      serve: { token },
    });
    for (const w of warnings) o.onWarning?.(w);
    const html = renderReviewPage(input);
    res.writeHead(200, {
      "content-type": "text/html; charset=utf-8",
      "content-length": Buffer.byteLength(html),
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      "x-frame-options": "DENY",
    });
    res.end(html);
  };

  const pick = async (req: IncomingMessage, res: ServerResponse) => {
    const body = await pickBody(req, token);
    if (!report) await refresh();
    const shot = group(report as Report, jobs).shots.find((s) => s.id === body.shot);
    if (!shot) throw new HttpError(400, `no shot ${body.shot} in this run`);
    const takes = shot.takes.map(takeNo);
    const take = shot.takes[takes.indexOf(body.take)];
    if (!take)
      throw new HttpError(400, `shot ${body.shot} has no take ${body.take} (takes ${takes.join(", ")})`);
    checkPickable(take.row, body);
    // A broken picks.yaml is the producer's to fix: not overwritten by one pick.
    const picks = await readPicks(o.picksFile).catch((e: unknown) => {
      throw new HttpError(409, (e as Error).message);
    });
    picks[body.shot] =
      body.version === undefined ? { take: body.take } : { take: body.take, version: body.version };
    await writePicks(o.picksFile, picks);
    sendJson(res, 200, { shots: picksAsWritten(picks) });
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    // Only requests addressed to this server by its own name: DNS rebinding gives another name.
    const host = String(req.headers.host ?? "");
    if (host !== `127.0.0.1:${port}` && host !== `localhost:${port}`)
      throw new HttpError(403, "requests must be addressed to 127.0.0.1 or localhost");
    const path = new URL(req.url ?? "/", "http://x").pathname;
    const method = req.method ?? "GET";
    if (path === "/" && (method === "GET" || method === "HEAD")) return page(res);
    if (path.startsWith("/media/") && (method === "GET" || method === "HEAD"))
      return media(o.sink, served, req, res, path);
    if (path === "/picks" && method === "POST") {
      // One pick at a time: each reads picks.yaml, adds its pick and writes it whole.
      const turn = picking.then(() => pick(req, res));
      picking = turn.catch(() => undefined);
      return turn;
    }
    if (path === "/" || path === "/picks" || path.startsWith("/media/"))
      throw new HttpError(405, "not allowed");
    throw new HttpError(404, "not found");
  };

  const server: Server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      const status = error instanceof HttpError ? error.status : 500;
      const message = error instanceof HttpError ? error.message : "the page could not be made";
      if (!(error instanceof HttpError)) o.onWarning?.(`review: ${(error as Error).message}`);
      if (res.headersSent) res.destroy();
      else sendJson(res, status, { error: message });
    });
  });
  server.requestTimeout = REQUEST_TIMEOUT_MS;
  server.headersTimeout = REQUEST_TIMEOUT_MS;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(o.port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Players keep connections open; they end with the server.
        server.closeAllConnections();
      }),
  };
}
