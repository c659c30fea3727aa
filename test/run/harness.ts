// Black-box harness for the crash and process tests: the sandbox and the runner each run as their
// own process (`node bin/clapper.js ...`), so a SIGKILL is a real kill, and every check is made
// from outside: the sandbox's stats and balance, the files on disk, report.json and the journal.
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync, readdirSync, statSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { Report } from "../../src/report/model.js";
import {
  applyRecord,
  initialState,
  type JobStatus,
  type RunRecord,
  type RunState,
} from "../../src/state/run-state.js";

export const ROOT = fileURLToPath(new URL("../../", import.meta.url));
export const BIN = join(ROOT, "bin/clapper.js");
/** The compiled CLI in one file, which bin/clapper.js loads when it is current (bin/load.js). */
export const BUNDLE = join(ROOT, "dist/cli/clapper.cjs");
export const KEY = "sk-ml-crash";

/**
 * Source files whose compiled twin in dist/ is missing or older: the CLI under test would be stale.
 * The bundle that bin/clapper.js runs (dist/cli/clapper.cjs, the second step of `npm run build`)
 * holds every module: it is listed as stale when it is missing or older than any source file.
 */
export function staleBuild(): string[] {
  const stale: string[] = [];
  let newest = 0;
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".ts")) {
        const source = statSync(path).mtimeMs;
        newest = Math.max(newest, source);
        const out = join(ROOT, "dist", relative(join(ROOT, "src"), path)).replace(/\.ts$/, ".js");
        if (!existsSync(out) || statSync(out).mtimeMs < source) stale.push(relative(ROOT, path));
      }
    }
  };
  walk(join(ROOT, "src"));
  if (!existsSync(BUNDLE) || statSync(BUNDLE).mtimeMs < newest) stale.push(relative(ROOT, BUNDLE));
  return stale;
}

// ---------------------------------------------------------------------------------------------
// randomness that can be replayed: the seed is printed with every failure
// ---------------------------------------------------------------------------------------------

export { seeded as rng } from "../../src/sandbox/random.js";

// ---------------------------------------------------------------------------------------------
// the sandbox, as its own process
// ---------------------------------------------------------------------------------------------

export interface Stats {
  requests: Record<string, number>;
  tasks_created: { video: number; speech: number };
  idempotent_replays: number;
}

export interface Balance {
  total_points: number;
  reserved_points: number;
  available_points: number;
}

export interface SandboxProcess {
  url: string;
  stats(): Promise<Stats>;
  balance(): Promise<Balance>;
  /** Makes every video result `bytes` bigger (0: back to normal). */
  pad(bytes: number): Promise<void>;
  close(): Promise<void>;
}

export async function startSandbox(timeScale: number, extraArgs: string[] = []): Promise<SandboxProcess> {
  const child = spawn(
    process.execPath,
    [
      BIN,
      "sandbox",
      "--port",
      "0",
      "--time-scale",
      String(timeScale),
      "--allow-private-urls",
      "--key",
      KEY,
      ...extraArgs,
    ],
    { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
  );
  let errors = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    errors += d;
  });
  const first = await new Promise<string>((resolve, reject) => {
    const lines = createInterface({ input: child.stdout });
    lines.once("line", resolve);
    child.once("exit", (code) =>
      reject(new Error(`the sandbox exited (${code}) before listening: ${errors}`)),
    );
  });
  const match = /^clapper sandbox listening on (http:\/\/127\.0\.0\.1:\d+)$/.exec(first);
  if (!match?.[1]) {
    child.kill("SIGKILL");
    throw new Error(`unexpected first line from the sandbox: ${first}`);
  }
  const url = match[1];
  const get = async <T>(path: string, key?: string): Promise<T> => {
    const res = await fetch(`${url}${path}`, key ? { headers: { authorization: `Bearer ${key}` } } : {});
    if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
    return (await res.json()) as T;
  };
  return {
    url,
    stats: () => get<Stats>("/_sandbox/stats"),
    balance: () => get<Balance>("/vid/v2/query/point_usage_summary", KEY),
    async pad(bytes) {
      const res = await fetch(`${url}/_sandbox/media`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ video_pad_bytes: bytes }),
      });
      if (!res.ok) throw new Error(`/_sandbox/media: HTTP ${res.status}`);
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** What a stretch of activity did at the sandbox, from two stats readings. */
export function statsDelta(before: Stats, after: Stats) {
  const creates = (s: Stats) =>
    (s.requests["POST /vid/v2/video_generation"] ?? 0) + (s.requests["POST /audio/v1/speech/jobs"] ?? 0);
  return {
    video: after.tasks_created.video - before.tasks_created.video,
    speech: after.tasks_created.speech - before.tasks_created.speech,
    tasks:
      after.tasks_created.video +
      after.tasks_created.speech -
      before.tasks_created.video -
      before.tasks_created.speech,
    createRequests: creates(after) - creates(before),
    replays: after.idempotent_replays - before.idempotent_replays,
  };
}

