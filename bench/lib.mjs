// What the benches that start their own services share: a scratch folder and the child processes
// (all killed, and the folder removed unless BENCH_KEEP=1, when the bench exits), a free loopback
// port, a redis-server, and a clapper sandbox process.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");
export const BIN = join(ROOT, "bin", "clapper.js");

/** A scratch folder and a list of children, cleaned up at exit. */
export function scratch(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const children = [];
  process.on("exit", () => {
    for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
    if (process.env.BENCH_KEEP !== "1") rmSync(dir, { recursive: true, force: true });
  });
  return { dir, children };
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** A redis-server on a free loopback port, without persistence; resolves with its address. */
export async function startRedis(children) {
  const port = await freePort();
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  children.push(child);
  await new Promise((resolve) => {
    child.stdout.on("data", (b) => {
      if (b.toString().includes("Ready to accept connections")) resolve();
    });
  });
  return `redis://127.0.0.1:${port}`;
}

/** `clapper sandbox --port 0 --key KEY ARGS`; resolves with its URL and a close(). */
export async function startSandbox(children, key, args = []) {
  const child = spawn(process.execPath, [BIN, "sandbox", "--port", "0", "--key", key, ...args], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  children.push(child);
  const line = await new Promise((resolve) => createInterface({ input: child.stdout }).once("line", resolve));
  const url = /listening on (\S+)/.exec(line)?.[1];
  if (!url) throw new Error(`unexpected sandbox line: ${line}`);
  return { url, close: () => child.kill("SIGTERM") };
}
