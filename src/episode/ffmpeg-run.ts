// Runs ffmpeg: one process per call, with a timeout, an AbortSignal, and the last lines of stderr
// kept for the message of a failure. The process is started from this one, or by a Spawner
// (spawner.ts) when this one is large. Which binary is chosen is ffmpeg-binary.ts's part (a flag, a
// variable, PATH, or the one packaged in @ffmpeg-installer/ffmpeg, found here by ffmpegBinary).
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { setPriority } from "node:os";

type FfmpegFailure = "missing" | "failed" | "timeout" | "aborted";

export class FfmpegError extends Error {
  override name = "FfmpegError";
  constructor(
    readonly kind: FfmpegFailure,
    message: string,
    /** The last lines ffmpeg printed on stderr. */
    readonly tail: readonly string[] = [],
  ) {
    super(message);
  }
}

const INSTALL_HINT =
  "reinstall the dependencies (npm install: @ffmpeg-installer/ffmpeg brings the binary for this platform as its optional dependency @ffmpeg-installer/<platform>-<arch>)";

/** The path of the packaged ffmpeg binary, or FfmpegError("missing") saying what to do. */
export function ffmpegBinary(): string {
  try {
    // Through require, not import: the package finds its binary from its own __dirname, which a
    // bundle would lose.
    const found = createRequire(import.meta.url)("@ffmpeg-installer/ffmpeg") as { path?: unknown };
    if (typeof found.path === "string" && found.path !== "") return found.path;
    throw new Error("it gave no path");
  } catch (error) {
    // The package throws a plain string for an unsupported platform or a missing binary.
    const reason = error instanceof Error ? error.message : String(error);
    throw new FfmpegError("missing", `ffmpeg is not available: ${reason.split("\n")[0]}; ${INSTALL_HINT}`);
  }
}

/** What runFfmpeg hears of a process it started. */
export interface ProcessEvents {
  stdout(chunk: Buffer): void;
  stderr(chunk: string): void;
  error(error: NodeJS.ErrnoException): void;
  close(code: number | null, signal: NodeJS.Signals | null): void;
}

/** A started process, as runFfmpeg stops it. */
interface Started {
  kill(signal: NodeJS.Signals): void;
  exited(): boolean;
}

interface LaunchOptions {
  /** Whether stdout is read (else discarded). */
  stdout: boolean;
  nice?: number | undefined;
}

/** Starts a process: here by default, or by a Spawner (spawner.ts) for a large process. */
export type Launch = (
  binary: string,
  args: readonly string[],
  o: LaunchOptions,
  on: ProcessEvents,
) => Started;

/** Starts the process from this one. */
export const launchHere: Launch = (binary, args, o, on) => {
  const child = spawn(binary, [...args], {
    stdio: ["ignore", o.stdout ? "pipe" : "ignore", "pipe"],
    // Its own process group is not needed: ffmpeg starts no children.
    windowsHide: true,
  });
  if (o.nice && child.pid !== undefined) {
    try {
      setPriority(child.pid, o.nice);
    } catch {
      // Not allowed here (a container's policy): it runs at the run's own priority.
    }
  }
  child.stderr?.setEncoding("utf8").on("data", on.stderr);
  child.stdout?.on("data", on.stdout);
  child.once("error", on.error);
  child.once("close", on.close);
  return { kill: (signal) => void child.kill(signal), exited: () => child.exitCode !== null };
};

interface RunFfmpegOptions {
  binary: string;
  /** Where the process is started from (launchHere by default). */
  launch?: Launch | undefined;
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  /** Bytes of stdout kept (a PCM read); stdout is discarded when 0. */
  maxStdout?: number;
  /** Non-zero exits that are an answer, not a failure (`ffmpeg -i FILE` with no output exits 1). */
  acceptExit?: (code: number) => boolean;
  /** A lower priority (a nice value, 1 to 19) for work done beside a run that should not slow it. */
  nice?: number;
}

interface FfmpegResult {
  code: number;
  stdout: Buffer;
  /** The end of stderr (at most STDERR_KEEP bytes). */
  stderr: string;
}

/** Enough for a file's description and the last lines of a failure; a long encode logs megabytes. */
const STDERR_KEEP = 64 * 1024;
const TAIL_LINES = 12;
/** After SIGTERM, how long ffmpeg may take to finish its file before SIGKILL. */
const KILL_GRACE_MS = 2000;

/** The last `n` non-empty lines of `text`. */
export function tailLines(text: string, n = TAIL_LINES): string[] {
  return text
    .split(/\r?\n|\r/)
    .map((l) => l.trimEnd())
    .filter((l) => l !== "")
    .slice(-n);
}

export function runFfmpeg(args: readonly string[], o: RunFfmpegOptions): Promise<FfmpegResult> {
  if (o.signal?.aborted) return Promise.reject(new FfmpegError("aborted", "stopped before ffmpeg started"));
  return new Promise((resolve, reject) => {
    let stderr = "";
    const stdout: Buffer[] = [];
    let stdoutBytes = 0;
    let ended: FfmpegFailure | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    const stop = (why: FfmpegFailure) => {
      if (ended || child.exited()) return;
      ended = why;
      child.kill("SIGTERM");
      killTimer = setTimeout(() => child.kill("SIGKILL"), KILL_GRACE_MS);
      killTimer.unref();
    };
    const timer = setTimeout(() => stop("timeout"), o.timeoutMs);
    const onAbort = () => stop("aborted");
    o.signal?.addEventListener("abort", onAbort, { once: true });
    const done = () => {
      clearTimeout(timer);
      if (killTimer) clearTimeout(killTimer);
      o.signal?.removeEventListener("abort", onAbort);
    };
    const child = (o.launch ?? launchHere)(
      o.binary,
      args,
      { stdout: Boolean(o.maxStdout), nice: o.nice },
      {
        stderr: (chunk) => {
          stderr += chunk;
          if (stderr.length > 2 * STDERR_KEEP) stderr = stderr.slice(-STDERR_KEEP);
        },
        stdout: (chunk) => {
          if (stdoutBytes >= (o.maxStdout ?? 0)) return;
          stdout.push(chunk);
          stdoutBytes += chunk.length;
        },
        error: (error) => {
          done();
          const reason =
            error.code === "ENOENT"
              ? "no such file (ENOENT)"
              : error.code === "EACCES"
                ? "not executable (EACCES)"
                : error.message;
          reject(new FfmpegError("missing", `cannot run ffmpeg at ${o.binary}: ${reason}; ${INSTALL_HINT}`));
        },
        close: (code, signal) => {
          done();
          const kept = stderr.slice(-STDERR_KEEP);
          const tail = tailLines(kept);
          if (ended === "timeout") {
            reject(
              new FfmpegError(
                "timeout",
                `ffmpeg did not finish within ${Math.round(o.timeoutMs / 1000)} s`,
                tail,
              ),
            );
            return;
          }
          if (ended === "aborted") {
            reject(new FfmpegError("aborted", "stopped: ffmpeg was ended", tail));
            return;
          }
          const exit = code ?? -1;
          if (exit !== 0 && !o.acceptExit?.(exit)) {
            const how = signal ? `was killed by ${signal}` : `exited with code ${exit}`;
            reject(
              new FfmpegError("failed", `ffmpeg ${how}${tail.length > 0 ? `: ${tail.at(-1)}` : ""}`, tail),
            );
            return;
          }
          resolve({ code: exit, stdout: Buffer.concat(stdout).subarray(0, o.maxStdout ?? 0), stderr: kept });
        },
      },
    );
  });
}
