// What each kind of job is in an episode: a video job makes a shot, a speech job a line laid over
// the shot its `shot:` names. The one place the episode tells the kinds apart.
import type { Job, SpeechJob, VideoJob } from "../manifest/job.js";

export const PART = { video: "shot", speech: "line" } as const satisfies Record<Job["kind"], string>;

export const isShot = (job: Job): job is VideoJob => PART[job.kind] === "shot";

export const isLine = (job: Job): job is SpeechJob => PART[job.kind] === "line";
