// `clapper run|status|report|cancel MANIFEST`: the run itself and the commands that read its state.

import { mkdir } from "node:fs/promises";
import { isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { dirname, join } from "node:path";
import type { Clients } from "../../../api/index.js";
import { Journal } from "../../../engine/journal.js";
import { ServiceGate } from "../../../engine/limiter.js";
import { acquireLock, LockHeldError } from "../../../engine/lock.js";
import {
  applyRecord,
  initialState,
  openAttempt,
  type RunRecord,
  type RunState,
} from "../../../engine/state.js";
import { formatProblems } from "../../../manifest/problems.js";
import { checkOwner, type LocatedRun, locateRun } from "../../../pipeline/locate.js";
import { buildReport, type Report, writeReports } from "../../../pipeline/report.js";
import { outputs, type RunOutcome, run } from "../../../pipeline/run.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import { type ConnectionArgs, connect } from "../../config.js";
import { ExitError } from "../../errors.js";
import { createLogger, type LogLevel } from "../../logger.js";
import { json, table } from "../../output.js";
import { ProgressDisplay } from "../../progress.js";

export function renderOutcome(o: RunOutcome): string {
  const lines: string[] = [];
  if (o.budget) {
    lines.push(o.message ?? "not enough points");
    lines.push(
      table(o.budget, [
        { header: "", value: (r) => r.what },
        { header: "POINTS", value: (r) => r.points, align: "right" },
      ]),
    );
    return lines.join("\n");
  }
  const r = o.report;
  if (!r) return o.message ?? "";
  const c = r.counts;
  lines.push(`run ${r.run.name}: ${r.run.status}`);
  lines.push(
    `  ${c.total} jobs: ${c.succeeded} succeeded, ${c.skipped} skipped, ${c.failed} failed, ${c.cancelled} cancelled, ${c.pending} pending`,
  );
  lines.push(
    `  points: ${r.points.spent} spent (estimated ${r.points.estimated})${r.points.balance_after !== null ? `, balance now ${r.points.balance_after}` : ""}`,
  );
  for (const j of r.jobs.filter((x) => x.status === "failed" || x.status === "cancelled")) {
    lines.push(`  ${j.status} ${j.id}: ${j.error?.message ?? ""}`);
  }
  if (o.message) lines.push(`  note: ${o.message}`);
  if (o.reportUris?.[0]) lines.push(`  report: ${o.reportUris[0]}`);
  if (o.exitCode === 4) lines.push("  interrupted: state saved; run the same command again to resume");
  return lines.join("\n");
}

/**
 * The run's manifest and state, found as `run` finds them: a manifest with errors has no state
 * (exit 2 with its problems), and a state that belongs to another manifest is not read.
 */
async function locate(manifestPath: string, cwd: string, opts: { state?: string }): Promise<LocatedRun> {
  const found = await locateRun({
    manifest: manifestPath,
    cwd,
    ...(opts.state ? { state: opts.state } : {}),
  });
  if (!found.ok) {
    throw new ExitError(2, formatProblems(found.errors).join("\n") || `cannot read ${manifestPath}`);
  }
  return found.run;
}

/** The state, checked to belong to this manifest. */
async function ownState(located: LocatedRun): Promise<RunState> {
  const state = await readState(located.statePath);
  const owner = checkOwner(state, located);
  if (owner.refuse) throw new ExitError(2, owner.refuse);
  return state;
}

/** Reads the state without writing to it: a run may be appending right now. */
function readState(statePath: string): Promise<RunState> {
  return Journal.read<RunState, RunRecord>({ path: statePath, initial: initialState, apply: applyRecord });
}

export async function status(o: {
  manifest: string;
  cwd: string;
  state?: string;
  output?: string;
}): Promise<Report> {
  const located = await locate(o.manifest, o.cwd, o);
  const { loaded, manifest } = located;
  const state = await ownState(located);
  return buildReport({
    state,
    jobs: loaded.jobs,
    manifest: manifest.display,
    name: manifest.name,
    interrupted: state.run?.finished_at === undefined && state.run !== undefined,
  });
}

export async function rewriteReport(o: {
  manifest: string;
  cwd: string;
  state?: string;
  output?: string;
  s3?: S3ClientOptions;
  env: NodeJS.ProcessEnv;
}) {
  const located = await locate(o.manifest, o.cwd, o);
  const { loaded, manifest, statePath } = located;
  let lock: Awaited<ReturnType<typeof acquireLock>>;
  try {
    lock = await acquireLock(`${statePath}.lock`);
  } catch (error) {
    if (error instanceof LockHeldError) throw new ExitError(5, error.message);
    throw error;
  }
  try {
    const state = await ownState(located);
    const report = buildReport({
      state,
      jobs: loaded.jobs,
      manifest: manifest.display,
      name: manifest.name,
      interrupted: state.run?.finished_at === undefined && state.run !== undefined,
    });
    // The same output as the run's: a folder, or S3.
    const { sink } = outputs(
      { ...(o.output ? { output: o.output } : {}), ...(o.s3 ? { s3: o.s3 } : {}) },
      manifest,
      o.cwd,
    );
    const uris = await writeReports(sink, report, o.env);
    return { report, uris };
  } finally {
    await lock.release();
  }
}

/** Cancels the run's tasks that have not ended; the next run records what became of them. */
export async function cancelRun(o: {
  manifest: string;
  cwd: string;
  state?: string;
  clients: Pick<Clients, "video" | "speech">;
  signal?: AbortSignal;
}) {
  const state = await ownState(await locate(o.manifest, o.cwd, o));
  const results: Array<{ job: string; task_id: string; status: string }> = [];
  for (const job of Object.values(state.jobs)) {
    const attempt = openAttempt(job);
    if (!attempt?.taskId) continue;
    const opts = o.signal ? { signal: o.signal } : {};
    try {
      const res =
        job.kind === "video"
          ? await o.clients.video.cancelTask(attempt.taskId, opts)
          : await o.clients.speech.cancelTask(attempt.taskId, opts);
      results.push({ job: job.id, task_id: attempt.taskId, status: res.status });
    } catch (error) {
      results.push({
        job: job.id,
        task_id: attempt.taskId,
        status: `not cancelled: ${(error as Error).message}`,
      });
    }
  }
  return results;
}

export function renderStatus(r: Report): string {
  const c = r.counts;
  return [
    `run ${r.run.name}: ${r.run.status} (${c.total} jobs: ${c.succeeded} succeeded, ${c.skipped} skipped, ${c.failed} failed, ${c.cancelled} cancelled, ${c.pending} pending; ${r.points.spent} points spent)`,
    "",
    table(r.jobs, [
      { header: "JOB", value: (j) => j.id },
      { header: "KIND", value: (j) => j.kind },
      { header: "STATUS", value: (j) => j.status },
      { header: "POINTS", value: (j) => j.points, align: "right" },
      { header: "TASK", value: (j) => j.task_id },
      { header: "OUTPUT / ERROR", value: (j) => j.output?.uri ?? j.error?.message },
    ]),
  ].join("\n");
}

export interface RunArgs {
  manifest: string;
  output?: string | undefined;
  staging?: string | undefined;
  "s3-endpoint"?: string | undefined;
  "s3-path-style"?: boolean | undefined;
  "callback-url"?: string | undefined;
  "callback-listen"?: string | undefined;
  state?: string | undefined;
  "max-points"?: number | undefined;
  only?: string | undefined;
  "retry-failed": boolean;
  fresh: boolean;
  "max-attempts": number;
  rps: number;
  "in-flight": number;
  "poll-interval": number;
  "log-format"?: "json" | "pretty" | undefined;
  "sandbox-time-scale": number;
  "break-lock": boolean;
  "max-result-mb"?: number | undefined;
  "allow-private-urls": boolean;
  "give-up-after": number;
}

export interface RunCommandIo {
  args: RunArgs;
  global: ConnectionArgs & { json: boolean; "log-level": LogLevel };
  env: NodeJS.ProcessEnv;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  signal: AbortSignal;
  logger?: import("pino").Logger;
}

/** `clapper run`: flags to options, the run, then the outcome on stdout and the exit code. */
export async function runCommand(o: RunCommandIo): Promise<number> {
  const { args, global } = o;
  for (const [flag, value, min] of [
    ["--max-attempts", args["max-attempts"], 1],
    ["--rps", args.rps, 0.1],
    ["--in-flight", args["in-flight"], 1],
    ["--poll-interval", args["poll-interval"], 0.01],
    ["--give-up-after", args["give-up-after"], 0.1],
    ...(args["max-result-mb"] !== undefined ? [["--max-result-mb", args["max-result-mb"], 1] as const] : []),
  ] as const) {
    if (!(Number.isFinite(value) && value >= min))
      throw new ExitError(2, `${flag} must be a number >= ${min}, got ${value}`);
  }
  if (
    args["max-points"] !== undefined &&
    !(Number.isInteger(args["max-points"]) && args["max-points"] >= 0)
  ) {
    throw new ExitError(2, `--max-points must be a whole number >= 0, got ${args["max-points"]}`);
  }
  const cwd = process.cwd();
  const terminal = Boolean(process.stderr.isTTY);
  const format = args["log-format"] ?? (terminal ? "pretty" : "json");
  // JSON logs carry one event per state change, which the info level holds.
  const level = format === "json" && global["log-level"] === "warn" ? "info" : global["log-level"];
  const logger = o.logger ?? createLogger(level);
  const limits = { rps: args.rps, inFlight: args["in-flight"] };
  const gate = new ServiceGate({ video: limits, speech: limits });
  // Located once, before anything is connected: the sandbox's state lives beside the run's.
  const found = await locateRun({
    manifest: args.manifest,
    cwd,
    ...(args.state ? { state: args.state } : {}),
  });
  if (!found.ok) {
    o.stderr(`${found.errors.length} error${found.errors.length === 1 ? "" : "s"}:`);
    for (const line of formatProblems(found.errors)) o.stderr(`  ${line}`);
    return 2;
  }
  const located = found.run;
  const statePath = located.statePath;
  try {
    await mkdir(dirname(statePath), { recursive: true });
  } catch (error) {
    throw new ExitError(
      2,
      `cannot create the state folder ${dirname(statePath)} (${(error as NodeJS.ErrnoException).code ?? error}): pass --state FILE in a writable place`,
    );
  }
  const conn = await connect(global, o.env, logger, {
    gate,
    ...(args["allow-private-urls"] ? { allowPrivateUrls: true } : {}),
    ...(global.sandbox
      ? {
          sandboxStateFile: join(dirname(statePath), "sandbox.json"),
          sandboxTimeScale: args["sandbox-time-scale"],
        }
      : {}),
  });
  const display = format === "pretty" && terminal ? new ProgressDisplay(process.stderr) : undefined;
  try {
    const outcome = await run({
      manifest: args.manifest,
      cwd,
      located,
      clients: conn,
      breakLock: args["break-lock"],
      ...(args["max-result-mb"] !== undefined
        ? { maxResultBytes: Math.floor(args["max-result-mb"] * 1024 * 1024) }
        : {}),
      gate,
      statePath,
      logger,
      signal: o.signal,
      env: o.env,
      maxAttempts: args["max-attempts"],
      retryFailed: args["retry-failed"],
      fresh: args.fresh,
      track: { minIntervalMs: args["poll-interval"] * 1000, giveUpMs: args["give-up-after"] * 1000 },
      ...(args.output ? { output: args.output } : {}),
      ...(args.staging ? { staging: args.staging } : {}),
      ...(args["callback-url"]
        ? { callback: callbackOptions(args["callback-url"], args["callback-listen"]) }
        : {}),
      s3: {
        ...(args["s3-endpoint"] ? { endpoint: args["s3-endpoint"] } : {}),
        ...(args["s3-path-style"] !== undefined ? { forcePathStyle: args["s3-path-style"] } : {}),
      },
      ...(args["max-points"] !== undefined ? { maxPoints: args["max-points"] } : {}),
      ...(args.only
        ? {
            only: args.only
              .split(",")
              .map((s) => s.trim())
              .filter(Boolean),
          }
        : {}),
      ...(display ? { onProgress: (p) => display.update(p) } : {}),
    });
    display?.done();
    if (outcome.errors && outcome.errors.length > 0) {
      o.stderr(`${outcome.errors.length} error${outcome.errors.length === 1 ? "" : "s"}:`);
      for (const line of formatProblems(outcome.errors)) o.stderr(`  ${line}`);
    }
    if (outcome.warnings && outcome.warnings.length > 0 && format === "pretty") {
      for (const line of formatProblems(outcome.warnings)) o.stderr(`warning: ${line}`);
    }
    if (global.json && outcome.report) o.stdout(json(outcome.report));
    else {
      const text = renderOutcome(outcome);
      if (text) (outcome.exitCode === 0 || outcome.exitCode === 1 ? o.stdout : o.stderr)(text);
    }
    return outcome.exitCode;
  } finally {
    display?.done();
    await conn.close();
    await gate.stop();
  }
}

/**
 * Where the callback listener binds when not told: the URL's own address when it is one of this
 * machine's, else loopback (a tunnel or proxy forwards to it). Never every address by default: the
 * listener would answer the whole network.
 */
function defaultListenHost(hostname: string): string {
  const host = hostname.replace(/^\[|\]$/g, "");
  if (isIP(host)) {
    const mine = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
    if (mine.includes(host)) return host;
  }
  return "127.0.0.1";
}

/** `--callback-url` and `--callback-listen [HOST:]PORT` (default: the URL's address if local, else loopback; the URL's port). */
export function callbackOptions(
  url: string,
  listen: string | undefined,
): { url: string; listen: { host: string; port: number } } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ExitError(
      2,
      `--callback-url must be an absolute http or https URL, got ${JSON.stringify(url)}`,
    );
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new ExitError(2, `--callback-url must be an http or https URL, got ${JSON.stringify(url)}`);
  }
  const m = (listen ?? "").match(/^(?:(.+):)?(\d+)$/);
  if (listen !== undefined && !m)
    throw new ExitError(2, `--callback-listen must be [HOST:]PORT, got ${JSON.stringify(listen)}`);
  const port = m ? Number(m[2]) : Number(parsed.port || (parsed.protocol === "https:" ? 443 : 80));
  if (!(port >= 0 && port <= 65535))
    throw new ExitError(2, `--callback-listen port must be 0-65535, got ${port}`);
  return { url, listen: { host: m?.[1] ?? defaultListenHost(parsed.hostname), port } };
}
