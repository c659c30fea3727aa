// `clapper run|status|report|cancel MANIFEST`: the run itself and the commands that read its state.

import { mkdir } from "node:fs/promises";
import { isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { dirname, join } from "node:path";
import type { Logger } from "pino";
import { ConnectionError, isUnavailable } from "../../../api/errors.js";
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
import { formatProblems, type Problem } from "../../../manifest/problems.js";
import { checkOwner, type LocatedRun, locateRun } from "../../../pipeline/locate.js";
import { buildReport, type Report, writeReports } from "../../../pipeline/report.js";
import { type MaxFailures, outputs, type Progress, type RunOutcome, run } from "../../../pipeline/run.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import { OutputError } from "../../../sinks/sink.js";
import type { ConnectionArgs, connect } from "../../config.js";
import { ExitError, fsExit, isFsError } from "../../errors.js";
import type { LogFormat } from "../../logger.js";
import { type Outcome, table } from "../../output.js";
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
export async function locate(
  manifestPath: string,
  cwd: string,
  opts: { state?: string | undefined },
): Promise<LocatedRun> {
  let found: Awaited<ReturnType<typeof locateRun>>;
  try {
    found = await locateRun({ manifest: manifestPath, cwd, ...(opts.state ? { state: opts.state } : {}) });
  } catch (error) {
    if (isFsError(error)) throw fsExit(error, { action: "read the manifest", path: manifestPath });
    throw error;
  }
  if (!found.ok) throw manifestExit(manifestPath, found.errors, found.warnings);
  return found.run;
}

/** Exit 2 for a manifest with errors: the problems travel with it (JSON, annotations, stderr). */
export function manifestExit(
  path: string,
  errors: readonly Problem[],
  warnings: readonly Problem[],
): ExitError {
  const n = errors.length;
  return new ExitError(2, `${path}: ${n} error${n === 1 ? "" : "s"}; nothing was done`, {
    problems: [...errors, ...warnings],
  });
}

/** The state, checked to belong to this manifest. */
async function ownState(located: LocatedRun): Promise<RunState> {
  const state = await readState(located.statePath);
  const owner = checkOwner(state, located);
  if (owner.refuse) throw new ExitError(2, owner.refuse);
  return state;
}

/** Reads the state without writing to it: a run may be appending right now. A missing file is a run never made. */
async function readState(statePath: string): Promise<RunState> {
  try {
    return await Journal.read<RunState, RunRecord>({
      path: statePath,
      initial: initialState,
      apply: applyRecord,
    });
  } catch (error) {
    if (isFsError(error)) {
      throw fsExit(error, {
        action: "read the run's state",
        path: statePath,
        hint: error.code === "ENOTDIR" || error.code === "EISDIR" ? "pass --state FILE" : undefined,
      });
    }
    throw error;
  }
}

/** No run was ever made from this state: nothing was recorded. */
function neverRun(state: RunState): boolean {
  return state.run === undefined && Object.keys(state.jobs).length === 0;
}

/** `status` of a manifest never run: the report's shape, its jobs pending, `run.status` "not-run". */
export type StatusReport = Omit<Report, "run"> & {
  run: Omit<Report["run"], "status" | "started_at"> & {
    status: Report["run"]["status"] | "not-run";
    started_at: string | null;
  };
};

export async function status(o: {
  manifest: string;
  cwd: string;
  state?: string | undefined;
}): Promise<StatusReport> {
  const located = await locate(o.manifest, o.cwd, o);
  const { loaded, manifest } = located;
  const state = await ownState(located);
  const report = buildReport({
    state,
    jobs: loaded.jobs,
    manifest: manifest.display,
    name: manifest.name,
    interrupted: state.run?.finished_at === undefined && state.run !== undefined,
  });
  if (!neverRun(state)) return report;
  return {
    ...report,
    run: { ...report.run, status: "not-run", started_at: null, finished_at: null },
    note: `not run yet: clapper run ${manifest.display} starts it`,
  };
}

export async function rewriteReport(o: {
  manifest: string;
  cwd: string;
  state?: string | undefined;
  output?: string | undefined;
  s3?: S3ClientOptions;
  env: NodeJS.ProcessEnv;
}) {
  const located = await locate(o.manifest, o.cwd, o);
  const { loaded, manifest, statePath } = located;
  // Before any lock: a run never made has no folder to lock in, and nothing to report.
  if (neverRun(await readState(statePath))) {
    throw new ExitError(
      2,
      `no run of ${manifest.name} yet: nothing to report; run clapper run ${manifest.display} first`,
    );
  }
  let lock: Awaited<ReturnType<typeof acquireLock>>;
  try {
    lock = await acquireLock(`${statePath}.lock`);
  } catch (error) {
    if (error instanceof LockHeldError) throw new ExitError(5, error.message);
    if (isFsError(error)) {
      throw fsExit(error, { action: "take the run's lock", path: `${statePath}.lock` });
    }
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
    // The run appended the GitHub step summary already: writing the reports again does not append
    // it a second time.
    let uris: string[];
    try {
      uris = await writeReports(sink, report, o.env, { stepSummary: false });
    } catch (error) {
      if (isFsError(error)) {
        throw fsExit(error, {
          action: "write the reports in",
          path: sink.uri("reports"),
          hint: "give this user write access there, or pass --output DIR to write them elsewhere",
        });
      }
      if (error instanceof OutputError) throw new ExitError(error.unreachable ? 6 : 2, error.message);
      throw error;
    }
    return { report, uris };
  } finally {
    await lock.release();
  }
}

export interface CancelRow {
  job: string;
  task_id: string;
  status: string;
  /** The service refused to cancel it (the command then exits 1). */
  failed?: boolean;
}

/**
 * Cancels the run's tasks that have not ended; the next run records what became of them. The
 * services are connected only when there is something to cancel.
 */
export async function cancelRun(o: {
  manifest: string;
  cwd: string;
  state?: string | undefined;
  connect: (located: LocatedRun) => Promise<Pick<Clients, "video" | "speech"> & { close(): Promise<void> }>;
  signal?: AbortSignal;
}): Promise<{ rows: CancelRow[]; never: boolean }> {
  const located = await locate(o.manifest, o.cwd, o);
  const state = await ownState(located);
  const open = Object.values(state.jobs).flatMap((job) => {
    const attempt = openAttempt(job);
    return attempt?.taskId ? [{ job, taskId: attempt.taskId }] : [];
  });
  if (open.length === 0) return { rows: [], never: neverRun(state) };
  const clients = await o.connect(located);
  const results: CancelRow[] = [];
  try {
    const opts = o.signal ? { signal: o.signal } : {};
    for (const { job, taskId } of open) {
      try {
        const res =
          job.kind === "video"
            ? await clients.video.cancelTask(taskId, opts)
            : await clients.speech.cancelTask(taskId, opts);
        results.push({ job: job.id, task_id: taskId, status: res.status });
      } catch (error) {
        // The service cannot be reached or will not serve: no other task will fare better; say so
        // at the top (exit 6).
        if (error instanceof ConnectionError || isUnavailable(error)) throw error;
        results.push({
          job: job.id,
          task_id: taskId,
          status: `not cancelled: ${(error as Error).message}`,
          failed: true,
        });
      }
    }
  } finally {
    await clients.close();
  }
  return { rows: results, never: false };
}

export function renderStatus(r: StatusReport): string {
  const c = r.counts;
  const head =
    r.run.status === "not-run"
      ? `run ${r.run.name}: not run yet (${c.total} jobs planned; clapper run ${r.run.manifest} starts it)`
      : `run ${r.run.name}: ${r.run.status} (${c.total} jobs: ${c.succeeded} succeeded, ${c.skipped} skipped, ${c.failed} failed, ${c.cancelled} cancelled, ${c.pending} pending; ${r.points.spent} points spent)`;
  return [
    head,
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
  "sandbox-time-scale": number;
  "break-lock": boolean;
  "max-result-mb"?: number | undefined;
  "allow-private-urls": boolean;
  "give-up-after": number;
  "max-failures"?: MaxFailures | undefined;
  deadline?: Date | undefined;
}

export interface RunCommandIo {
  args: RunArgs;
  global: ConnectionArgs & { json: boolean; "sandbox-state"?: string | undefined };
  env: NodeJS.ProcessEnv;
  signal: AbortSignal;
  /** The log format chosen (flag, variable, or by the terminal). */
  format: LogFormat;
  /** Makes the run's logger; `writeLine` takes the pretty lines when a live display shows. */
  logger: (writeLine?: (line: string) => void) => Logger;
  /** Opens the services (the CLI's one way to connect, which remembers the address for messages). */
  connect: typeof connect;
}

function onlyIds(only: string): string[] {
  return only
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** `clapper run`: flags to options, the run, then its outcome (printed by main.ts). */
export async function runCommand(o: RunCommandIo): Promise<Outcome> {
  const { args, global } = o;
  const cwd = process.cwd();
  // With pretty logs, the live display shows the run (redrawn in place on a terminal, a status line
  // now and then elsewhere); log lines print above its status line.
  const display = o.format === "pretty" ? new ProgressDisplay(process.stderr, { env: o.env }) : undefined;
  const logger = o.logger(display ? (line) => display.log(line) : undefined);
  const limits = { rps: args.rps, inFlight: args["in-flight"] };
  const gate = new ServiceGate({ video: limits, speech: limits });
  try {
    // Located once, before anything is connected: the sandbox's state lives beside the run's.
    let found: Awaited<ReturnType<typeof locateRun>>;
    try {
      found = await locateRun({ manifest: args.manifest, cwd, ...(args.state ? { state: args.state } : {}) });
    } catch (error) {
      if (isFsError(error)) throw fsExit(error, { action: "read the manifest", path: args.manifest });
      throw error;
    }
    if (!found.ok) return manifestOutcome(args.manifest, found.errors, found.warnings);
    const located = found.run;
    const statePath = located.statePath;
    try {
      await mkdir(dirname(statePath), { recursive: true });
    } catch (error) {
      throw fsExit(error, {
        action: "create the state folder",
        path: dirname(statePath),
        hint: "pass --state FILE in a writable place, or run from a writable folder",
      });
    }
    const conn = await o.connect(global, o.env, logger, {
      gate,
      ...(args["allow-private-urls"] ? { allowPrivateUrls: true } : {}),
      ...(global.sandbox
        ? {
            sandboxStateFile: global["sandbox-state"] ?? sandboxStatePath(statePath),
            sandboxTimeScale: args["sandbox-time-scale"],
          }
        : {}),
    });
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
        ...(args.only ? { only: onlyIds(args.only) } : {}),
        ...(args["max-failures"] ? { maxFailures: args["max-failures"] } : {}),
        ...(args.deadline ? { deadline: args.deadline } : {}),
        ...(display ? { onProgress: (p: Progress) => display.update(p) } : {}),
      });
      display?.done();
      return runOutcome(outcome, o.format, args.manifest);
    } finally {
      await conn.close();
    }
  } finally {
    display?.done();
    await gate.stop();
  }
}