/** Balance once no task holds a reservation any more (every task of the iteration has ended). */
/** The deepest the committed points (reserved and spent) went below `from`, sampled every 15 ms. */
export function watchCommitted(sb: SandboxProcess, from: Balance) {
  let deepest = 0;
  let on = true;
  const loop = (async () => {
    while (on) {
      const b = await sb.balance().catch(() => undefined);
      if (b) deepest = Math.max(deepest, from.available_points - b.available_points);
      await new Promise((r) => setTimeout(r, 15));
    }
  })();
  return {
    async stop() {
      on = false;
      await loop;
      return deepest;
    },
  };
}

export async function settledBalance(sb: SandboxProcess, timeoutMs = 5000): Promise<Balance> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const b = await sb.balance();
    if (b.reserved_points === 0 || Date.now() > deadline) return b;
    await new Promise((r) => setTimeout(r, 20));
  }
}

// ---------------------------------------------------------------------------------------------
// the runner, as its own process
// ---------------------------------------------------------------------------------------------

export interface LogEvent {
  event?: string;
  job?: string;
  status?: string;
  task_id?: string;
  msg?: string;
  [key: string]: unknown;
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  events: LogEvent[];
  stdout: string;
  /** stderr lines that are not JSON log lines (messages for people). */
  messages: string[];
  ms: number;
  /** When the first log event arrived, in milliseconds after the start (undefined: none). */
  firstEventMs: number | undefined;
}

export interface CliProcess {
  child: ChildProcess;
  events: LogEvent[];
  /** Resolves on the first log event for which `test` holds (rejects if the process ends first). */
  when(test: (e: LogEvent) => boolean): Promise<LogEvent>;
  done: Promise<CliResult>;
}

export interface CliOptions {
  cwd: string;
  env?: Record<string, string>;
  /** Sends the returned signal as soon as a log event asks for it (synchronously, on the line); each signal once. */
  on?: (e: LogEvent, events: readonly LogEvent[]) => NodeJS.Signals | undefined;
  /** Sends the signal `on` asked for this many milliseconds later instead. */
  onDelayMs?: number;
  /** SIGKILL after this many milliseconds (if still running). */
  killAfterMs?: number;
}

export function cliEnv(sb: SandboxProcess): Record<string, string> {
  return { CLAPPER_BASE_URL: sb.url, CLAPPER_API_KEY: KEY, CLAPPER_RETRY_BASE_MS: "5" };
}

