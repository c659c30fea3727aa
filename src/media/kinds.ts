// What each kind of result is, as data: its container, how it is scanned and how a stored one is
// measured. The checks read this table instead of asking which kind they hold.
import { Mp4Scanner, mp4FileSeconds } from "./mp4.js";
import type { Scanner } from "./scanner.js";
import { WavScanner } from "./wav.js";

export type MediaKind = "video" | "speech";

interface MediaRules {
  /** The container's name, as refusals quote it. */
  label: "MP4" | "WAV";
  contentType: string;
  /** A scanner for one result that may be at most `maxBytes` long. */
  scanner: (maxBytes: number) => Scanner;
  /** Where the scanner's duration comes from, as a refusal for the wrong length says it. */
  measuredBy: string;
  /** Duration in seconds of a stored file, read from its headers. */
  fileSeconds: (path: string) => Promise<number | undefined>;
}

export const MEDIA: Record<MediaKind, MediaRules> = {
  video: {
    label: "MP4",
    contentType: "video/mp4",
    scanner: (maxBytes) => new Mp4Scanner(maxBytes),
    measuredBy: "sample table",
    fileSeconds: mp4FileSeconds,
  },
  speech: {
    label: "WAV",
    contentType: "audio/wav",
    scanner: (maxBytes) => new WavScanner(maxBytes),
    measuredBy: "data chunk",
    fileSeconds: async (path) =>
      (await (await musicMetadata()).parseFile(path, { duration: true })).format.duration,
  },
};

/** Duration in seconds of a stored WAV or MP4, read from its headers. */
export async function mediaSeconds(path: string, kind: MediaKind): Promise<number | undefined> {
  return MEDIA[kind].fileSeconds(path);
}

/** music-metadata, loaded when an audio file is read (about 80 ms of CPU no other command pays). */
function musicMetadata(): Promise<typeof import("music-metadata")> {
  return import("music-metadata");
}
