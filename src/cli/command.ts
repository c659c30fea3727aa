// What a command is: its flags (a yargs builder) and its handler, which returns an Outcome that
// main.ts prints. Each command's folder defines its own (commands/<name>/command.ts); main.ts
// assembles them. A command's definition is loaded to parse every command line (--version and
// --help too), so it reaches its core (the API, the pipeline) only by a dynamic import in its
// handler.
import type { Logger } from "pino";
import type { Argv } from "yargs";
import type { Connection, ConnectionArgs, connect } from "./config.js";
import { ExitCode } from "./exit-code.js";
import type { LogFormat, LogLevel } from "./logger.js";
import type { AddOption } from "./options.js";
import type { Outcome } from "./output.js";

/** The global options (main.ts), which every command's arguments carry. */
export interface GlobalArgs extends ConnectionArgs {
  json: boolean;
  "log-level"?: LogLevel;
  "log-format"?: LogFormat;
  "sandbox-state"?: string;
}

/** What a command needs at run time, made once per invocation by main.ts. */
export interface Runtime {
  env: NodeJS.ProcessEnv;
  signal: AbortSignal;
  /** The logger of the chosen command, in the format and at the level asked for. */
  logger(writeLine?: (line: string) => void): Logger;
  format: LogFormat;
  /** Opens the services, remembering the address for the messages of failures. */
  connect: typeof connect;
  /** Opens the services for a command without a manifest (its sandbox state from --sandbox-state). */
  services(args: GlobalArgs): Promise<Connection>;
  /** Prints at once (the sandbox's first line). */
  print(text: string): void;
  /** The connection's clients, their errors marked with the service they came from. */
  tagged<T extends Pick<Connection, "video" | "speech">>(conn: T): T;
}

/** Adds a command's positionals and flags; every flag through `option` (its variable, its refusals). */
type Builder = (y: Argv, option: AddOption) => Argv<object>;

/** One command that runs: `clapper plan`, `clapper skills list`. */
export interface CommandSpec<A> {
  /** yargs' syntax: the name, then the positionals (`plan <manifest>`). */
  command: string;
  describe: string;
  builder?: Builder;
  /** Refuses a combination of flags as the line is parsed, before anything runs (parseCommandLine too). */
  check?: (args: A) => void;
  handler: (args: A, rt: Runtime) => Promise<Outcome>;
}

/** A command whose subcommands run: `clapper skills`. */
export interface CommandGroup {
  command: string;
  describe: string;
  /** The flags every subcommand takes. */
  builder?: Builder;
  commands: readonly Command[];
  /** The refusal when no subcommand is named. */
  demand: string;
}

/** The arguments as yargs hands them over, before a command's own type is put back on them. */
export type ParsedArgs = GlobalArgs & Record<string, unknown>;

export type Command = CommandSpec<ParsedArgs> | CommandGroup;

/**
 * A command, its arguments' type checked in its own module. yargs builds that object from the
 * builder's flags, which the type system cannot follow: the one cast is here.
 */
export function defineCommand<A>(spec: CommandSpec<GlobalArgs & A>): Command {
  return spec as unknown as CommandSpec<ParsedArgs>;
}

export function isGroup(c: Command): c is CommandGroup {
  return "commands" in c;
}

/** Opens the services for one command, does its work, and closes them. */
export async function withConnection(
  rt: Runtime,
  args: GlobalArgs,
  work: (conn: Connection) => Promise<Outcome>,
): Promise<Outcome> {
  const conn = await rt.services(args);
  try {
    return await work(conn);
  } finally {
    await conn.close();
  }
}

/** `warning: ...` lines for people, on stderr beside the answer. */
function warningNotes(warnings: readonly string[]): Pick<Outcome, "notes"> {
  return warnings.length > 0 ? { notes: warnings.map((w) => `warning: ${w}`) } : {};
}

/** Opens the services for one command, does its work, and closes them. */
export async function withServices<T>(
  rt: Runtime,
  args: GlobalArgs,
  work: (conn: Connection) => Promise<T>,
  render: (data: T) => string,
  /** What the answer warns of (a list the service served incompletely), for people. */
  warningsOf: (data: T) => readonly string[] = () => [],
): Promise<Outcome> {
  return withConnection(rt, args, async (conn) => {
    const data = await work(conn);
    return { code: ExitCode.Ok, json: data, text: render(data), ...warningNotes(warningsOf(data)) };
  });
}

/** A list for a command: its items, and one sentence for each list the service served incompletely. */
export interface Listed<T> {
  items: T[];
  warnings: string[];
}

/**
 * A command that lists: with --json one object, `{ [key]: [...] }` (a list is wrapped, never a
 * bare array), with `warnings` beside it when a list came back incomplete; for people, the table
 * on stdout and each warning on stderr.
 */
export async function withList<T>(
  rt: Runtime,
  args: GlobalArgs,
  key: string,
  work: (conn: Connection) => Promise<Listed<T>>,
  render: (items: readonly T[]) => string,
): Promise<Outcome> {
  return withConnection(rt, args, async (conn) => {
    const { items, warnings } = await work(conn);
    return {
      code: ExitCode.Ok,
      json: { [key]: items, ...(warnings.length > 0 ? { warnings } : {}) },
      text: render(items),
      ...warningNotes(warnings),
    };
  });
}
