/**
 * A generous per-result byte limit: far above any real result of that length and resolution, low
 * enough that an endless or padded body is stopped long before it fills a disk.
 */
import type { MediaKind } from "../media/kinds.js";

const MIB = 1024 * 1024;

type VideoTier = "480P" | "768P" | "1080P" | "2K" | "4K";
/** Generous H.264 byte rates (bytes per second of video): several times what encoders emit. */
const VIDEO_BYTES_PER_SECOND: Record<VideoTier, number> = {
  "480P": 2 * MIB,
  "768P": 4 * MIB,
  "1080P": 8 * MIB,
  "2K": 12 * MIB,
  "4K": 25 * MIB,
};
/** Room for containers, headers and any fixed overhead, whatever the duration. */
const LIMIT_BASE = 32 * MIB;
/** Slow speech in any script stays well under this; pauses included. */
const SPEECH_SECONDS_PER_CHAR = 0.5;
const SPEECH_FIXED_SECONDS = 10;
/** The slowest speed the speech API accepts. */
const SPEECH_MIN_SPEED = 0.5;
/** 48 kHz stereo 32-bit: more than any speech format the service offers. */
const SPEECH_BYTES_PER_SECOND = 48_000 * 2 * 4;

/** What each kind's limit is computed from. */
interface LimitInputs {
  video: { seconds: number; tier: VideoTier };
  speech: { countedChars: number; speed: number };
}

export type ResultLimitJob<K extends MediaKind = MediaKind> = { [P in K]: { kind: P } & LimitInputs[P] }[K];

const LIMITS: { [K in MediaKind]: (job: LimitInputs[K]) => number } = {
  video(job) {
    const seconds = Number.isFinite(job.seconds) && job.seconds > 0 ? job.seconds : 0;
    return Math.ceil(LIMIT_BASE + seconds * VIDEO_BYTES_PER_SECOND[job.tier]);
  },
  speech(job) {
    const chars = Number.isFinite(job.countedChars) && job.countedChars > 0 ? job.countedChars : 0;
    // Speed 0 means the default 1.0 to the service; below the API's minimum is treated as the minimum.
    const speed = Number.isFinite(job.speed) && job.speed > 0 ? Math.max(job.speed, SPEECH_MIN_SPEED) : 1;
    const seconds = (SPEECH_FIXED_SECONDS + chars * SPEECH_SECONDS_PER_CHAR) / speed;
    return Math.ceil(LIMIT_BASE + seconds * SPEECH_BYTES_PER_SECOND);
  },
};

export function resultLimit<K extends MediaKind>(job: ResultLimitJob<K>): number {
  return LIMITS[job.kind](job);
}
