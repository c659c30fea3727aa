// ffmpeg's command lines for `clapper assemble`, as argv arrays (never a shell string: a path with
// spaces, quotes or any other character reaches ffmpeg as one argument), and the readers of what
// ffmpeg prints. Pure functions, unit-tested in test/assemble/ffmpeg.test.ts; running them is
// ffmpeg-run.ts's part.
import { isAbsolute } from "node:path";

/** The episode's audio: AAC at 48 kHz stereo, whatever the narration and music files are. */
export const SAMPLE_RATE = 48_000;

export interface Rational {
  num: number;
  den: number;
}

interface PlannedLine {
  /** Absolute path of the line's audio file. */
  path: string;
}

interface PlannedShot {
  /** Absolute path of the shot's video file. */
  path: string;
  /** Frames of the episode this shot fills, at the episode's frame rate. */
  frames: number;
  /** Audio samples (at SAMPLE_RATE) this shot's audio fills: the same span as its frames. */
  samples: number;
  /** Its narration, in order: the first after `leadSamples`, each next `gapSamples` after the previous ends. */
  lines: PlannedLine[];
}

export interface EpisodePlan {
  width: number;
  height: number;
  fps: Rational;
  shots: PlannedShot[];
  leadSamples: number;
  gapSamples: number;
  /** Fade from and to black inside each shot, in seconds (0: hard cuts). */
  fadeSeconds: number;
  music?: { path: string; db: number; fadeOutSeconds: number };
  /** Where ffmpeg writes the episode (a temporary name: it takes its name once checked). */
  output: string;
  /**
   * ffmpeg's own limit on its CPU seconds (`-timelimit`). The runner's timeout stops it from the
   * parent; this stops it when the parent is gone (a SIGKILL leaves the child running, and ffmpeg
   * ignores a broken stderr), so an orphan encodes into its temporary file for a bounded time.
   */
  timeLimitSeconds?: number;
}

/** `file:` keeps a name that starts like a protocol (`concat:`, `http:`) or an option (`-`) a file. */
function fileArg(path: string): string {
  if (!isAbsolute(path)) throw new Error(`ffmpeg is given absolute paths only, got ${JSON.stringify(path)}`);
  return `file:${path}`;
}

const fpsText = (fps: Rational) => (fps.den === 1 ? String(fps.num) : `${fps.num}/${fps.den}`);

/** Seconds as ffmpeg's filters read them: fixed decimals, no exponent. */
function sec(value: number): string {
  return (Math.round(value * 1e6) / 1e6).toFixed(6).replace(/\.?0+$/, "") || "0";
}

const AUDIO_FORMAT = `aformat=sample_fmts=fltp:sample_rates=${SAMPLE_RATE}:channel_layouts=stereo`;

/** `samples` of silence, in the episode's audio format. */
function silence(samples: number): string {
  return `anullsrc=r=${SAMPLE_RATE}:cl=stereo,atrim=end_sample=${samples},${AUDIO_FORMAT}`;
}

/**
 * Splits `seconds` of each shot into whole frames and samples so that the shots' ends fall where the
 * sum of their durations says: each shot ends at round(cumulative seconds x rate). The episode then
 * lasts the sum of the shots (within half a frame), never drifting by a rounding per shot, and its
 * audio ends with its video.
 */
export function cutPoints(
  seconds: readonly number[],
  fps: Rational,
): Array<{ frames: number; samples: number; startSeconds: number }> {
  let total = 0;
  let framesBefore = 0;
  let samplesBefore = 0;
  return seconds.map((s) => {
    total += s;
    const frameEnd = Math.round((total * fps.num) / fps.den);
    const frames = Math.max(1, frameEnd - framesBefore);
    const endSeconds = ((framesBefore + frames) * fps.den) / fps.num;
    const sampleEnd = Math.round(endSeconds * SAMPLE_RATE);
    const cut = {
      frames,
      samples: sampleEnd - samplesBefore,
      startSeconds: (framesBefore * fps.den) / fps.num,
    };
    framesBefore += frames;
    samplesBefore = sampleEnd;
    return cut;
  });
}

