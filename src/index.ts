/**
 * clapper as a library: `@clapperhq/clapper`. The same runs, plans and status as the `clapper`
 * command, as promises: nothing is printed and the process is never exited. See docs/library.md.
 *
 * @example
 * ```ts
 * import { run, startSandbox } from "@clapperhq/clapper";
 * const sandbox = await startSandbox({ timeScale: 0.01 });
 * const report = await run({ manifest: "jobs/demo.yaml", baseUrl: sandbox.url, apiKey: "sk-ml-sandbox" });
 * console.log(report.counts);
 * await sandbox.close();
 * ```
 * @packageDocumentation
 */

/** Where the services are, and what every entry point shares (cwd, env, logger, signal). */
export type { CommonOptions, ConnectionOptions } from "./library/connection.js";
/** The errors clapper refuses with: a manifest's problems by file, line and field, and the CLI's exit code. */
export { ClapperError, type ClapperErrorDetails } from "./library/errors.js";
/** `plan()`: what `clapper plan --json` prints. */
export { type PlanOptions, type PlanReport, plan } from "./library/plan.js";
/** `run()`: a manifest run to its report. */
export { type RunEvent, type RunOptions, run } from "./library/run.js";
/** `startSandbox()`: the emulator of both services, in this process. */
export { type SandboxHandle, type SandboxOptions, startSandbox } from "./library/sandbox.js";
/** `status()`: what `clapper status --json` prints. */
export { type StatusOptions, type StatusReport, status } from "./library/status.js";
/** A manifest's problem: file, line, field, message and severity. */
export type { Problem } from "./manifest/problems.js";
/** The report: report.json's content, and its jobs. */
export type {
  Report,
  ReportJob,
  ReportJobStage,
  ReportJobStatus,
  ReportVersion,
  ShardSummary,
} from "./report/model.js";
/** How a run ended, and why it stopped early. */
export type { RunEnd } from "./run/end.js";
/** One shard of a manifest split over machines. */
export type { Shard } from "./run/shard.js";
/** What a run reports as it goes (in `RunEvent`), and its limits. */
export type { MaxFailures, Phase, Progress, StoppedBy } from "./run/types.js";
/** The S3 client's settings, for outputs and states in S3. */
export type { S3ClientOptions } from "./sinks/s3.js";
