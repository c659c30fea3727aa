// The live display of `clapper run` on a terminal: one status line at the bottom of stderr (phase,
// elapsed time, jobs by state, points, ETA), with log lines printed above it. The clock ticks every
// second without events and the ETA counts down; state changes redraw it at most ten times a second.
//
// No terminal library: the status is a single line cut to the terminal's width, so it never wraps,
// and redrawing it takes two sequences every terminal since the VT100 knows (carriage return, then
// "erase to end of line", ESC [ K). log-update 8 and listr2 11 need Node >= 22; log-update 7 allows
// Node 20 but draws multi-line frames (a trailing newline, a cursor hidden through exit and signal
// hooks), wraps rather than cuts, brings some fifteen packages, and has no mode for dumb terminals.
// A terminal with TERM=dumb (or a stream that is not a terminal) gets plain lines instead: the
// status when the phase changes or half a minute passed, and the logs as they come.
import type { FeedProgress } from "../run/feed.js";
import type { Phase, Progress } from "../run/run.js";

type Kind = "video" | "speech";
const KINDS: readonly Kind[] = ["video", "speech"];

/** Erase from the cursor to the end of the line (ECMA-48 EL). */
const ERASE_LINE_END = "\u001b[K";
/** Redraws are kept at least this far apart. */
const THROTTLE_MS = 100;
/** On a dumb terminal, the status is printed again after this long even without a new phase. */
const DUMB_EVERY_MS = 30_000;
/** On a dumb terminal, a new phase is printed no sooner than this after the last status line. */
const DUMB_PHASE_GAP_MS = 1000;
/** Phases in which an ETA means something. */
const ETA_PHASES: ReadonlySet<Phase> = new Set(["submitting", "waiting", "collecting"]);

/** The middle value (mean of the two middle ones for an even count); undefined for none. */
export function median(values: readonly number[]): number | undefined {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return undefined;
  const sorted = [...finite].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/**
 * Milliseconds until one kind's work of this run is done: `null` when it has none left, undefined
 * when there is no basis for an estimate yet.
 */
function kindRemainingMs(p: Progress, kind: Kind, now: number): number | null | undefined {
  const tasks = p.inFlight.filter((t) => t.kind === kind);
  const queued = Math.max(0, Math.floor(p.queued[kind] ?? 0));
  if (tasks.length === 0 && queued === 0) return null;
  // How long a task of this kind takes: the median of those that ended; before any ended, what the
  // service's estimates imply (age at the look plus what it said was left).
  const typical =
    median(p.durations[kind]) ??
    median(
      tasks.flatMap((t) => (t.remaining ? [t.remaining.at - t.createdAt + t.remaining.seconds * 1000] : [])),
    );
  const left: number[] = [];
  for (const t of tasks) {
    if (t.remaining) left.push(Math.max(0, t.remaining.seconds * 1000 - (now - t.remaining.at)));
    else if (typical !== undefined) left.push(Math.max(0, typical - (now - t.createdAt)));
    else return undefined;
  }
  left.sort((a, b) => a - b);
  const inFlightEnd = left.length > 0 ? (left[left.length - 1] ?? 0) : 0;
  if (queued === 0) return inFlightEnd;
  if (typical === undefined) return undefined;
  // Queued jobs start as slots free up, `limit` at a time, each taking the typical duration.
  // No more slots matter than there are tasks to put in them (a huge --in-flight must cost nothing).
  const limit = Math.min(
    Math.max(1, Math.floor(p.inFlightLimit[kind] || 0) || tasks.length),
    queued + left.length,
  );
  // When each slot is first free: beyond the limit, a slot frees only once enough tasks ended.
  const slots =
    left.length >= limit
      ? left.slice(left.length - limit)
      : [...new Array<number>(limit - left.length).fill(0), ...left];
  // Two ascending queues (first free times, then the ends of queued jobs, which only grow): the next
  // job takes the earliest; O(queued + limit).
  const ends: number[] = [];
  let i = 0;
  let j = 0;
  let last = 0;
  for (let n = 0; n < queued; n++) {
    const slot = slots[i];
    const again = ends[j];
    let start: number;
    if (slot !== undefined && (again === undefined || slot <= again)) {
      start = slot;
      i++;
    } else {
      start = again ?? 0;
      j++;
    }
    last = start + typical;
    ends.push(last);
  }
  return Math.max(inFlightEnd, last);
}

/**
 * Seconds until the work of this run is done, from the tasks in flight (the service's own estimate
 * minus the time since that look; else the median duration of their kind minus their age) and the
 * jobs not created yet (in waves of the in-flight limit at the median duration). Reused jobs are no
 * work and count for nothing. Undefined until there is a basis for every kind with work left; 0
 * when only downloads are left.
 */
export function estimateEta(p: Progress, now: number): number | undefined {
  let latest: number | undefined;
  for (const kind of KINDS) {
    const ms = kindRemainingMs(p, kind, now);
    if (ms === null) continue;
    if (ms === undefined) return undefined;
    latest = Math.max(latest ?? 0, ms);
  }
  if (latest === undefined) return p.counts.collecting > 0 ? 0 : undefined;
  return latest / 1000;
}

/** 42s, 3m05s, 1h02m. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  return m < 60
    ? `${m}m${String(s % 60).padStart(2, "0")}s`
    : `${Math.floor(m / 60)}h${String(m % 60).padStart(2, "0")}m`;
}

interface LineOptions {
  /** Terminal width: the line is cut to one less (the last column would wrap on some terminals). */
  columns?: number;
  /** Separator and ellipsis in Unicode (default) or plain ASCII. */
  unicode?: boolean;
  /** The final line: no ETA. */
  final?: boolean;
}

