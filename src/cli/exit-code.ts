// The exit codes every command ends with: a contract scripts, cron, CI and Kubernetes rely on
// (docs/configuration.md, "Exit codes"). Only the CLI maps outcomes to them.

import type { RunEndOrBug } from "../run/end.js";

export const ExitCode = {
  /** Every job succeeded and its output is stored; other commands: done. */
  Ok: 0,
  /** The run ended with failed, cancelled or unfinished jobs (report written); a refused request. */
  Failed: 1,
  /** Usage or manifest error: nothing was submitted. */
  Usage: 2,
  /** The budget or the balance is too small: nothing was submitted. */
  Budget: 3,
  /** Interrupted (a stop signal, the deadline): state saved, run again to resume. */
  Interrupted: 4,
  /** Another live run holds this run's lock. */
  Locked: 5,
  /** A service, a store or the coordinator is unreachable or refuses service: state saved, run again. */
  Unreachable: 6,
  /** A bug: state saved where possible, the message says where to report it. */
  Internal: 70,
} as const;

export type ExitCode = (typeof ExitCode)[keyof typeof ExitCode];

/** The exit code of each way a run ends: the one table from the run's ends to the process's codes. */
const RUN_END_CODES = {
  succeeded: ExitCode.Ok,
  "jobs-failed": ExitCode.Failed,
  "state-unwritable": ExitCode.Failed,
  "manifest-invalid": ExitCode.Usage,
  refused: ExitCode.Usage,
  "over-budget": ExitCode.Budget,
  interrupted: ExitCode.Interrupted,
  locked: ExitCode.Locked,
  unreachable: ExitCode.Unreachable,
  bug: ExitCode.Internal,
} as const satisfies Record<RunEndOrBug, ExitCode>;

export function exitCodeOf(end: RunEndOrBug): ExitCode {
  return RUN_END_CODES[end];
}
