// Where each job's result is stored, relative to the run's output folder (or bucket prefix). One
// function, so that the check for collisions at plan time and the run agree on every name.
import type { Job } from "./expand.js";

export function outputKey(job: Job): string {
  if (job.kind === "video")
    return `shots/${job.rowId}${job.take !== undefined ? `-take-${job.take}` : ""}.mp4`;
  return `lines/${job.rowId}.wav`;
}
