// How clapper declares a flag: its value parsed from the text as typed (a refusal quotes it), and
// its CLAPPER_* variable read as its default, so the order is flag > variable > built-in default.
// Only declared flags read a variable: CLAPPER_API_KEY (no flag: never a key on a command line),
// CLAPPER_RETRY_BASE_MS and CLAPPER_TEST_FAULT are read by the code that uses them, never parsed
// as flags.
import type { Argv, Options } from "yargs";
import type { ExitError } from "./errors.js";
import { type NumberRule, parseBoolean, parseChoice, parseNumber } from "./values.js";

export type OptionSpec = {
  describe: string;
  hidden?: boolean;
  /** Its variable is read by the code that uses it (CLAPPER_BASE_URL): not as the flag's default. */
  noEnv?: boolean;
  /** Its variable, when not CLAPPER_ and the flag's name (`--coordinator`: CLAPPER_REDIS_URL). */
  env?: string;
} & (
  | { type: "boolean"; default?: boolean }
  | { type: "string"; default?: string; array?: boolean }
  | { type: "number"; rule: NumberRule; default?: number }
  | { type: "choice"; choices: readonly string[]; default?: string }
  /** Any other value: `parse(text, name)` throws a ValueError naming `name`. */
  | { type: "value"; parse: (raw: string, name: string) => unknown }
);

export interface OptionContext {
  argv: readonly string[];
  env: NodeJS.ProcessEnv;
  /** Every flag declared so far, for "did you mean" on an unknown one. */
  flags: Set<string>;
  /** Variables whose value is refused: reported once a command is chosen. */
  envErrors: ExitError[];
}

export type AddOption = <T>(y: Argv<T>, name: string, spec: OptionSpec) => Argv<T>;

/** `--max-points` -> `CLAPPER_MAX_POINTS`. */
export function envName(flag: string): string {
  return `CLAPPER_${flag.toUpperCase().replace(/-/g, "_")}`;
}

/** Whether the command line sets the flag itself (`--x`, `--x=v`, `--no-x`). */
function onCommandLine(argv: readonly string[], flag: string): boolean {
  const end = argv.indexOf("--");
  const args = end >= 0 ? argv.slice(0, end) : argv;
  return args.some((a) => a === `--${flag}` || a.startsWith(`--${flag}=`) || a === `--no-${flag}`);
}

export function optionAdder(ctx: OptionContext): AddOption {
  return <T>(y: Argv<T>, name: string, spec: OptionSpec): Argv<T> => {
    ctx.flags.add(name);
    const variable = spec.env ?? envName(name);
    const raw = spec.noEnv ? undefined : ctx.env[variable];
    const fromEnv =
      raw !== undefined && raw.trim() !== "" && !onCommandLine(ctx.argv, name) ? raw : undefined;
    // Messages name what the user typed: the flag, or the variable that stood in for it.
    const source = fromEnv !== undefined ? variable : `--${name}`;
    const base: Options = { describe: spec.describe, ...(spec.hidden ? { hidden: true } : {}) };
    const option = yargsOption(spec, base, { fromEnv, variable, source, envErrors: ctx.envErrors });
    return y.option(name, option) as Argv<T>;
  };
}

/** The yargs option of a flag: its type, and its default from the environment when the variable is set. */
function yargsOption(
  spec: OptionSpec,
  base: Options,
  given: { fromEnv: string | undefined; variable: string; source: string; envErrors: ExitError[] },
): Options {
  const { fromEnv, variable, source } = given;
  switch (spec.type) {
    case "boolean": {
      let value = spec.default;
      if (fromEnv !== undefined) {
        try {
          value = parseBoolean(variable, fromEnv);
        } catch (error) {
          given.envErrors.push(error as ExitError);
        }
      }
      return { ...base, type: "boolean", ...(value !== undefined ? { default: value } : {}) };
    }
    case "string": {
      const value = fromEnv ?? spec.default;
      return {
        ...base,
        type: "string",
        requiresArg: true,
        ...(spec.array ? { array: true } : {}),
        ...(value !== undefined ? { default: spec.array && fromEnv !== undefined ? [fromEnv] : value } : {}),
      };
    }
    case "number": {
      const value = fromEnv ?? spec.default;
      // No yargs type: `type: "number"` would turn "abc" into NaN before the message could quote it.
      return {
        ...base,
        requiresArg: true,
        ...(value !== undefined ? { default: value } : {}),
        coerce: (v: unknown) => (v === undefined ? undefined : parseNumber(source, last(v), spec.rule)),
      };
    }
    case "choice": {
      const value = fromEnv ?? spec.default;
      return {
        ...base,
        type: "string",
        requiresArg: true,
        choices: [...spec.choices],
        ...(value !== undefined ? { default: value } : {}),
        coerce: (v: unknown) => (v === undefined ? undefined : parseChoice(source, last(v), spec.choices)),
      };
    }
    case "value": {
      return {
        ...base,
        requiresArg: true,
        ...(fromEnv !== undefined ? { default: fromEnv } : {}),
        coerce: (v: unknown) => (v === undefined ? undefined : spec.parse(String(last(v)), source)),
      };
    }
  }
}

/** A flag given twice keeps its last value, as with every other flag. */
function last(v: unknown): unknown {
  return Array.isArray(v) ? v[v.length - 1] : v;
}
