// The yargs setup: the global flags, every command mounted from the registry, and the parse that
// chooses a command (with its work) or hands back what yargs printed instead. Nothing runs here.
import yargs, { type Argv } from "yargs";
import { type Command, type CommandSpec, isGroup, type ParsedArgs, type Runtime } from "./command.js";
import { ExitError } from "./errors.js";
import { ExitCode } from "./exit-code.js";
import { LOG_FORMATS, LOG_LEVELS } from "./logger.js";
import { type AddOption, type OptionContext, type OptionSpec, optionAdder } from "./options.js";
import type { Outcome } from "./output.js";
import { packageInfo } from "./package-info.js";
import { COMMANDS } from "./registry.js";
import { EPILOG, USAGE, usageMessage } from "./usage.js";

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

interface Chosen {
  command: string;
  args: ParsedArgs;
  work: (rt: Runtime) => Promise<Outcome>;
}

export interface Parsed {
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
    .usage(USAGE)
    .epilog(EPILOG)
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

/** Parses the command line: the command chosen (with its work), or what yargs printed instead. */
export async function parse(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<Parsed> {
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
export function printedKind(argv: readonly string[]): "help" | "version" | "completion" {
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
export function wantsJson(argv: readonly string[], env: NodeJS.ProcessEnv): boolean {
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
