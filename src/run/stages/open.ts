// Stage 1, open: find the run (the manifest read offline, its name checked before any path is
// built from it), where its results go, and take its lock. A second run on the same state stops
// here, before it talks to anyone.
import type { Lock } from "../../locks/file-lock.js";
import { LockHeldError } from "../../locks/file-lock.js";
import { didYouMean } from "../../manifest/problems.js";
import type { MaterialStager } from "../../services/staging.js";
import type { Sink } from "../../sinks/sink.js";
import { type LocatedRun, locateRun } from "../../state/locate.js";
import { matchesOnly, onlyChoices, type RunContext, StateFolderError } from "../context.js";
import { errorInfo } from "../errors.js";
import type { RunOutcome } from "../types.js";

export interface Opened {
  located: LocatedRun;
  sink: Sink;
  stager: MaterialStager;
  lock: Lock;
  /** Aborted when another process takes the lock over: this run must stop writing at once. */
  lockLost: AbortSignal;
  /** When the lock was taken: store uploads begun before it belong to no live writer of this run. */
  lockedAt: Date;
}

export async function openRun(ctx: RunContext): Promise<Opened | RunOutcome> {
  const { options } = ctx;
  let located = options.located;
  if (!located) {
    const found = await locateRun({
      manifest: options.manifest,
      cwd: ctx.cwd,
      ...(options.statePath ? { state: options.statePath } : {}),
      ...(options.shard ? { shard: options.shard } : {}),
    });
    if (!found.ok) return { end: "manifest-invalid", errors: found.errors, warnings: found.warnings };
    located = found.run;
  }
  const only = options.only;
  if (only) {
    const jobs = located.loaded.jobs;
    const unknown = only.filter((o) => !jobs.some((job) => matchesOnly(job, [o])));
    if (unknown.length > 0 || only.length === 0) {
      return {
        end: "refused",
        message: `--only: no job matches ${unknown.map((o) => `${o}${didYouMean(o, onlyChoices(jobs))}`).join(", ") || "an empty list"} (ids look like shot/s01, shot/s02/take-2, s02/take-2, line/n01)`,
        warnings: located.loaded.warnings,
      };
    }
  }
  let out: { sink: Sink; stager: MaterialStager };
  try {
    out = ctx.seams.outputs(options, located.manifest, ctx.cwd);
  } catch (error) {
    return { end: "refused", message: (error as Error).message };
  }
  const locked = await lock(ctx, located.statePath);
  if ("end" in locked) return locked;
  return { located, ...out, ...locked, lockedAt: new Date() };
}

/**
 * The lock, as a lease. Losing it mid-run (this process stalled past the lease, or --break-lock
 * elsewhere) stops the run at once: another process now writes this state.
 */
async function lock(
  ctx: RunContext,
  statePath: string,
): Promise<{ lock: Lock; lockLost: AbortSignal } | RunOutcome> {
  const { options } = ctx;
  const lost = new AbortController();
  let held: Lock;
  try {
    held = await ctx.seams.lock(`${statePath}.lock`, {
      breakLock: options.breakLock === true,
      ...options.lease,
      onLost: (error) => lost.abort(error),
      // A killed container's lock cannot be judged by its pid: it is watched for the rest of its lease.
      wait: {
        signal: ctx.signal,
        onWait: (message, waitMs) => options.logger.warn({ event: "lock-wait", wait_ms: waitMs }, message),
      },
      onRefreshError: (error) =>
        options.logger.warn(
          { event: "lock-refresh-failed", error: errorInfo(error) },
          "could not refresh the run's lock",
        ),
    });
  } catch (error) {
    if (error instanceof LockHeldError) return { end: "locked", message: error.message, statePath };
    if (error instanceof StateFolderError) return { end: "refused", message: error.message };
    if (ctx.signal.aborted) return ctx.stoppedEarly();
    throw error;
  }
  ctx.defer(() => held.release());
  if (held.replaced) options.logger.warn({ event: "lock-replaced" }, held.replaced.message);
  const onLost = () => {
    options.logger.error(
      { event: "lock-lost", error: errorInfo(lost.signal.reason) },
      "the run's lock was lost; stopping",
    );
    // Not one more line into a state another process now writes.
    ctx.store?.freeze();
    ctx.stop.abort(lost.signal.reason);
  };
  lost.signal.addEventListener("abort", onLost, { once: true });
  ctx.defer(() => lost.signal.removeEventListener("abort", onLost));
  return { lock: held, lockLost: lost.signal };
}
