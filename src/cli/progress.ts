// A live one-line progress display for terminals: jobs by state, points, ETA. Redrawn at most
// ten times a second on stderr, so stdout stays clean for results.
import type { Progress } from "../pipeline/run.js";

function duration(seconds: number): string {
  if (seconds < 60) return `${seconds}s`;
  const m = Math.floor(seconds / 60);
  return m < 60
    ? `${m}m${String(seconds % 60).padStart(2, "0")}s`
    : `${Math.floor(m / 60)}h${String(m % 60).padStart(2, "0")}m`;
}

export function progressLine(p: Progress): string {
  const c = p.counts;
  const parts = [
    `${c.stored}/${p.total} stored`,
    c.running + c.submitting > 0 ? `${c.running + c.submitting} running` : "",
    c.collecting > 0 ? `${c.collecting} downloading` : "",
    c.pending > 0 ? `${c.pending} waiting` : "",
    c.failed > 0 ? `${c.failed} failed` : "",
    c.cancelled > 0 ? `${c.cancelled} cancelled` : "",
    `points ${p.spent} spent, ${p.reserved} reserved`,
    p.etaSeconds !== undefined && c.stored < p.total ? `ETA ${duration(p.etaSeconds)}` : "",
  ];
  return parts.filter(Boolean).join(" · ");
}

export class ProgressDisplay {
  private last = 0;
  private pending: Progress | undefined;
  private timer: NodeJS.Timeout | undefined;
  private width = 0;

  constructor(private readonly out: NodeJS.WriteStream) {}

  update(p: Progress): void {
    this.pending = p;
    const wait = 100 - (Date.now() - this.last);
    if (wait <= 0) this.draw();
    else this.timer ??= setTimeout(() => this.draw(), wait);
  }

  private draw(): void {
    this.timer = undefined;
    if (!this.pending) return;
    this.last = Date.now();
    const columns = this.out.columns || 100;
    const line = progressLine(this.pending).slice(0, columns - 1);
    this.out.write(`\r${line.padEnd(this.width)}`);
    this.width = line.length;
  }

  /** Draws the last state and ends the line; safe to call more than once. */
  done(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.draw();
    this.pending = undefined;
    if (this.width > 0) this.out.write("\n");
    this.width = 0;
  }
}
