// `clapper run MANIFEST`: the run itself, from its flags to its outcome.

import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "pino";
import type { CoordinatorUrl } from "../../../coord/url.js";
import { formatProblems, type Problem } from "../../../manifest/problems.js";
import { startMetrics } from "../../../metrics/index.js";
import { DEFAULT_CEILING_RPS, type RememberedRate } from "../../../rate/controller.js";
import { ServiceGate, type Sharing } from "../../../rate/limiter.js";
import { ratesPath, readRates, writeRates } from "../../../rate/remembered.js";
import type { Report, ReportJob } from "../../../report/model.js";
import { countsText, plural } from "../../../report/words.js";
import { type Progress, type RunOutcome, run, type Seams } from "../../../run/run.js";
import { inShard, type Shard } from "../../../run/shard.js";
import { type RunOptions, runLedgerKey } from "../../../run/types.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import { type LocatedRun, locateRun } from "../../../state/locate.js";
import { isS3State } from "../../../state/location.js";
import { startStep } from "../../../trace.js";
import type { ConnectionArgs, connect } from "../../config.js";
import { ExitError, fsExit, isFsError } from "../../errors.js";
import { ExitCode, exitCodeOf } from "../../exit-code.js";
import type { LogFormat } from "../../logger.js";
import { type Outcome, table } from "../../output.js";
import { ProgressDisplay } from "../../progress.js";
import { chosenShard } from "../flags.js";
import { callbackOptions, checkCallbackHost } from "./callback.js";
import type { RunArgs } from "./command.js";

export { callbackOptions };

import { sandboxStatePath } from "./state.js";

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
  // With --only, the run is about the jobs it selected: the others' failures are not its news.
  const only = r.run.only ? new Set(r.run.only) : undefined;
  lines.push(`run ${r.run.name}: ${r.run.status}`);
  lines.push(`  ${countsText(r.counts)}`);
  if (only) {
    lines.push(
      `  --only: ${plural(only.size, "job")} selected; the others stand as earlier runs left them (a stored result counts as reused)`,
    );
  }
  lines.push(
    `  points: ${r.points.spent} spent (estimated ${r.points.estimated})${r.points.balance_after !== null ? `, balance now ${r.points.balance_after}` : ""}`,
  );
  for (const j of r.jobs.filter((x) => x.status === "failed" || x.status === "cancelled")) {
    if (!only || only.has(j.id)) lines.push(`  ${j.status} ${j.id}: ${j.error?.message ?? ""}`);
  }
  if (o.message) lines.push(`  note: ${o.message}`);
  lines.push(...retryLines(r));
  const pages = (o.reportUris ?? []).filter((u) => /report\.html$/.test(u));
  if (pages[0]) lines.push(`  report: ${pages[0]} (report.json, report.md and junit.xml beside it)`);
  for (const merged of pages.slice(1)) lines.push(`  merged report: ${merged}`);
  if (!pages[0] && o.reportUris?.[0]) lines.push(`  report: ${o.reportUris[0]}`);
  if (o.end === "interrupted") lines.push(...interruptLines(r));
  return lines.join("\n");
}

