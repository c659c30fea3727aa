// `clapper report MANIFEST`: report.json, report.md, junit.xml and report.html written again from the run's state.
import { acquireLock, LockHeldError } from "../../../locks/file-lock.js";
import { reportsFolder, writeReports } from "../../../report/writing.js";
import { MergeError, mergeReports } from "../../../run/merge.js";
import { outputs } from "../../../run/run.js";
import type { Shard } from "../../../run/shard.js";
import { type S3ClientOptions, S3StoreError } from "../../../sinks/s3.js";
import { OutputError } from "../../../sinks/sink.js";
import { isS3State } from "../../../state/location.js";
import { ExitError, fsExit, isFsError } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";
import { locate, neverRun, ownState, readState, reportFromState } from "../run/state.js";

export async function rewriteReport(o: {
  manifest: string;
  cwd: string;
  state?: string | undefined;
  shard?: Shard | undefined;
  output?: string | undefined;
  s3?: S3ClientOptions;
  env: NodeJS.ProcessEnv;
  signal?: AbortSignal | undefined;
}) {
  const located = await locate(o.manifest, o.cwd, o);
  const { manifest, statePath } = located;
  // Before any lock: a run never made has no folder to lock in, and nothing to report.
  if (neverRun(await readState(statePath, o.s3))) {
    throw new ExitError(
      ExitCode.Usage,
      `no run of ${manifest.name} yet: nothing to report; run clapper run ${manifest.display} first`,
    );
  }
  // A state in S3 has no lock file; its lock is the coordinator's, named under the account (the
  // API key's hash), which this command, reading no service, may not have. It only reads the
  // state, and a live run writes its own reports again when it ends.
  let lock: Awaited<ReturnType<typeof acquireLock>> | undefined;
  try {
    if (!isS3State(statePath)) lock = await acquireLock(`${statePath}.lock`);
  } catch (error) {
    if (error instanceof LockHeldError) throw new ExitError(ExitCode.Locked, error.message);
    if (isFsError(error)) {
      throw fsExit(error, { action: "take the run's lock", path: `${statePath}.lock` });
    }
    throw error;
  }
  try {
    const state = await ownState(located, o.s3);
    // The same output as the run's: a folder, or S3.
    const { sink } = outputs(
      { ...(o.output ? { output: o.output } : {}), ...(o.s3 ? { s3: o.s3 } : {}) },
      manifest,
      o.cwd,
    );
    const report = await reportFromState(located, state, sink);
    // The run appended the GitHub step summary already: writing the reports again does not append
    // it a second time.
    let uris: string[];
    const warnings: string[] = [];
    try {
      uris = await writeReports(sink, report, o.env, {
        stepSummary: false,
        folder: reportsFolder(located.shard),
        jobs: located.loaded.jobs,
        manifestPath: manifest.path,
        signal: o.signal,
        onWarning: (w) => warnings.push(w),
      });
    } catch (error) {
      if (isFsError(error)) {
        throw fsExit(error, {
          action: "write the reports in",
          path: sink.uri("reports"),
          hint: "give this user write access there, or pass --output DIR to write them elsewhere",
        });
      }
      if (error instanceof OutputError)
        throw new ExitError(error.unreachable ? ExitCode.Unreachable : ExitCode.Usage, error.message);
      throw error;
    }
    return { report, uris, warnings };
  } finally {
    await lock?.release();
  }
}

/**
 * `report --merge`: the shards' reports, read from the output (a folder or S3, wherever the shards
 * wrote them), merged into `reports/` over every job of the manifest. No state is read, and no
 * lock is taken: the shards may still run, and a merge written early is written again later.
 */
export async function mergeReport(o: {
  manifest: string;
  cwd: string;
  total?: number | undefined;
  output?: string | undefined;
  s3?: S3ClientOptions;
  env: NodeJS.ProcessEnv;
  signal?: AbortSignal;
}) {
  const located = await locate(o.manifest, o.cwd, {});
  const { manifest } = located;
  const { sink } = outputs(
    { ...(o.output ? { output: o.output } : {}), ...(o.s3 ? { s3: o.s3 } : {}) },
    manifest,
    o.cwd,
  );
  try {
    const merged = await mergeReports({
      jobs: located.loaded.jobs,
      manifest: manifest.display,
      name: manifest.name,
      sink,
      total: o.total,
      ...(o.signal ? { signal: o.signal } : {}),
    });
    // The merge job has its own step summary: the whole run shows there.
    const warnings: string[] = [];
    const uris = await writeReports(sink, merged.report, o.env, {
      jobs: located.loaded.jobs,
      manifestPath: manifest.path,
      ...(o.signal ? { signal: o.signal } : {}),
      onWarning: (w) => warnings.push(w),
    });
    return { ...merged, uris, warnings };
  } catch (error) {
    if (error instanceof MergeError) throw new ExitError(ExitCode.Usage, error.message);
    if (isFsError(error)) throw fsExit(error, { action: "merge the reports in", path: sink.uri("reports") });
    if (error instanceof OutputError)
      throw new ExitError(error.unreachable ? ExitCode.Unreachable : ExitCode.Usage, error.message);
    if (error instanceof S3StoreError) throw new ExitError(ExitCode.Unreachable, error.message);
    throw error;
  }
}
