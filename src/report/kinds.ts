// What the reports tell differently of a shot's video and a line's audio, as data keyed by kind:
// the rest of the reports never tells the two services apart by branching.
import type { Job, SpeechJob, VideoJob } from "../manifest/index.js";

type JobKind = Job["kind"];

interface KindFacts {
  /** The element that plays its output on the review page, and the word for that output. */
  media: "video" | "audio";
  /** Whether its output gets a still for the review page's grid (a frame of the video). */
  still: boolean;
}

export const KINDS: Readonly<Record<JobKind, KindFacts>> = {
  video: { media: "video", still: true },
  speech: { media: "audio", still: false },
};

/** One function per kind, each given the job as its own type. */
export type ByKind<R> = { video: (job: VideoJob) => R; speech: (job: SpeechJob) => R };

/** The function of `table` for the job's kind, called with the job. */
export function byKind<R>(job: Job, table: ByKind<R>): R {
  // The one place the union is opened: the function picked by `job.kind` takes a job of that kind.
  return (table[job.kind] as (job: Job) => R)(job);
}