/** A manifest path as a shell reads it: quoted when it holds anything but plain characters. */
function shellWord(path: string): string {
  return /^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replace(/'/g, "'\\''")}'`;
}

/**
 * After failed jobs, what `--retry-failed` would do: a result that was paid for and not stored is
 * downloaded again through its task at no cost (any run does that); the others get new tasks,
 * each reserved at its estimate.
 */
function retryLines(r: Report): string[] {
  const only = r.run.only ? new Set(r.run.only) : undefined;
  const failed = r.jobs.filter(
    (j) =>
      (j.status === "failed" || j.status === "cancelled") &&
      j.error?.code !== "removed_from_manifest" &&
      (!only || only.has(j.id)),
  );
  if (failed.length === 0) return [];
  const download = failed.filter((j) => j.paid_not_stored);
  const again = failed.filter((j) => !j.paid_not_stored);
  const points = again.reduce((sum, j) => sum + (j.estimated_points ?? 0), 0);
  const unknown = again.some((j) => j.estimated_points === null);
  const about = `about ${points}${unknown ? "+" : ""} points`;
  const parts: string[] = [];
  if (download.length > 0)
    parts.push(
      `downloads again, at no cost, the paid result${download.length === 1 ? "" : "s"} of ${plural(download.length, "job")}${named(download)}`,
    );
  if (again.length > 0)
    parts.push(
      `makes ${again.length === 1 ? "a new task" : "new tasks"} for ${plural(again.length, "job")}${named(again, about)}`,
    );
  return [`  next: clapper run ${shellWord(r.run.manifest)} --retry-failed ${parts.join(" and ")}`];
}

/** A few job ids, named, then `more`: ` (shot/s02, line/n03, about 80 points)`; no ids past three. */
function named(jobs: readonly ReportJob[], more?: string): string {
  const said = [...(jobs.length <= 3 ? jobs.map((j) => j.id) : []), ...(more ? [more] : [])];
  return said.length > 0 ? ` (${said.join(", ")})` : "";
}

/** After an interrupt: what is still running at the service, holding points, and how to stop it. */
function interruptLines(r: Report): string[] {
  let tasks = 0;
  let reserved = 0;
  for (const j of r.jobs) {
    tasks += j.in_flight?.tasks ?? 0;
    reserved += j.in_flight?.reserved_points ?? 0;
  }
  const manifest = shellWord(r.run.manifest);
  if (tasks === 0) return ["  interrupted: state saved; run the same command again to resume"];
  return [
    `  interrupted: state saved; ${plural(tasks, "task is", "tasks are")} still running at the service, holding ${reserved} reserved points`,
    `  run the same command again to follow ${tasks === 1 ? "it" : "them"} and store the results (nothing is paid twice), or clapper cancel ${manifest} to stop ${tasks === 1 ? "it" : "them"}`,
  ];
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
  const limits = {
    rps: args.rps?.rps ?? DEFAULT_CEILING_RPS,
    ...(args.rps?.fixed ? { fixed: true } : {}),
    inFlight: args["in-flight"],
  };
  const gate = new ServiceGate({ video: limits, speech: limits }, { scope: args["rate-scope"] });
  try {
    const shard = chosenShard(args, o.env);
    const found = await locateForRun(args, cwd, shard);
    if ("refused" in found) return found.refused;
    const { located } = found;
    startStep("run located (manifest loaded, state folder made)");
    const statePath = located.statePath;
    if (shard) {
      logger.info(
        { event: "shard", shard: `${shard.index}/${shard.total}`, from: shard.source },
        `shard ${shard.index} of ${shard.total} (${shard.source}): ${located.loaded.jobs.filter((job) => inShard(job, shard)).length} of ${located.loaded.jobs.length} jobs`,
      );
    }
    // Checked before anything is connected: without the coordinator, nothing would lock the state.
    if (isS3State(statePath) && !args.coordinator) {
      return {
        code: ExitCode.Usage,
        message: `--state ${statePath}: a state in S3 is locked through the coordinator (a pod has no disk to keep a lock file on): pass --coordinator redis://HOST:PORT (or set CLAPPER_REDIS_URL); nothing was submitted`,
      };
    }
    if (args["callback-url"]) await checkCallbackHost(args["callback-url"], args["allow-private-urls"]);
    const conn = await o.connect(global, o.env, logger, {
      gate,
      ...(args["allow-private-urls"] ? { allowPrivateUrls: true } : {}),
      ...(global.sandbox
        ? {
            sandboxStateFile: global["sandbox-state"] ?? sandboxStatePath(located),
            sandboxTimeScale: args["sandbox-time-scale"],
          }
        : {}),
    });
    startStep("services connected");
    const rates = await rememberedRates(statePath, s3Settings(args));
    const remembered = await rates.read(conn.account);
    gate.resume(remembered);
    if (Object.keys(remembered).length > 0) {
      const from = Object.entries(remembered)
        .map(([scope, r]) => `${r?.rps}/s ${scope === "key" ? "for the key" : `for ${scope}`}`)
        .join(", ");
      logger.info(
        { event: "rate-start", rates: remembered },
        `starting at the rate the last run found: ${from}`,
      );
    }
    startStep("remembered rates read");
    const lease = leaseFromEnv(o.env);
    if (located.manifest.pool && !args.coordinator) {
      await conn.close();
      return {
        code: ExitCode.Usage,
        message: `${args.manifest}: budget.pool "${located.manifest.pool.name}" is shared by every run that names it, through a coordinator: pass --coordinator redis://HOST:PORT (or set CLAPPER_REDIS_URL); nothing was submitted`,
      };
    }
    let coordinated: Coordinated | undefined;
    if (args.coordinator) {
      try {
        coordinated = await coordinate(args.coordinator, conn.account, located, o.signal, lease);
      } catch (error) {
        await conn.close();
        if (error instanceof ExitError) return { code: error.code, message: error.message };
        throw error;
      }
      gate.share(coordinated.sharing);
    }
    const metrics = await startMetrics({
      file: args["metrics-file"],
      pushgateway: args.pushgateway,
      run: located.manifest.name,
      statePath,
      rates: gate,
      logger,
      env: o.env,
    });
    try {
      const outcome = await metrics.around(run)(
        runOptions(args, {
          cwd,
          located,
          conn,
          gate,
          logger,
          signal: o.signal,
          env: o.env,
          display,
          coordinated,
          lease,
        }),
      );
      display?.done();
      if (shard && coordinated && outcome.finishedCampaign !== undefined) {
        await mergeWhenLast(outcome, { args, cwd, env: o.env, shard, located, coordinated, logger });
      }
      return runOutcome(outcome, o.format, args.manifest);
    } finally {
      await remember(rates, conn.account, gate, logger);
      // Given back in reverse order: the coordinator was taken after the services.
      await coordinated?.close();
      await conn.close();
    }
  } finally {
    display?.done();
    await gate.stop();
  }
}

/** The run's options: its flags, and what the command opened for it. */
function runOptions(
  args: RunArgs,
  opened: {
    cwd: string;
    located: LocatedRun;
    conn: RunOptions["clients"];
    gate: ServiceGate;
    logger: Logger;
    signal: AbortSignal;
    env: NodeJS.ProcessEnv;
    display: ProgressDisplay | undefined;
    coordinated: Coordinated | undefined;
    lease: { leaseMs: number; heartbeatMs: number } | undefined;
  },
): RunOptions {
  const { cwd, located, conn: clients, gate, logger, signal, env, display, coordinated, lease } = opened;
  return {
    manifest: args.manifest,
    cwd,
    located,
    clients,
    exitCodeOf,
    breakLock: args["break-lock"],
    ...(args["max-result-mb"] !== undefined
      ? { maxResultBytes: Math.floor(args["max-result-mb"] * 1024 * 1024) }
      : {}),
    gate,
    statePath: located.statePath,
    logger,
    signal,
    env,
    maxAttempts: args["max-attempts"],
    retryFailed: args["retry-failed"],
    fresh: args.fresh,
    ...(args["repair-state"] ? { repairState: true } : {}),
    track: { minIntervalMs: args["poll-interval"] * 1000, giveUpMs: args["give-up-after"] * 1000 },
    ...(args.output ? { output: args.output } : {}),
    ...(args.staging ? { staging: args.staging } : {}),
    ...(args["callback-url"]
      ? {
          callback: callbackOptions(
            args["callback-url"],
            args["callback-listen"],
            args["allow-private-urls"],
          ),
        }
      : {}),
    s3: s3Settings(args),
    ...(args["max-points"] !== undefined ? { maxPoints: args["max-points"] } : {}),
    ...(args.only ? { only: onlyIds(args.only) } : {}),
    ...(args["max-failures"] ? { maxFailures: args["max-failures"] } : {}),
    ...(args.deadline ? { deadline: args.deadline } : {}),
    ...(display ? { onProgress: (p: Progress) => display.update(p) } : {}),
    ...(coordinated ? { seams: coordinated.seams, lost: coordinated.lost } : {}),
    ...(lease ? { lease } : {}),
  };
}

/**
 * Test-only (documented in docs/configuration.md): CLAPPER_LOCK_LEASE_MS shortens the run lock's lease (and
 * the coordinator's holder lease), so that a test sees a killed holder's lock freed in seconds.
 */
function leaseFromEnv(env: NodeJS.ProcessEnv): { leaseMs: number; heartbeatMs: number } | undefined {
  const ms = Number(env.CLAPPER_LOCK_LEASE_MS);
  if (!Number.isInteger(ms) || ms < 200) return undefined;
  return { leaseMs: ms, heartbeatMs: Math.max(50, Math.floor(ms / 6)) };
}

interface Coordinated {
  sharing: Sharing;
  /** Records a finished shard; true when every shard of its run has finished. */
  shardFinished(run: string, index: number, total: number): Promise<boolean>;
  seams: Partial<Seams>;
  /** Aborted with the error when the coordinator is lost mid-run. */
  lost: AbortSignal;
  close(): Promise<void>;
}

/**
 * Connects to the coordinator before anything is submitted: unreachable, the run exits 6 having
 * sent nothing. Loaded only when asked for (ioredis stays out of a run without one).
 */
async function coordinate(
  url: CoordinatorUrl,
  account: string,
  located: LocatedRun,
  signal: AbortSignal | undefined,
  lease: { leaseMs: number } | undefined,
): Promise<Coordinated> {
  const [{ connectCoordinator, CoordinatorUnavailableError }, { coordinatedSeams, sharing }] =
    await Promise.all([import("../../../coord/index.js"), import("../../../run/coordinated.js")]);
  const lost = new AbortController();
  const lose = (error: unknown) => {
    if (!lost.signal.aborted) lost.abort(error);
  };
  let coordinator: Awaited<ReturnType<typeof connectCoordinator>>;
  try {
    coordinator = await connectCoordinator(url.url, {
      account,
      ...(signal ? { signal } : {}),
      ...(lease ? { holderLeaseMs: lease.leaseMs } : {}),
      onLost: lose,
    });
  } catch (error) {
    if (error instanceof CoordinatorUnavailableError) {
      throw new ExitError(ExitCode.Unreachable, `${error.message}; nothing was submitted`);
    }
    throw error;
  }
  return {
    sharing: sharing(coordinator, lose),
    seams: coordinatedSeams({ coordinator, pool: located.manifest.pool, lose }),
    lost: lost.signal,
    shardFinished: (run, index, total) => coordinator.shardFinished(run, index, total),
    close: () => coordinator.close(),
  };
}

function s3Settings(args: RunArgs): S3ClientOptions {
  return {
    ...(args["s3-endpoint"] ? { endpoint: args["s3-endpoint"] } : {}),
    ...(args["s3-path-style"] !== undefined ? { forcePathStyle: args["s3-path-style"] } : {}),
  };
}

interface RateMemory {
  where: string;
  read(account: string): Promise<Record<string, RememberedRate>>;
  write(account: string, rates: Record<string, RememberedRate>): Promise<void>;
}

/** Where the rates are remembered: beside the state file, or under the prefix of a state in S3. */
async function rememberedRates(statePath: string, s3: S3ClientOptions): Promise<RateMemory> {
  if (isS3State(statePath)) {
    const { s3Rates } = await import("../../../state/store.js");
    return s3Rates(statePath, s3);
  }
  const path = ratesPath(statePath);
  return {
    where: path,
    read: (account) => readRates(path, account),
    write: (account, rates) => writeRates(path, account, rates),
  };
}

/** The rate this run found, for the next run on the account (a cache: a failure only costs time). */
async function remember(
  memory: RateMemory,
  account: string,
  gate: ServiceGate,
  logger: Logger,
): Promise<void> {
  const path = memory.where;
  if (gate.requests() === 0) return;
  const rates = gate.remember();
  const limited = gate.limitedCount();
  const found = Object.entries(rates)
    .map(
      ([scope, r]) =>
        `${r.rps}/s ${scope === "key" ? "for the key" : `for ${scope}`}${r.settled ? " (the service's limit)" : ""}`,
    )
    .join(", ");
  logger.info({ event: "rate", rates, limited, path }, `request rate: ${found}; ${limited} answered 429`);
  try {
    await memory.write(account, rates);
  } catch (error) {
    logger.debug({ event: "rate-not-kept", path, error: (error as Error).message }, "the rate was not kept");
  }
}

/**
 * Located once, before anything is connected: the sandbox's state lives beside the run's. A
 * manifest with errors is refused with its problems.
 */
async function locateForRun(
  args: RunArgs,
  cwd: string,
  shard: Shard | undefined,
): Promise<{ located: LocatedRun } | { refused: Outcome }> {
  let found: Awaited<ReturnType<typeof locateRun>>;
  try {
    found = await locateRun({
      manifest: args.manifest,
      cwd,
      ...(args.state ? { state: args.state } : {}),
      ...(shard ? { shard } : {}),
    });
  } catch (error) {
    if (isFsError(error)) throw fsExit(error, { action: "read the manifest", path: args.manifest });
    throw error;
  }
  if (!found.ok) return { refused: manifestOutcome(args.manifest, found.errors, found.warnings) };
  const statePath = found.run.statePath;
  if (isS3State(statePath)) return { located: found.run };
  try {
    await mkdir(dirname(statePath), { recursive: true });
  } catch (error) {
    throw fsExit(error, {
      action: "create the state folder",
      path: dirname(statePath),
      hint: "pass --state FILE in a writable place, or run from a writable folder",
    });
  }
  return { located: found.run };
}

function manifestOutcome(path: string, errors: readonly Problem[], warnings: readonly Problem[]): Outcome {
  const n = errors.length;
  return {
    code: ExitCode.Usage,
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
  const code = exitCodeOf(outcome.end);
  const r = outcome.report;
  const message =
    outcome.message ??
    (r
      ? `run ${r.run.name}: ${r.run.status} (${r.counts.failed} failed, ${r.counts.cancelled} cancelled, ${r.counts.pending} pending)`
      : undefined);
  return {
    code,
    ...(r ? { json: r, whole: true } : outcome.budget ? { json: { budget: outcome.budget } } : {}),
    ...(text
      ? {
          text,
          textTo:
            code === ExitCode.Ok || code === ExitCode.Failed ? ("stdout" as const) : ("stderr" as const),
        }
      : {}),
    ...(notes.length > 0 ? { notes } : {}),
    ...(message ? { message } : {}),
    ...(warnings.length > 0 ? { problems: warnings } : {}),
  };
}

/**
 * The last shard of a run to finish (the coordinator counts them) writes the merged report over
 * every job of the manifest, as `clapper report MANIFEST --merge` does. A failure to merge costs
 * only the merged report: the shard's own stands, and the merge can be run again.
 */
async function mergeWhenLast(
  outcome: RunOutcome,
  o: {
    args: RunArgs;
    cwd: string;
    env: NodeJS.ProcessEnv;
    shard: Shard;
    located: LocatedRun;
    coordinated: Coordinated;
    logger: Logger;
  },
): Promise<void> {
  const { shard, logger } = o;
  const name = o.located.manifest.name;
  const campaign = outcome.finishedCampaign ?? 0;
  try {
    const run = runLedgerKey({ state: "", name, campaign, shard });
    if (!(await o.coordinated.shardFinished(run, shard.index, shard.total))) return;
    const { mergeReport } = await import("../report/index.js");
    const merged = await mergeReport({
      manifest: o.args.manifest,
      cwd: o.cwd,
      total: shard.total,
      output: o.args.output,
      s3: {
        ...(o.args["s3-endpoint"] ? { endpoint: o.args["s3-endpoint"] } : {}),
        ...(o.args["s3-path-style"] !== undefined ? { forcePathStyle: o.args["s3-path-style"] } : {}),
      },
      env: o.env,
    });
    outcome.reportUris = [...(outcome.reportUris ?? []), ...merged.uris];
    logger.info(
      { event: "merged", shards: shard.total, uri: merged.uris[0], status: merged.report.run.status },
      `every shard of ${name} has finished: merged report ${merged.uris[0]} (${merged.report.run.status})`,
    );
  } catch (error) {
    logger.warn(
      { event: "merge-failed", error: (error as Error).message },
      `the merged report was not written: ${(error as Error).message}; clapper report ${o.args.manifest} --merge writes it`,
    );
  }
}
