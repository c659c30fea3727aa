// The one error type the library rejects with when clapper refuses (a manifest with errors, a
// setting that cannot work, a run that ended without a report). Failures of the services and of
// the file system keep their own types, as the CLI classifies them.
import { ExitError } from "../cli/errors.js";
import type { Problem } from "../manifest/problems.js";
import type { BudgetRow } from "../run/admit.js";
import type { RunEnd } from "../run/end.js";

/** Details of a refusal, beside its message. */
export interface ClapperErrorDetails {
  /** The exit code the CLI ends with for the same refusal (2 for a manifest or a setting, 3 for the budget...). */
  code: number;
  /** The manifest's problems, errors first: `{file, line, field, message, severity}` each. */
  problems?: readonly Problem[] | undefined;
  /** How the run ended, when it ran. */
  end?: RunEnd | undefined;
  /** When the run did not fit the balance or the budget: the points asked for and available. */
  budget?: readonly BudgetRow[] | undefined;
  cause?: unknown;
}

/**
 * clapper refused: `problems` names each problem of a manifest by file, line and field, and `code`
 * is the exit code `clapper` would end with.
 */
export class ClapperError extends Error {
  override name = "ClapperError";
  readonly code: number;
  readonly problems: readonly Problem[];
  readonly end: RunEnd | undefined;
  readonly budget: readonly BudgetRow[] | undefined;
  constructor(message: string, details: ClapperErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.code = details.code;
    this.problems = details.problems ?? [];
    this.end = details.end;
    this.budget = details.budget;
  }
}

/** A refusal the CLI would print as `clapper: ...` becomes a ClapperError; other errors pass as they are. */
export function asClapperError(error: unknown): unknown {
  if (!(error instanceof ExitError)) return error;
  return new ClapperError(error.message, { code: error.code, problems: error.problems, cause: error });
}
