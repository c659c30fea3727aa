// Debian's Prometheus tools for the metrics suites: promtool (package `prometheus`) checks the
// exposition and the example rules, prometheus-pushgateway receives pushes. Without them a suite
// skips and says why; in CI (`CI` set, as .ci/run does) it never skips: the test fails instead.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { it } from "vitest";

export const PROMTOOL = "/usr/bin/promtool";
export const PUSHGATEWAY = "/usr/bin/prometheus-pushgateway";

/** `it`, skipped with the reason outside CI when one of the tools is missing; failing in CI. */
export function toolTest(
  name: string,
  tools: readonly string[],
  fn: () => Promise<void>,
  timeout = 30_000,
): void {
  const missing = tools.filter((t) => !existsSync(t));
  const skip = missing.length > 0 && !process.env.CI;
  const title = skip
    ? `${name} (skipped: no ${missing.join(", ")}; apt-get install prometheus prometheus-pushgateway)`
    : name;
  it.skipIf(skip)(
    title,
    async () => {
      if (missing.length > 0) throw new Error(`CI is set and ${missing.join(", ")} is missing`);
      await fn();
    },
    timeout,
  );
}

/** A command's exit code and output, fed `input` on stdin; killed after `timeoutMs`. */
export function tool(
  command: string,
  args: readonly string[],
  input = "",
  timeoutMs = 15_000,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, {
    stdio: ["pipe", "pipe", "pipe"],
    signal: AbortSignal.timeout(timeoutMs),
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
  });
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  child.stdin.end(input);
  return new Promise((resolve) => {
    child.on("error", () => {});
    child.once("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** A loopback port free now (the kernel's choice, given back at once). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** A running prometheus-pushgateway on loopback, and how to stop it. */
export async function startPushgateway(): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await freePort();
  const child = spawn(PUSHGATEWAY, [`--web.listen-address=127.0.0.1:${port}`], { stdio: "ignore" });
  const url = `http://127.0.0.1:${port}`;
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once("close", () => resolve());
      child.kill("SIGTERM");
    });
  const until = Date.now() + 10_000;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`${PUSHGATEWAY} exited with ${child.exitCode}`);
    const ready = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(1000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ready) return { url, stop };
    await new Promise((r) => setTimeout(r, 100));
  }
  await stop();
  throw new Error(`${PUSHGATEWAY} was not ready on ${url} within 10 s`);
}
