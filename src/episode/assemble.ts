// The episode: the run's stored shots, each with its narration, cut into one file (OUTPUT/NAME/
// episode.mp4, or a file named), checked, and recorded with its inputs in reports/assemble.json.
// Nothing changed since the last episode: nothing is done. Failures are EpisodeErrors (or file
// system errors, which the caller words); `clapper assemble` maps them to exit codes.
import { randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, mkdtemp, readdir, rename, rm, stat, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import type { Logger } from "pino";
import { acquireLock, LockHeldError } from "../locks/file-lock.js";
import { processAlive } from "../locks/process-alive.js";
import { LocalSink } from "../sinks/local.js";
import type { S3ClientOptions } from "../sinks/s3.js";
import { OutputError, type Sink } from "../sinks/sink.js";
import type { LocatedRun } from "../state/locate.js";
import { isS3State } from "../state/location.js";
import type { RunState } from "../state/run-state.js";
import { AssembleError, type Built, buildEpisode } from "./build.js";
import { EpisodeError, EpisodeFileError } from "./errors.js";
import { parseVersion, versionArgs } from "./ffmpeg.js";
import { FfmpegError, ffmpegBinary, runFfmpeg } from "./ffmpeg-run.js";
import { fitFromState } from "./fitting.js";
import {
  type Chosen,
  type ChosenShot,
  chooseInputs,
  hashFile,
  inputsFingerprint,
  type Stored,
} from "./inputs.js";
import { localInputs } from "./local-inputs.js";
import { isShot } from "./parts.js";
import {
  EPISODE_KEY,
  type EpisodeRecord,
  episodeIntact,
  noteInReport,
  RECORD_KEY,
  readRecord,
} from "./record.js";
import { type AssembleSettings, DEFAULT_ASSEMBLE } from "./settings.js";

/** A music bed is minutes of compressed audio; a larger file is a mistake, not a bed. */
const MUSIC_MAX_BYTES = 512 * 1024 * 1024;

interface AssembleOptions {
  /** The manifest as named on the command line, for the advice in messages. */
  manifest: string;
  /** The run, located: a sharded run has a place (a state, a lock) per shard, together holding every job. */
  places: readonly LocatedRun[];
  /** One place's state, checked to belong to the manifest. */
  readState: (place: LocatedRun) => Promise<RunState>;
  cwd: string;
  s3?: S3ClientOptions | undefined;
  /** The episode's file (relative to cwd); default: episode.mp4 beside the run's shots/ and lines/. */
  output?: string | undefined;
  /** Assemble even when the recorded inputs are unchanged. */
  force?: boolean;
  /** Seconds ffmpeg may take for the episode. */
  timeoutSeconds?: number | undefined;
  signal?: AbortSignal;
  logger?: Logger;
}

export type AssembleAnswer = EpisodeRecord & { status: "assembled" | "up-to-date"; record: string };

export async function assembleEpisode(o: AssembleOptions): Promise<AssembleAnswer> {
  const started = performance.now();
  const located = o.places[0] as LocatedRun;
  const { manifest } = located;
  // A sharded run keeps a state per shard: each job is in its own shard's, so together they hold all.
  const readStates = async (): Promise<RunState> => {
    const states = await Promise.all(o.places.map((place) => o.readState(place)));
    const first = states[0] as RunState;
    return o.places.length > 1
      ? { ...first, jobs: Object.assign({}, ...states.map((st) => st.jobs)) }
      : first;
  };
  if (!located.loaded.jobs.some(isShot))
    throw new EpisodeError("refused", `${manifest.display} has no shots: there is no episode to assemble`);
  const state0 = await readStates();
  // Nothing recorded: no run was ever made from this state.
  if (state0.run === undefined && Object.keys(state0.jobs).length === 0) {
    throw new EpisodeError(
      "not-ready",
      `no run of ${manifest.name} yet: no shot is stored; run clapper run ${manifest.display} first`,
    );
  }
  // The run's lock: a run writing a shot now would change an input under ffmpeg, and two
  // assemblies of one run would race for one episode.
  const locks = await lockRun(o.places);
  try {
    // Read again under the lock: what a run finished meanwhile counts.
    return await assembleLocked(o, await readStates(), started);
  } catch (error) {
    throw failureOf(error, o.signal);
  } finally {
    for (const held of locks.reverse()) await held.release();
  }
}

type Held = Awaited<ReturnType<typeof acquireLock>>;

/** Every local place's lock (a state in S3 is locked through the coordinator, by the run). */
async function lockRun(places: readonly LocatedRun[]): Promise<Held[]> {
  const locks: Held[] = [];
  for (const { statePath } of places) {
    try {
      if (!isS3State(statePath)) locks.push(await acquireLock(`${statePath}.lock`));
    } catch (error) {
      for (const held of locks.reverse()) await held.release();
      if (error instanceof LockHeldError) throw new EpisodeError("locked", error.message);
      throw new EpisodeFileError(error, "take the run's lock", `${statePath}.lock`);
    }
  }
  return locks;
}

async function assembleLocked(o: AssembleOptions, state: RunState, started: number): Promise<AssembleAnswer> {
  const { manifest } = o.places[0] as LocatedRun;
  const settings: AssembleSettings = manifest.assemble ?? DEFAULT_ASSEMBLE;
  // Shots timed to their narration, as the run fitted them (their fingerprints follow the fit).
  const jobs = [...(o.places[0] as LocatedRun).loaded.jobs];
  await fitFromState(jobs, state);
  const chosen = chooseInputs(jobs, state, settings);
  if (chosen.refusals.length > 0) throw refusedInputs(chosen, state, manifest);
  const runSink = await sinkOf(baseOf(chosen.shots[0] as ChosenShot), o.s3);
  const target = o.output ? resolve(o.cwd, o.output) : runSink.uri(EPISODE_KEY);
  if (o.output && /^s3:\/\//i.test(o.output))
    throw new EpisodeError(
      "refused",
      "--output: a local file path is expected; an S3 run's episode goes beside its shots",
    );
  const binary = ffmpegBinary();
  const version = await ffmpegVersion(binary, o.signal);
  const music = settings.music ? await hashMusic(settings.music.path, o.signal) : undefined;
  const fingerprint = inputsFingerprint({
    shots: chosen.shots,
    timing: manifest.timing,
    settings,
    music,
    ffmpegVersion: version,
    target,
  });

  const recorded = await readRecord(runSink);
  if (!o.force && recorded?.fingerprint === fingerprint && recorded.episode.uri === target) {
    if (await episodeIntact(recorded, runSink, target, o.signal)) {
      // A run since may have written its report again: the episode goes back in (if it is not there).
      await noteInReport(runSink, recorded, runSink.uri(RECORD_KEY), o.logger);
      o.logger?.info({ event: "episode-up-to-date", uri: target }, "episode up to date");
      return { ...recorded, status: "up-to-date", record: runSink.uri(RECORD_KEY) };
    }
  }

  const built = await buildInPlace(o, { chosen, settings, runSink, target, binary });
  const record: EpisodeRecord = {
    episode: {
      uri: target,
      bytes: built.bytes,
      sha256: built.sha256,
      duration_seconds: built.duration_seconds,
      width: built.width,
      height: built.height,
      fps: built.fps,
      streams: built.streams,
    },
    fingerprint,
    name: manifest.name,
    manifest: manifest.display,
    run_id: state.run?.id ?? null,
    assembled_at: new Date().toISOString(),
    ffmpeg: { version },
    settings: {
      timing: { lead: manifest.timing.lead, gap: manifest.timing.gap },
      transition: settings.transition,
      transition_seconds: settings.transition === "none" ? 0 : settings.transitionSeconds,
      music: settings.music?.written ?? null,
      music_db: settings.music ? settings.musicDb : null,
      takes: settings.takes,
    },
    music: music && settings.music ? { path: settings.music.written, ...music } : null,
    shots: built.shots,
    unplaced_lines: chosen.unplaced,
    warnings: [...built.warnings, ...unplacedWarnings(chosen)],
    elapsed_seconds: Math.round(performance.now() - started) / 1000,
    ffmpeg_seconds: built.ffmpeg_seconds,
  };
  const recordUri = await runSink.writeText(
    RECORD_KEY,
    `${JSON.stringify(record, null, 2)}\n`,
    "application/json",
  );
  await noteInReport(runSink, record, recordUri, o.logger);
  o.logger?.info(
    {
      event: "episode-assembled",
      uri: target,
      bytes: built.bytes,
      seconds: built.duration_seconds,
      ffmpeg_seconds: built.ffmpeg_seconds,
    },
    "episode assembled",
  );
  return { ...record, status: "assembled", record: recordUri };
}

function unplacedWarnings(chosen: Chosen): string[] {
  const n = chosen.unplaced.length;
  return n > 0 ? [`${n} line(s) name no shot and are not in the episode: ${chosen.unplaced.join(", ")}`] : [];
}

/** Every input not stored as the manifest now asks, listed, with how a run makes them. */
function refusedInputs(chosen: Chosen, state: RunState, manifest: LocatedRun["manifest"]): EpisodeError {
  const n = chosen.refusals.length;
  // A plain run leaves failed shots failed: only --retry-failed makes them again.
  const failed = chosen.refusals.some((r) => {
    const st = state.jobs[r.job];
    return st?.status === "failed" || st?.status === "cancelled";
  });
  const next = failed
    ? `clapper run ${manifest.display} --retry-failed makes the failed ones again`
    : `run clapper run ${manifest.display} first`;
  return new EpisodeError(
    "not-ready",
    `cannot assemble ${manifest.name}: ${chosen.refusals.map((r) => r.reason).join("; ")}; ${next} (${n} input${n === 1 ? "" : "s"} missing)`,
    { refused: chosen.refusals },
  );
}

async function ffmpegVersion(binary: string, signal: AbortSignal | undefined): Promise<string> {
  const { stdout } = await runFfmpeg(versionArgs(), {
    binary,
    timeoutMs: 30_000,
    signal,
    maxStdout: 64 * 1024,
  });
  return parseVersion(stdout.toString("utf8")) ?? "unknown";
}

/**
 * The episode built from local copies of its inputs in a temporary folder, and put in place: a
 * local one renamed over the target from beside it, one in S3 uploaded beside the run's shots.
 */
async function buildInPlace(
  o: AssembleOptions,
  b: { chosen: Chosen; settings: AssembleSettings; runSink: Sink; target: string; binary: string },
): Promise<Built> {
  const { manifest } = o.places[0] as LocatedRun;
  const { settings, runSink, target } = b;
  const work = await mkdtemp(join(tmpdir(), "clapper-assemble-"));
  try {
    const shots = await localInputs(b.chosen.shots, work, o);
    const local = !/^s3:\/\//i.test(target);
    const temp = local ? tempBeside(target) : join(work, "episode.mp4");
    if (local) await prepareFolder(dirname(target), basename(target));
    o.logger?.info({ event: "assemble-started", shots: shots.length, target }, "assembling the episode");
    try {
      const built = await buildEpisode({
        shots,
        timing: manifest.timing,
        settings,
        music: settings.music,
        output: temp,
        binary: b.binary,
        timeoutMs: o.timeoutSeconds !== undefined ? o.timeoutSeconds * 1000 : undefined,
        signal: o.signal,
      });
      // Only a checked episode takes the name: a kill before this leaves the old one (or none).
      if (local) await rename(temp, target);
      else
        await runSink.write(EPISODE_KEY, createReadStream(temp), {
          expectedBytes: built.bytes,
          contentType: "video/mp4",
          ...(o.signal ? { signal: o.signal } : {}),
        });
      return built;
    } finally {
      if (local) await unlink(temp).catch(() => undefined);
    }
  } finally {
    await rm(work, { recursive: true, force: true }).catch(() => undefined);
  }
}

/** Every failure in the episode's terms, with what to do; a file system error is left to the caller. */
function failureOf(error: unknown, signal: AbortSignal | undefined): unknown {
  if (error instanceof EpisodeError || error instanceof EpisodeFileError) return error;
  if (error instanceof FfmpegError) {
    if (error.kind === "missing") return new EpisodeError("refused", error.message);
    if (error.kind === "aborted" || signal?.aborted)
      return new EpisodeError(
        "interrupted",
        "interrupted: the episode was not written (the one before, if any, is untouched); run again",
      );
    const tail = error.tail.slice(-3).join(" | ");
    return new EpisodeError(
      "failed",
      `${error.message}${tail ? ` (ffmpeg's last lines: ${tail})` : ""}; the episode was not written`,
      { ffmpeg_stderr: [...error.tail] },
    );
  }
  if (signal?.aborted)
    return new EpisodeError("interrupted", "interrupted: the episode was not written; run again");
  if (error instanceof AssembleError)
    return new EpisodeError("failed", `${error.message}; the episode was not written`);
  if (error instanceof OutputError)
    return new EpisodeError(error.unreachable ? "unreachable" : "refused", error.message);
  return error;
}

/** The run's output folder (or S3 prefix): a stored shot's location without its key. */
function baseOf(stored: Stored): string {
  const suffix = `/${stored.key}`;
  if (stored.uri.endsWith(suffix)) return stored.uri.slice(0, -suffix.length);
  return dirname(dirname(stored.uri));
}

async function sinkOf(base: string, s3: S3ClientOptions | undefined): Promise<Sink> {
  if (!/^s3:\/\//i.test(base)) return new LocalSink(base);
  const { createS3Client, parseS3Uri, S3Sink } = await import("../sinks/s3.js");
  return new S3Sink(createS3Client(s3), parseS3Uri(base));
}

async function hashMusic(path: string, signal: AbortSignal | undefined) {
  const { size } = await stat(path);
  if (size > MUSIC_MAX_BYTES)
    throw new EpisodeError(
      "refused",
      `assemble.music: ${path} is ${size} bytes, over the ${MUSIC_MAX_BYTES} bytes a music bed may have`,
    );
  return hashFile(path, signal);
}

const TEMP_MARK = ".assembling-";

function tempBeside(target: string): string {
  return join(
    dirname(target),
    `.${basename(target)}${TEMP_MARK}${process.pid}-${randomBytes(4).toString("hex")}`,
  );
}

/** The folder made, and the temporary episodes that killed assemblies left in it removed. */
async function prepareFolder(dir: string, name: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  const prefix = `.${name}${TEMP_MARK}`;
  for (const entry of await readdir(dir)) {
    if (!entry.startsWith(prefix)) continue;
    const pid = Number(entry.slice(prefix.length).split("-")[0]);
    if (Number.isInteger(pid) && pid !== process.pid && processAlive(pid)) continue;
    await unlink(join(dir, entry)).catch(() => undefined);
  }
}
