// The built CLI as its own process (`node bin/clapper.js ...`), for the tests of what a script sees:
// stdout, stderr and the exit code, nothing mocked. Run `npm run build` first.
import { spawn } from "node:child_process";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { BIN } from "../run/harness.js";

export interface Ran {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  /** Run as this user (the tests run as root, which no permission stops). */
  uid?: number;
  gid?: number;
  /** Called with each stderr line; returning a signal sends it to the process. */
  onLine?: (line: string) => NodeJS.Signals | undefined;
  timeoutMs?: number;
}

/** `clapper ARGS`, with only PATH and HOME from this environment (no CLAPPER_* leaks in). */
export function clapper(args: string[], o: RunOptions = {}): Promise<Ran> {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
  for (const [k, v] of Object.entries(o.env ?? {})) if (v !== undefined) env[k] = v;
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: o.cwd ?? tmpdir(),
    env,
    stdio: ["ignore", "pipe", "pipe"],
    ...(o.uid !== undefined ? { uid: o.uid } : {}),
    ...(o.gid !== undefined ? { gid: o.gid } : {}),
  });
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
  });
  createInterface({ input: child.stderr }).on("line", (line) => {
    stderr += `${line}\n`;
    const signal = o.onLine?.(line);
    if (signal && child.exitCode === null) child.kill(signal);
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), o.timeoutMs ?? 20_000);
  return new Promise((resolve) => {
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** stdout as exactly one JSON value: JSON.parse fails on anything more (or less). */
export function oneJson(r: Ran): Record<string, any> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(r.stdout);
  } catch {
    throw new Error(
      `stdout is not exactly one JSON value (exit ${r.code}):\n${r.stdout}\n--- stderr:\n${r.stderr}`,
    );
  }
  return parsed as Record<string, any>;
}

export interface Folder {
  path: string;
  file(name: string, text: string): Promise<string>;
  remove(): Promise<void>;
}

/** A temporary folder others can read (mode 755), for runs as another user too. */
export async function folder(prefix = "clapper-cli-"): Promise<Folder> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  await chmod(path, 0o755);
  return {
    path,
    async file(name, text) {
      const p = join(path, name);
      await writeFile(p, text, { mode: 0o644 });
      return p;
    },
    remove: () => rm(path, { recursive: true, force: true }),
  };
}

/** A manifest of one shot and one line, small and cheap; `slow` makes the sandbox take its time. */
export function smallManifest(
  name: string,
  o: { slow?: boolean; shots?: number; lines?: boolean } = {},
): string {
  const m = o.slow ? " [sandbox:slow]" : "";
  const shots = Array.from(
    { length: o.shots ?? 1 },
    (_, i) => `  - { id: s0${i + 1}, prompt: "A lighthouse at dusk, take ${i + 1}${m}" }`,
  );
  return [
    `name: ${name}`,
    "output: ./output",
    "defaults:",
    '  shot: { model: Vid-H3, resolution: 480P, duration: 4, ratio: "16:9" }',
    '  line: { language: EN, voice: "preset:en_female_bright" }',
    "shots:",
    ...shots,
    ...(o.lines === false ? [] : ["lines:", `  - { id: n01, text: "Every night, the light came on.${m}" }`]),
    "",
  ].join("\n");
}
