// `clapper assemble MANIFEST`: the run located as every command beside `run` finds it, the episode
// made (src/episode/), its failures turned into the exit codes docs/configuration.md promises.
import type { Logger } from "pino";
import { type AssembleAnswer, assembleEpisode } from "../../../episode/assemble.js";
import { EpisodeError, type EpisodeFailure, EpisodeFileError } from "../../../episode/errors.js";
import { displayPath } from "../../../manifest/problems.js";
import { PicksError } from "../../../review/picks.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import { ExitError, fsExit, isFsError } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";
import { locate, manifestExit, ownState } from "../run/state.js";

export interface AssembleCommandOptions {
  manifest: string;
  cwd: string;
  state?: string | undefined;
  s3?: S3ClientOptions;
  output?: string | undefined;
  /** A sharded run: its N shards' states together hold every job. */
  shards?: number | undefined;
  force?: boolean;
  timeoutSeconds?: number | undefined;
  /** `--ffmpeg`; CLAPPER_FFMPEG and PATH are read from `env`. */
  ffmpeg?: string | undefined;
  env?: NodeJS.ProcessEnv;
  signal?: AbortSignal;
  logger?: Logger;
}

const EXIT_OF_FAILURE: Record<EpisodeFailure, ExitCode> = {
  refused: ExitCode.Usage,
  "not-ready": ExitCode.Failed,
  failed: ExitCode.Failed,
  locked: ExitCode.Locked,
  interrupted: ExitCode.Interrupted,
  unreachable: ExitCode.Unreachable,
};

export async function assemble(o: AssembleCommandOptions): Promise<AssembleAnswer> {
  const shards = o.shards ?? 1;
  const places = await Promise.all(
    Array.from({ length: shards }, (_, i) =>
      locate(o.manifest, o.cwd, {
        state: o.state,
        ...(shards > 1 ? { shard: { index: i + 1, total: shards } } : {}),
      }),
    ),
  );
  try {
    return await assembleEpisode({
      manifest: o.manifest,
      places,
      readState: (place) => ownState(place, o.s3),
      cwd: o.cwd,
      s3: o.s3,
      output: o.output,
      ...(o.force !== undefined ? { force: o.force } : {}),
      timeoutSeconds: o.timeoutSeconds,
      ffmpeg: o.ffmpeg,
      env: o.env,
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.logger ? { logger: o.logger } : {}),
    });
  } catch (error) {
    throw exitOf(error, o.cwd);
  }
}

/** An episode's failure as its exit code, with what to do. */
function exitOf(error: unknown, cwd: string): unknown {
  // A bad picks.yaml is told as a manifest's problems are: exit 2, its file, line and field.
  if (error instanceof PicksError) {
    const file = displayPath(error.file, cwd);
    return manifestExit(
      file,
      [{ severity: "error", file, line: error.line, field: error.field, message: error.reason }],
      [],
    );
  }
  if (error instanceof EpisodeError) {
    return new ExitError(
      EXIT_OF_FAILURE[error.failure],
      error.message,
      error.data ? { data: error.data } : {},
    );
  }
  if (error instanceof EpisodeFileError) {
    return isFsError(error.cause)
      ? fsExit(error.cause, { action: error.action, path: error.path })
      : error.cause;
  }
  if (isFsError(error))
    return fsExit(error, { action: "assemble the episode at", path: error.path ?? "its folder" });
  return error;
}

export function renderAssemble(a: AssembleAnswer): string {
  const e = a.episode;
  const chosen = a.takes.filter((t) => t.source !== "default");
  const head = a.status === "up-to-date" ? `episode up to date: ${e.uri}` : `episode assembled: ${e.uri}`;
  const lines = [
    head,
    `  ${a.shots.length} shot${a.shots.length === 1 ? "" : "s"}, ${a.shots.reduce((n, s) => n + s.lines.length, 0)} lines, ${e.duration_seconds} s, ${e.width}x${e.height} at ${e.fps} fps, ${e.bytes} bytes, sha256 ${e.sha256}`,
    `  captions: ${a.captions.srt.uri}, ${a.captions.vtt.uri} (${a.captions.cues} cues)`,
    // Take 1 by default goes without saying: only the chosen ones are listed.
    ...(chosen.length > 0
      ? [`  takes: ${chosen.map((t) => `${t.shot} take ${t.take} (${t.source})`).join(", ")}`]
      : []),
    `  ffmpeg ${a.ffmpeg.version} (${a.ffmpeg.source}: ${a.ffmpeg.path})`,
    `  record: ${a.record}`,
    ...a.warnings.map((w) => `  warning: ${w}`),
  ];
  return lines.join("\n");
}