/** Starts `node bin/clapper.js ARGS` and follows its JSON log on stderr line by line. */
export function cli(args: string[], options: CliOptions): CliProcess {
  const started = Date.now();
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, ...options.env };
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: options.cwd,
    env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const events: LogEvent[] = [];
  const messages: string[] = [];
  const waiters: Array<{
    test: (e: LogEvent) => boolean;
    resolve: (e: LogEvent) => void;
    reject: (e: Error) => void;
  }> = [];
  let stdout = "";
  child.stdout?.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
  });
  // Each signal goes once: a second SIGTERM or SIGINT is the forced stop (exit at once, temporary
  // files left for the next run to sweep), another story than the one a test sets out to tell.
  const sent = new Set<NodeJS.Signals>();
  let firstEventMs: number | undefined;
  const send = (signal: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
  };
  const timer =
    options.killAfterMs !== undefined ? setTimeout(() => send("SIGKILL"), options.killAfterMs) : undefined;
  createInterface({ input: child.stderr as NodeJS.ReadableStream }).on("line", (line) => {
    let event: LogEvent | undefined;
    if (line.startsWith("{")) {
      try {
        event = JSON.parse(line) as LogEvent;
      } catch {
        event = undefined;
      }
    }
    if (!event) {
      messages.push(line);
      return;
    }
    if (events.length === 0) firstEventMs = Date.now() - started;
    events.push(event);
    if (options.on && !sent.has("SIGKILL")) {
      const signal = options.on(event, events);
      if (signal && !sent.has(signal)) {
        sent.add(signal);
        if (options.onDelayMs) setTimeout(() => send(signal), options.onDelayMs);
        else send(signal);
      }
    }
    for (const w of [...waiters]) {
      if (w.test(event)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(event);
      }
    }
  });
  const done = new Promise<CliResult>((resolve) => {
    child.once("close", (code, signal) => {
      if (timer) clearTimeout(timer);
      for (const w of waiters.splice(0)) w.reject(new Error(`the process ended (${code ?? signal}) first`));
      resolve({ code, signal, events, stdout, messages, ms: Date.now() - started, firstEventMs });
    });
  });
  return {
    child,
    events,
    done,
    when(test) {
      const found = events.find(test);
      if (found) return Promise.resolve(found);
      return new Promise((resolve, reject) => waiters.push({ test, resolve, reject }));
    },
  };
}

// ---------------------------------------------------------------------------------------------
// manifests, state and outputs
// ---------------------------------------------------------------------------------------------

export interface ManifestOptions {
  /** Adds `[sandbox:slow]` to every prompt and text. */
  slow?: boolean;
  /** Only the shots (video jobs), e.g. for cancelling tasks in flight. */
  shotsOnly?: boolean;
  /** Only the lines (speech jobs): one service, so every create is sent before any look at a task. */
  linesOnly?: boolean;
  /** Extra narration lines (heavy journals). */
  extraLines?: number;
}

export const SHOT_IDS = ["shot/s01", "shot/s02", "shot/s03"];
export const LINE_IDS = ["line/n01", "line/n02", "line/n03"];

/** Three shots and three lines of differing prices, in the `jobs/` style. */
export function manifestYaml(name: string, o: ManifestOptions = {}): string {
  const m = o.slow ? " [sandbox:slow]" : "";
  const lines = [
    `name: ${name}`,
    "output: ./output",
    "defaults:",
    '  shot: { model: Vid-H3, resolution: 480P, duration: 4, ratio: "16:9" }',
    '  line: { language: EN, voice: "preset:en_female_bright" }',
  ];
  if (!o.linesOnly) {
    lines.push(
      "shots:",
      `  - { id: s01, prompt: "Wide shot: a lighthouse on a cliff at dusk${m}" }`,
      `  - { id: s02, prompt: "The lamp room, the lens starts to turn${m}", resolution: 768P }`,
      `  - { id: s03, prompt: "Waves break on the rocks below${m}", duration: 6 }`,
    );
  }
  if (!o.shotsOnly) {
    lines.push(
      "lines:",
      `  - { id: n01,${o.linesOnly ? "" : " shot: s01,"} text: "Every night, the light came on at seven.${m}" }`,
      `  - { id: n02,${o.linesOnly ? "" : " shot: s02,"} text: "And every night, someone was watching.${m}", speed: 0.9 }`,
      `  - { id: n03, text: "The sea was calm.${m}" }`,
    );
    for (let i = 1; i <= (o.extraLines ?? 0); i++) {
      lines.push(`  - { id: x${String(i).padStart(3, "0")}, text: "Line number ${i} of the long night." }`);
    }
  }
  return `${lines.join("\n")}\n`;
}

export interface Workspace {
  name: string;
  dir: string;
  manifest: string;
  statePath: string;
  outputDir: string;
  reportPath: string;
  remove(): Promise<void>;
}

