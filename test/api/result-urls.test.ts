// Result URLs are untrusted input (issue 9, item 21): the services' own public-address rule applies
// to them, so a hostile or broken answer cannot point the runner at the machine's neighbours.
// Fetched from a public address, or from the service's own origin; private ones with the flag only.
import { lookup } from "node:dns/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { hostname } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { ResultUrlError } from "../../src/api/errors.js";
import { HttpClient } from "../../src/api/http.js";
import { classifyHostLiteral } from "../../src/api/urls.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

/** A server on `host` that counts the connections made to it and serves a few bytes. */
async function server(host = "127.0.0.1") {
  let connections = 0;
  const s = createServer((_req, res) => {
    res.writeHead(200, { "content-type": "video/mp4", "content-length": "5" });
    res.end("hello");
  });
  s.on("connection", () => {
    connections += 1;
  });
  await new Promise<void>((r) => s.listen(0, host, r));
  closers.push(() => new Promise<void>((r) => s.close(() => r())));
  return { url: `http://${host}:${(s.address() as AddressInfo).port}`, connections: () => connections };
}

function client(baseUrl: string, allowPrivateUrls = false): HttpClient {
  const http = new HttpClient({ baseUrl, apiKey: "sk-ml-result-urls", allowPrivateUrls });
  closers.push(() => http.close());
  return http;
}

const text = async (http: HttpClient, url: string) => {
  const res = await http.download(url, { what: "download" });
  return (await (res.body as unknown as { text(): Promise<string> }).text?.()) ?? "read";
};

describe("result URLs", () => {
  it("are fetched from the service's own origin, even when that is loopback (the sandbox)", async () => {
    const service = await server();
    const http = client(service.url);
    await expect(http.download(`${service.url}/media/x.mp4`, { what: "download" })).resolves.toBeDefined();
  });

  it("are refused, without a connection, at private, loopback, link-local and unspecified addresses", async () => {
    const neighbour = await server("127.0.0.2");
    const http = client("https://api.example.com");
    const port = new URL(neighbour.url).port;
    for (const url of [
      `http://127.0.0.2:${port}/x.mp4`,
      `http://2130706434:${port}/x.mp4`, // 127.0.0.2 written as one number
      `http://0.0.0.0:${port}/x.mp4`,
      "http://10.1.2.3/x.mp4",
      "http://169.254.169.254/latest/meta-data/",
      "http://[::1]/x.mp4",
      "http://localhost/x.mp4",
      "http://192.168.0.10/x.mp4",
    ]) {
      await expect(http.download(url, { what: "download shot/s01" }), url).rejects.toThrow(ResultUrlError);
    }
    expect(neighbour.connections()).toBe(0);
  });

  it("are refused when not http(s) or carrying user information", async () => {
    const http = client("https://api.example.com");
    for (const url of [
      "file:///etc/passwd",
      "ftp://example.com/x.mp4",
      "https://user:pw@example.com/x.mp4",
      "not a url",
    ]) {
      await expect(http.download(url, { what: "download" }), url).rejects.toThrow(ResultUrlError);
    }
  });

  it("are refused when a host name resolves only to non-public addresses (checked at connect time)", async () => {
    const name = hostname();
    const addresses = await lookup(name, { all: true }).catch(() => []);
    // This machine's own name resolves to its own (private or loopback) addresses here.
    if (addresses.length === 0 || addresses.some((a) => classifyHostLiteral(a.address) === "public")) return;
    const local = await server("0.0.0.0");
    const http = client("https://api.example.com");
    const url = `http://${name}:${new URL(local.url).port}/x.mp4`;
    await expect(http.download(url, { what: "download" })).rejects.toThrow(/no public address|ENOTPUBLIC/);
    expect(local.connections()).toBe(0);
  });

  it("at private addresses are fetched with --allow-private-urls", async () => {
    const neighbour = await server("127.0.0.2");
    const http = client("https://api.example.com", true);
    await expect(text(http, `${neighbour.url}/x.mp4`)).resolves.toBe("hello");
    expect(neighbour.connections()).toBe(1);
  });
});
