// pino to stderr, so stdout stays for results (tables, --json). Keys are redacted by path as a
// second line of defence: no code path puts the key into a log object in the first place.
//
// Two formats: `json` (one object per line, for machines and log shippers) and `pretty` (one
// readable line per event, through pino-pretty's formatter called synchronously: no worker thread,
// so no line is lost when the process exits right after logging it).
import { createRequire } from "node:module";
import pino, { type Logger } from "pino";
import type { PrettyOptions } from "pino-pretty";
import { redact } from "../api/redact.js";

/** pino-pretty, loaded only when pretty lines are asked for. */
function prettyFactory(options: PrettyOptions): (line: string) => string {
  const load = createRequire(import.meta.url)("pino-pretty") as {
    prettyFactory: (o: PrettyOptions) => (line: string) => string;
  };
  return load.prettyFactory(options);
}

export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
export const LOG_LEVELS: readonly LogLevel[] = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];
export type LogFormat = "json" | "pretty";
export const LOG_FORMATS: readonly LogFormat[] = ["json", "pretty"];

/** pino sets `lastLevel` on a destination that asks for it, before each write. */
const NEEDS_METADATA = Symbol.for("pino.metadata");
const WARN = 40;
/** Destinations holding lines: written out when the process exits, whatever the way it exits. */
const holding = new Set<LineBatch>();
let exitHooked = false;

/**
 * stderr, with the info and debug lines of one turn written together: a run logs an event per state
 * change, thousands of lines, and a system call each cost more than building them. The lines go out
 * at the end of this turn of the event loop, or before the process exits; a warning or an error
 * goes out at once, behind the lines before it.
 */
class LineBatch {
  readonly [NEEDS_METADATA] = true;
  lastLevel = 0;
  private lines: string[] = [];

  constructor(private readonly out: { write(text: string): unknown }) {}

  write(line: string): void {
    this.lines.push(line);
    if (this.lastLevel >= WARN) {
      this.drain();
      return;
    }
    if (this.lines.length > 1) return;
    if (!exitHooked) {
      exitHooked = true;
      process.on("exit", drainAll);
    }
    holding.add(this);
    setImmediate(() => this.drain());
  }

  drain(): void {
    holding.delete(this);
    if (this.lines.length === 0) return;
    const text = this.lines.length === 1 ? (this.lines[0] as string) : this.lines.join("");
    this.lines = [];
    this.out.write(text);
  }

  /** `logger.flush()`: what is held goes out now (synchronously). */
  flush(done?: (error?: Error) => void): void {
    this.drain();
    done?.();
  }
}

function drainAll(): void {
  for (const batch of [...holding]) batch.drain();
}

/**
 * Google Cloud Logging's and most shippers' names for pino's numeric levels: a shipper that knows
 * only `severity` still tells an error from an info line.
 */
function severity(level: number): string {
  if (level >= 60) return "CRITICAL";
  if (level >= 50) return "ERROR";
  if (level >= 40) return "WARNING";
  if (level >= 30) return "INFO";
  return "DEBUG";
}

/** JSON lines: `severity` beside `level`, and `time` as ISO 8601 (what shippers parse without a hint). */
const JSON_LINES = {
  formatters: { level: (_label: string, level: number) => ({ level, severity: severity(level) }) },
  timestamp: pino.stdTimeFunctions.isoTime,
};

export function createLogger(
  level: LogLevel = "warn",
  destination: pino.DestinationStream = new LineBatch(pino.destination({ dest: 2, sync: true })),
  json = false,
): Logger {
  return pino(
    {
      level,
      base: undefined,
      // Pretty lines read pino's own numeric time and level: they are left as they were.
      ...(json ? JSON_LINES : {}),
      redact: {
        paths: ["apiKey", "api_key", "authorization", "*.authorization", "headers.authorization", "*.apiKey"],
        censor: "[redacted]",
      },
      // Paths cannot see a key inside a message a service wrote: every line is redacted by value too.
      hooks: { streamWrite: redact },
    },
    destination,
  );
}

interface CliLoggerOptions {
  level: LogLevel;
  format: LogFormat;
  /** Colours in pretty lines (a terminal). */
  color?: boolean;
  /**
   * Where pretty lines go, each a complete line without its newline (default: stderr). The live
   * progress display passes its own, so lines print above its status line.
   */
  writeLine?: (line: string) => void;
}

/** The CLI's logger in the format asked for. */
export function createCliLogger(o: CliLoggerOptions): Logger {
  if (o.format === "json") return createLogger(o.level, undefined, true);
  // For a person: one sentence a line ("shot/s01: task failed (attempt 1): ... [code]"); the whole
  // object only when debugging, where its every field matters.
  const debugging = o.level === "debug" || o.level === "trace";
  const prettify = prettyFactory({
    colorize: o.color === true,
    singleLine: true,
    translateTime: "HH:MM:ss.l",
    ignore: "pid,hostname",
    ...(debugging ? {} : { hideObject: true, messageFormat: sentence }),
  });
  const writeLine = o.writeLine ?? ((line: string) => void process.stderr.write(`${line}\n`));
  return createLogger(o.level, {
    write(chunk: string) {
      for (const line of prettify(chunk).split("\n")) if (line !== "") writeLine(line);
    },
  });
}

/**
 * The level: the one asked for (flag or CLAPPER_LOG_LEVEL) whatever the format; else `info` for
 * the JSON log of a run (one event per state change, which scripts follow), `warn` otherwise.
 */
export function defaultLogLevel(o: {
  asked?: LogLevel | undefined;
  command: string;
  format: LogFormat;
}): LogLevel {
  if (o.asked) return o.asked;
  return o.command === "run" && o.format === "json" ? "info" : "warn";
}

/** Fields of an event worth a person's eye, said after its message. */
const SAID: ReadonlyArray<readonly [string, (v: unknown) => string]> = [
  ["attempt", (v) => `attempt ${v}`],
  ["task_id", (v) => `task ${v}`],
  ["status", (v) => String(v)],
  ["uri", (v) => String(v)],
];

/** An event as one sentence: the job, the message, the details that matter, the error and its code. */
function sentence(log: Record<string, unknown>, messageKey: string): string {
  const job = typeof log.job === "string" ? `${log.job}: ` : "";
  const details = SAID.filter(([key]) => log[key] !== undefined && log[key] !== null).map(([key, say]) =>
    say(log[key]),
  );
  const error = log.error as { code?: unknown; message?: unknown } | string | undefined;
  const why =
    typeof error === "string"
      ? `: ${error}`
      : error && typeof error === "object" && error.message !== undefined
        ? `: ${String(error.message)}${error.code !== undefined ? ` [${String(error.code)}]` : ""}`
        : "";
  return `${job}${String(log[messageKey] ?? "")}${details.length > 0 ? ` (${details.join(", ")})` : ""}${why}`;
}
