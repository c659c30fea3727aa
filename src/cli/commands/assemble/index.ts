// `clapper assemble MANIFEST`: the run's stored shots, each with its narration, cut into one
// episode (OUTPUT/NAME/episode.mp4, or --output FILE), checked, and recorded with its inputs in
// reports/assemble.json. Nothing changed since the last episode: nothing is done.
import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, mkdtemp, readdir, rename, rm, stat, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { pipeline } from "node:stream/promises";
import type { Logger } from "pino";
import { acquireLock, LockHeldError } from "../../../engine/lock.js";
import type { RunState } from "../../../engine/state.js";
import type { AssembleSettings } from "../../../manifest/index.js";
import {
  AssembleError,
  type Built,
  buildEpisode,
  type ChosenShot,
  chooseInputs,
  DEFAULT_ASSEMBLE,
  hashFile,
  inputsFingerprint,
  type LocalShot,
  type Stored,
} from "../../../pipeline/assemble.js";
import { parseVersion, versionArgs } from "../../../pipeline/ffmpeg.js";
import { FfmpegError, ffmpegBinary, runFfmpeg } from "../../../pipeline/ffmpeg-run.js";
import { fitFromState } from "../../../pipeline/fitting.js";
import type { LocatedRun } from "../../../pipeline/locate.js";
import { isS3State } from "../../../pipeline/state-location.js";
import { LocalSink } from "../../../sinks/local.js";
import { processAlive } from "../../../sinks/process-alive.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import { OutputError, type Sink } from "../../../sinks/sink.js";
import { ExitError, fsExit, isFsError } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";
import { locate, neverRun, ownState } from "../run/state.js";

export const RECORD_KEY = "reports/assemble.json";
const EPISODE_KEY = "episode.mp4";
/** The record is ours, but read as untrusted input (another machine may have written it). */
const RECORD_MAX_BYTES = 4 * 1024 * 1024;
/** A music bed is minutes of compressed audio; a larger file is a mistake, not a bed. */
const MUSIC_MAX_BYTES = 512 * 1024 * 1024;
/** An input fetched from S3 larger than this is refused rather than filling the temporary folder. */
const INPUT_MAX_BYTES = 4 * 1024 * 1024 * 1024;

export interface AssembleOptions {
  manifest: string;
  cwd: string;
  state?: string | undefined;
  s3?: S3ClientOptions;
  /** The episode's file (relative to cwd); default: episode.mp4 beside the run's shots/ and lines/. */
  output?: string | undefined;
  /** A sharded run: its N shards' states together hold every job. */
  shards?: number | undefined;
  /** Assemble even when the recorded inputs are unchanged. */
  force?: boolean;
  /** Seconds ffmpeg may take for the episode. */
  timeoutSeconds?: number | undefined;
  signal?: AbortSignal;
  logger?: Logger;
}

export interface EpisodeRecord {
  episode: {
    uri: string;
    bytes: number;
    sha256: string;
    duration_seconds: number;
    width: number;
    height: number;
    fps: string;
    streams: { video: number; audio: number };
  };
  /** sha256 of every input's sha256, the timing, the assemble block, the music and ffmpeg's version. */
  fingerprint: string;
  name: string;
  manifest: string;
  run_id: string | null;
  assembled_at: string;
  ffmpeg: { version: string };
  settings: {
    timing: { lead: number; gap: number };
    transition: string;
    transition_seconds: number;
    music: string | null;
    music_db: number | null;
    takes: Record<string, number>;
  };
  music: { path: string; bytes: number; sha256: string } | null;
  shots: Built["shots"];
  /** Lines with no `shot:`, not in the episode. */
  unplaced_lines: string[];
  warnings: string[];
  elapsed_seconds: number;
  /** Of which ffmpeg's encode. */
  ffmpeg_seconds: number;
}

export type AssembleAnswer = EpisodeRecord & { status: "assembled" | "up-to-date"; record: string };

