// A stored result is checked for what it claims to be: a media file of the expected length.
import { Transform } from "node:stream";
import { mp4FileSeconds, mp4Seconds } from "../api/mp4.js";
import { wavSeconds } from "../api/wav.js";

export class MediaCheckError extends Error {
  override name = "MediaCheckError";
}

/** Duration in seconds of a stored WAV or MP4, read from its headers. */
export async function mediaSeconds(path: string, kind: "video" | "speech"): Promise<number | undefined> {
  if (kind === "video") return mp4FileSeconds(path);
  return (await (await musicMetadata()).parseFile(path, { duration: true })).format.duration;
}

/**
 * Throws when the file is not readable media, or a video's length differs from the requested
 * duration by more than half a second.
 */
export async function verifyMedia(
  path: string,
  kind: "video" | "speech",
  expectedSeconds?: number,
): Promise<number> {
  let seconds: number | undefined;
  try {
    seconds = await mediaSeconds(path, kind);
  } catch (error) {
    throw new MediaCheckError(
      `${path}: not a readable ${kind === "video" ? "MP4" : "WAV"} file (${(error as Error).message})`,
    );
  }
  if (seconds === undefined || !(seconds > 0)) {
    throw new MediaCheckError(`${path}: no duration in the file's headers`);
  }
  if (expectedSeconds !== undefined && Math.abs(seconds - expectedSeconds) > 0.5) {
    throw new MediaCheckError(`${path}: lasts ${seconds.toFixed(2)} s, ${expectedSeconds} s were requested`);
  }
  return seconds;
}

/**
 * Keeps the first `limit` bytes of a stream while passing everything through, so a result
 * streamed into S3 can still be checked from its headers without being read back.
 * Headers alone cannot tell a truncated or padded result: mediaCheck (media-check.ts) checks the
 * whole stream against the container's own sizes and supersedes this and verifyHead.
 */
export function headCapture(limit = 4 * 1024 * 1024): { stream: Transform; head: () => Buffer } {
  const chunks: Buffer[] = [];
  let kept = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _enc, done) {
      if (kept < limit) {
        const part = chunk.subarray(0, limit - kept);
        chunks.push(part);
        kept += part.length;
      }
      done(null, chunk);
    },
  });
  return { stream, head: () => Buffer.concat(chunks) };
}

/**
 * The same check as verifyMedia, from the first bytes of the file: WAV headers and fast-start MP4s
 * (moov before the media data) carry the duration there. Returns undefined when the head does not
 * hold it (a moov at the end), in which case the size and hash checks have to do.
 */
export async function verifyHead(
  head: Buffer,
  kind: "video" | "speech",
  expectedSeconds?: number,
): Promise<number | undefined> {
  let seconds: number | undefined;
  if (kind === "video") {
    seconds = mp4Seconds(head);
    if (seconds === undefined) return undefined;
  } else {
    seconds = wavSeconds(head);
    if (seconds === undefined)
      throw new MediaCheckError("not a readable WAV file (no RIFF/WAVE header with fmt and data)");
  }
  if (seconds === undefined || !(seconds > 0)) throw new MediaCheckError("no duration in the file's headers");
  if (expectedSeconds !== undefined && Math.abs(seconds - expectedSeconds) > 0.5) {
    throw new MediaCheckError(`lasts ${seconds.toFixed(2)} s, ${expectedSeconds} s were requested`);
  }
  return seconds;
}

/** music-metadata, loaded when an audio file is read (about 80 ms of CPU no other command pays). */
function musicMetadata(): Promise<typeof import("music-metadata")> {
  return import("music-metadata");
}
