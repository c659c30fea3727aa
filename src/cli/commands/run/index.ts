// `clapper run MANIFEST`: the run itself, from its flags to its outcome.

import type { Logger } from "pino";
import { type Coordinated, type RunSettings, startRun } from "../../../library/start-run.js";
import { formatProblems, type Problem } from "../../../manifest/problems.js";
import type { Report, ReportJob } from "../../../report/model.js";
import { countsText, plural } from "../../../report/words.js";
import type { Progress, RunOutcome } from "../../../run/run.js";
import type { Shard } from "../../../run/shard.js";
import { runLedgerKey } from "../../../run/types.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import type { LocatedRun } from "../../../state/locate.js";
import type { ConnectionArgs, connect } from "../../config.js";
import { ExitCode, exitCodeOf } from "../../exit-code.js";
import type { LogFormat } from "../../logger.js";
import { type Outcome, table } from "../../output.js";
import { ProgressDisplay } from "../../progress.js";
import { chosenShard } from "../flags.js";
import { callbackOptions } from "./callback.js";
import type { RunArgs } from "./command.js";

export { callbackOptions };

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
  // report.json's word for reused: scripts (the Docker smoke's "run again" check) read the summary
  // for `N skipped`, people read `reused` above. No more is claimed: with --only, a job left out
  // counts as skipped even when its row changed.
  if (r.counts.skipped > 0) lines.push(`  ${r.counts.skipped} skipped (reused, in report.json's words)`);
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

/** The run's settings, from its flags. */
function runSettings(args: RunArgs, global: RunCommandIo["global"], shard: Shard | undefined): RunSettings {
  return {
    manifest: args.manifest,
    output: args.output,
    state: args.state,
    staging: args.staging,
    s3: s3Settings(args),
    maxPoints: args["max-points"],
    ...(args.only ? { only: onlyIds(args.only) } : {}),
    retryFailed: args["retry-failed"],
    fresh: args.fresh,
    stills: args.stills,
    repairState: args["repair-state"],
    maxAttempts: args["max-attempts"],
    rps: args.rps?.rps,
    fixedRps: args.rps?.fixed,
    rateScope: args["rate-scope"],
    inFlight: args["in-flight"],
    pollInterval: args["poll-interval"],
    giveUpAfter: args["give-up-after"],
    breakLock: args["break-lock"],
    maxResultMb: args["max-result-mb"],
    maxFailures: args["max-failures"],
    deadline: args.deadline,
    allowPrivateUrls: args["allow-private-urls"],
    callbackUrl: args["callback-url"],
    callbackListen: args["callback-listen"],
    shard,
    coordinator: args.coordinator,
    metricsFile: args["metrics-file"],
    pushgateway: args.pushgateway,
    sandboxState: global["sandbox-state"],
    sandboxTimeScale: args["sandbox-time-scale"],
  };
}

/** `clapper run`: flags to settings, the run (src/library/start-run.ts), then its outcome (printed by main.ts). */
export async function runCommand(o: RunCommandIo): Promise<Outcome> {
  const { args, global } = o;
  const cwd = process.cwd();
  // With pretty logs, the live display shows the run (redrawn in place on a terminal, a status line
  // now and then elsewhere); log lines print above its status line.
  const display = o.format === "pretty" ? new ProgressDisplay(process.stderr, { env: o.env }) : undefined;
  const logger = o.logger(display ? (line) => display.log(line) : undefined);
  try {
    const shard = chosenShard(args, o.env);
    const started = await startRun(runSettings(args, global, shard), {
      cwd,
      env: o.env,
      signal: o.signal,
      logger,
      connection: global,
      connect: o.connect,
      ...(display ? { onProgress: (p: Progress) => display.update(p) } : {}),
      async afterRun(outcome, opened) {
        display?.done();
        if (shard && opened.coordinated && outcome.finishedCampaign !== undefined) {
          const { located, coordinated } = opened;
          await mergeWhenLast(outcome, { args, cwd, env: o.env, shard, located, coordinated, logger });
        }
      },
    });
    if ("refused" in started) {
      const r = started.refused;
      return r.reason === "manifest"
        ? manifestOutcome(args.manifest, r.errors, r.warnings)
        : { code: r.code, message: r.message };
    }
    return runOutcome(started.outcome, o.format, args.manifest);
  } finally {
    display?.done();
  }
}

function s3Settings(args: RunArgs): S3ClientOptions {
  return {
    ...(args["s3-endpoint"] ? { endpoint: args["s3-endpoint"] } : {}),
    ...(args["s3-path-style"] !== undefined ? { forcePathStyle: args["s3-path-style"] } : {}),
  };
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
  // The summary of a run that ended or was stopped (Ctrl-C, a --deadline: a nightly run's usual end)
  // goes to stdout: stderr may be a JSON-lines log (`2>> nightly.jsonl`). Other ends explain a
  // failure, on stderr.
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
            code === ExitCode.Ok || code === ExitCode.Failed || code === ExitCode.Interrupted
              ? ("stdout" as const)
              : ("stderr" as const),
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
