// Results go to stdout: aligned tables for people, JSON for scripts (`--json`).

type Cell = string | number | boolean | undefined | null;

interface Column<T> {
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

// ---------------------------------------------------------------------------------------------
// GitHub Actions workflow commands. The runner reads them from stdout and stderr alike
// (actions/runner: both streams of a step go through its command manager), so clapper prints them
// on stderr, where they leave `--json` on stdout intact.
// ---------------------------------------------------------------------------------------------

/** The message part of a workflow command: `%`, CR and LF escaped. */
export function escapeData(text: string): string {
  return text.replace(/%/g, "%25").replace(/\r/g, "%0D").replace(/\n/g, "%0A");
}

/** A property value of a workflow command: as data, plus `:` and `,`. */
export function escapeProperty(text: string): string {
  return escapeData(text).replace(/:/g, "%3A").replace(/,/g, "%2C");
}

interface Annotated {
  severity: "error" | "warning";
  file: string;
  line: number;
  field: string;
  message: string;
}

/** `::error file=shots.csv,line=14,title=duration::expected an integer from 4 to 30, got 31` */
export function workflowCommand(p: Annotated): string {
  const props = [
    p.file ? `file=${escapeProperty(p.file)}` : "",
    p.line > 0 ? `line=${p.line}` : "",
    `title=${escapeProperty(p.field ? `clapper: ${p.field}` : "clapper")}`,
  ].filter(Boolean);
  return `::${p.severity} ${props.join(",")}::${escapeData(p.message)}`;
}

/** Whether workflow commands are wanted: inside a GitHub Actions job. */
export function inGithubActions(env: NodeJS.ProcessEnv): boolean {
  return env.GITHUB_ACTIONS === "true";
}

/** What a command ends with: printed in one place (main.ts), as text for people or one JSON object. */
export interface Outcome {
  code: number;
  /** The answer with --json (an object: with a non-zero code, `error` is added beside its fields). */
  json?: unknown;
  /**
   * `json` is printed as it is whatever the code: a run's report is the same object as its
   * report.json (its status, counts and `stopped_by` say what went wrong).
   */
  whole?: boolean;
  /** The answer for people. */
  text?: string;
  /** Where `text` goes: stdout (default), or stderr when it explains a failure. */
  textTo?: "stdout" | "stderr";
  /** Lines for people on stderr (problems, warnings, notes). */
  notes?: string[];
  /** One line saying what went wrong (for `error.message`; on stderr when nothing else says it). */
  message?: string;
  /** Manifest problems (errors and warnings): in `error.problems`, and as GitHub annotations. */
  problems?: ReadonlyArray<Annotated>;
  /** The command printed its answer itself already (the sandbox's first line). */
  printed?: boolean;
}