export async function assemble(o: AssembleOptions): Promise<AssembleAnswer> {
  const started = performance.now();
  // A sharded run keeps a state per shard: each job is in its own shard's, so together they hold all.
  const shards = o.shards ?? 1;
  const places = await Promise.all(
    Array.from({ length: shards }, (_, i) =>
      locate(o.manifest, o.cwd, {
        state: o.state,
        ...(shards > 1 ? { shard: { index: i + 1, total: shards } } : {}),
      }),
    ),
  );
  const located = places[0] as LocatedRun;
  const { manifest } = located;
  const readStates = async (): Promise<RunState> => {
    const states = await Promise.all(places.map((place) => ownState(place, o.s3)));
    const first = states[0] as RunState;
    return shards > 1 ? { ...first, jobs: Object.assign({}, ...states.map((st) => st.jobs)) } : first;
  };
  const settings: AssembleSettings = manifest.assemble ?? DEFAULT_ASSEMBLE;
  if (!located.loaded.jobs.some((j) => j.kind === "video"))
    throw new ExitError(ExitCode.Usage, `${manifest.display} has no shots: there is no episode to assemble`);
  const state0 = await readStates();
  if (neverRun(state0)) {
    throw new ExitError(
      ExitCode.Failed,
      `no run of ${manifest.name} yet: no shot is stored; run clapper run ${manifest.display} first`,
    );
  }
  // The run's lock: a run writing a shot now would change an input under ffmpeg, and two
  // assemblies of one run would race for one episode.
  const locks: Array<Awaited<ReturnType<typeof acquireLock>>> = [];
  for (const { statePath } of places) {
    try {
      if (!isS3State(statePath)) locks.push(await acquireLock(`${statePath}.lock`));
    } catch (error) {
      for (const held of locks.reverse()) await held.release();
      if (error instanceof LockHeldError) throw new ExitError(ExitCode.Locked, error.message);
      if (isFsError(error)) throw fsExit(error, { action: "take the run's lock", path: `${statePath}.lock` });
      throw error;
    }
  }
  let work: string | undefined;
  try {
    // Read again under the lock: what a run finished meanwhile counts.
    const state = await readStates();
    // Shots timed to their narration, as the run fitted them (their fingerprints follow the fit).
    const jobs = [...located.loaded.jobs];
    await fitFromState(jobs, state);
    const chosen = chooseInputs(jobs, state, settings);
    if (chosen.refusals.length > 0) {
      const n = chosen.refusals.length;
      // A plain run leaves failed shots failed: only --retry-failed makes them again.
      const failed = chosen.refusals.some((r) => {
        const st = state.jobs[r.job];
        return st?.status === "failed" || st?.status === "cancelled";
      });
      const next = failed
        ? `clapper run ${manifest.display} --retry-failed makes the failed ones again`
        : `run clapper run ${manifest.display} first`;
      throw new ExitError(
        ExitCode.Failed,
        `cannot assemble ${manifest.name}: ${chosen.refusals.map((r) => r.reason).join("; ")}; ${next} (${n} input${n === 1 ? "" : "s"} missing)`,
        { data: { refused: chosen.refusals } },
      );
    }
    const first = chosen.shots[0] as ChosenShot;
    const runSink = await sinkOf(baseOf(first), o.s3);
    const target = o.output ? resolve(o.cwd, o.output) : runSink.uri(EPISODE_KEY);
    if (o.output && /^s3:\/\//i.test(o.output))
      throw new ExitError(
        ExitCode.Usage,
        "--output: a local file path is expected; an S3 run's episode goes beside its shots",
      );

    const binary = ffmpegBinary();
    const version =
      parseVersion(
        (
          await runFfmpeg(versionArgs(), {
            binary,
            timeoutMs: 30_000,
            signal: o.signal,
            maxStdout: 64 * 1024,
          })
        ).stdout.toString("utf8"),
      ) ?? "unknown";
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

    work = await mkdtemp(join(tmpdir(), "clapper-assemble-"));
    const shots = await localInputs(chosen.shots, work, o);
    const local = !/^s3:\/\//i.test(target);
    const temp = local ? tempBeside(target) : join(work, "episode.mp4");
    if (local) await prepareFolder(dirname(target), basename(target));
    o.logger?.info({ event: "assemble-started", shots: shots.length, target }, "assembling the episode");
    let built: Built;
    try {
      built = await buildEpisode({
        shots,
        timing: manifest.timing,
        settings,
        music: settings.music,
        output: temp,
        binary,
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
    } finally {
      if (local) await unlink(temp).catch(() => undefined);
    }
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
      warnings: [
        ...built.warnings,
        ...(chosen.unplaced.length > 0
          ? [
              `${chosen.unplaced.length} line(s) name no shot and are not in the episode: ${chosen.unplaced.join(", ")}`,
            ]
          : []),
      ],
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
  } catch (error) {
    throw exitOf(error, o.signal);
  } finally {
    if (work) await rm(work, { recursive: true, force: true }).catch(() => undefined);
    for (const held of locks.reverse()) await held.release();
  }
}

/** The run's report.json can be large (a row per job); one this big is no report of ours. */
const REPORT_MAX_BYTES = 64 * 1024 * 1024;

/**
 * The episode in the run's report.json too (`episode`: uri, bytes, sha256, duration), so the report
 * accounts for every output. Best effort: the episode and its record stand without it, and the
 * next run's report is written without it (its shots may change).
 */
async function noteInReport(
  sink: Sink,
  record: EpisodeRecord,
  recordUri: string,
  logger?: Logger,
): Promise<void> {
  try {
    const text = await sink.readText("reports/report.json", REPORT_MAX_BYTES);
    if (text === undefined) return;
    const report = JSON.parse(text) as Record<string, unknown>;
    if (typeof report !== "object" || report === null || Array.isArray(report)) return;
    const { uri, bytes, sha256, duration_seconds } = record.episode;
    const noted = report.episode as { uri?: unknown; sha256?: unknown } | undefined;
    if (noted?.uri === uri && noted.sha256 === sha256) return;
    report.episode = {
      uri,
      bytes,
      sha256,
      duration_seconds,
      assembled_at: record.assembled_at,
      record: recordUri,
    };
    await sink.writeText("reports/report.json", `${JSON.stringify(report, null, 2)}\n`, "application/json");
  } catch (error) {
    logger?.warn(
      { event: "report-not-updated", error: String((error as Error)?.message ?? error) },
      "the episode is stored, but report.json could not be updated with it",
    );
  }
}

/** Every failure as the exit code docs/configuration.md promises, with what to do. */
function exitOf(error: unknown, signal: AbortSignal | undefined): unknown {
  if (error instanceof ExitError) return error;
  if (error instanceof FfmpegError) {
    if (error.kind === "missing") return new ExitError(ExitCode.Usage, error.message);
    if (error.kind === "aborted" || signal?.aborted)
      return new ExitError(
        ExitCode.Interrupted,
        "interrupted: the episode was not written (the one before, if any, is untouched); run again",
      );
    const tail = error.tail.slice(-3).join(" | ");
    return new ExitError(
      ExitCode.Failed,
      `${error.message}${tail ? ` (ffmpeg's last lines: ${tail})` : ""}; the episode was not written`,
      {
        data: { ffmpeg_stderr: [...error.tail] },
      },
    );
  }
  if (signal?.aborted)
    return new ExitError(ExitCode.Interrupted, "interrupted: the episode was not written; run again");
  if (error instanceof AssembleError)
    return new ExitError(ExitCode.Failed, `${error.message}; the episode was not written`);
  if (error instanceof OutputError)
    return new ExitError(error.unreachable ? ExitCode.Unreachable : ExitCode.Usage, error.message);
  if (isFsError(error))
    return fsExit(error, { action: "assemble the episode at", path: error.path ?? "its folder" });
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
  const { createS3Client, parseS3Uri, S3Sink } = await import("../../../sinks/s3.js");
  return new S3Sink(createS3Client(s3), parseS3Uri(base));
}

async function hashMusic(path: string, signal: AbortSignal | undefined) {
  const { size } = await stat(path);
  if (size > MUSIC_MAX_BYTES)
    throw new ExitError(
      ExitCode.Usage,
      `assemble.music: ${path} is ${size} bytes, over the ${MUSIC_MAX_BYTES} bytes a music bed may have`,
    );
  return hashFile(path, signal);
}

async function readRecord(sink: Sink): Promise<EpisodeRecord | undefined> {
  try {
    const text = await sink.readText(RECORD_KEY, RECORD_MAX_BYTES);
    if (text === undefined) return undefined;
    const parsed = JSON.parse(text) as EpisodeRecord;
    return typeof parsed?.fingerprint === "string" && typeof parsed.episode?.uri === "string"
      ? parsed
      : undefined;
  } catch {
    // An unreadable record is no record: the episode is made again.
    return undefined;
  }
}

/** The episode in place is the one recorded: same bytes (and, on disk, the same sha256). */
async function episodeIntact(
  r: EpisodeRecord,
  sink: Sink,
  target: string,
  signal?: AbortSignal,
): Promise<boolean> {
  if (/^s3:\/\//i.test(target)) return (await sink.stat(EPISODE_KEY))?.bytes === r.episode.bytes;
  try {
    const h = await hashFile(target, signal);
    return h.bytes === r.episode.bytes && h.sha256 === r.episode.sha256;
  } catch {
    return false;
  }
}

/** Local paths of every input, each checked against the sha256 the state recorded for it. */
async function localInputs(
  shots: readonly ChosenShot[],
  work: string,
  o: AssembleOptions,
): Promise<LocalShot[]> {
  const fetchOne = async (stored: Stored): Promise<string> => {
    const path = /^s3:\/\//i.test(stored.uri) ? await download(stored, work, o) : stored.uri;
    const h = await hashFile(path, o.signal).catch((error: unknown) => {
      if (isFsError(error))
        throw new ExitError(
          ExitCode.Failed,
          `${stored.job}: its stored output ${stored.uri} cannot be read (${(error as Error).message}); run clapper run again to collect it`,
        );
      throw error;
    });
    if (h.sha256 !== stored.sha256)
      throw new ExitError(
        ExitCode.Failed,
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
async function download(stored: Stored, work: string, o: AssembleOptions): Promise<string> {
  if (stored.bytes > INPUT_MAX_BYTES)
    throw new ExitError(
      ExitCode.Failed,
      `${stored.job}: ${stored.uri} is ${stored.bytes} bytes, more than assemble fetches`,
    );
  const { createS3Client, parseS3Uri, S3Sink } = await import("../../../sinks/s3.js");
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

export function renderAssemble(a: AssembleAnswer): string {
  const e = a.episode;
  const head = a.status === "up-to-date" ? `episode up to date: ${e.uri}` : `episode assembled: ${e.uri}`;
  const lines = [
    head,
    `  ${a.shots.length} shot${a.shots.length === 1 ? "" : "s"}, ${a.shots.reduce((n, s) => n + s.lines.length, 0)} lines, ${e.duration_seconds} s, ${e.width}x${e.height} at ${e.fps} fps, ${e.bytes} bytes, sha256 ${e.sha256}`,
    `  record: ${a.record}`,
    ...a.warnings.map((w) => `  warning: ${w}`),
  ];
  return lines.join("\n");
}