/**
 * The one ffmpeg command that makes the episode. Inputs: every shot's video, then every line's
 * audio, then the music (looped). Each shot is scaled to fit the episode's size and padded with
 * black (its ratio kept), set to the episode's frame rate, cut or held to its frames; its audio is
 * its lines placed in order over silence, cut at the shot's end; the video's own audio is not used.
 * The shots are joined by the concat filter (one encode, so no AAC priming gap at each join), the
 * music mixed under them by an exact sum (amix in ffmpeg 4.1 would halve the narration).
 */
export function episodeArgs(plan: EpisodePlan): string[] {
  if (plan.shots.length === 0) throw new Error("an episode needs at least one shot");
  const args = ["-hide_banner", "-nostdin", "-y", "-loglevel", "info"];
  if (plan.timeLimitSeconds !== undefined)
    args.push("-timelimit", String(Math.max(1, Math.ceil(plan.timeLimitSeconds))));
  for (const shot of plan.shots) args.push("-i", fileArg(shot.path));
  const lineInputs: number[][] = [];
  let next = plan.shots.length;
  for (const shot of plan.shots) {
    lineInputs.push(
      shot.lines.map((line) => {
        args.push("-i", fileArg(line.path));
        return next++;
      }),
    );
  }
  const musicInput = plan.music ? next : undefined;
  if (plan.music) args.push("-stream_loop", "-1", "-i", fileArg(plan.music.path));

  const { width: w, height: h } = plan;
  const chains: string[] = [];
  const pairs: string[] = [];
  let totalSamples = 0;
  plan.shots.forEach((shot, i) => {
    const seconds = (shot.frames * plan.fps.den) / plan.fps.num;
    const fade = Math.min(plan.fadeSeconds, seconds / 2);
    const fades =
      fade > 0 ? `,fade=t=in:st=0:d=${sec(fade)},fade=t=out:st=${sec(seconds - fade)}:d=${sec(fade)}` : "";
    chains.push(
      `[${i}:v]scale=w=${w}:h=${h}:force_original_aspect_ratio=decrease,` +
        `pad=w=${w}:h=${h}:x=(ow-iw)/2:y=(oh-ih)/2:color=black,setsar=1,fps=${fpsText(plan.fps)},format=yuv420p,` +
        // Held on its last frame when it is a little short of its frames, cut when longer.
        `tpad=stop_mode=clone:stop=-1,trim=end_frame=${shot.frames},setpts=PTS-STARTPTS${fades}[v${i}]`,
    );
    const inputs = lineInputs[i] ?? [];
    if (inputs.length === 0) {
      chains.push(`${silence(shot.samples)}[a${i}]`);
    } else {
      const parts: string[] = [];
      inputs.forEach((input, k) => {
        const gap = k === 0 ? plan.leadSamples : plan.gapSamples;
        if (gap > 0) {
          chains.push(`${silence(gap)}[s${i}_${k}]`);
          parts.push(`[s${i}_${k}]`);
        }
        chains.push(`[${input}:a]aresample=${SAMPLE_RATE},${AUDIO_FORMAT}[l${i}_${k}]`);
        parts.push(`[l${i}_${k}]`);
      });
      chains.push(
        `${parts.join("")}concat=n=${parts.length}:v=0:a=1,apad,atrim=end_sample=${shot.samples},asetpts=N/SR/TB[a${i}]`,
      );
    }
    pairs.push(`[v${i}][a${i}]`);
    totalSamples += shot.samples;
  });
  const joinedAudio = plan.music ? "[narration]" : "[aout]";
  chains.push(`${pairs.join("")}concat=n=${plan.shots.length}:v=1:a=1[vout]${joinedAudio}`);
  if (plan.music && musicInput !== undefined) {
    const total = totalSamples / SAMPLE_RATE;
    const fadeOut = Math.min(plan.music.fadeOutSeconds, total / 2);
    chains.push(
      `[${musicInput}:a]aresample=${SAMPLE_RATE},${AUDIO_FORMAT},volume=${plan.music.db}dB,` +
        `atrim=end_sample=${totalSamples},asetpts=N/SR/TB,afade=t=out:st=${sec(total - fadeOut)}:d=${sec(fadeOut)}[music]`,
    );
    chains.push("[narration][music]amerge=inputs=2,pan=stereo|c0=c0+c2|c1=c1+c3[aout]");
  }
  args.push(
    "-filter_complex",
    chains.join(";"),
    "-map",
    "[vout]",
    "-map",
    "[aout]",
    "-c:v",
    "libx264",
    "-preset",
    "veryfast",
    "-crf",
    "20",
    "-pix_fmt",
    "yuv420p",
    "-r",
    fpsText(plan.fps),
    "-c:a",
    "aac",
    "-b:a",
    "160k",
    "-ar",
    String(SAMPLE_RATE),
    "-ac",
    "2",
    // The same inputs make the same bytes: no creation time, no encoder version strings.
    "-map_metadata",
    "-1",
    "-fflags",
    "+bitexact",
    "-flags:v",
    "+bitexact",
    "-flags:a",
    "+bitexact",
    "-movflags",
    "+faststart",
    "-f",
    "mp4",
    fileArg(plan.output),
  );
  return args;
}

