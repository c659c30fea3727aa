// Results go to stdout: aligned tables for people, JSON for scripts (`--json`).

export type Cell = string | number | boolean | undefined | null;

export interface Column<T> {
  header: string;
  value: (row: T) => Cell;
  align?: "left" | "right";
}

export function table<T>(rows: readonly T[], columns: readonly Column<T>[]): string {
  const cells = rows.map((row) => columns.map((c) => show(c.value(row))));
  const widths = columns.map((c, i) => Math.max(c.header.length, ...cells.map((r) => (r[i] ?? "").length)));
  const line = (values: readonly string[]) =>
    values
      .map((v, i) => (columns[i]?.align === "right" ? v.padStart(widths[i] ?? 0) : v.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return [line(columns.map((c) => c.header)), ...cells.map(line)].join("\n");
}

function show(value: Cell): string {
  if (value === undefined || value === null) return "-";
  return String(value);
}

export function date(seconds: number | undefined): string {
  if (!seconds) return "-";
  return new Date(seconds * 1000)
    .toISOString()
    .replace("T", " ")
    .replace(/\.\d+Z$/, "Z");
}

export function json(data: unknown): string {
  return JSON.stringify(data, null, 2);
}
