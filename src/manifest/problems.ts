// Everything wrong with a manifest, found in stages and reported together: errors stop a run
// before anything is spent, warnings are shown separately.
import { relative } from "node:path";
import { closest, distance } from "fastest-levenshtein";

export interface Problem {
  severity: "error" | "warning";
  /** Path as the user wrote it (relative to the working directory when possible). */
  file: string;
  line: number;
  /** The manifest field, e.g. `duration` or `reference_images[1]`; empty for file-level problems. */
  field: string;
  message: string;
}

/** `shots.csv:14: duration: expected an integer from 4 to 30, got 31` */
export function formatProblem(p: Problem): string {
  const where = p.line > 0 ? `${p.file}:${p.line}` : p.file;
  return p.field ? `${where}: ${p.field}: ${p.message}` : `${where}: ${p.message}`;
}

/** Shown paths are relative to the working directory when that is shorter. */
export function displayPath(path: string, cwd: string): string {
  const rel = relative(cwd, path);
  return rel && !rel.startsWith("..") && rel.length < path.length ? rel : path;
}

/** At most this many problems of each severity are kept: a broken million-row file makes a million. */
export const KEPT_PROBLEMS = 1000;
/** Repeats are recognised among this many distinct problems; beyond, memory stays bounded instead. */
const REMEMBERED = 100_000;

/** Anything shaped like a model API key: the prefix alone names no key and stays. */
const API_KEY = /sk-ml-[A-Za-z0-9._~+/=-]+/g;

/** Masks API keys: a manifest can name a file that holds one, and errors quote files. */
export function redactKeys(text: string): string {
  return text.replace(API_KEY, "sk-ml-…[redacted]");
}

/**
 * A short, masked excerpt of text read from a file, for a message: at most `max` characters (code
 * points), cut with an ellipsis. Errors quote cells and column names of files that may not be
 * manifests at all, so they never quote much.
 */
export function snippet(text: string, max = 40): string {
  const masked = redactKeys(text);
  if (masked.length <= max) return masked;
  const chars = [...masked];
  return chars.length <= max ? masked : `${chars.slice(0, max - 1).join("")}…`;
}

/** A snippet in double quotes, escaped as JSON: `got "sk-ml-…[redacted]"`. */
export function quoted(text: string, max = 40): string {
  return JSON.stringify(snippet(text, max));
}

export class Problems {
  readonly list: Problem[] = [];
  /** A default inherited by many rows is wrong once, not once per row. */
  private readonly seen = new Set<string>();
  private reported = 0;
  private readonly kept = { error: 0, warning: 0 };
  private readonly dropped = { error: 0, warning: 0 };

  /**
   * How many times an error was reported, repeats included (a row that inherits a wrong default
   * is wrong, though its message is listed once). Cheap: the sorted `errors` list is built on read.
   */
  get errorCount(): number {
    return this.reported;
  }

  /** Distinct problems found past the first KEPT_PROBLEMS of their severity: counted, not kept. */
  get omitted(): { errors: number; warnings: number } {
    return { errors: this.dropped.error, warnings: this.dropped.warning };
  }

  error(file: string, line: number, field: string, message: string): void {
    this.reported += 1;
    this.add({ severity: "error", file, line, field, message });
  }

  warn(file: string, line: number, field: string, message: string): void {
    this.add({ severity: "warning", file, line, field, message });
  }

  private add(problem: Problem): void {
    // A last line of defence: whatever a message quotes, no key leaves through it, and a field
    // (a CSV column name) is one short line.
    const p = {
      ...problem,
      field: snippet(problem.field).replace(/\p{Cc}/gu, "\ufffd"),
      message: redactKeys(problem.message),
    };
    const key = `${p.severity}\n${p.file}\n${p.line}\n${p.field}\n${p.message}`;
    if (this.seen.has(key)) return;
    if (this.seen.size < REMEMBERED) this.seen.add(key);
    if (this.kept[p.severity] >= KEPT_PROBLEMS) {
      this.dropped[p.severity] += 1;
      return;
    }
    this.kept[p.severity] += 1;
    this.list.push(p);
  }

  get errors(): Problem[] {
    return sorted(this.list.filter((p) => p.severity === "error"));
  }

  get warnings(): Problem[] {
    return sorted(this.list.filter((p) => p.severity === "warning"));
  }
}

/**
 * The first `limit` problems of a list, formatted, and a line for the rest: those of the list past
 * the limit and those never kept (`omitted`). `… and 950 more errors`.
 */
export function formatProblems(
  list: readonly Problem[],
  { limit = 50, omitted = 0 }: { limit?: number; omitted?: number } = {},
): string[] {
  const lines = list.slice(0, Math.max(0, limit)).map(formatProblem);
  const rest = list.length - lines.length + omitted;
  if (rest > 0) {
    const noun = (list[0]?.severity ?? "error") === "error" ? "error" : "warning";
    lines.push(`… and ${rest} more ${noun}${rest === 1 ? "" : "s"}`);
  }
  return lines;
}

/** By file (in order of first appearance), then line; stable within a line. */
function sorted(list: Problem[]): Problem[] {
  const order = new Map<string, number>();
  for (const p of list) if (!order.has(p.file)) order.set(p.file, order.size);
  return [...list].sort((a, b) => (order.get(a.file) ?? 0) - (order.get(b.file) ?? 0) || a.line - b.line);
}

const SUGGESTION_CANDIDATES = 10_000;

/** ` (did you mean "duration"?)` when a known name is close enough to be a likely typo. */
export function didYouMean(input: string, known: readonly string[]): string {
  if (known.length === 0) return "";
  const lower = input.toLowerCase();
  const exactCase = known.find((k) => k.toLowerCase() === lower);
  if (exactCase) return ` (did you mean ${quoted(exactCase, 64)}?)`;
  // Edit distances to every id of a 200,000-row file, for each of its errors, would take hours.
  if (known.length > SUGGESTION_CANDIDATES) return "";
  const best = closest(
    lower,
    known.map((k) => k.toLowerCase()),
  );
  const limit = Math.max(2, Math.floor(input.length / 3));
  if (distance(lower, best) > limit) return "";
  const match = known.find((k) => k.toLowerCase() === best) ?? best;
  return ` (did you mean ${quoted(match, 64)}?)`;
}