/** Asks ffmpeg to describe a file (it prints the streams, then refuses for want of an output). */
export function probeArgs(path: string): string[] {
  return ["-hide_banner", "-nostdin", "-i", fileArg(path)];
}

export function versionArgs(): string[] {
  return ["-hide_banner", "-version"];
}

/** Decodes `seconds` of a file's audio from `from` as mono 16-bit PCM on stdout (tests, checks). */
export function pcmArgs(path: string, from: number, seconds: number, rate = 8000): string[] {
  return [
    "-hide_banner",
    "-nostdin",
    "-ss",
    sec(from),
    "-t",
    sec(seconds),
    "-i",
    fileArg(path),
    "-map",
    "0:a:0",
    "-ac",
    "1",
    "-ar",
    String(rate),
    "-f",
    "s16le",
    "pipe:1",
  ];
}

export interface Probed {
  video?: { width: number; height: number; fps?: Rational };
  audioStreams: number;
  videoStreams: number;
}

/**
 * The streams of `ffmpeg -i FILE`'s description: `Stream #0:0(und): Video: h264 ..., 1280x720
 * [SAR 1:1 DAR 16:9], 16 kb/s, 24 fps, 24 tbr, ...`. The first video stream gives size and rate.
 */
export function parseProbe(stderr: string): Probed {
  const out: Probed = { audioStreams: 0, videoStreams: 0 };
  for (const line of stderr.split("\n")) {
    const m = /^\s*Stream #\d+:\d+.*?: (Video|Audio): (.*)$/.exec(line);
    if (!m) continue;
    if (m[1] === "Audio") {
      out.audioStreams += 1;
      continue;
    }
    out.videoStreams += 1;
    if (out.video) continue;
    // The size is the first WxH after the codec (a hex tag such as 0x31637661 is not one).
    const size = /(?:^|[ ,])(\d{2,5})x(\d{2,5})(?=[ ,]|$)/.exec(m[2] ?? "");
    if (!size) continue;
    const fps = /, ([\d.]+)(k?) fps/.exec(m[2] ?? "") ?? /, ([\d.]+)(k?) tbr/.exec(m[2] ?? "");
    out.video = {
      width: Number(size[1]),
      height: Number(size[2]),
      ...(fps ? { fps: rateOf(Number(fps[1]) * (fps[2] === "k" ? 1000 : 1)) } : {}),
    };
  }
  return out;
}

/** A printed rate as a fraction: 23.98 is 24000/1001, 29.97 is 30000/1001, 25 is 25/1. */
export function rateOf(value: number): Rational {
  if (!(value > 0)) return { num: 24, den: 1 };
  for (const base of [24, 30, 60, 120]) {
    if (Math.abs(value - (base * 1000) / 1001) < 0.01) return { num: base * 1000, den: 1001 };
  }
  if (Math.abs(value - Math.round(value)) < 0.01) return { num: Math.round(value), den: 1 };
  return { num: Math.round(value * 1000), den: 1000 };
}

/** `ffmpeg version N-47683-g0e8eb07980-static https://...` -> `N-47683-g0e8eb07980-static`. */
export function parseVersion(stdout: string): string | undefined {
  return /^ffmpeg version (\S+)/m.exec(stdout)?.[1];
}
