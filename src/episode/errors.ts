// Why an episode was not made, in the episode's own terms: the CLI maps each failure to its exit
// code (src/cli/commands/assemble/), so this folder knows nothing of exit codes.

export type EpisodeFailure =
  /** The manifest, a flag or the machine asks for what cannot be (no shots, no ffmpeg): nothing done. */
  | "refused"
  /** An input is not stored, or not as the run stored it: a run makes it. */
  | "not-ready"
  /** ffmpeg or the episode's check failed. */
  | "failed"
  /** Another live process holds the run's lock. */
  | "locked"
  | "interrupted"
  /** The output store cannot be reached. */
  | "unreachable";

export class EpisodeError extends Error {
  override name = "EpisodeError";
  constructor(
    readonly failure: EpisodeFailure,
    message: string,
    /** What belongs beside the error in a JSON answer (the refused inputs, ffmpeg's last lines). */
    readonly data?: Record<string, unknown>,
  ) {
    super(message);
  }
}

/**
 * An error (of the file system, as a rule) met while doing `action` on `path`: the caller says why
 * and what to do, in the words it uses for every file.
 */
export class EpisodeFileError extends Error {
  override name = "EpisodeFileError";
  constructor(
    override readonly cause: unknown,
    readonly action: string,
    readonly path: string,
  ) {
    super(`cannot ${action} ${path}: ${(cause as Error)?.message ?? String(cause)}`);
  }
}
