// The library's `run()`: the CLI's run (src/library/start-run.ts) without its process: it resolves
// to the report, never exits, never prints; refusals reject with a ClapperError.
import { ExitCode, exitCodeOf } from "../cli/exit-code.js";
import type { Report } from "../report/model.js";
import type { Progress } from "../run/types.js";
import { type CommonOptions, type ConnectionOptions, common, connection } from "./connection.js";
import { asClapperError, ClapperError } from "./errors.js";
import { type RunSettings, type Started, startRun } from "./start-run.js";

/** What `run()` tells as it goes. */
export type RunEvent = {
  type: "progress";
  /** The run's phase, its jobs by stage, its points reserved and spent, its tasks in flight. */
  progress: Progress;
};

/** `run()`'s options: the manifest, where the services are, and any of the `run` command's flags in camelCase. */
export interface RunOptions
  extends ConnectionOptions,
    CommonOptions,
    Omit<RunSettings, "sandboxState" | "sandboxTimeScale" | "shard" | "coordinator"> {
  /** Called as the run goes, a few times a second at most; an error it throws is logged and ignored. */
  onEvent?: ((event: RunEvent) => void) | undefined;
  /** With `sandbox: true`: multiplier of the emulator's durations (default 0.01) and its state file (default beside the run's state). */
  sandboxTimeScale?: number | undefined;
  sandboxState?: string | undefined;
}

/**
 * Runs a manifest to its report, as `clapper run` does: budget checked, resumable (a second call
 * after an interrupted one pays for nothing twice), reports written beside the output. Resolves to
 * the report (report.json's content) whatever its status, also when `signal` interrupted the run;
 * rejects with a {@link ClapperError} when clapper refuses (its `problems` name a manifest's errors
 * by file, line and field), or with the error of a service that cannot be reached.
 */
export async function run(options: RunOptions): Promise<Report> {
  const { cwd, env, logger, signal } = common(options);
  const { onEvent } = options;
  let started: Started;
  try {
    const services = connection(options, env, "run");
    started = await startRun(options, {
      cwd,
      env,
      signal,
      logger,
      connection: services.args,
      connect: services.connect,
      ...(onEvent
        ? {
            onProgress(progress: Progress) {
              // The caller's code must not break the run it watches.
              try {
                onEvent({ type: "progress", progress });
              } catch (error) {
                logger.warn({ event: "on-event-failed", error: (error as Error).message }, "onEvent threw");
              }
            },
          }
        : {}),
    });
  } catch (error) {
    throw asClapperError(error);
  }
  if ("refused" in started) {
    const r = started.refused;
    if (r.reason === "setting") throw new ClapperError(r.message, { code: r.code });
    throw manifestError(options.manifest, r.errors, r.warnings);
  }
  const o = started.outcome;
  if (o.errors && o.errors.length > 0) throw manifestError(options.manifest, o.errors, o.warnings ?? []);
  if (!o.report) {
    throw new ClapperError(o.message ?? `${options.manifest}: the run ended (${o.end}) without a report`, {
      code: exitCodeOf(o.end),
      end: o.end,
      budget: o.budget,
    });
  }
  return o.report;
}

function manifestError(
  path: string,
  errors: readonly ClapperError["problems"][number][],
  warnings: readonly ClapperError["problems"][number][],
): ClapperError {
  const n = errors.length;
  const first = errors[0];
  const where = first
    ? ` (first: ${first.file}:${first.line}: ${first.field ? `${first.field}: ` : ""}${first.message})`
    : "";
  return new ClapperError(`${path}: ${n} error${n === 1 ? "" : "s"}; nothing was submitted${where}`, {
    code: ExitCode.Usage,
    problems: [...errors, ...warnings],
  });
}
