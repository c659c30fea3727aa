// The statuses of both kinds of task, apart from the command so the CLI's flags load without the API.
export const VIDEO_STATUSES: ReadonlySet<string> = new Set([
  "queued",
  "running",
  "succeeded",
  "failed",
  "cancelled",
]);
export const SPEECH_STATUSES: ReadonlySet<string> = new Set([
  "queued",
  "generating",
  "succeeded",
  "failed",
  "cancelled",
]);
/** Every status of either kind of task, for `tasks list --status`. */
export const TASK_STATUSES: readonly string[] = [...new Set([...VIDEO_STATUSES, ...SPEECH_STATUSES])];

/** The statuses a task ends in, on both services. */
export const ENDED: ReadonlySet<string> = new Set(["succeeded", "failed", "cancelled"]);

/** What a cancel answered with `status` did: cancelled; nothing, the task had ended; or stopping. */
export function outcomeOf(status: string): "cancelled" | "stopping" | "ended" {
  return status === "cancelled" ? "cancelled" : ENDED.has(status) ? "ended" : "stopping";
}