/** A temporary folder holding `NAME.yaml`; state and output at their default places beside it. */
export async function workspace(
  name: string,
  o: ManifestOptions | { text: string } = {},
): Promise<Workspace> {
  const dir = await mkdtemp(join(tmpdir(), "clapper-crash-"));
  const manifest = join(dir, `${name}.yaml`);
  await writeFile(manifest, "text" in o ? o.text : manifestYaml(name, o));
  return {
    name,
    dir,
    manifest,
    statePath: join(dir, ".clapper", name, "state.jsonl"),
    outputDir: join(dir, "output", name),
    reportPath: join(dir, "output", name, "reports", "report.json"),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}

export async function readReport(ws: Workspace): Promise<Report> {
  return JSON.parse(await readFile(ws.reportPath, "utf8")) as Report;
}

/** The journal's records as the runner would replay them (a torn last line left out). */
export async function journalRecords(path: string): Promise<RunRecord[]> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch {
    return [];
  }
  const records: RunRecord[] = [];
  const parts = text.split("\n");
  // The part after the last newline is a line still being written (or torn): not a record yet.
  for (const line of parts.slice(0, -1)) {
    if (line.trim() === "") continue;
    records.push(JSON.parse(line) as RunRecord);
  }
  return records;
}

/** The state the journal holds, through the runner's own reducer. */
export function replay(records: readonly RunRecord[]): RunState {
  const state = initialState();
  for (const r of records) {
    if ((r as { t: string }).t === "snapshot")
      Object.assign(state, (r as unknown as { state: RunState }).state);
    else applyRecord(state, r);
  }
  return state;
}

export type Phase = "before-create" | "after-create" | "download" | "report" | "finished";

/**
 * Where a killed run stood, from its journal: the moments the crash tests must cover. Several
 * can hold at once (one job downloading while another is being created).
 */
export function phasesAt(state: RunState, jobIds: readonly string[]): Set<Phase> {
  const phases = new Set<Phase>();
  if (state.run?.finished_at !== undefined) return new Set(["finished"]);
  const statuses: JobStatus[] = jobIds.map((id) => state.jobs[id]?.status ?? "pending");
  if (statuses.some((s) => s === "pending" || s === "submitting")) phases.add("before-create");
  if (statuses.some((s) => s === "running")) phases.add("after-create");
  if (statuses.some((s) => s === "collecting")) phases.add("download");
  if (statuses.every((s) => s === "stored")) phases.add("report");
  return phases;
}

/** Intents whose create may or may not have reached the service: a resumed run re-sends them. */
export function unsureCreates(state: RunState): number {
  let n = 0;
  for (const job of Object.values(state.jobs)) {
    const last = job.attempts.at(-1);
    if (last && last.spent === undefined && last.taskId === undefined) n += 1;
  }
  return n;
}

export async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** Every file under `dir` whose name says it is a temporary left by a writer. */
export function leftovers(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const found: string[] = [];
  const walk = (d: string) => {
    for (const entry of readdirSync(d, { withFileTypes: true })) {
      const path = join(d, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith(".partial")) found.push(relative(dir, path));
    }
  };
  walk(dir);
  return found;
}

/** Each report output checked on disk: present, of the recorded size and hash. */
export async function verifyOutputs(report: Report): Promise<Array<{ id: string; problem: string }>> {
  const problems: Array<{ id: string; problem: string }> = [];
  for (const job of report.jobs) {
    if (!job.output) {
      problems.push({ id: job.id, problem: "no output in the report" });
      continue;
    }
    if (!existsSync(job.output.uri)) {
      problems.push({ id: job.id, problem: `missing ${job.output.uri}` });
      continue;
    }
    const size = statSync(job.output.uri).size;
    if (size !== job.output.bytes)
      problems.push({ id: job.id, problem: `${size} bytes, report says ${job.output.bytes}` });
    const sha = await sha256File(job.output.uri);
    if (sha !== job.output.sha256)
      problems.push({ id: job.id, problem: `sha256 ${sha}, report says ${job.output.sha256}` });
  }
  return problems;
}

/** Two narration lines, the second's text given: the manifest the versions' kill tests edit. */
export const twoLines = (n02: string) =>
  [
    "name: ep",
    "output: ./output",
    "defaults:",
    '  line: { language: EN, voice: "preset:en_female_bright" }',
    "lines:",
    '  - { id: n01, text: "Every night, the light came on at seven." }',
    `  - { id: n02, text: "${n02}" }`,
    "",
  ].join("\n");