interface Part {
  text: string;
  /** A shorter form, used before any part is dropped. */
  short?: string;
  /** Lower is kept longer when the line is too wide. */
  rank: number;
}

/**
 * What the live line counts beyond the run's `Progress` (the feed gives them; a bare `Progress`
 * has none, and the line then judges every job not reused to be this run's work).
 */
type Shown = Progress & Partial<Pick<FeedProgress, "work" | "idle" | "removed">>;

/**
 * The status line: phase · elapsed · jobs by state · points · ETA, fitted to `columns`. Its words
 * are the run summary's: generated (made in this run), reused, failed, cancelled, pending; while
 * the run goes on, its pending jobs are told apart (running, downloading, queued, not selected).
 */
export function progressLine(p: Shown, now: number = Date.now(), options: LineOptions = {}): string {
  const parts: Part[] = [{ text: p.phase, rank: 0 }];
  const elapsed = formatDuration((now - p.startedAt) / 1000);
  parts.push({ text: `elapsed ${elapsed}`, short: elapsed, rank: 1 });
  if (p.total > 0) parts.push(...(options.final ? finalCounts(p) : liveCounts(p)));
  if (p.total > 0 || p.spent > 0 || p.reserved > 0) {
    const cap = p.cap !== undefined ? `, cap ${p.cap}` : "";
    const reserved = options.final && p.reserved === 0 ? "" : `, ${p.reserved} reserved`;
    parts.push({
      text: `points ${p.spent} spent${reserved}${cap}`,
      short: `${p.spent}${reserved ? `+${p.reserved}` : ""}${p.cap !== undefined ? `/${p.cap}` : ""} pts`,
      rank: 5,
    });
  }
  if (!options.final && ETA_PHASES.has(p.phase)) {
    const eta = estimateEta(p, now);
    if (eta !== undefined)
      parts.push({ text: eta < 1 ? "ETA soon" : `ETA ${formatDuration(Math.ceil(eta))}`, rank: 2 });
  }
  return fitParts(parts, options);
}

/** Jobs stored that this run generated (an earlier process of it included). */
function generatedOf(p: Shown): { generated: number; reused: number } {
  const reused = Math.max(0, Math.min(p.reused, p.counts.stored));
  return { generated: p.counts.stored - reused, reused };
}

