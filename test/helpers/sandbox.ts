// Starts a real sandbox on loopback and talks to it over HTTP, as every integration test does.
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import { type Sandbox, type SandboxOptions, startSandbox } from "../../src/sandbox/index.js";

export const KEY = "sk-ml-test";

export async function sandbox(options: SandboxOptions = {}): Promise<Sandbox> {
  return startSandbox({
    port: 0,
    timeScale: 0.001,
    allowPrivateUrls: true,
    keys: [`${KEY}=acme`],
    ...options,
  });
}

export interface Reply<T = any> {
  status: number;
  body: T;
  headers: Record<string, string | string[] | undefined>;
}

export interface CallOptions {
  key?: string | null;
  body?: unknown;
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
  idem?: string;
}

/** One API call; the key defaults to the test key, `null` sends none. */
export async function call<T = any>(
  base: string,
  method: string,
  path: string,
  opts: CallOptions = {},
): Promise<Reply<T>> {
  const headers: Record<string, string> = { accept: "application/json", ...opts.headers };
  const key = opts.key === undefined ? KEY : opts.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  if (opts.idem !== undefined) headers["idempotency-key"] = opts.idem;
  let body: string | Buffer | undefined;
  if (opts.rawBody !== undefined) body = opts.rawBody;
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers["content-type"] ??= "application/json";
  }
  const res = await request(`${base}${path}`, { method: method as "GET", headers, body });
  const text = await res.body.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // non-JSON answers stay text
  }
  return { status: res.statusCode, body: parsed as T, headers: res.headers };
}

export async function download(url: string, headers: Record<string, string> = {}) {
  const res = await request(url, { headers });
  return { status: res.statusCode, headers: res.headers, data: Buffer.from(await res.body.arrayBuffer()) };
}

/** Polls until `done` holds or the deadline passes. */
export async function until<T>(
  fn: () => Promise<T>,
  done: (v: T) => boolean,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (done(value)) return value;
    if (Date.now() > deadline)
      throw new Error(`condition not met within ${timeoutMs} ms: ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export interface Received {
  headers: IncomingMessage["headers"];
  body: any;
  at: number;
}

/** A local HTTP receiver for callbacks whose answer status can be scripted per request. */
export async function receiver(status: (n: number, body: any) => number = () => 200) {
  const received: Received[] = [];
  let n = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8") || "null");
      received.push({ headers: req.headers, body, at: Date.now() });
      n += 1;
      const code = status(n, body);
      res.writeHead(code, code >= 300 && code < 400 ? { location: "http://127.0.0.1:1/elsewhere" } : {});
      res.end("ok");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** A local file server for material URLs. */
export async function fileServer(files: Record<string, { type: string; data: Buffer }>) {
  const server = createServer((req, res) => {
    const file = files[req.url ?? ""];
    if (!file) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "content-type": file.type, "content-length": file.data.length }).end(file.data);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return { base: `http://127.0.0.1:${port}`, close: () => new Promise<void>((r) => server.close(() => r())) };
}
