// Shared by the run suites: a sandbox over real HTTP, a workspace with manifests, `run()` in
// process with captured JSON logs, the CLI through `main()`, and readers for the sandbox's stats,
// the balance and the run's files.
import { createHash } from "node:crypto";
import { readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { onTestFinished } from "vitest";
import { stringify } from "yaml";
import { createClients } from "../../src/api/index.js";
import { retryPoliciesFromEnv } from "../../src/cli/config.js";
import { exitCodeOf } from "../../src/cli/exit-code.js";
import { createLogger, type LogLevel } from "../../src/cli/logger.js";
import { main } from "../../src/cli/main.js";
import { ServiceGate } from "../../src/rate/limiter.js";
import { DEFAULT_LIMITS, type RunOptions, type RunOutcome, run } from "../../src/run/run.js";
import { type Sandbox, type SandboxOptions, startSandbox } from "../../src/sandbox/index.js";
import { tempDir } from "../fixtures/audio.js";
import { call } from "../helpers/sandbox.js";

/** Distinctive, so that a leak is found by a plain text search. */
export const KEY = "sk-ml-runsuite-4f1c9e7d2a";
export const OTHER_KEY = "sk-ml-runsuite-colleague-88b1";
export const ORG = "acme";
export const RETRY_ENV = { CLAPPER_RETRY_BASE_MS: "5" };
export const FAST_TRACK = { minIntervalMs: 20, maxIntervalMs: 200 };

export interface Sb extends Sandbox {
  stats(): Promise<SandboxStats>;
  /** available_points of the organization, read through the API (which settles ended tasks). */
  available(): Promise<number>;
  /** Total points (remaining) of the organization: what success has not yet deducted. */
  total(): Promise<number>;
  /** Waits until no points are reserved any more (every task ended), then returns the balance. */
  settledTotal(): Promise<number>;
  faults(body: Record<string, unknown>): Promise<void>;
}

export interface SandboxStats {
  requests: Record<string, number>;
  tasks_created: { video: number; speech: number };
  idempotent_replays: number;
}

export async function sandbox(options: SandboxOptions = {}): Promise<Sb> {
  const s = await startSandbox({
    port: 0,
    timeScale: 0.002,
    allowPrivateUrls: true,
    keys: [`${KEY}=${ORG}`, `${OTHER_KEY}=${ORG}`],
    ...options,
  });
  const summary = async () =>
    (await call(s.url, "GET", "/vid/v2/query/point_usage_summary", { key: KEY })).body as {
      total_points: number;
      reserved_points: number;
      available_points: number;
    };
  return Object.assign(s, {
    stats: async () => (await call(s.url, "GET", "/_sandbox/stats", { key: null })).body as SandboxStats,
    available: async () => (await summary()).available_points,
    total: async () => (await summary()).total_points,
    async settledTotal() {
      const deadline = Date.now() + 10_000;
      for (;;) {
        const sum = await summary();
        if (sum.reserved_points === 0) return sum.total_points;
        if (Date.now() > deadline) throw new Error(`points still reserved: ${JSON.stringify(sum)}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async faults(body: Record<string, unknown>) {
      const res = await call(s.url, "POST", "/_sandbox/faults", { key: null, body });
      if (res.status !== 200) throw new Error(`faults: ${res.status} ${JSON.stringify(res.body)}`);
    },
  });
}

export const created = (st: SandboxStats) => st.tasks_created.video + st.tasks_created.speech;

export interface Shot {
  id: string;
  prompt: string;
  [field: string]: unknown;
}
export interface Line {
  id: string;
  text: string;
  [field: string]: unknown;
}

export interface ManifestSpec {
  name?: string;
  budget?: number;
  shots?: Shot[];
  lines?: Line[];
}

/** A manifest as the brief sketches it: 768P 4 s shots (40 points), preset-voice lines. */
export function manifestText(spec: ManifestSpec): string {
  return stringify({
    name: spec.name ?? "ep01",
    output: "./out",
    ...(spec.budget !== undefined ? { budget: { max_points: spec.budget } } : {}),
    defaults: {
      shot: { model: "Vid-H3", resolution: "768P", duration: 4, ratio: "16:9" },
      line: { language: "EN", voice: "preset:en_female_bright" },
    },
    ...(spec.shots ? { shots: spec.shots } : {}),
    ...(spec.lines ? { lines: spec.lines } : {}),
  });
}

export interface Workspace {
  dir: string;
  /** Writes (or rewrites) `name` in the workspace; returns its path. */
  manifest(spec: ManifestSpec, name?: string): Promise<string>;
  write(name: string, text: string): Promise<string>;
  /** The run's output folder: `<dir>/out/<run name>`. */
  out(runName?: string): string;
  statePath(runName?: string): string;
  journal(runName?: string): Promise<Array<Record<string, any>>>;
  remove(): Promise<void>;
}

export async function workspace(): Promise<Workspace> {
  const t = await tempDir("clapper-run-");
  const write = async (name: string, text: string) => {
    const p = join(t.path, name);
    await writeFile(p, text);
    return p;
  };
  const statePath = (runName = "ep01") => join(t.path, ".clapper", runName, "state.jsonl");
  return {
    dir: t.path,
    manifest: (spec, name = "manifest.yaml") => write(name, manifestText(spec)),
    write,
    out: (runName = "ep01") => join(t.path, "out", runName),
    statePath,
    async journal(runName) {
      const text = await readFile(statePath(runName), "utf8");
      return text
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => JSON.parse(l));
    },
    remove: () => rm(t.path, { recursive: true, force: true }),
  };
}

/** A pino logger writing JSON lines into memory. */
export function capture(level: LogLevel = "debug") {
  const chunks: string[] = [];
  const logger = createLogger(level, {
    write(msg: string) {
      chunks.push(msg);
    },
  });
  return {
    logger,
    text: () => chunks.join(""),
    lines: (): Array<Record<string, any>> =>
      chunks
        .join("")
        .split("\n")
        .filter((l) => l.trim() !== "")
        .map((l) => JSON.parse(l)),
  };
}

export interface InProcess {
  /** The run's outcome, with the exit code the CLI would end with for it. */
  outcome: RunOutcome & { exitCode: number };
  logs: ReturnType<typeof capture>;
}

/** `run()` against the sandbox with its own clients and gate; fast tracking, fast HTTP retries. */
export async function runIn(
  s: Sandbox,
  manifest: string,
  extra: Partial<Omit<RunOptions, "clients" | "logger" | "exitCodeOf">> & {
    key?: string;
    allowPrivateUrls?: boolean;
  } = {},
): Promise<InProcess> {
  const logs = capture();
  const { key = KEY, allowPrivateUrls, ...options } = extra;
  const gate = (options.gate as ServiceGate | undefined) ?? new ServiceGate(options.limits ?? DEFAULT_LIMITS);
  const clients = createClients({
    baseUrl: s.url,
    apiKey: key,
    logger: logs.logger,
    gate,
    policies: retryPoliciesFromEnv(RETRY_ENV),
    ...(allowPrivateUrls ? { allowPrivateUrls } : {}),
  });
  try {
    const outcome = await run({
      manifest,
      clients,
      gate,
      logger: logs.logger,
      env: {},
      exitCodeOf,
      ...options,
      track: { ...FAST_TRACK, ...options.track },
    });
    return { outcome: { ...outcome, exitCode: exitCodeOf(outcome.end) }, logs };
  } finally {
    await clients.close();
    if (!options.gate) await gate.stop();
  }
}

export interface CliResult {
  code: number;
  out: string;
  err: string;
  logs: ReturnType<typeof capture>;
}

/** The CLI as a user runs it, against the sandbox, with a captured logger. */
export async function cli(
  s: Sandbox | undefined,
  argv: string[],
  env: Record<string, string> = {},
  level: LogLevel = "info",
): Promise<CliResult> {
  const out: string[] = [];
  const err: string[] = [];
  const logs = capture(level);
  const code = await main(argv, {
    env: {
      ...RETRY_ENV,
      ...(s ? { CLAPPER_BASE_URL: s.url, CLAPPER_API_KEY: KEY } : {}),
      ...env,
    },
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    logger: logs.logger,
  });
  return { code, out: out.join("\n"), err: err.join("\n"), logs };
}

/** Every file under `dir`, recursively (absolute paths). */
export async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

export const job = (outcome: RunOutcome, id: string) => {
  const found = outcome.report?.jobs.find((j) => j.id === id);
  if (!found) throw new Error(`no job ${id} in the report`);
  return found;
};

/** A sandbox and a workspace for one test, both cleaned up when it ends. */
export async function setup(options: SandboxOptions = {}): Promise<{ s: Sb; w: Workspace }> {
  const s = await sandbox(options);
  const w = await workspace();
  onTestFinished(async () => {
    await s.close();
    await w.remove();
  });
  return { s, w };
}

/** Requests by method, e.g. `posts(stats)` counts every POST the sandbox answered or refused. */
export const posts = (st: SandboxStats) =>
  Object.entries(st.requests)
    .filter(([template]) => template.startsWith("POST "))
    .reduce((sum, [, n]) => sum + n, 0);

export const sha256 = async (path: string) =>
  createHash("sha256")
    .update(await readFile(path))
    .digest("hex");
