// Which ffmpeg clapper runs: the one `--ffmpeg` names, else CLAPPER_FFMPEG's, else `ffmpeg` on
// PATH, else the binary packaged in @ffmpeg-installer/ffmpeg. A machine's own ffmpeg is newer and
// has more codecs than the packaged 4.1, and an image can ship Debian's; the packaged one is the
// fallback that `npm install` alone provides. Whichever is chosen must answer `-version` like
// ffmpeg, and its version is part of what an episode is made from (its fingerprint), so changing
// ffmpeg makes the episode again.
import { constants } from "node:fs";
import { access, stat } from "node:fs/promises";
import { delimiter, join, resolve } from "node:path";
import { parseVersion, versionArgs } from "./ffmpeg.js";
import { FfmpegError, ffmpegBinary, type Launch, runFfmpeg } from "./ffmpeg-run.js";

type FfmpegSource = "flag" | "env" | "path" | "packaged";

export interface FoundFfmpeg {
  path: string;
  source: FfmpegSource;
  /** The token after `ffmpeg version` on the first line of `ffmpeg -version`. */
  version: string;
}

interface FindOptions {
  /** `--ffmpeg`'s value: a path, or a bare name looked up on PATH. */
  flag?: string | undefined;
  /** Where CLAPPER_FFMPEG and PATH are read (default: process.env). */
  env?: NodeJS.ProcessEnv | undefined;
  /** What a relative path is relative to (default: the working directory). */
  cwd?: string | undefined;
  signal?: AbortSignal | undefined;
  /** How long `-version` may take (default 20 s: a loaded machine starts a process slowly). */
  timeoutMs?: number | undefined;
  /** Where `-version` is started from (runFfmpeg's `launch`). */
  launch?: Launch | undefined;
}

const ENV_VAR = "CLAPPER_FFMPEG";
const VERSION_TIMEOUT_MS = 20_000;
const VERSION_MAX_BYTES = 64 * 1024;

const WHERE: Record<FfmpegSource, string> = {
  flag: "--ffmpeg",
  env: ENV_VAR,
  path: "PATH",
  packaged: "the packaged @ffmpeg-installer/ffmpeg",
};

async function isExecutableFile(path: string): Promise<boolean> {
  try {
    if (!(await stat(path)).isFile()) return false;
    await access(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first executable `name` in PATH's folders, as a shell finds it. */
async function onPath(name: string, env: NodeJS.ProcessEnv): Promise<string | undefined> {
  for (const dir of (env.PATH ?? "").split(delimiter)) {
    // An empty entry means the working directory to a shell; a command never relies on that.
    if (dir === "") continue;
    const candidate = join(dir, name);
    if (await isExecutableFile(candidate)) return candidate;
  }
  return undefined;
}

/** A path named by the flag or the variable: with a slash, a file; a bare name, looked up on PATH. */
async function named(value: string, source: FfmpegSource, o: FindOptions, env: NodeJS.ProcessEnv) {
  const path = value.includes("/") ? resolve(o.cwd ?? process.cwd(), value) : await onPath(value, env);
  if (path === undefined)
    throw new FfmpegError("missing", `${WHERE[source]} names ${value}, which is not on PATH`);
  if (!(await isExecutableFile(path)))
    throw new FfmpegError("missing", `${WHERE[source]} names ${path}, which is not an executable file`);
  return path;
}

async function choose(o: FindOptions): Promise<{ path: string; source: FfmpegSource }> {
  const env = o.env ?? process.env;
  const flag = o.flag?.trim();
  if (flag) return { path: await named(flag, "flag", o, env), source: "flag" };
  const variable = env[ENV_VAR]?.trim();
  if (variable) return { path: await named(variable, "env", o, env), source: "env" };
  const found = await onPath("ffmpeg", env);
  if (found) return { path: found, source: "path" };
  return { path: ffmpegBinary(), source: "packaged" };
}

/**
 * The ffmpeg to run, where it came from, and its version. Throws FfmpegError: "missing" when the
 * one chosen is not there or does not answer like ffmpeg (the message names where it came from),
 * "aborted" on the signal.
 */
export async function findFfmpeg(o: FindOptions = {}): Promise<FoundFfmpeg> {
  const { path, source } = await choose(o);
  const from = `the ffmpeg from ${WHERE[source]} (${path})`;
  let stdout: string;
  try {
    const r = await runFfmpeg(versionArgs(), {
      binary: path,
      launch: o.launch,
      timeoutMs: o.timeoutMs ?? VERSION_TIMEOUT_MS,
      signal: o.signal,
      maxStdout: VERSION_MAX_BYTES,
    });
    stdout = r.stdout.toString("utf8");
  } catch (error) {
    if (!(error instanceof FfmpegError) || error.kind === "aborted") throw error;
    throw new FfmpegError("missing", `${from} does not answer -version: ${error.message}`, error.tail);
  }
  const first = stdout.split("\n", 1)[0]?.trim() ?? "";
  const version = parseVersion(first);
  if (version === undefined)
    throw new FfmpegError(
      "missing",
      `${from} does not answer like ffmpeg: its -version began ${JSON.stringify(first.slice(0, 80))}, not "ffmpeg version ..."`,
    );
  return { path, source, version };
}
