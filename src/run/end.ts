// Why a run ended, in the run's own words. The run never names an exit code: the CLI maps each end
// to one (src/cli/exit-code.ts, `exitCodeOf`), and lends that table to the run for its last log line
// (`RunOptions.exitCodeOf`), so that the log says the very code the process ends with.

export type RunEnd =
  /** Every job succeeded and its output is stored. */
  | "succeeded"
  /** The run ended with failed, cancelled or unfinished jobs, or its reports could not be written. */
  | "jobs-failed"
  /** The local state could not be written: the run stopped (a disk to fix, not a service to wait for). */
  | "state-unwritable"
  /** The manifest has errors: nothing was submitted. */
  | "manifest-invalid"
  /** A flag, a setting, the key, the output or the state stands in the way: nothing was submitted. */
  | "refused"
  /** The budget or the balance is too small: nothing was submitted. */
  | "over-budget"
  /** A stop signal or the deadline: state saved, the next run resumes. */
  | "interrupted"
  /** Another process holds (or took over) the run's lock or its state. */
  | "locked"
  /** A service, the store or the coordinator cannot be reached, or answers out of its specification. */
  | "unreachable";

/** How a run ended, as the log and the CLI say it: a returned end, or an error that left the run (a bug). */
export type RunEndOrBug = RunEnd | "bug";
