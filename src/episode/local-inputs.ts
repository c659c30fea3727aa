// Every input of the episode as a local file ffmpeg can read: a local output as it is, one in S3
// copied into the temporary folder; each checked against the sha256 the run's state recorded.
import { createWriteStream } from "node:fs";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { S3ClientOptions } from "../sinks/s3.js";
import type { LocalShot } from "./build.js";
import { EpisodeError } from "./errors.js";
import { type ChosenShot, hashFile, type Stored } from "./inputs.js";

/** An input fetched from S3 larger than this is refused rather than filling the temporary folder. */
const INPUT_MAX_BYTES = 4 * 1024 * 1024 * 1024;

interface FetchOptions {
  /** The manifest as named on the command line, for the advice in messages. */
  manifest: string;
  s3?: S3ClientOptions | undefined;
  signal?: AbortSignal | undefined;
}

/** A system error of the file system (open, read), as opposed to an abort or a bug. */
function isFileSystemError(error: unknown): boolean {
  const e = error as NodeJS.ErrnoException | undefined;
  return error instanceof Error && typeof e?.code === "string" && typeof e.syscall === "string";
}

/** Local paths of every input, each checked against the sha256 the state recorded for it. */
export async function localInputs(
  shots: readonly ChosenShot[],
  work: string,
  o: FetchOptions,
): Promise<LocalShot[]> {
  const fetchOne = async (stored: Stored): Promise<string> => {
    const path = /^s3:\/\//i.test(stored.uri) ? await download(stored, work, o) : stored.uri;
    const h = await hashFile(path, o.signal).catch((error: unknown) => {
      if (isFileSystemError(error))
        throw new EpisodeError(
          "not-ready",
          `${stored.job}: its stored output ${stored.uri} cannot be read (${(error as Error).message}); run clapper run again to collect it`,
        );
      throw error;
    });
    if (h.sha256 !== stored.sha256)
      throw new EpisodeError(
        "not-ready",
        `${stored.job}: ${stored.uri} is not the file the run stored (its sha256 differs); run clapper run ${o.manifest} again to restore it`,
      );
    return path;
  };
  const out: LocalShot[] = [];
  for (const shot of shots) {
    const lines = [];
    for (const line of shot.lines) lines.push({ ...line, path: await fetchOne(line) });
    out.push({ ...shot, path: await fetchOne(shot), lines });
  }
  return out;
}

/** An input stored in S3, copied into the temporary folder, refused past the size the state recorded. */
async function download(stored: Stored, work: string, o: FetchOptions): Promise<string> {
  if (stored.bytes > INPUT_MAX_BYTES)
    throw new EpisodeError(
      "not-ready",
      `${stored.job}: ${stored.uri} is ${stored.bytes} bytes, more than assemble fetches`,
    );
  const { createS3Client, parseS3Uri, S3Sink } = await import("../sinks/s3.js");
  const at = stored.uri.lastIndexOf("/");
  const sink = new S3Sink(createS3Client(o.s3), parseS3Uri(stored.uri.slice(0, at)));
  const body = await sink.read(stored.uri.slice(at + 1));
  const path = join(
    work,
    `${stored.job.replace(/[^A-Za-z0-9._-]/g, "_")}${stored.key.slice(stored.key.lastIndexOf("."))}`,
  );
  let bytes = 0;
  body.on("data", (chunk: Buffer) => {
    bytes += chunk.length;
    if (bytes > stored.bytes)
      body.destroy(new Error(`${stored.uri} is larger than the ${stored.bytes} bytes recorded`));
  });
  await pipeline(body, createWriteStream(path), ...(o.signal ? [{ signal: o.signal }] : []));
  return path;
}