/** While the run goes on: its work done of its work, what is under way, what ended otherwise. */
function liveCounts(p: Shown): Part[] {
  const c = p.counts;
  const { generated, reused } = generatedOf(p);
  const parts: Part[] = [];
  const work = p.work ?? p.total - reused;
  if (work > 0) parts.push({ text: `${generated}/${work} generated`, rank: 3 });
  const running = c.submitting + c.running;
  if (running > 0) parts.push({ text: `${running} running`, rank: 6 });
  if (c.collecting > 0) parts.push({ text: `${c.collecting} downloading`, rank: 8 });
  // Jobs left alone (outside --only) are pending too, but nothing waits for them.
  const waiting = Math.max(0, c.pending - (p.idle ?? 0));
  if (waiting > 0) parts.push({ text: `${waiting} queued`, rank: 9 });
  if (c.failed > 0) parts.push({ text: `${c.failed} failed`, rank: 4 });
  const cancelled = c.cancelled + (p.removed ?? 0);
  if (cancelled > 0) parts.push({ text: `${cancelled} cancelled`, rank: 7 });
  if (reused > 0) parts.push({ text: `${reused} reused`, rank: 10 });
  if ((p.idle ?? 0) > 0) parts.push({ text: `${p.idle} not selected`, rank: 11 });
  return parts;
}

/** The last line: the counts of the summary printed under it, in its words. */
function finalCounts(p: Shown): Part[] {
  const c = p.counts;
  const { generated, reused } = generatedOf(p);
  const pending = c.pending + c.submitting + c.running + c.collecting;
  const cancelled = c.cancelled + (p.removed ?? 0);
  const parts: Part[] = [
    { text: `${generated} generated`, rank: 3 },
    { text: `${reused} reused`, rank: 4 },
  ];
  if (c.failed > 0) parts.push({ text: `${c.failed} failed`, rank: 4 });
  if (cancelled > 0) parts.push({ text: `${cancelled} cancelled`, rank: 6 });
  if (pending > 0) parts.push({ text: `${pending} pending`, rank: 6 });
  return parts;
}

/**
 * Joins the parts; too wide, uses short forms, the least useful part's first, then drops parts by
 * rank, then cuts with an ellipsis.
 */
function fitParts(parts: Part[], options: LineOptions): string {
  const unicode = options.unicode ?? true;
  const sep = unicode ? " · " : " | ";
  const columns = options.columns;
  const full = parts.map((x) => x.text).join(sep);
  if (columns === undefined || !Number.isFinite(columns) || columns <= 0) return full;
  const max = Math.max(1, Math.floor(columns) - 1);
  if (full.length <= max) return full;
  const kept = parts.map((part) => ({ part, text: part.text }));
  const join = () => kept.map((x) => x.text).join(sep);
  let line = full;
  const byRank = [...kept].sort((a, b) => b.part.rank - a.part.rank);
  for (const k of byRank) {
    if (line.length <= max) break;
    if (k.part.short === undefined) continue;
    k.text = k.part.short;
    line = join();
  }
  while (line.length > max && kept.length > 1) {
    let worst = 0;
    for (let k = 1; k < kept.length; k++)
      if ((kept[k]?.part.rank ?? 0) > (kept[worst]?.part.rank ?? 0)) worst = k;
    kept.splice(worst, 1);
    line = join();
  }
  if (line.length <= max) return line;
  const ellipsis = unicode ? "…" : "...";
  return max > ellipsis.length ? line.slice(0, max - ellipsis.length) + ellipsis : line.slice(0, max);
}

/**
 * Whether the terminal shows UTF-8: not the Linux console nor a dumb one, a locale that says UTF-8
 * when one is set (C or POSIX, or a legacy charset, means ASCII), and on Windows a modern terminal.
 */
export function supportsUnicode(
  env: NodeJS.ProcessEnv,
  platform: NodeJS.Platform = process.platform,
): boolean {
  const term = env.TERM ?? "";
  if (term === "dumb" || term === "linux") return false;
  const locale = env.LC_ALL || env.LC_CTYPE || env.LANG || "";
  if (locale !== "") return /utf-?8/i.test(locale);
  if (platform === "win32")
    return Boolean(
      env.WT_SESSION || env.TERM_PROGRAM === "vscode" || env.ConEmuTask || term.startsWith("xterm"),
    );
  return true;
}

interface DisplayOptions {
  /** The clock (epoch ms); tests pass their own. */
  now?: () => number;
  /** The environment read for TERM, the locale and COLUMNS (default: process.env). */
  env?: NodeJS.ProcessEnv;
}

