// The episode: the run's stored shots, each with its narration, cut into one file (OUTPUT/NAME/
// episode.mp4, or a file named), checked, and recorded with its inputs in reports/assemble.json.
// Nothing changed since the last episode: nothing is done. Failures are EpisodeErrors (or file
// system errors, which the caller words); `clapper assemble` maps them to exit codes.
import { createHash, randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { mkdir, readdir, rename, rm, stat, unlink, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import type { Logger } from "pino";
import { acquireLock, LockHeldError } from "../locks/file-lock.js";
import { processAlive } from "../locks/process-alive.js";
import { type Pick, PicksError, picksPath } from "../review/picks.js";
import { LocalSink } from "../sinks/local.js";
import type { S3ClientOptions } from "../sinks/s3.js";
import { OutputError, type Sink } from "../sinks/sink.js";
import type { LocatedRun } from "../state/locate.js";
import { isS3State } from "../state/location.js";
import type { RunState } from "../state/run-state.js";
import { AssembleError, type Built, buildEpisode } from "./build.js";
import { CAPTIONS_FORMAT, cuesOf, formatSrt, formatVtt } from "./captions.js";
import { EpisodeError, EpisodeFileError } from "./errors.js";
import { findFfmpeg } from "./ffmpeg-binary.js";
import { FfmpegError } from "./ffmpeg-run.js";
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
import { isLine, isShot } from "./parts.js";
import {
  CAPTION_KEYS,
  type CaptionFile,
  EPISODE_KEY,
  type EpisodeRecord,
  episodeIntact,
  noteInReport,
  RECORD_KEY,
  readRecord,
} from "./record.js";
import { type AssembleSettings, DEFAULT_ASSEMBLE } from "./settings.js";
import { readShotPicks, takesUsed } from "./takes.js";
import { makeWorkFolder } from "./work-folder.js";

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
  /** `--ffmpeg`: the ffmpeg to run (before CLAPPER_FFMPEG, PATH and the packaged one). */
  ffmpeg?: string | undefined;
  /** Where CLAPPER_FFMPEG and PATH are read (default: process.env). */
  env?: NodeJS.ProcessEnv | undefined;
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
  // A picked version is checked against the versions the run kept, told at its line in picks.yaml.
  const picks = await readPicksOf(located, state0);
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
    return await assembleLocked(o, await readStates(), picks, started);
  } catch (error) {
    throw failureOf(error, o.signal);
  } finally {
    for (const held of locks.reverse()) await held.release();
  }
}

