// A run's manifest and state as the commands beside `run` find and read them (status, report,
// cancel), and where --sandbox keeps the emulator's state for a run.
import { stat } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fitFromState } from "../../../episode/fitting.js";
import type { Job } from "../../../manifest/index.js";
import { outputKey } from "../../../manifest/outputs.js";
import type { Problem } from "../../../manifest/problems.js";
import { buildReport } from "../../../report/build.js";
import type { Report } from "../../../report/model.js";
import { outputs } from "../../../run/outputs.js";
import { inShard, type Shard } from "../../../run/shard.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import type { Sink } from "../../../sinks/sink.js";
import { Journal } from "../../../state/journal.js";
import { checkOwner, defaultStatePath, type LocatedRun, locateRun } from "../../../state/locate.js";
import { isS3State } from "../../../state/location.js";
import { damagedMessage, isDamagedState } from "../../../state/repair.js";
import {
  applyRecord,
  initialState,
  type JobState,
  type RunRecord,
  type RunState,
} from "../../../state/run-state.js";
import { type KeptVersion, versionName } from "../../../state/versions.js";
import { ExitError, fsExit, isFsError } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";

/**
 * The run's manifest and state, found as `run` finds them: a manifest with errors has no state
 * (exit 2 with its problems), and a state that belongs to another manifest is not read.
 */
export async function locate(
  manifestPath: string,
  cwd: string,
  opts: { state?: string | undefined; shard?: Shard | undefined },
): Promise<LocatedRun> {
  let found: Awaited<ReturnType<typeof locateRun>>;
  try {
    found = await locateRun({
      manifest: manifestPath,
      cwd,
      ...(opts.state ? { state: opts.state } : {}),
      ...(opts.shard ? { shard: opts.shard } : {}),
    });
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
  return new ExitError(ExitCode.Usage, `${path}: ${n} error${n === 1 ? "" : "s"}; nothing was done`, {
    problems: [...errors, ...warnings],
  });
}

/** The state, checked to belong to this manifest. */
export async function ownState(located: LocatedRun, s3?: S3ClientOptions): Promise<RunState> {
  const state = await readState(located.statePath, s3, located.manifest.display);
  const owner = checkOwner(state, located);
  if (owner.refuse) throw new ExitError(ExitCode.Usage, owner.refuse);
  return state;
}

/**
 * Reads the state without writing to it: a run may be appending right now. A missing file (or an
 * empty prefix) is a run never made.
 */
export async function readState(
  statePath: string,
  s3?: S3ClientOptions,
  manifest?: string,
): Promise<RunState> {
  if (isS3State(statePath)) {
    const { readS3State, StateStoreError } = await import("../../../state/store.js");
    try {
      return await readS3State(statePath, s3);
    } catch (error) {
      if (!(error instanceof StateStoreError)) throw error;
      throw new ExitError(
        error.kind === "unreachable" ? ExitCode.Unreachable : ExitCode.Usage,
        error.message,
      );
    }
  }
  try {
    return await Journal.read<RunState, RunRecord>({
      path: statePath,
      initial: initialState,
      apply: applyRecord,
    });
  } catch (error) {
    if (isDamagedState(error))
      throw new ExitError(ExitCode.Usage, damagedMessage(error, manifest ?? "MANIFEST"));
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
export function neverRun(state: RunState): boolean {
  return state.run === undefined && Object.keys(state.jobs).length === 0;
}

/**
 * Where `--sandbox` keeps the emulator's state for a run: beside the run's state, or for a state in
 * S3 in the state's default folder beside the manifest (the emulator is of this machine only).
 */
export function sandboxStatePath(located: LocatedRun): string {
  const { statePath, manifest } = located;
  const beside = isS3State(statePath) ? defaultStatePath(manifest.dir, manifest.name) : statePath;
  return join(dirname(beside), "sandbox.json");
}

/**
 * The report of a run as its state stands (status, report): interrupted when it began and never
 * finished. `sink`: the run's output (default: the manifest's own output folder).
 */
export async function reportFromState(located: LocatedRun, state: RunState, sink?: Sink): Promise<Report> {
  const shard = located.shard;
  // Shots timed to narration, as the run fitted them (the state says how long each line is).
  const jobs = [...located.loaded.jobs];
  await fitFromState(jobs, state);
  return buildReport({
    state: await relocated(state, jobs, sink ?? localOutput(located)),
    jobs: shard ? jobs.filter((job) => inShard(job, shard)) : jobs,
    ...(shard ? { shard } : {}),
    manifest: located.manifest.display,
    name: located.manifest.name,
    interrupted: state.run?.finished_at === undefined && state.run !== undefined,
  });
}

/**
 * The state with its outputs where this project's output folder holds them, for a project copied
 * or moved whole: a stored file found at the place this run would store it, of the recorded size,
 * is named there (the next run records it so). In memory only; a folder only (an S3 key names
 * the same object from anywhere).
 */
async function relocated(state: RunState, jobs: readonly Job[], sink: Sink | undefined): Promise<RunState> {
  if (!sink?.localPath) return state;
  let copy: RunState | undefined;
  const named = (id: string) => {
    copy ??= structuredClone(state);
    return copy.jobs[id] as JobState;
  };
  for (const job of jobs) {
    const st = state.jobs[job.id];
    const here = sink.uri(outputKey(job));
    const output = st?.output;
    if (output?.uri.startsWith("/") && output.uri !== here && (await sizeAt(here)) === output.bytes)
      named(job.id).output = { ...output, uri: here };
    // Its kept versions, beside it, each found there the same way.
    const folder = here.slice(0, here.lastIndexOf("/") + 1);
    for (const [i, v] of (st?.versions ?? []).entries()) {
      const there = `${folder}${versionName(v.uri)}`;
      if (!v.uri.startsWith("/") || v.uri === there || (await sizeAt(there)) !== v.bytes) continue;
      (named(job.id).versions as KeptVersion[])[i] = { ...v, uri: there };
    }
  }
  return copy ?? state;
}

async function sizeAt(path: string): Promise<number | undefined> {
  return (await stat(path).catch(() => undefined))?.size;
}

/** The manifest's own output when it is a folder (an S3 output is not opened for this). */
function localOutput(located: LocatedRun): Sink | undefined {
  const output = located.manifest.output ?? "./output";
  return /^s3:\/\//i.test(output) ? undefined : outputs({}, located.manifest, located.manifest.dir).sink;
}
