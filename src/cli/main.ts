// The thin CLI: each command's folder defines its flags and its handler (commands/*/command.ts);
// this module assembles them under the global options and is the one place that turns what a
// command ends with into output and an exit code. Connections, logging and signals are set up
// here too: every exit prints one answer (text for people, or exactly one JSON object on stdout
// with --json), every error is classified once (src/cli/errors.ts).
import { readFileSync } from "node:fs";
import { closest, distance } from "fastest-levenshtein";
import type { Logger } from "pino";
import yargs, { type Argv } from "yargs";
import { redact } from "../api/redact.js";
import { releaseHeldLocksSync } from "../engine/lock.js";
import { formatProblems, type Problem } from "../manifest/problems.js";
import { traceStart } from "../trace.js";
import {
  type Command,
  type CommandSpec,
  type GlobalArgs,
  isGroup,
  type ParsedArgs,
  type Runtime,
} from "./command.js";
import { assemble } from "./commands/assemble/command.js";
import { balance } from "./commands/balance/command.js";
import { budget } from "./commands/budget/command.js";
import { cancel } from "./commands/cancel/command.js";
import { init } from "./commands/init/command.js";
import { plan } from "./commands/plan/command.js";
import { report } from "./commands/report/command.js";
import { run } from "./commands/run/command.js";
import { sandbox } from "./commands/sandbox/command.js";
import { schema } from "./commands/schema/command.js";
import { skills } from "./commands/skills/command.js";
import { status } from "./commands/status/command.js";
import { tasks } from "./commands/tasks/command.js";
import { voices } from "./commands/voices/command.js";
import type { ConnectExtras } from "./config.js";
import { type Classified, classify, ExitError } from "./errors.js";
import { ExitCode } from "./exit-code.js";
import {
  createCliLogger,
  defaultLogLevel,
  LOG_FORMATS,
  LOG_LEVELS,
  type LogFormat,
  type LogLevel,
} from "./logger.js";
import { type AddOption, type OptionContext, type OptionSpec, optionAdder } from "./options.js";
import { inGithubActions, json, type Outcome, workflowCommand } from "./output.js";

/** In the order --help lists them. */
const COMMANDS: readonly Command[] = [
  init,
  sandbox,
  plan,
  run,
  status,
  report,
  cancel,
  assemble,
  balance,
  budget,
  skills,
  voices,
  tasks,
  schema,
];

const GLOBAL_FLAGS: ReadonlyArray<readonly [string, OptionSpec]> = [
  ["json", { type: "boolean", default: false, describe: "print one JSON object on stdout (for scripts)" }],
  [
    "sandbox",
    { type: "boolean", default: false, describe: "use an in-process emulator instead of the services" },
  ],
  [
    "sandbox-state",
    {
      type: "string",
      describe:
        "with --sandbox: the emulator's state file (default for run, plan and cancel: beside the run's state; else none: an empty emulator)",
    },
  ],
  ["base-url", { type: "string", noEnv: true, describe: "service address (default: $CLAPPER_BASE_URL)" }],
  ["api-key-file", { type: "string", describe: "file holding the API key (default: $CLAPPER_API_KEY)" }],
  [
    "timeout",
    {
      type: "number",
      rule: { min: 0, above: true, unit: "seconds" },
      describe: "seconds per HTTP attempt (default 30)",
    },
  ],
  [
    "log-level",
    {
      type: "choice",
      choices: LOG_LEVELS,
      describe: "log level on stderr (default: info for a run's JSON log, else warn)",
    },
  ],
  [
    "log-format",
    {
      type: "choice",
      choices: LOG_FORMATS,
      describe: "json: one object per line; pretty: readable lines (default on a terminal)",
    },
  ],
];

interface PackageInfo {
  version: string;
  bugs?: string | { url?: string };
  repository?: string | { url?: string };
}

function packageInfo(): PackageInfo {
  return JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as PackageInfo;
}

/** Where a bug is reported: package.json's `bugs`, else its repository's issues, else a sentence. */
export function bugsUrl(pkg: Pick<PackageInfo, "bugs" | "repository">): string {
  const bugs = typeof pkg.bugs === "string" ? pkg.bugs : pkg.bugs?.url;
  if (bugs) return bugs;
  const repo = typeof pkg.repository === "string" ? pkg.repository : pkg.repository?.url;
  const m = repo?.match(/github\.com[/:]([^/]+\/[^/.]+)/);
  if (m) return `https://github.com/${m[1]}/issues`;
  return "the issue tracker of the clapper repository";
}

