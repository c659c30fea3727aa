// What following a task to its end takes and gives: the options, the caller's hint, what other
// processes read (sightings), and how trouble is told.

export interface TrackOptions {
  /** Shortest wait between two looks at one task. */
  minIntervalMs: number;
  /** Longest wait between two looks at one task (the safety net when callbacks are on). */
  maxIntervalMs: number;
  /** A list request is used when at least this many tasks are due together. */
  batchThreshold: number;
  /**
   * How long a task may stay unreadable (invalid answers, an unknown status, errors after the HTTP
   * layer's retries) before it is given up on for this run: the task is left open, resumable.
   */
  giveUpMs: number;
}

export const DEFAULT_TRACK_OPTIONS: TrackOptions = {
  minIntervalMs: 1000,
  maxIntervalMs: 30_000,
  batchThreshold: 3,
  giveUpMs: 10 * 60 * 1000,
};

/** The task could not be read for `giveUpMs`: it is left as it is, for a later run to follow. */
export class TaskUnreadableError extends Error {
  override name = "TaskUnreadableError";
  constructor(
    message: string,
    readonly failures: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/**
 * What other processes on the account read of tasks (through a coordinator): the services list
 * every task of the account on each page, so a page one process reads answers for the others too.
 * Best effort both ways: a sighting that cannot be had costs only the look it would have saved.
 */
export interface Sightings<T> {
  /** The newest sighting of each task (same order), with when it was read (epoch ms). */
  recall(ids: readonly string[]): Promise<ReadonlyArray<{ task: T; at: number } | undefined>>;
  /** What a page or a look just showed. Never throws. */
  tell(tasks: readonly T[]): void;
}

/** Told of every failed look at a task (after the HTTP layer's own retries), so none is silent. */
export type TrackTrouble = (taskId: string, error: unknown, failures: number) => void;

/** What the caller knows of a task before the first look. */
export interface TrackHint {
  /**
   * How long the task should take at the service's nominal pace (see `expectedSpeechMs`): the
   * first look waits for it, scaled by the pace observed so far, instead of looking at once.
   */
  expectedMs?: number;
}
