// How long a task should take at the services' nominal pace: the first look's wait (scaled by the
// pace learnt, see pace.ts), and the order creates go in across both services, longest first.
import { countBillableChars } from "../api/speech.js";

/** Nominal queue wait of a speech task (the emulator's), before its first attempt. */
export const SPEECH_QUEUE_MS = 1000;
/** Nominal time of one attempt: a fixed part, and a part per counted character at speed 1. */
const SPEECH_ATTEMPT_MS = 2000;
const SPEECH_CHAR_MS = 15;

/** Nominal time of one attempt of a line: what a retry adds. */
export function attemptMs(text: string, speed: number): number {
  // Faster speech makes less audio to generate. Slower speech is not assumed to take longer: a
  // prediction far too long holds a finished line back for all of the excess, while one too short
  // costs a look and at most a minimum interval.
  const pace = speed > 1 ? speed : 1;
  return SPEECH_ATTEMPT_MS + (SPEECH_CHAR_MS * countBillableChars(text)) / pace;
}

/**
 * How long a speech task with this text should take from creation to end at the service's
 * nominal pace: its queue wait and one attempt. A `track()` hint; the poller scales it by the pace
 * it observes, so a slower or faster service (or the sandbox's time scale) is learned.
 */
export function expectedSpeechMs(text: string, speed = 1): number {
  return SPEECH_QUEUE_MS + attemptMs(text, speed || 1);
}

/** Nominal stage times of a video task (the emulator's; the spec names the stages, not their times). */
const VIDEO_QUEUE_MS = 5000;
const VIDEO_OPTIMIZE_MS = 8000;
const VIDEO_BASE_MS = 32_000;
const VIDEO_PER_SECOND_MS = 5100;
const VIDEO_UPSCALE_MS = 10_000;
const VIDEO_UPSCALE_PER_SECOND_MS = 2000;
const VIDEO_LITE_SHARE = 0.6;
const UPSCALED = new Set(["1080P", "2K", "4K"]);

/**
 * How long a video task of this request should take from creation to end at a nominal pace: the
 * stages the spec names (queue, prompt optimization, generation, upload, upscale). Used to order
 * creates across both services, longest first; only the order of these figures matters.
 */
export function expectedVideoMs(request: {
  model?: string;
  resolution?: string;
  duration?: number;
  use_context_ir?: boolean;
}): number {
  const seconds = request.duration ?? 5;
  let work = VIDEO_BASE_MS + VIDEO_PER_SECOND_MS * seconds;
  if (request.use_context_ir === true) work += VIDEO_OPTIMIZE_MS;
  if (UPSCALED.has(String(request.resolution ?? "").toUpperCase())) {
    work += VIDEO_UPSCALE_MS + VIDEO_UPSCALE_PER_SECOND_MS * seconds;
  }
  return VIDEO_QUEUE_MS + work * (request.model === "vid-h3-lite" ? VIDEO_LITE_SHARE : 1);
}
