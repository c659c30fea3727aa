// A local reference audio file becomes a registered asset in one call: checked here first
// (type, size, duration) so a file the service would refuse is never uploaded.
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import { basename } from "node:path";
import { ClapperApiError, ConnectionError, ServiceError } from "./errors.js";
import type { HttpClient } from "./http.js";
import { type Asset, MAX_REFERENCE_AUDIO_BYTES, UPLOAD_CONTENT_TYPES } from "./speech.js";
import type { SpeechClient } from "./speech-client.js";
import { uploadExtension } from "./speech-request.js";
import type { CallOptions } from "./video-client.js";

export const MIN_REFERENCE_MS = 500;
export const MAX_REFERENCE_MS = 15_000;

/** The file cannot be used as reference audio; nothing was uploaded. */
export class ReferenceAudioError extends ClapperApiError {
  override name = "ReferenceAudioError";
  constructor(message: string) {
    super(message, undefined, undefined, "invalid_reference_audio");
  }
}

export interface ReferenceAudioFacts {
  fileName: string;
  contentType: string;
  fileSize: number;
  durationMs: number;
}

/** Reads what the upload needs from the file and checks it against the service's limits. */
export async function inspectReferenceAudio(path: string): Promise<ReferenceAudioFacts> {
  const fileName = basename(path);
  const ext = uploadExtension(fileName);
  if (!ext) {
    const accepted = Object.keys(UPLOAD_CONTENT_TYPES).join(", ");
    throw new ReferenceAudioError(`${path}: expected a ${accepted} file, got ${JSON.stringify(fileName)}`);
  }
  let size: number;
  try {
    size = (await stat(path)).size;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ReferenceAudioError(
      code === "ENOENT" ? `${path}: file not found` : `${path}: cannot be read (${code ?? error})`,
    );
  }
  if (size === 0 || size > MAX_REFERENCE_AUDIO_BYTES) {
    throw new ReferenceAudioError(
      `${path}: expected a size from 1 to ${MAX_REFERENCE_AUDIO_BYTES} bytes (15 MiB), got ${size}`,
    );
  }
  let seconds: number | undefined;
  try {
    seconds = (await (await musicMetadata()).parseFile(path, { duration: true })).format.duration;
  } catch (error) {
    throw new ReferenceAudioError(`${path}: not a readable ${ext} audio file (${(error as Error).message})`);
  }
  if (seconds === undefined) throw new ReferenceAudioError(`${path}: the audio duration cannot be read`);
  const durationMs = Math.round(seconds * 1000);
  if (durationMs < MIN_REFERENCE_MS || durationMs > MAX_REFERENCE_MS) {
    throw new ReferenceAudioError(
      `${path}: expected a duration from 0.5 to 15 s, got ${(durationMs / 1000).toFixed(2)} s`,
    );
  }
  const contentType = UPLOAD_CONTENT_TYPES[ext][0] as string;
  return { fileName, contentType, fileSize: size, durationMs };
}

/** Whole upload flows tried when registration fails in a way that may or may not have happened. */
const FLOW_ATTEMPTS = 4;

/**
 * Local file -> upload URL -> PUT (no API key) -> registered asset.
 *
 * Registration is not idempotent (one upload record registers once, so a blind retry could fail on
 * its own success): when its answer is lost (a dropped connection, a 5xx), the whole flow starts
 * over with a fresh upload record. An orphaned upload or asset is harmless; the service drops it.
 */
export async function uploadReferenceAudio(
  http: HttpClient,
  speech: SpeechClient,
  path: string,
  opts: CallOptions = {},
): Promise<Asset> {
  const facts = await inspectReferenceAudio(path);
  for (let flow = 1; ; flow++) {
    const ticket = await speech.requestUpload(
      { file_name: facts.fileName, content_type: facts.contentType, file_size: facts.fileSize },
      opts,
    );
    await http.upload(ticket.upload_url, () => createReadStream(path), facts.fileSize, facts.contentType, {
      ...(opts.signal ? { signal: opts.signal } : {}),
      what: `upload ${facts.fileName}`,
    });
    try {
      return await speech.registerAsset(
        {
          object_key: ticket.object_key,
          file_name: facts.fileName,
          content_type: facts.contentType,
          file_size: facts.fileSize,
          duration_ms: facts.durationMs,
        },
        opts,
      );
    } catch (error) {
      const ambiguous = error instanceof ConnectionError || error instanceof ServiceError;
      if (!ambiguous || flow >= FLOW_ATTEMPTS) throw error;
    }
  }
}

/** music-metadata, loaded when an audio file is read (about 80 ms of CPU no other command pays). */
function musicMetadata(): Promise<typeof import("music-metadata")> {
  return import("music-metadata");
}
