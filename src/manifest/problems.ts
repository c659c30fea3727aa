// Everything wrong with a manifest, found in stages and reported together: errors stop a run
// before anything is spent, warnings are shown separately.
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

export class Problems {
  readonly list: Problem[] = [];
  /** A default inherited by many rows is wrong once, not once per row. */
  private readonly seen = new Set<string>();
  private reported = 0;

  /**
   * How many times an error was reported, repeats included (a row that inherits a wrong default
   * is wrong, though its message is listed once). Cheap: the sorted `errors` list is built on read.
   */
  get errorCount(): number {
    return this.reported;
  }

  error(file: string, line: number, field: string, message: string): void {
    this.reported += 1;
    this.add({ severity: "error", file, line, field, message });
  }

  warn(file: string, line: number, field: string, message: string): void {
    this.add({ severity: "warning", file, line, field, message });
  }

  private add(p: Problem): void {
    const key = `${p.severity}\n${p.file}\n${p.line}\n${p.field}\n${p.message}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    this.list.push(p);
  }

  get errors(): Problem[] {
    return sorted(this.list.filter((p) => p.severity === "error"));
  }

  get warnings(): Problem[] {
    return sorted(this.list.filter((p) => p.severity === "warning"));
  }
}

/** By file (in order of first appearance), then line; stable within a line. */
function sorted(list: Problem[]): Problem[] {
  const order = new Map<string, number>();
  for (const p of list) if (!order.has(p.file)) order.set(p.file, order.size);
  return [...list].sort((a, b) => (order.get(a.file) ?? 0) - (order.get(b.file) ?? 0) || a.line - b.line);
}

/** ` (did you mean "duration"?)` when a known name is close enough to be a likely typo. */
export function didYouMean(input: string, known: readonly string[]): string {
  if (known.length === 0) return "";
  const lower = input.toLowerCase();
  const exactCase = known.find((k) => k.toLowerCase() === lower);
  if (exactCase) return ` (did you mean ${JSON.stringify(exactCase)}?)`;
  const best = closest(
    lower,
    known.map((k) => k.toLowerCase()),
  );
  const limit = Math.max(2, Math.floor(input.length / 3));
  if (distance(lower, best) > limit) return "";
  const match = known.find((k) => k.toLowerCase() === best) ?? best;
  return ` (did you mean ${JSON.stringify(match)}?)`;
}
