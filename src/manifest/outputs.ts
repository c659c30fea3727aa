// Where each job's result is stored, relative to the run's output folder (or bucket prefix). One
// function, so that the check for collisions at plan time and the run agree on every name.
import { type Job, perKind } from "./job.js";
import type { Problems } from "./problems.js";

export const outputKey = perKind<string>({
  video: (shot) => `shots/${shot.rowId}${shot.take !== undefined ? `-take-${shot.take}` : ""}.mp4`,
  speech: (line) => `lines/${line.rowId}.wav`,
});

/**
 * Takes the jobs of rows whose output files are their own. Two jobs writing one file would
 * overwrite each other and be paid for again on every run; two names that differ only by case are
 * one file on macOS and Windows (and on stores synced there), so they are refused everywhere and
 * manifests stay portable. The later row is reported at its id, naming the job that writes the file
 * first, and makes no job.
 */
export class OutputCheck {
  /** Lowercased output key -> index in `jobs` of the job that writes it. */
  private readonly writers = new Map<string, number>();
  /** The line of the id of each job's row, by index in `jobs`. */
  private readonly idLines: number[] = [];

  constructor(
    private readonly jobs: Job[],
    private readonly problems: Problems,
  ) {}

  add(rowJobs: readonly Job[], file: string, idLine: () => number): void {
    const keys: string[] = [];
    for (const job of rowJobs) {
      const key = outputKey(job);
      const lower = key.toLowerCase();
      const index = this.writers.get(lower);
      if (index === undefined) {
        keys.push(lower);
        continue;
      }
      const first = this.jobs[index] as Job;
      const firstKey = outputKey(first);
      const where = `${first.file}:${this.idLines[index]}`;
      this.problems.error(
        file,
        idLine(),
        "id",
        firstKey === key
          ? `${job.id} would write ${key}, as ${first.id} (${where}) does: each job needs its own output file`
          : `${job.id} would write ${key}, which differs only by case from ${firstKey} of ${first.id} (${where}): they are one file on case-insensitive file systems (macOS, Windows)`,
      );
      return;
    }
    const line = idLine();
    rowJobs.forEach((job, i) => {
      this.writers.set(keys[i] as string, this.jobs.length);
      this.idLines.push(line);
      this.jobs.push(job);
    });
  }
}
