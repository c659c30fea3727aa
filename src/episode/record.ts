// What an assembled episode leaves beside the run's outputs: reports/assemble.json (the episode, its
// inputs and settings, the fingerprint that tells a later assembly nothing changed), and the
// episode's line in the run's report.json.
import type { Logger } from "pino";
import type { Sink } from "../sinks/sink.js";
import type { Built } from "./build.js";
import type { FoundFfmpeg } from "./ffmpeg-binary.js";
import { hashFile } from "./inputs.js";
import type { TakeUsed } from "./takes.js";

export const RECORD_KEY = "reports/assemble.json";
export const EPISODE_KEY = "episode.mp4";
/** The captions, beside the episode in the run's output. */
export const CAPTION_KEYS = { srt: "episode.srt", vtt: "episode.vtt" } as const;
/** The record is ours, but read as untrusted input (another machine may have written it). */
const RECORD_MAX_BYTES = 4 * 1024 * 1024;
/** The run's report.json can be large (a row per job); one this big is no report of ours. */
const REPORT_MAX_BYTES = 64 * 1024 * 1024;

export interface CaptionFile {
  uri: string;
  bytes: number;
  sha256: string;
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
  /** One cue per line heard in the episode, as SubRip and as WebVTT. */
  captions: { cues: number; srt: CaptionFile; vtt: CaptionFile };
  /** The take of every shot and where it was chosen (picks.yaml, the manifest's assemble.takes, or 1). */
  takes: TakeUsed[];
  /** sha256 of every input's sha256, the timing, the assemble block, the music and ffmpeg's version. */
  fingerprint: string;
  name: string;
  manifest: string;
  run_id: string | null;
  assembled_at: string;
  /** The ffmpeg that made it: its path, where it was chosen from, its version. */
  ffmpeg: FoundFfmpeg;
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

export async function readRecord(sink: Sink): Promise<EpisodeRecord | undefined> {
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

/**
 * The episode in place is the one recorded, and so are its captions: same bytes (and, on disk, the
 * same sha256). A record from before captions has none, so its episode is made again.
 */
export async function episodeIntact(
  r: EpisodeRecord,
  sink: Sink,
  target: string,
  signal?: AbortSignal,
): Promise<boolean> {
  const captions = r.captions ? [r.captions.srt, r.captions.vtt] : undefined;
  if (!captions?.every((c) => typeof c?.uri === "string")) return false;
  if (/^s3:\/\//i.test(target)) {
    if ((await sink.stat(EPISODE_KEY))?.bytes !== r.episode.bytes) return false;
    for (const [key, c] of [
      [CAPTION_KEYS.srt, r.captions.srt],
      [CAPTION_KEYS.vtt, r.captions.vtt],
    ] as const)
      if ((await sink.stat(key))?.bytes !== c.bytes) return false;
    return true;
  }
  try {
    for (const f of [{ ...r.episode, uri: target }, ...captions]) {
      const h = await hashFile(f.uri, signal);
      if (h.bytes !== f.bytes || h.sha256 !== f.sha256) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * The episode in the run's report.json too (`episode`: uri, bytes, sha256, duration), so the report
 * accounts for every output. Best effort: the episode and its record stand without it, and the
 * next run's report is written without it (its shots may change).
 */
export async function noteInReport(
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
