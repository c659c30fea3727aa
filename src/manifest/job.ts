// What a manifest row becomes: a job, with the create body to send, its fingerprint and its
// estimated points. A shot makes one video job per take; a line makes one speech job.
import type { ReferenceAudioFacts } from "../api/reference-audio.js";
import type { SpeechCreateRequest } from "../api/speech-request.js";
import type { ResolutionTier } from "../api/video.js";
import type { VideoCreateRequest } from "../api/video-request.js";
import type { MaterialRef } from "./materials.js";
import type { AutoDuration } from "./timing.js";

/** A voice as the manifest names it, resolved as far as possible without the service. */
export type VoiceSpec =
  | { source: "preset" | "custom"; voiceId: string }
  | ({ source: "file"; path: string; sha256: string; saveAs?: string } & ReferenceAudioFacts);

export interface SkillRef {
  name: string;
  /** Set when the manifest's `skills` map defines it (synced before a run). */
  file?: string;
  sha256?: string;
}

interface JobBase {
  /** `shot/s01`, `shot/s02/take-2`, `line/n01`. */
  id: string;
  rowId: string;
  file: string;
  line: number;
  fingerprint: string;
  /** Estimated points; null when the speech price is unknown. */
  points: number | null;
}

export interface VideoJob extends JobBase {
  kind: "video";
  take?: number;
  tier: ResolutionTier;
  /** Seconds; for an auto shot not fitted yet, the estimate. */
  duration: number;
  /** `duration: auto`: timed to its narration lines (src/manifest/timing.ts). */
  auto?: AutoDuration;
  /** The create body, with material URLs still to be staged (`materials[i]` fills `content[contentIndex]`). */
  request: VideoCreateRequest;
  materials: Array<{ contentIndex: number; ref: MaterialRef }>;
  skill?: SkillRef;
}

export interface SpeechJob extends JobBase {
  kind: "speech";
  shot?: string;
  countedChars: number;
  /** The create body; `voice` is filled from `voiceSpec` at run time (a file becomes an asset). */
  request: Omit<SpeechCreateRequest, "voice">;
  voice: VoiceSpec;
}

export type Job = VideoJob | SpeechJob;

/** What each kind of job answers, as a table: `{ video: (shot) => ..., speech: (line) => ... }`. */
type PerKind<R> = { [K in Job["kind"]]: (job: Extract<Job, { kind: K }>) => R };

/** The function that answers for any job from its kind's entry of the table. */
export function perKind<R>(table: PerKind<R>): (job: Job) => R {
  // The table's entry for job.kind takes that very kind of job; TypeScript cannot follow the pairing.
  return (job) => (table[job.kind] as (job: Job) => R)(job);
}

/** The shot a job belongs to: a shot's own row, or the shot a line names (if it names one). */
export const shotOf = perKind<string | undefined>({
  video: (shot) => shot.rowId,
  speech: (line) => line.shot,
});