/** Two-stage shutdown: the first SIGINT/SIGTERM aborts gracefully, the second exits at once. */
function shutdownSignal(
  early: AbortSignal | undefined,
  onForce: (name: NodeJS.Signals) => void,
): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  // A stop that came while the CLI was still loading (bin/clapper.js kept it): this run starts stopped.
  if (early?.aborted) controller.abort(early.reason);
  const onSignal = (name: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      // The journal is flushed record by record, so leaving now loses nothing: exit as interrupted,
      // giving back the locks this process holds so that the next run need not wait out a lease.
      releaseHeldLocksSync();
      process.stderr.write(`clapper: second ${name}, exiting now\n`);
      onForce(name);
      process.exit(ExitCode.Interrupted);
    }
    controller.abort(new Error(`received ${name}`));
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  return {
    signal: controller.signal,
    dispose() {
      process.off("SIGINT", onSignal);
      process.off("SIGTERM", onSignal);
    },
  };
}

export interface MainIo {
  env: NodeJS.ProcessEnv;
  /** Results: one call per command, without the trailing newline. */
  stdout: (text: string) => void;
  /** The one-line reason of a failure, without the trailing newline. */
  stderr: (text: string) => void;
  logger?: Logger;
  /** Aborted by a stop signal that came before main() could listen (bin/clapper.js). */
  earlySignal?: AbortSignal;
}

interface Chosen {
  command: string;
  args: ParsedArgs;
  work: (rt: Runtime) => Promise<Outcome>;
}

interface Parsed {
  chosen?: Chosen;
  /** What yargs printed instead of running a command: help, version, a completion script. */
  output?: string;
}

/** How a command's yargs handler ends parsing once the command is chosen (see buildCli). */
const CHOSEN = Symbol("command chosen");

/** Every flag and command, and the work each command does; nothing is run while parsing. */
function buildCli(argv: readonly string[], env: NodeJS.ProcessEnv, choose: (c: Chosen) => void): Argv {
  const ctx: OptionContext = { argv, env, flags: new Set(), envErrors: [] };
  const option = optionAdder(ctx);
  const pick = (command: string, spec: CommandSpec<ParsedArgs>) => (parsed: unknown) => {
    if (ctx.envErrors[0]) throw ctx.envErrors[0];
    const args = parsed as ParsedArgs;
    spec.check?.(args);
    choose({ command, args, work: (rt) => spec.handler(args, rt) });
    // Validated and chosen: leave yargs here. After a handler it renders the command's whole help
    // text to cache it (cliui and string widths, 40-90 ms of a run's start), never printed since
    // the work runs later, from main().
    throw CHOSEN;
  };

  let cli = yargs([...argv])
    .scriptName("clapper")
    .usage(
      "$0 <command> [options]\n\nStoryboard manifests to finished video and speech, budgeted and resumable.",
    )
    .epilog(
      "Every flag can also be set by a CLAPPER_* variable (--max-points: CLAPPER_MAX_POINTS); the flag wins. " +
        "The API key comes from CLAPPER_API_KEY or --api-key-file, never from the command line.\n" +
        "Exit codes: 0 done, 1 failed jobs or a refused request, 2 usage or manifest error, 3 budget, " +
        "4 interrupted, 5 locked, 6 unreachable, 70 internal error.",
    )
    .env(false);
  for (const [name, spec] of GLOBAL_FLAGS) cli = option(cli, name, spec);
  cli = cli.group([...GLOBAL_FLAGS.map(([name]) => name), "help", "version"], "Global options:");
  for (const command of COMMANDS) cli = mount(cli, command, option, pick);

  return (
    cli
      .completion(
        "completion",
        "print the shell completion script (bash; zsh when $SHELL is zsh): clapper completion >> ~/.bashrc",
      )
      .recommendCommands()
      .demandCommand(1, "name a command; see clapper --help")
      .strict()
      .version(packageInfo().version)
      .help()
      .alias("h", "help")
      .wrap(Math.min(110, process.stdout.columns || 110))
      // main() returns the exit code: yargs must not exit the process (after --help, --version).
      .exitProcess(false)
      .fail((message, error) => {
        // A refused value (coerce) arrives with its error; a bug in a builder is not a usage error.
        if (error instanceof ExitError) throw error;
        if (error && !message) throw error;
        throw new ExitError(
          ExitCode.Usage,
          usageMessage(message ?? error?.message ?? "usage error", argv, ctx.flags),
        );
      })
  );
}

