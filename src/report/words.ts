// The words every report uses for the same things: a job's status, the counts, a request id.
import type { Report, ReportJob } from "./model.js";

/** The job's status word, with where an unfinished job stands. */
export function statusText(j: ReportJob): string {
  return j.status === "pending" && j.stage && j.stage !== "pending" ? `pending (${j.stage})` : j.status;
}

/** `1 job`, `2 jobs`: a count with its noun. */
export function plural(n: number, noun: string, nouns = `${noun}s`): string {
  return `${n} ${n === 1 ? noun : nouns}`;
}

/**
 * The counts in the words every summary uses (the run's end, report.md, the review page, the
 * live line): generated (made in this run: `succeeded`), reused (`skipped`), failed, cancelled,
 * pending.
 */
export function countsText(c: Report["counts"]): string {
  return `${plural(c.total, "job")}: ${c.succeeded} generated, ${c.skipped} reused, ${c.failed} failed, ${c.cancelled} cancelled, ${c.pending} pending`;
}

/** The request id a service error message carries (`... (request req_123)`), if any. */
export function requestIdOf(message: string | undefined): string | undefined {
  return message ? /\(request ([^\s()]+)\)/.exec(message)?.[1] : undefined;
}