/** picks.yaml beside the manifest, checked against its shots (a PicksError names line and field). */
async function readPicksOf(located: LocatedRun, state?: RunState): Promise<Record<string, Pick>> {
  try {
    return await readShotPicks(located.manifest.path, located.loaded.jobs, state);
  } catch (error) {
    if (error instanceof PicksError) throw error;
    throw new EpisodeFileError(error, "read the picks in", picksPath(located.manifest.path));
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

async function assembleLocked(
  o: AssembleOptions,
  state: RunState,
  picks: Readonly<Record<string, Pick>>,
  started: number,
): Promise<AssembleAnswer> {
  const { manifest } = o.places[0] as LocatedRun;
  const settings: AssembleSettings = manifest.assemble ?? DEFAULT_ASSEMBLE;
  // Shots timed to their narration, as the run fitted them (their fingerprints follow the fit).
  const jobs = [...(o.places[0] as LocatedRun).loaded.jobs];
  await fitFromState(jobs, state);
  const takes = takesUsed(jobs, settings.takes, picks);
  const chosen = chooseInputs(
    jobs,
    state,
    { ...settings, takes: Object.fromEntries(takes.map((t) => [t.shot, t.take])) },
    Object.fromEntries(takes.flatMap((t) => (t.version === undefined ? [] : [[t.shot, t.version]]))),
  );
  // The captions' words are the lines' spoken text (their audio's sha256 follows it too).
  const texts = new Map(jobs.flatMap((j) => (isLine(j) ? [[j.id, j.request.text] as const] : [])));
  if (chosen.refusals.length > 0) throw refusedInputs(chosen, state, manifest);
  const runSink = await sinkOf(baseOf(chosen.shots[0] as ChosenShot), o.s3);
  const target = o.output ? resolve(o.cwd, o.output) : runSink.uri(EPISODE_KEY);
  if (o.output && /^s3:\/\//i.test(o.output))
    throw new EpisodeError(
      "refused",
      "--output: a local file path is expected; an S3 run's episode goes beside its shots",
    );
  const ffmpeg = await findFfmpeg({ flag: o.ffmpeg, env: o.env, cwd: o.cwd, signal: o.signal });
  const binary = ffmpeg.path;
  const version = ffmpeg.version;
  const music = settings.music ? await hashMusic(settings.music.path, o.signal) : undefined;
  const fingerprint = inputsFingerprint({
    shots: chosen.shots,
    timing: manifest.timing,
    settings,
    music,
    ffmpegVersion: version,
    target,
    captions: { format: CAPTIONS_FORMAT, texts },
  });

  const recorded = await readRecord(runSink);
  if (!o.force && recorded?.fingerprint === fingerprint && recorded.episode.uri === target) {
    if (await episodeIntact(recorded, runSink, target, o.signal)) {
      // A run since may have written its report again: the episode goes back in (if it is not there).
      await noteInReport(runSink, recorded, runSink.uri(RECORD_KEY), o.logger);
      o.logger?.info({ event: "episode-up-to-date", uri: target }, "episode up to date");
      // The ffmpeg chosen now: of the same version (the fingerprint says so), maybe from elsewhere.
      return { ...recorded, ffmpeg, status: "up-to-date", record: runSink.uri(RECORD_KEY) };
    }
  }

  const { built, captions } = await buildInPlace(o, {
    chosen,
    settings,
    runSink,
    target,
    binary,
    textOf: (job) => texts.get(job),
  });
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
    captions,
    takes,
    fingerprint,
    name: manifest.name,
    manifest: manifest.display,
    run_id: state.run?.id ?? null,
    assembled_at: new Date().toISOString(),
    ffmpeg,
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

type CaptionTexts = Record<keyof typeof CAPTION_KEYS, string>;

/** A local episode's captions: `episode.srt` and `episode.vtt` beside `episode.mp4` (or FILE.srt beside FILE). */
function captionPath(target: string, ext: keyof typeof CAPTION_KEYS): string {
  return /\.mp4$/i.test(target) ? `${target.slice(0, -4)}.${ext}` : `${target}.${ext}`;
}

function captionFile(uri: string, text: string): CaptionFile {
  const bytes = Buffer.from(text, "utf8");
  return { uri, bytes: bytes.length, sha256: createHash("sha256").update(bytes).digest("hex") };
}

/**
 * The episode built from local copies of its inputs in a temporary folder, and put in place with
 * its captions: a local one renamed over the target from beside it, one in S3 uploaded beside the
 * run's shots.
 */
async function buildInPlace(
  o: AssembleOptions,
  b: {
    chosen: Chosen;
    settings: AssembleSettings;
    runSink: Sink;
    target: string;
    binary: string;
    textOf: (job: string) => string | undefined;
  },
): Promise<{ built: Built; captions: EpisodeRecord["captions"] }> {
  const { manifest } = o.places[0] as LocatedRun;
  const { settings, runSink, target } = b;
  const work = await makeWorkFolder("assemble");
  try {
    const shots = await localInputs(b.chosen.shots, work, o);
    const local = !/^s3:\/\//i.test(target);
    const temp = local ? tempBeside(target) : join(work, "episode.mp4");
    if (local) {
      await prepareFolder(dirname(target), basename(target));
      for (const ext of CAPTION_EXTS)
        await prepareFolder(dirname(target), basename(captionPath(target, ext)));
    }
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
      // The cues come from the placement the filter graph was built from, not from another reckoning.
      const cues = cuesOf(built.shots, b.textOf);
      const texts: CaptionTexts = { srt: formatSrt(cues), vtt: formatVtt(cues) };
      const uriOf = (ext: keyof typeof CAPTION_KEYS) =>
        local ? captionPath(target, ext) : runSink.uri(CAPTION_KEYS[ext]);
      const captions = {
        cues: cues.length,
        srt: captionFile(uriOf("srt"), texts.srt),
        vtt: captionFile(uriOf("vtt"), texts.vtt),
      };
      if (local) await putLocal(temp, target, texts);
      else await putInSink(o, runSink, temp, built.bytes, texts);
      return { built, captions };
    } finally {
      if (local) await unlink(temp).catch(() => undefined);
    }
  } finally {
    await rm(work, { recursive: true, force: true }).catch(() => undefined);
  }
}

const CAPTION_EXTS = Object.keys(CAPTION_KEYS) as Array<keyof typeof CAPTION_KEYS>;
const CAPTION_TYPES: Record<keyof typeof CAPTION_KEYS, string> = {
  srt: "application/x-subrip",
  vtt: "text/vtt",
};

/**
 * The checked episode and its captions take their names: each is whole under a temporary name
 * first, so a kill before leaves the old files (or none), never half of one.
 */
async function putLocal(temp: string, target: string, texts: CaptionTexts): Promise<void> {
  const files = CAPTION_EXTS.map((ext) => {
    const path = captionPath(target, ext);
    return { path, temp: tempBeside(path), text: texts[ext] };
  });
  try {
    for (const f of files) await writeFile(f.temp, f.text, "utf8");
    await rename(temp, target);
    for (const f of files) await rename(f.temp, f.path);
  } finally {
    for (const f of files) await unlink(f.temp).catch(() => undefined);
  }
}

/** An S3 run's episode and captions, each one object written whole. */
async function putInSink(
  o: AssembleOptions,
  sink: Sink,
  temp: string,
  bytes: number,
  texts: CaptionTexts,
): Promise<void> {
  await sink.write(EPISODE_KEY, createReadStream(temp), {
    expectedBytes: bytes,
    contentType: "video/mp4",
    ...(o.signal ? { signal: o.signal } : {}),
  });
  for (const ext of CAPTION_EXTS) await sink.writeText(CAPTION_KEYS[ext], texts[ext], CAPTION_TYPES[ext]);
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
