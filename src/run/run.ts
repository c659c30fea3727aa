// `run`: the whole pipeline over a manifest, as its stages. Each stage is a module with a typed
// input and output; the shared context (src/run/context.ts) holds the seams, the stop and the
// resources, given back in reverse order whatever the way out. The stages, top to bottom:
//   open       find the run, its output, and take its lock             (stages/open.ts)
//   admission  plan, prove the output, open the state, decide the work (stages/admission.ts)
//   prepare    skills, voices, what dead writers left in the store     (stages/prepare.ts)
//   execute    every job's life under the limits (src/run/jobs.ts) (stages/execute.ts)
//   finish     the reports, the `finish` record, how the run ended     (stages/finish.ts)
// Each way out is a RunEnd (src/run/end.ts) or a thrown error; only the CLI turns them into exit codes.
import { channel } from "node:diagnostics_channel";
import { AbortedError, ClapperApiError, ResultUrlError } from "../api/index.js";
import { ServiceGate } from "../rate/limiter.js";
import { RUN_STAGE } from "../trace.js";
import { RunContext } from "./context.js";
import { errorInfo } from "./errors.js";
import { ProgressFeed } from "./feed.js";
import { Halt } from "./halt.js";
import { admitRun } from "./stages/admission.js";
import { execute } from "./stages/execute.js";
import { finish } from "./stages/finish.js";
import { openRun } from "./stages/open.js";
import { prepare } from "./stages/prepare.js";
import { DEFAULT_LIMITS, type RunOptions, type RunOutcome } from "./types.js";

export { outputs } from "./outputs.js";
export { tooManyFailures } from "./stages/execute.js";
export * from "./types.js";

/** The run, and its last word in the log whatever the way out. */
export async function run(options: RunOptions): Promise<RunOutcome> {
  const startedAt = Date.now();
  const halt = new Halt(options.signal, options.deadline, options.lost);
  const feed = new ProgressFeed(options.onProgress, startedAt);
  try {
    feed.setPhase("planning");
    const outcome = await runOnce(options, halt, feed);
    const r = outcome.report;
    options.logger.info(
      {
        event: "run-finished",
        status: r?.run.status ?? "not-started",
        exit_code: options.exitCodeOf(outcome.end),
        duration_ms: Date.now() - startedAt,
        ...(r ? { counts: r.counts, points: r.points } : {}),
        ...(outcome.stoppedBy ? { stopped_by: outcome.stoppedBy } : {}),
        ...(outcome.message ? { note: outcome.message } : {}),
      },
      `run finished: exit ${options.exitCodeOf(outcome.end)}`,
    );
    return outcome;
  } catch (error) {
    // A service's refusal is said by the CLI with its own exit code; only a bug is exit 70 (`bug` in
    // the CLI's table). The log says which, and never an exit code the process will not end with.
    const refusal = !isBug(error);
    options.logger.error(
      {
        event: "run-finished",
        status: refusal ? "stopped" : "crashed",
        ...(refusal ? {} : { exit_code: options.exitCodeOf("bug") }),
        duration_ms: Date.now() - startedAt,
      },
      refusal
        ? `run stopped: ${errorInfo(error).message}`
        : `run finished by an internal error: ${errorInfo(error).message}`,
    );
    throw error;
  } finally {
    halt.dispose();
  }
}

/** The stages in order; any of them may end the run with an outcome. */
async function runOnce(options: RunOptions, halt: Halt, feed: ProgressFeed): Promise<RunOutcome> {
  const ctx = new RunContext(options, halt, feed);
  let statePath: string | undefined;
  try {
    const opened = await openRun(ctx);
    if ("end" in opened) return opened;
    ended("open");
    statePath = opened.located.statePath;
    const gate = options.gate ?? new ServiceGate(options.limits ?? DEFAULT_LIMITS);
    if (!options.gate) ctx.defer(() => gate.stop());
    const admitted = await admitRun(ctx, opened);
    if ("end" in admitted) return admitted;
    ended("admission");
    ctx.feed.setPhase("pre-flight");
    const prepared = await prepare(ctx, opened, admitted);
    if ("end" in prepared) return prepared;
    ended("prepare");
    // Test-only (documented in docs/configuration.md): a bug inside a run that holds its lock and its state,
    // to check exit 70 and that the state is saved and the lock let go.
    if (options.env?.CLAPPER_TEST_FAULT === "internal") {
      throw new Error("injected internal fault (CLAPPER_TEST_FAULT=internal)");
    }
    const executed = await execute(ctx, gate, opened, admitted, prepared);
    if ("end" in executed) return executed;
    return await finish(ctx, opened, admitted, executed);
  } catch (error) {
    return ctx.caught(error, statePath);
  } finally {
    await ctx.release();
  }
}

const stages = channel(RUN_STAGE);

/** A stage that ended, for whoever listens on node:diagnostics_channel (src/trace.ts times the start). */
function ended(stage: "open" | "admission" | "prepare"): void {
  if (stages.hasSubscribers) stages.publish({ stage });
}

/**
 * Whether an error that left the run is a bug (exit 70): not a service's answer, a stop, a refused
 * result URL or a file system's refusal, which the CLI says with their own exit codes.
 */
function isBug(error: unknown): boolean {
  if (error instanceof ClapperApiError || error instanceof AbortedError || error instanceof ResultUrlError)
    return false;
  const code = (error as { code?: unknown } | undefined)?.code;
  return !(typeof code === "string" && /^E[A-Z]+$/.test(code));
}