/** One command (or a group and its subcommands) added to yargs; `name` is what it is chosen as ("skills list"). */
function mount(
  cli: Argv,
  command: Command,
  option: AddOption,
  pick: (name: string, spec: CommandSpec<ParsedArgs>) => (parsed: unknown) => void,
  prefix = "",
): Argv {
  const name = `${prefix}${command.command.split(" ")[0]}`;
  if (!isGroup(command)) {
    const build = (y: Argv) => (command.builder ? command.builder(y, option) : y);
    return cli.command(command.command, command.describe, build, pick(name, command));
  }
  return cli.command(command.command, command.describe, (y: Argv) => {
    let group: Argv = command.builder ? command.builder(y, option) : y;
    for (const sub of command.commands) group = mount(group, sub, option, pick, `${name} `);
    return group.demandCommand(1, command.demand);
  });
}

/** yargs' usage messages, made precise: the unknown command or flag named, a close one suggested. */
function usageMessage(message: string, argv: readonly string[], flags: ReadonlySet<string>): string {
  const recommended = /^Did you mean (.+)\?$/.exec(message);
  if (recommended?.[1]) {
    const words = argv.filter((a) => !a.startsWith("-"));
    const typed = words.length > 0 ? closest(recommended[1], words) : undefined;
    return `unknown command${typed ? ` ${JSON.stringify(typed)}` : ""}: did you mean ${recommended[1]}? (see clapper --help)`;
  }
  const unknown = /^Unknown arguments?: (.+)$/s.exec(message);
  if (unknown?.[1]) {
    const known = [...flags, "help", "version"];
    const names = unknown[1].split(", ");
    // yargs lists `maxPionts` beside `max-pionts`: one unknown flag, named once.
    const camel = (n: string) => n.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    const distinct = names.filter((n) => !names.some((other) => other !== n && camel(other) === n));
    const parts = distinct.map((name) => {
      const asFlag = argv.some((a) => a === `--${name}` || a.startsWith(`--${name}=`) || a === `-${name}`);
      if (!asFlag) return name;
      const best = closest(name, known);
      return best && distance(name, best) <= Math.max(2, Math.floor(name.length / 3))
        ? `--${name} (did you mean --${best}?)`
        : `--${name}`;
    });
    return `unknown argument${parts.length === 1 ? "" : "s"}: ${parts.join(", ")} (see clapper --help)`;
  }
  const missing = /^Not enough non-option arguments: got (\d+), need at least (\d+)$/.exec(message);
  if (missing) {
    const words = argv.filter((a) => !a.startsWith("-"));
    return `missing ${Number(missing[2]) - Number(missing[1]) === 1 ? "an argument" : "arguments"}: see clapper ${words.join(" ")} --help`;
  }
  return message;
}