export class ProgressDisplay {
  private readonly now: () => number;
  private readonly env: NodeJS.ProcessEnv;
  /** Redrawing in place (ANSI) or plain lines (dumb terminal, or not a terminal at all). */
  private readonly plain: boolean;
  private readonly unicode: boolean;
  private state: Progress | undefined;
  /** The status line on screen now ("" for none). */
  private shown = "";
  private lastDraw = Number.NEGATIVE_INFINITY;
  private throttle: NodeJS.Timeout | undefined;
  private clock: NodeJS.Timeout | undefined;
  private finished = false;
  /** The status line gave way to log lines and is drawn again at the end of this microtask. */
  private cleared = false;
  /** Plain mode: the phase and time of the last printed status. */
  private printedPhase: Phase | undefined;
  private printedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly out: NodeJS.WriteStream,
    options: DisplayOptions = {},
  ) {
    this.now = options.now ?? (() => Date.now());
    this.env = options.env ?? process.env;
    this.plain = !out.isTTY || this.env.TERM === "dumb";
    this.unicode = supportsUnicode(this.env);
  }

  /** The newest state; redrawn at most ~10 times a second, and every second for the clock. */
  update(p: Progress): void {
    if (this.finished) return;
    this.state = p;
    if (this.throttle) return;
    const wait = this.lastDraw + THROTTLE_MS - this.now();
    if (wait <= 0) this.draw();
    else
      this.throttle = setTimeout(() => {
        this.throttle = undefined;
        this.draw();
      }, wait).unref();
  }

  /** Prints `text` (one or more complete lines, e.g. a pretty log line) above the status line, then redraws it. */
  log(text: string): void {
    const lines = text.endsWith("\n") ? text : `${text}\n`;
    if (this.finished || this.plain || this.shown === "") {
      this.out.write(lines);
      return;
    }
    if (this.cleared) {
      this.out.write(lines);
      return;
    }
    // The status line gives way to the text, and comes back below it once the lines written in the
    // same turn of the event loop (a multi-line log entry, a burst) are all out: one redraw for all.
    this.out.write(`\r${ERASE_LINE_END}${lines}`);
    this.cleared = true;
    queueMicrotask(() => {
      this.cleared = false;
      if (this.finished || !this.state) return;
      const line = this.line();
      this.out.write(`${line}${ERASE_LINE_END}`);
      this.shown = line;
      this.lastDraw = this.now();
    });
  }

  /** Draws the last state, ends the status line, stops the timer; safe to call more than once. */
  done(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.throttle) clearTimeout(this.throttle);
    if (this.clock) clearTimeout(this.clock);
    this.throttle = undefined;
    this.clock = undefined;
    if (!this.state) return;
    const line = this.line(true);
    if (this.plain) {
      if (line !== this.shown) this.out.write(`${line}\n`);
    } else {
      this.out.write(`\r${line}${ERASE_LINE_END}\n`);
    }
    this.shown = "";
  }

  private columns(): number {
    const fromEnv = Number.parseInt(this.env.COLUMNS ?? "", 10);
    return this.out.columns || (fromEnv > 0 ? fromEnv : 80);
  }

  private line(final = false): string {
    if (!this.state) return "";
    return progressLine(this.state, this.now(), { columns: this.columns(), unicode: this.unicode, final });
  }

  private draw(): void {
    if (this.finished || !this.state || this.cleared) return;
    const now = this.now();
    const line = this.line();
    if (this.plain) {
      const phase = this.state.phase;
      const since = now - this.printedAt;
      if ((this.printedPhase !== phase && since >= DUMB_PHASE_GAP_MS) || since >= DUMB_EVERY_MS) {
        this.out.write(`${line}\n`);
        this.shown = line;
        this.printedPhase = phase;
        this.printedAt = now;
      }
    } else if (line !== this.shown) {
      this.out.write(`\r${line}${ERASE_LINE_END}`);
      this.shown = line;
    }
    this.lastDraw = now;
    this.schedule(now);
  }

  /** The clock: the next redraw just after the elapsed time turns to its next second. */
  private schedule(now: number): void {
    if (this.clock) clearTimeout(this.clock);
    const startedAt = this.state?.startedAt ?? now;
    const intoSecond = (((now - startedAt) % 1000) + 1000) % 1000;
    const plainWait =
      (this.state?.phase !== this.printedPhase ? DUMB_PHASE_GAP_MS : DUMB_EVERY_MS) - (now - this.printedAt);
    const wait = this.plain ? plainWait + 5 : 1000 - intoSecond + 5;
    this.clock = setTimeout(
      () => {
        this.clock = undefined;
        this.draw();
      },
      Math.max(5, wait),
    ).unref();
  }
}