/** Where `--sandbox` keeps the emulator's state for a run: beside the run's state. */
export function sandboxStatePath(statePath: string): string {
  return join(dirname(statePath), "sandbox.json");
}

function manifestOutcome(path: string, errors: readonly Problem[], warnings: readonly Problem[]): Outcome {
  const n = errors.length;
  return {
    code: 2,
    message: `${path}: ${n} error${n === 1 ? "" : "s"}; nothing was submitted`,
    notes: [`${n} error${n === 1 ? "" : "s"}:`, ...formatProblems(errors).map((line) => `  ${line}`)],
    problems: [...errors, ...warnings],
  };
}

/** The run's outcome as the CLI prints it. */
function runOutcome(outcome: RunOutcome, format: LogFormat, manifestPath: string): Outcome {
  if (outcome.errors && outcome.errors.length > 0) {
    return manifestOutcome(manifestPath, outcome.errors, outcome.warnings ?? []);
  }
  const warnings = outcome.warnings ?? [];
  const notes = format === "pretty" ? formatProblems(warnings).map((line) => `warning: ${line}`) : [];
  // A report or a budget table explains the outcome; otherwise its message does (`clapper: ...`).
  const text = outcome.report || outcome.budget ? renderOutcome(outcome) : "";
  const code = outcome.exitCode;
  const r = outcome.report;
  const message =
    outcome.message ??
    (r
      ? `run ${r.run.name}: ${r.run.status} (${r.counts.failed} failed, ${r.counts.cancelled} cancelled, ${r.counts.pending} pending)`
      : undefined);
  return {
    code,
    ...(r ? { json: r, whole: true } : outcome.budget ? { json: { budget: outcome.budget } } : {}),
    ...(text ? { text, textTo: code === 0 || code === 1 ? ("stdout" as const) : ("stderr" as const) } : {}),
    ...(notes.length > 0 ? { notes } : {}),
    ...(message ? { message } : {}),
    ...(warnings.length > 0 ? { problems: warnings } : {}),
  };
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