/** Parses the command line: the command chosen (with its work), or what yargs printed instead. */
async function parse(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<Parsed> {
  let chosen: Chosen | undefined;
  let output: string | undefined;
  const cli = buildCli(argv, env, (c) => {
    chosen = c;
  });
  try {
    // With a callback, yargs hands over what it would print (help, version) instead of printing it.
    await cli.parseAsync([...argv], {}, (_error, _args, out) => {
      if (out) output = out;
    });
  } catch (error) {
    if (error !== CHOSEN) throw error;
  }
  if (chosen) return { chosen };
  return { output: output ?? "" };
}

/** What yargs printed instead of running a command, from the words that asked for it. */
function printedKind(argv: readonly string[]): "help" | "version" | "completion" {
  const end = argv.indexOf("--");
  const args = end >= 0 ? argv.slice(0, end) : argv;
  if (args.includes("--help") || args.includes("-h")) return "help";
  if (args.includes("--version")) return "version";
  if (args.find((a) => !a.startsWith("-")) === "completion") return "completion";
  return "help";
}

/** Checks a command line against clapper's own parser without running anything. */
export async function parseCommandLine(
  argv: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ ok: true; command: string; args: Record<string, unknown> } | { ok: false; message: string }> {
  try {
    const parsed = await parse(argv, env);
    if (parsed.chosen) return { ok: true, command: parsed.chosen.command, args: parsed.chosen.args };
    // --help, --version, completion: valid command lines that print and do nothing else.
    return { ok: true, command: printedKind(argv), args: {} };
  } catch (error) {
    return { ok: false, message: error instanceof Error ? error.message : String(error) };
  }
}

/** Whether the command line (or CLAPPER_JSON) asks for JSON, read before yargs has parsed it. */
function wantsJson(argv: readonly string[], env: NodeJS.ProcessEnv): boolean {
  const end = argv.indexOf("--");
  const args = end >= 0 ? argv.slice(0, end) : argv;
  for (let i = args.length - 1; i >= 0; i--) {
    const a = args[i];
    if (a === "--json" || a === "--json=true") return true;
    if (a === "--no-json" || a === "--json=false") return false;
  }
  const v = env.CLAPPER_JSON?.trim().toLowerCase();
  return v === "1" || v === "true" || v === "yes" || v === "on";
}

export async function main(argv: string[], io: Partial<MainIo> = {}): Promise<number> {
  traceStart("main() called");
  const env = io.env ?? process.env;
  const out = new Answers(io, env, wantsJson(argv, env));
  const shutdown = shutdownSignal(io.earlySignal, (name) => out.forced(name));
  let session: Session | undefined;
  try {
    let parsed: Parsed;
    try {
      parsed = await parse(argv, env);
    } catch (error) {
      return out.failure(classify(error, { bugs: bugsUrl(packageInfo()) }));
    }
    if (!parsed.chosen) return out.instead(argv, parsed.output ?? "");
    traceStart("command line parsed");
    const { command, args, work } = parsed.chosen;
    out.json = args.json === true;
    const format: LogFormat = args["log-format"] ?? (process.stderr.isTTY ? "pretty" : "json");
    const level = defaultLogLevel({ asked: args["log-level"], command, format });
    session = openSession({ env, io, signal: shutdown.signal, format, level, print: (t) => out.print(t) });
    let outcome: Outcome;
    try {
      // Test-only (documented in docs/configuration.md): an internal fault, to check exit 70 end to end. `run`
      // honours it later, with the run located and the services open.
      if (env.CLAPPER_TEST_FAULT === "internal" && command !== "run") {
        throw new Error("injected internal fault (CLAPPER_TEST_FAULT=internal)");
      }
      outcome = await work(session.rt);
    } catch (error) {
      const baseUrl = session.baseUrl();
      const c = classify(error, { bugs: bugsUrl(packageInfo()), ...(baseUrl ? { baseUrl } : {}) });
      if (c.stack && (level === "debug" || level === "trace")) out.stderr(c.stack);
      return out.failure(c);
    }
    return out.outcome(outcome);
  } finally {
    session?.flush();
    shutdown.dispose();
  }
}

interface Session {
  rt: Runtime;
  /** The services' address, for the message of a failure: known once a command connects. */
  baseUrl(): string | undefined;
  /** Writes out what the loggers still hold, before the process exits. */
  flush(): void;
}

/** The runtime of the chosen command: its loggers, and its one way to the services. */
function openSession(o: {
  env: NodeJS.ProcessEnv;
  io: Partial<MainIo>;
  signal: AbortSignal;
  format: LogFormat;
  level: LogLevel;
  print: (text: string) => void;
}): Session {
  const { env, io, format, level } = o;
  const loggers: Logger[] = [];
  let made: Logger | undefined;
  let config: typeof import("./config.js") | undefined;
  let baseUrl: string | undefined;
  const rt: Runtime = {
    env,
    signal: o.signal,
    format,
    print: o.print,
    tagged: (conn) => (config ? config.tagServices(conn) : conn),
    logger(writeLine) {
      if (io.logger) return io.logger;
      if (made && !writeLine) return made;
      made = createCliLogger({
        level,
        format,
        color: Boolean(process.stderr.isTTY) && !env.NO_COLOR,
        ...(writeLine ? { writeLine } : {}),
      });
      loggers.push(made);
      return made;
    },
    connect: async (a, e, logger, extras?: ConnectExtras) => {
      baseUrl = a.sandbox ? "the in-process sandbox" : (a["base-url"] ?? e.CLAPPER_BASE_URL);
      // Loaded on use: the API clients (zod, undici) are not needed to parse a command line.
      config ??= await import("./config.js");
      const conn = await config.connect(a, e, logger, extras);
      baseUrl = a.sandbox ? `the in-process sandbox (${conn.baseUrl})` : conn.baseUrl;
      return conn;
    },
    async services(a: GlobalArgs) {
      const logger = rt.logger();
      const stateFile = a["sandbox-state"];
      if (a.sandbox && !stateFile) {
        logger.warn(
          { event: "sandbox-empty" },
          "--sandbox without --sandbox-state: the emulator starts empty (no tasks, skills or voices of a run); pass --sandbox-state .clapper/NAME/sandbox.json beside a manifest to use that run's",
        );
      }
      return rt.tagged(
        await rt.connect(a, env, logger, a.sandbox && stateFile ? { sandboxStateFile: stateFile } : {}),
      );
    },
  };
  return {
    rt,
    baseUrl: () => baseUrl,
    flush() {
      for (const logger of loggers) logger.flush?.();
    },
  };
}

/**
 * Everything one invocation prints, and the exit code it ends with: text for people, or in JSON
 * mode exactly one object on stdout. Every line may quote a service or a file: redacted by value
 * on the way out.
 */
class Answers {
  /** With --json (or CLAPPER_JSON): guessed from the words until yargs has parsed them. */
  json: boolean;
  /** Something went to stdout already. */
  private answered = false;
  /** The command printed its answer itself already (the sandbox's first line). */
  private printedAlready = false;
  private readonly rawStdout: (text: string) => void;
  private readonly rawStderr: (text: string) => void;

  constructor(
    io: Partial<MainIo>,
    private readonly env: NodeJS.ProcessEnv,
    json: boolean,
  ) {
    this.json = json;
    this.rawStdout = io.stdout ?? ((text: string) => void process.stdout.write(`${text}\n`));
    this.rawStderr = io.stderr ?? ((text: string) => void process.stderr.write(`${text}\n`));
  }

  stdout(text: string): void {
    this.answered = true;
    this.rawStdout(redact(text));
  }

  stderr(text: string): void {
    this.rawStderr(redact(text));
  }

  /** Prints at once, for a command that answers before it ends. */
  print(text: string): void {
    this.printedAlready = true;
    this.stdout(text);
  }

  /** A second stop signal: the one JSON object of this exit, unless the answer went out already. */
  forced(name: NodeJS.Signals): void {
    if (this.json && !this.answered) {
      this.rawStdout(
        json({
          error: {
            code: ExitCode.Interrupted,
            message: `second ${name}: exited at once; the state is saved, run again to resume`,
          },
        }),
      );
    }
  }

  /** What yargs printed instead of running a command (help, version, a completion script). */
  instead(argv: readonly string[], output: string): number {
    const text = output.replace(/\n+$/, "");
    // The shell's completion callback reads plain words, whatever CLAPPER_JSON says.
    const completing = argv.includes("--get-yargs-completions");
    if (!this.json || completing) this.stdout(text);
    else this.stdout(json({ [printedKind(argv)]: text }));
    return 0;
  }

  /** What a command ended with. */
  outcome(o: Outcome): number {
    if (inGithubActions(this.env) && o.problems?.length) {
      for (const p of o.problems) this.stderr(workflowCommand(p));
    }
    if (this.json) {
      if (o.printed && this.printedAlready && o.code === ExitCode.Ok) return o.code;
      this.stdout(json(answer(o)));
      if (o.code !== ExitCode.Ok && o.message) this.stderr(`clapper: ${o.message}`);
      return o.code;
    }
    if (o.text && o.textTo === "stderr") this.stderr(o.text);
    else if (o.text) this.stdout(o.text);
    for (const note of o.notes ?? []) this.stderr(note);
    if (o.code !== ExitCode.Ok && o.message && !o.text && !o.notes?.length)
      this.stderr(`clapper: ${o.message}`);
    return o.code;
  }

  /** A failure that reached the top, printed as one line (and its problems), or as `{error}`. */
  failure(c: Classified): number {
    const problems = (c.problems ?? []) as Problem[];
    const errors = problems.filter((p) => p.severity === "error");
    const warnings = problems.filter((p) => p.severity === "warning");
    const notes = [
      ...formatProblems(errors).map((line) => `  ${line}`),
      ...formatProblems(warnings).map((line) => `  warning: ${line}`),
    ];
    if (this.printedAlready && this.json) {
      // An answer went out already (the sandbox's first line): the failure goes to stderr only.
      this.stderr(`clapper: ${c.message}`);
      return c.code;
    }
    if (inGithubActions(this.env)) for (const p of problems) this.stderr(workflowCommand(p));
    if (this.json) {
      this.stdout(
        json(answer({ code: c.code, message: c.message, problems, ...(c.data ? { json: c.data } : {}) })),
      );
    }
    this.stderr(`clapper: ${c.message}`);
    for (const line of notes) this.stderr(line);
    return c.code;
  }
}

/** The one JSON object of an outcome: its data, and with a non-zero code `error` beside it. */
function answer(o: Outcome): unknown {
  if (o.code === ExitCode.Ok || o.whole) return o.json ?? {};
  const data =
    o.json === undefined
      ? {}
      : typeof o.json === "object" && o.json !== null && !Array.isArray(o.json)
        ? (o.json as Record<string, unknown>)
        : { data: o.json };
  const problems = (o.problems ?? []).map((p) => ({
    severity: p.severity,
    file: p.file,
    line: p.line,
    field: p.field,
    message: p.message,
  }));
  const message = o.message ?? o.text?.split("\n")[0] ?? `exit code ${o.code}`;
  return { ...data, error: { code: o.code, message, ...(problems.length > 0 ? { problems } : {}) } };
}
