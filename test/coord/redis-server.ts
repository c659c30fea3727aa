// A real redis-server (Debian's package) for the coordinator's tests: started on a free loopback
// port with no persistence, killed (SIGKILL, as a crashed server) and restarted on the same port
// (empty, as a server that lost its data) when a test asks. Never a mock.
//
// On a machine without redis-server the tests that need it skip and say why; in CI (`CI` set, as
// `.ci/run` does) they never skip: `redisAvailable()` is true there and `startRedis()` fails loudly.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

const BINARY = process.env.CLAPPER_REDIS_SERVER ?? "redis-server";

function installed(): boolean {
  const r = spawnSync(BINARY, ["--version"], { encoding: "utf8" });
  return r.status === 0 && /Redis server v=/.test(r.stdout);
}

const HAVE = installed();

export const redisSkipReason = HAVE
  ? ""
  : `skipped: no ${BINARY} on this machine (apt-get install redis-server; .ci/run installs it, and in CI these tests never skip)`;

/** Whether to run the tests: always in CI, where a missing server is a failure rather than a skip. */
export function redisAvailable(): boolean {
  return HAVE || isCi();
}

function isCi(): boolean {
  const ci = (process.env.CI ?? "").trim().toLowerCase();
  return ci !== "" && ci !== "0" && ci !== "false";
}

export interface RedisServer {
  url: string;
  port: number;
  /** SIGKILL: connections drop, nothing is saved. */
  kill(): void;
  /** Starts again on the same port, empty; resolves once it answers. */
  restart(): Promise<void>;
  /** Stops it for good and removes its folder. */
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const address = s.address();
      const port = typeof address === "object" && address ? address.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export async function startRedis(): Promise<RedisServer> {
  if (!HAVE) throw new Error(`${BINARY} is not installed: apt-get install -y redis-server`);
  const dir = await mkdtemp(join(tmpdir(), "clapper-redis-"));
  const port = await freePort();
  let child: ChildProcess | undefined;
  const launch = async () => {
    const c = spawn(
      BINARY,
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    child = c;
    let output = "";
    c.stdout?.on("data", (b: Buffer) => {
      output += b.toString();
    });
    c.stderr?.on("data", (b: Buffer) => {
      output += b.toString();
    });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`redis-server did not start in 10 s:\n${output}`)),
        10_000,
      );
      const check = setInterval(() => {
        if (/Ready to accept connections/.test(output)) {
          clearTimeout(timer);
          clearInterval(check);
          resolve();
        }
      }, 10);
      c.once("exit", (code) => {
        clearTimeout(timer);
        clearInterval(check);
        reject(new Error(`redis-server exited with ${code} at start:\n${output}`));
      });
    });
  };
  await launch();
  const killNow = () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  };
  const exited = async () => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    await new Promise((r) => c.once("exit", r));
  };
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    kill: killNow,
    async restart() {
      killNow();
      await exited();
      await launch();
    },
    async stop() {
      killNow();
      await exited();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
