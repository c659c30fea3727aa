// `clapper review` as its own process (the dist/ build), and raw HTTP requests to it.
import { type ChildProcess, spawn } from "node:child_process";
import { request } from "node:http";
import { createInterface } from "node:readline";
import { BIN } from "../run/harness.js";

/** `clapper review MANIFEST --json --port 0` started; resolves with its URL (its first line). */
export async function serve(
  manifest: string,
  cwd: string,
): Promise<{ url: string; child: ChildProcess; stderr: () => string }> {
  const child = spawn(process.execPath, [BIN, "review", manifest, "--json", "--port", "0"], {
    cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    err += d;
  });
  const first = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no URL within 20 s; stderr: ${err}`)), 20_000);
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).once("line", (line) => {
      clearTimeout(timer);
      resolve(line);
    });
    child.once("exit", (code) => reject(new Error(`exited ${code} before its URL; stderr: ${err}`)));
  });
  const { url } = JSON.parse(first) as { url: string };
  return { url, child, stderr: () => err };
}

/** A raw request, so that the Host header can be anything. */
export function raw(
  url: string,
  o: { method?: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: o.method ?? "GET", headers: o.headers, timeout: 10_000 }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on("error", reject);
    req.on("timeout", () => req.destroy(new Error("timed out")));
    req.end(o.body);
  });
}
