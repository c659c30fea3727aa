// The episode's captions: one cue per narration line heard in it, from where the build placed the
// line (the very placement its filter graph uses), written as SubRip (episode.srt) and WebVTT
// (episode.vtt). A line cut at its shot's end ends there; a line placed past it is not heard and
// has no cue.

/** Bumped when the captions' text changes for the same inputs: an episode made before is made again. */
export const CAPTIONS_FORMAT = 1;

export interface Cue {
  /** The line's id (`n01`): the VTT cue's identifier. */
  id: string;
  start: number;
  end: number;
  text: string;
}

interface PlacedLine {
  id: string;
  job: string;
  start_seconds: number;
  end_seconds: number;
}

/** The cues of the episode's lines in time order; `textOf` gives a line job's spoken text. */
export function cuesOf(
  shots: ReadonlyArray<{ lines: readonly PlacedLine[] }>,
  textOf: (job: string) => string | undefined,
): Cue[] {
  const cues: Cue[] = [];
  for (const shot of shots) {
    for (const line of shot.lines) {
      const text = textOf(line.job);
      if (text === undefined || !(line.end_seconds > line.start_seconds)) continue;
      cues.push({ id: line.id, start: line.start_seconds, end: line.end_seconds, text });
    }
  }
  return cues;
}

/** `HH:MM:SS<sep>mmm`, hours not limited to two digits past 99. */
function timestamp(seconds: number, sep: "," | "."): string {
  const ms = Math.max(0, Math.round(seconds * 1000));
  const pad = (n: number, w = 2) => String(n).padStart(w, "0");
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor(ms / 60_000) % 60;
  const s = Math.floor(ms / 1000) % 60;
  return `${pad(h)}:${pad(m)}:${pad(s)}${sep}${pad(ms % 1000, 3)}`;
}

/** A blank line ends a cue in both formats, so a text's lines are kept and its empty ones dropped. */
function textLines(text: string): string[] {
  return text
    .split(/\r\n|\r|\n/)
    .map((l) => l.trim())
    .filter((l) => l !== "");
}

/**
 * SubRip has no escapes (players read `<b>` as bold, as the text's author would expect); only an
 * arrow, which a lenient reader could take for a timing line, is broken up.
 */
function srtText(text: string): string {
  return textLines(text)
    .map((l) => l.replace(/-->/g, "-- >"))
    .join("\n");
}

/** WebVTT's cue text: `&`, `<` and `>` as entities (so `-->` cannot occur). */
function vttText(text: string): string {
  return textLines(text)
    .map((l) => l.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;"))
    .join("\n");
}

export function formatSrt(cues: readonly Cue[]): string {
  return cues
    .map((c, i) => `${i + 1}\n${timestamp(c.start, ",")} --> ${timestamp(c.end, ",")}\n${srtText(c.text)}\n`)
    .join("\n");
}

export function formatVtt(cues: readonly Cue[]): string {
  // An identifier may not hold an arrow: such a cue goes without one.
  const body = cues.map(
    (c) =>
      `${c.id.includes("-->") ? "" : `${c.id}\n`}${timestamp(c.start, ".")} --> ${timestamp(c.end, ".")}\n${vttText(c.text)}\n`,
  );
  return ["WEBVTT\n", ...body].join("\n");
}
