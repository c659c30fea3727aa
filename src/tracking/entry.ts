// A task followed to its end, as the pollers keep it between looks.

/** The statuses a task ends in. */
export const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);

/** A task's predicted end, kept between looks. */
export interface Plan {
  /** When it should end (epoch ms). */
  endAt: number;
  /** The attempt seen last: a new one (a retry) moves the end. */
  attempt: number;
  /** Looks after `endAt` that found it still open: each waits a little longer. */
  late: number;
  /** Looks before `endAt` while the pace is not learnt yet. */
  early?: number;
  /** One attempt's nominal time (ms, before the pace): counted once per task, not at every look. */
  attemptMs?: number;
}

export interface Entry<T> {
  taskId: string;
  createdAt: number;
  /** When this process began to follow it (epoch ms). */
  since: number;
  /** The last time a look found it not ended (epoch ms): what bounds its duration from below. */
  openAt: number;
  /** The task's own estimate of the time it still needs, at the last look. */
  remaining?: { seconds: number; at: number };
  dueAt: number;
  /** Consecutive failed looks, and since when: reset by any readable answer. */
  failures: number;
  failingSince?: number;
  /** Whether any answer has shown the task to this process: until then "not found" may be a lag. */
  seen?: boolean;
  plan?: Plan;
  /** The caller's nominal time for the task (TrackHint.expectedMs): scaled by the pace learnt. */
  expectedMs?: number;
  onUpdate: (task: T) => void;
  resolve: (task: T) => void;
  reject: (error: unknown) => void;
}
