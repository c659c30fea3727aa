// The tries of one result download, over real HTTP: every request the HTTP layer makes (its
// retries happen inside one call) is counted with its answer, the time for tries is bounded
// without ever cutting a transfer under way, and the failure names task, host and status only.
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, onTestFinished } from "vitest";
import { ServiceError } from "../../src/api/errors.js";
import { HttpClient } from "../../src/api/http.js";
import {
  DownloadFailedError,
  DownloadTimeUpError,
  DownloadTrail,
  type ResultSpec,
  storeResult,
} from "../../src/results/collect.js";
import { makeMp4 } from "../../src/sandbox/media.js";
import { LocalSink } from "../../src/sinks/local.js";

const SPEC: ResultSpec = {
  id: "shot/s01",
  kind: "video",
  key: "shots/s01.mp4",
  expectedSeconds: 1,
  maxBytes: 64 * 1024 * 1024,
  metadata: {},
};
const MP4 = await makeMp4(1, 64, 64);

let root: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "clapper-collect-"));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** A result host: `answer` serves request number n (from 1). */
async function host(answer: (n: number, res: import("node:http").ServerResponse) => void) {
  let hits = 0;
  const server: Server = createServer((_req, res) => answer(++hits, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  onTestFinished(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}/_media/videos/t1.mp4?sig=SECRET&expires=9`, hits: () => hits };
}

const failing = (res: import("node:http").ServerResponse) => {
  res.writeHead(500, { "content-type": "application/json" });
  res.end('{"type":"error","error":{"type":"internal_error","message":"store down"}}');
};

function client(url: string, read: { maxRetries: number; baseDelayMs: number; maxDelayMs: number }) {
  const http = new HttpClient({ baseUrl: new URL(url).origin, apiKey: "sk-ml-test", policies: { read } });
  onTestFinished(() => http.close());
  return http;
}

const store = (http: HttpClient, url: string, trail: DownloadTrail) =>
  storeResult(http, new LocalSink(root), url, SPEC, new AbortController().signal, trail);

describe("the tries of a result download", () => {
  it("counts each request of the HTTP layer's retries and the last status, across calls", async () => {
    const h = await host((_n, res) => failing(res));
    const http = client(h.url, { maxRetries: 3, baseDelayMs: 1, maxDelayMs: 2 });
    const trail = new DownloadTrail(60_000);
    await expect(store(http, h.url, trail)).rejects.toBeInstanceOf(ServiceError);
    expect({ tries: trail.tries, status: trail.status, hits: h.hits() }).toEqual({
      tries: 4,
      status: 500,
      hits: 4,
    });
    await expect(store(http, h.url, trail)).rejects.toBeInstanceOf(ServiceError);
    expect(trail.tries).toBe(8);
    expect(h.hits()).toBe(8);
    const message = new DownloadFailedError("vtask_1", trail).message;
    expect(message).toBe(
      `the result of task vtask_1 could not be downloaded after 8 tries (HTTP 500 from ${new URL(h.url).host})`,
    );
    expect(message).not.toMatch(/SECRET|expires|_media|\?/);
  });

  it("stops when the time for tries runs out, keeping the last status", async () => {
    const h = await host((_n, res) => failing(res));
    // The default policy's shape, slower: the HTTP layer alone would go on for seconds.
    const http = client(h.url, { maxRetries: 8, baseDelayMs: 200, maxDelayMs: 8000 });
    const trail = new DownloadTrail(700);
    const started = Date.now();
    await expect(store(http, h.url, trail)).rejects.toBeInstanceOf(DownloadTimeUpError);
    const ms = Date.now() - started;
    expect(ms).toBeGreaterThanOrEqual(690);
    expect(ms).toBeLessThan(1500);
    expect(trail.spent).toBe(true);
    expect(trail.status).toBe(500);
    expect(trail.tries).toBe(h.hits());
    expect(trail.tries).toBeGreaterThanOrEqual(2);
  });

  it("never cuts a transfer that has started, however long it takes", async () => {
    const h = await host((n, res) => {
      if (n === 1) return failing(res);
      res.writeHead(200, { "content-type": "video/mp4", "content-length": MP4.length });
      // The body takes longer than the whole time for tries.
      let at = 0;
      const step = Math.ceil(MP4.length / 6);
      const timer = setInterval(() => {
        res.write(MP4.subarray(at, at + step));
        at += step;
        if (at >= MP4.length) {
          clearInterval(timer);
          res.end();
        }
      }, 100);
    });
    const http = client(h.url, { maxRetries: 3, baseDelayMs: 1, maxDelayMs: 2 });
    const trail = new DownloadTrail(300);
    const written = await store(http, h.url, trail);
    expect(written.bytes).toBe(MP4.length);
    expect({ tries: trail.tries, status: trail.status }).toEqual({ tries: 2, status: 200 });
  });
});
