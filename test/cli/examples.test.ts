// The deployment examples in examples/ (GitHub Actions, GitLab CI, cron, systemd, Kubernetes, Docker
// Compose): every file parses, has the structure its README paragraph relies on, and every clapper
// command line in it is accepted by clapper's own parser (`parseCommandLine` in src/cli/main.ts), so a
// renamed or mistyped flag breaks this test rather than somebody's nightly run. The sharded examples
// (a Kubernetes Indexed Job, a GitHub matrix, Compose services) are also checked to select every
// shard 1..N exactly once, as clapper itself resolves it (`resolveShard`), from the index each
// scheduler gives.
//
// How command lines are found (a small extractor, tested on its own below):
// - shell text (GitHub `run:`, GitLab `script:`, the crontab command) is split into words the way sh
//   does it: quotes, backslashes, `\`-newline continuations, comments, operators (`&&`, `||`, `;`,
//   `|`) and redirections (`>> file`, `2>&1`) are understood; a simple command is a clapper
//   invocation when its program is `clapper`, a path ending in `/clapper` or `bin/clapper.js`
//   (directly or after `node`), or `npx clapper`, after leading `NAME=value` assignments, `env`
//   (with `-u NAME`), `exec` and shell keywords (`do`, `then`, ...);
// - systemd `ExecStart=`: the unit's `\` continuations joined, specifiers replaced (`%%` is `%`, `%d`
//   the credentials folder), then split like shell text;
// - crontab: the five time fields dropped, `\%` made `%` and an unescaped `%` ending the command
//   (what cron does), then split like shell text;
// - Kubernetes: the container's `command` + `args` arrays as they are (no shell), `$(VAR)` replaced
//   from the container's `env`; no `command` means the image's entrypoint, clapper. An Indexed Job
//   gives one command line per index, with JOB_COMPLETION_INDEX set as Kubernetes sets it;
// - GitHub matrix jobs: one command line per combination of the matrix, `${{ matrix.NAME }}` replaced;
// - Docker Compose: the file's `${VAR}`, `${VAR:-default}` (and `-`, `?`, `+` forms) and `$$`
//   interpolated in every value as Compose does, with nothing set in the shell (COMPOSE_SHELL), then
//   for each service of the clapper image its `entrypoint` (else the image's, clapper) + `command`
//   (a list, or a string split into words with no shell), `environment` a map or a list.
// Variables are replaced by plausible values: first those the file itself defines (workflow and job
// `env:`, GitLab `variables:`, crontab assignments, `Environment=`, container `env`), then what the
// platform sets (PLATFORM below, e.g. $RUNNER_TEMP, $CI_PROJECT_DIR, $CREDENTIALS_DIRECTORY), then a
// script's own (SCRIPT_VARS: `$deadline` is an ISO time 50 minutes from now, as `date` makes it).
// That environment is also what clapper's parser is given.
// GitHub `${{ expr }}` is replaced before the shell sees it (GITHUB_EXPRESSIONS). A variable or an
// expression with no value, or a command substitution, left in a clapper command line fails the test.
import { existsSync } from "node:fs";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { basename, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments, parseDocument } from "yaml";
import { createLogger } from "../../src/cli/logger.js";
import { main } from "../../src/cli/main.js";
import { type ResolvedShard, resolveShard, type Shard } from "../../src/run/shard.js";
import { type TempDir, tempDir } from "../fixtures/audio.js";

const EXAMPLES = fileURLToPath(new URL("../../examples/", import.meta.url));

// ---------------------------------------------------------------------------------------------
// clapper's parser, loaded on use: it is looked up at run time so that this file compiles whether
// or not main.ts exports it yet.

type Parsed = { ok: true; command: string; args: Record<string, unknown> } | { ok: false; message: string };
type ParseCommandLine = (argv: string[], env?: NodeJS.ProcessEnv) => Promise<Parsed>;

async function loadParser(): Promise<ParseCommandLine> {
  const mod = (await import("../../src/cli/main.js")) as unknown as { parseCommandLine?: ParseCommandLine };
  if (typeof mod.parseCommandLine !== "function") {
    throw new Error("src/cli/main.ts does not export parseCommandLine(argv, env) yet");
  }
  return mod.parseCommandLine;
}

// ---------------------------------------------------------------------------------------------
// Shell words.

/** Marks a variable, expression or command substitution that has no value: never valid in argv. */
const UNSET = "\u0000unset:";

type Lookup = (name: string) => string | undefined;

type Token = { kind: "word"; value: string } | { kind: "op"; value: string };

const NAME = /^[A-Za-z_][A-Za-z0-9_]*/;

/**
 * Splits shell text into words and operators, as sh would: quotes removed, variables expanded
 * (`$NAME`, `${NAME}`, `${NAME:-default}`; unquoted expansions split on blanks), redirections and
 * their targets dropped, comments skipped. Command substitutions become an UNSET marker.
 */
function shellTokens(text: string, lookup: Lookup): Token[] {
  const tokens: Token[] = [];
  let fields: string[] | null = null;
  let quoted = false;
  let dropNextWord = false;
  let i = 0;

  const begin = () => {
    fields ??= [""];
    return fields;
  };
  const append = (s: string) => {
    const f = begin();
    f[f.length - 1] += s;
  };
  const appendSplit = (s: string) => {
    const f = begin();
    const parts = s.split(/[ \t\n]+/);
    f[f.length - 1] += parts[0] ?? "";
    for (const part of parts.slice(1)) f.push(part);
  };
  const end = () => {
    if (!fields) return;
    const words = quoted ? fields : fields.filter((w) => w !== "");
    fields = null;
    quoted = false;
    if (dropNextWord && words.length > 0) {
      dropNextWord = false;
      return;
    }
    for (const value of words) tokens.push({ kind: "word", value });
  };
  const op = (value: string) => {
    end();
    tokens.push({ kind: "op", value });
  };

  /** `$...` at text[i]: returns the value and moves i past it. */
  const dollar = (): string => {
    const next = text[i + 1] ?? "";
    if (next === "(") {
      // $(...) or $((...)): skipped to the matching parenthesis.
      let depth = 0;
      let j = i + 1;
      for (; j < text.length; j++) {
        if (text[j] === "(") depth++;
        else if (text[j] === ")" && --depth === 0) break;
      }
      const body = text.slice(i, j + 1);
      i = j + 1;
      return `${UNSET}${body}`;
    }
    if (next === "{") {
      const close = text.indexOf("}", i + 2);
      if (close < 0) throw new Error(`unclosed \${ in: ${text}`);
      const inner = text.slice(i + 2, close);
      i = close + 1;
      const m = /^([A-Za-z_][A-Za-z0-9_]*)(?::?-(.*))?$/.exec(inner);
      if (!m?.[1]) return `${UNSET}\${${inner}}`;
      return lookup(m[1]) ?? m[2] ?? `${UNSET}${m[1]}`;
    }
    const name = NAME.exec(text.slice(i + 1))?.[0];
    if (name) {
      i += 1 + name.length;
      return lookup(name) ?? `${UNSET}${name}`;
    }
    if (/^[?#@*$!0-9-]/.test(next)) {
      i += 2;
      return `${UNSET}$${next}`;
    }
    i += 1;
    return "$";
  };

  while (i < text.length) {
    const c = text[i] as string;
    const next = text[i + 1];
    if (c === "\\" && next === "\n") {
      i += 2;
    } else if (c === " " || c === "\t" || c === "\r") {
      end();
      i++;
    } else if (c === "\n") {
      op("\n");
      i++;
    } else if (c === "#" && fields === null) {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === "'") {
      const close = text.indexOf("'", i + 1);
      if (close < 0) throw new Error(`unclosed ' in: ${text}`);
      begin();
      quoted = true;
      append(text.slice(i + 1, close));
      i = close + 1;
    } else if (c === '"') {
      begin();
      quoted = true;
      i++;
      while (i < text.length && text[i] !== '"') {
        const d = text[i] as string;
        if (d === "\\" && i + 1 < text.length) {
          const e = text[i + 1] as string;
          if (e === "\n") i += 2;
          else if ('$`"\\'.includes(e)) {
            append(e);
            i += 2;
          } else {
            append(d);
            i++;
          }
        } else if (d === "$") {
          append(dollar());
        } else if (d === "`") {
          const close = text.indexOf("`", i + 1);
          append(`${UNSET}${text.slice(i, close + 1)}`);
          i = close + 1;
        } else {
          append(d);
          i++;
        }
      }
      if (i >= text.length) throw new Error(`unclosed " in: ${text}`);
      i++;
    } else if (c === "\\") {
      append(next ?? "");
      i += 2;
    } else if (c === "$") {
      appendSplit(dollar());
    } else if (c === "`") {
      const close = text.indexOf("`", i + 1);
      append(`${UNSET}${text.slice(i, close + 1)}`);
      i = close + 1;
    } else if (c === ">" || c === "<" || (c === "&" && next === ">")) {
      // A redirection: an all-digit word just before it is its file descriptor.
      const fd = fields as string[] | null;
      if (fd && !quoted && fd.length === 1 && /^\d+$/.test(fd[0] ?? "")) {
        fields = null;
      } else end();
      if (c === "<" && next === "<") throw new Error(`here-documents are not supported: ${text}`);
      i += c === "&" ? 2 : 1;
      if (text[i] === ">" || text[i] === "|") i++;
      if (text[i] === "&") {
        // >&2, 2>&1, <&-: the target is a descriptor, part of the operator.
        i++;
        while (/[0-9-]/.test(text[i] ?? "")) i++;
      } else dropNextWord = true;
    } else if (c === "&" || c === "|" || c === ";") {
      const two = next === c ? c + c : c;
      op(two);
      i += two.length;
    } else if (c === "(" || c === ")") {
      op(c);
      i++;
    } else {
      append(c);
      i++;
    }
  }
  end();
  return tokens;
}

/** The simple commands of shell text: word lists between operators. */
function simpleCommands(text: string, lookup: Lookup): string[][] {
  const commands: string[][] = [[]];
  for (const t of shellTokens(text, lookup)) {
    if (t.kind === "op") commands.push([]);
    else commands[commands.length - 1]?.push(t.value);
  }
  return commands.filter((c) => c.length > 0);
}

const KEYWORDS = new Set(["do", "then", "else", "elif", "if", "while", "until", "!", "{", "exec", "time"]);

function isClapper(word: string | undefined): boolean {
  if (word === undefined) return false;
  return word === "clapper" || word.endsWith("/clapper") || /(^|\/)clapper\.js$/.test(word);
}

/** clapper's own argv (what follows the program) when a simple command runs clapper. */
function clapperArgv(words: readonly string[]): string[] | undefined {
  let i = 0;
  for (;;) {
    const w = words[i];
    if (w === undefined) return undefined;
    if (/^[A-Za-z_][A-Za-z0-9_]*=/.test(w) || KEYWORDS.has(w)) i++;
    else if (w === "env") {
      i++;
      while (words[i] !== undefined && (words[i]?.startsWith("-") || /^[A-Za-z_]\w*=/.test(words[i] ?? ""))) {
        i += words[i] === "-u" ? 2 : 1;
      }
    } else break;
  }
  const program = words[i];
  if (isClapper(program)) return words.slice(i + 1);
  if (program === "npx" && words[i + 1] === "clapper") return words.slice(i + 2);
  if (program !== undefined && basename(program) === "node") {
    let j = i + 1;
    while (words[j]?.startsWith("-")) j++;
    if (isClapper(words[j]) && words[j]?.endsWith(".js")) return words.slice(j + 1);
  }
  return undefined;
}

/** Mentions of a clapper command in shell text (comment lines left out): what the extractor must find. */
function mentions(text: string): number {
  const code = text
    .split("\n")
    .filter((line) => !line.trim().startsWith("#"))
    .join("\n");
  return (
    code.match(
      /(?:^|[\s;&|(])(?:\S*\/)?clapper(?:\.js)?\s+(?:plan|run|report|status|cancel|balance|skills|voices|tasks|sandbox)\b/g,
    ) ?? []
  ).length;
}

interface CommandLine {
  /** Where it was found: the file and the field. */
  where: string;
  /** The job, service or object that runs it (GitHub job id, Compose service, Kubernetes object name). */
  unit?: string;
  argv: string[];
  /** The environment clapper would see there. */
  env: Record<string, string>;
}

function fromShell(where: string, text: string, env: Record<string, string>, unit?: string): CommandLine[] {
  const lookup: Lookup = (name) => env[name] ?? SCRIPT_VARS[name];
  const found = simpleCommands(text, lookup)
    .map(clapperArgv)
    .filter((argv): argv is string[] => argv !== undefined)
    .map((argv) => ({ where, argv, env, ...(unit !== undefined ? { unit } : {}) }));
  // The extractor must not miss what a reader sees: as many command lines as mentions.
  expect({ where, found: found.length }).toEqual({ where, found: mentions(text) });
  return found;
}

// ---------------------------------------------------------------------------------------------
// Plausible values of what the platforms and the scripts define.

const DEADLINE_ISO = new Date(Date.now() + 50 * 60_000).toISOString().replace(/\.\d{3}Z$/, "Z");

/** What each platform sets (a plausible value each). */
const PLATFORM = {
  github: {
    GITHUB_ACTIONS: "true",
    GITHUB_WORKSPACE: "/home/runner/work/storyboards/storyboards",
    GITHUB_STEP_SUMMARY: "/home/runner/work/_temp/_runner_file_commands/step_summary_1",
    GITHUB_PATH: "/home/runner/work/_temp/_runner_file_commands/add_path_1",
    RUNNER_TEMP: "/home/runner/work/_temp",
    HOME: "/home/runner",
    PWD: "/home/runner/work/storyboards/storyboards",
  },
  gitlab: {
    GITLAB_CI: "true",
    CI_PROJECT_DIR: "/builds/media/storyboards",
    CI_DEFAULT_BRANCH: "main",
    HOME: "/home/node",
  },
  cron: { HOME: "/home/clapper", LOGNAME: "clapper" },
  systemd: { CREDENTIALS_DIRECTORY: "/run/credentials/clapper.service" },
} satisfies Record<string, Record<string, string>>;

/** What the examples' scripts compute themselves. */
const SCRIPT_VARS: Record<string, string> = {
  // deadline="$(date -u -d '+50 minutes' +%Y-%m-%dT%H:%M:%SZ)" in the GitHub run step
  deadline: DEADLINE_ISO,
  status: "0",
  attempt: "1",
};

/** GitHub expressions, `${{ ... }}`: replaced in the text before the shell sees it. */
const GITHUB_EXPRESSIONS: Record<string, string> = {
  "secrets.CLAPPER_API_KEY": "example-api-key-not-a-real-one",
  "secrets.CLAPPER_REDIS_URL": "rediss://:example-password@redis.example.com:6380/0",
  "vars.CLAPPER_BASE_URL": "https://media-api.example.com",
  "vars.AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/clapper",
  "github.event.pull_request.number": "42",
  "github.run_id": "9876543210",
  "github.run_attempt": "1",
};

/** `${{ env.X }}`, `${{ matrix.X }}` (from the job's matrix combination) and GITHUB_EXPRESSIONS. */
function githubExpressions(
  text: string,
  env: Record<string, string>,
  matrix: Record<string, unknown> = {},
): string {
  return text.replace(/\$\{\{\s*(.*?)\s*\}\}/g, (_m, expr: string) => {
    const fromEnv = /^env\.([A-Za-z_]\w*)$/.exec(expr)?.[1];
    if (fromEnv) return env[fromEnv] ?? `${UNSET}${expr}`;
    const fromMatrix = /^matrix\.([A-Za-z_][\w-]*)$/.exec(expr)?.[1];
    if (fromMatrix) return fromMatrix in matrix ? String(matrix[fromMatrix]) : `${UNSET}${expr}`;
    return GITHUB_EXPRESSIONS[expr] ?? `${UNSET}${expr}`;
  });
}

/**
 * The combinations a job's `strategy.matrix` runs (one empty combination without a matrix): the
 * product of its lists. `include`/`exclude` are refused rather than half understood.
 */
function matrixCombinations(strategy: any): Array<Record<string, unknown>> {
  const matrix = strategy?.matrix;
  if (matrix === undefined) return [{}];
  if (typeof matrix !== "object" || matrix === null || "include" in matrix || "exclude" in matrix) {
    throw new Error("only a matrix of plain lists is understood here (no include, exclude or expression)");
  }
  let combos: Array<Record<string, unknown>> = [{}];
  for (const [name, values] of Object.entries(matrix)) {
    if (!Array.isArray(values) || values.length === 0) throw new Error(`matrix.${name}: expected a list`);
    combos = combos.flatMap((c) => values.map((v) => ({ ...c, [name]: v })));
  }
  return combos;
}

// ---------------------------------------------------------------------------------------------
// The formats: YAML, systemd units, crontabs.

const read = (path: string) => readFile(join(EXAMPLES, path), "utf8");

function yamlOf(path: string, text: string, options: { merge?: boolean } = {}): any {
  const doc = parseDocument(text, { prettyErrors: true, ...options });
  expect(doc.errors.map((e) => `${path}: ${e.message}`)).toEqual([]);
  return doc.toJS();
}

/** The shell `docker compose` runs in, for its interpolation: nothing set, so every default applies. */
const COMPOSE_SHELL: Record<string, string> = {};

/**
 * Compose's interpolation of one value: `$$` is `$`; `$VAR`, `${VAR}`; `${VAR:-default}` (unset or
 * empty) and `${VAR-default}` (unset); `${VAR:?message}` and `${VAR?message}` (an error when unset:
 * marked UNSET); `${VAR:+alt}` and `${VAR+alt}`. A variable with no value and no default is UNSET.
 */
function composeInterpolate(text: string, shell: Record<string, string>): string {
  return text.replace(
    /\$\$|\$\{([^}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)/g,
    (m: string, braced: string | undefined, bare: string | undefined) => {
      if (m === "$$") return "$";
      if (bare !== undefined) return shell[bare] ?? `${UNSET}${bare}`;
      const x = /^([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([\s\S]*))?$/.exec(braced ?? "");
      if (!x?.[1]) throw new Error(`not a Compose interpolation: ${m}`);
      const [, name, op, arg = ""] = x;
      if (arg.includes("${")) throw new Error(`nested interpolation is not supported here: ${m}`);
      const value = shell[name];
      const missing = value === undefined || (op?.startsWith(":") === true && value === "");
      switch (op?.replace(":", "")) {
        case undefined:
          return value ?? `${UNSET}${name}`;
        case "-":
          return missing ? arg : (value as string);
        case "?":
          return missing ? `${UNSET}${name} (${arg})` : (value as string);
        default:
          return missing ? "" : arg;
      }
    },
  );
}

/** Every string value of a Compose file interpolated (keys are not, as in Compose). */
function interpolateAll(value: unknown, shell: Record<string, string>): any {
  if (typeof value === "string") return composeInterpolate(value, shell);
  if (Array.isArray(value)) return value.map((v) => interpolateAll(v, shell));
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolateAll(v, shell)]));
  }
  return value;
}

/** A Compose `command` or `entrypoint`: a list as it is, a string split into words (quotes, no shell). */
function composeWords(value: unknown, where: string): string[] {
  if (value === undefined || value === null) return [];
  if (Array.isArray(value)) {
    for (const w of value) expect(typeof w, `${where}: every item is a string`).toBe("string");
    return value as string[];
  }
  expect(typeof value, `${where}: a list or a string`).toBe("string");
  const tokens = shellTokens(value as string, () => undefined).filter((t) => t.value !== "\n");
  // No shell runs it: an operator would be passed on as a word, which is never what was meant.
  expect(
    tokens.filter((t) => t.kind === "op"),
    `${where}: shell operators in a command that no shell runs`,
  ).toEqual([]);
  return tokens.map((t) => t.value);
}

/** A Compose `environment`: a map (null: passed from the shell) or a list of NAME=value (or NAME). */
function composeEnvironment(value: unknown, shell: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  const set = (name: string, v: unknown) => {
    if (v === null || v === undefined) {
      const passed = shell[name];
      if (passed !== undefined) env[name] = passed;
    } else env[name] = String(v);
  };
  if (Array.isArray(value)) {
    for (const item of value as string[]) {
      const eq = item.indexOf("=");
      if (eq < 0) set(item, null);
      else set(item.slice(0, eq), item.slice(eq + 1));
    }
  } else if (value && typeof value === "object") {
    for (const [k, v] of Object.entries(value)) set(k, v);
  }
  return env;
}

/** The sandbox's default key (sandbox contract): public, accepted by `clapper sandbox` alone. */
const SANDBOX_KEY = "sk-ml-sandbox";

/** A service runs clapper's image: `image: clapper` (any registry or tag). */
function runsClapperImage(service: any): boolean {
  return typeof service?.image === "string" && /(^|\/)clapper(:[\w.-]+)?$/.test(service.image);
}

type Unit = Map<string, Array<[string, string]>>;

/** A systemd unit file: sections of `Key=value` (in order, repeated keys kept), `\` continuations joined. */
function parseUnit(text: string): Unit {
  const unit: Unit = new Map();
  let section: Array<[string, string]> | undefined;
  const lines = text.replace(/\\\n/g, " ").split("\n");
  for (const [n, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[([A-Za-z]+)\]$/.exec(line);
    if (header?.[1]) {
      section = [];
      unit.set(header[1], section);
      continue;
    }
    const kv = /^([A-Za-z][A-Za-z0-9]*)=(.*)$/.exec(line);
    if (!kv?.[1] || !section) throw new Error(`line ${n + 1} is neither a section nor Key=value: ${line}`);
    section.push([kv[1], (kv[2] ?? "").trim()]);
  }
  return unit;
}

function unitValue(unit: Unit, section: string, key: string): string | undefined {
  return unit
    .get(section)
    ?.filter(([k]) => k === key)
    .at(-1)?.[1];
}

/** systemd's specifiers in a command line: %% and the few a unit like this one uses. */
function systemdSpecifiers(text: string, credentials: string): string {
  return text.replace(/%(.)/g, (_m, c: string) => {
    const value = { "%": "%", d: credentials, h: "/home/clapper", n: "clapper.service" }[c];
    if (value === undefined) throw new Error(`unknown systemd specifier %${c}`);
    return value;
  });
}

interface CronEntry {
  schedule: string[];
  command: string;
}

/** A crontab: `NAME=value` lines, and entries of five time fields (or @keyword) and a command. */
function parseCrontab(text: string): { env: Record<string, string>; entries: CronEntry[] } {
  const env: Record<string, string> = {};
  const entries: CronEntry[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const assignment = /^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(line);
    if (assignment?.[1]) {
      env[assignment[1]] = (assignment[2] ?? "").replace(/^(["'])(.*)\1$/, "$2");
      continue;
    }
    const m = line.startsWith("@")
      ? /^(@\w+)\s+(.+)$/.exec(line)
      : /^(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(.+)$/.exec(line);
    if (!m) throw new Error(`not a crontab entry: ${line}`);
    const schedule = m.slice(1, -1) as string[];
    // What cron does with %: an unescaped one ends the command (the rest is its input), \% is a %.
    let command = "";
    const rest = m.at(-1) as string;
    for (let i = 0; i < rest.length; i++) {
      if (rest[i] === "\\" && rest[i + 1] === "%") {
        command += "%";
        i++;
      } else if (rest[i] === "%") break;
      else command += rest[i];
    }
    entries.push({ schedule, command });
  }
  return { env, entries };
}

const CRON_FIELD = [
  /^(\*|\d{1,2}(-\d{1,2})?)(\/\d+)?(,(\*|\d{1,2}(-\d{1,2})?)(\/\d+)?)*$/, // minute
  /^(\*|\d{1,2}(-\d{1,2})?)(\/\d+)?(,(\*|\d{1,2}(-\d{1,2})?)(\/\d+)?)*$/, // hour
  /^(\*|\d{1,2}(-\d{1,2})?)(\/\d+)?(,(\*|\d{1,2}(-\d{1,2})?)(\/\d+)?)*$/, // day of month
  /^(\*|\d{1,2}(-\d{1,2})?|[a-z]{3})(\/\d+)?(,(\*|\d{1,2}(-\d{1,2})?|[a-z]{3})(\/\d+)?)*$/i, // month
  /^(\*|\d(-\d)?|[a-z]{3})(\/\d+)?(,(\*|\d(-\d)?|[a-z]{3})(\/\d+)?)*$/i, // day of week
];

/** `5h`, `50m`, `5h30min`, `90s` (clapper's --deadline and systemd's time spans) in seconds. */
function seconds(span: string): number {
  const unit: Record<string, number> = { h: 3600, min: 60, m: 60, s: 1 };
  let total = 0;
  const rest = span.replace(/(\d+)\s*(h|min|m|s)/g, (_m, n: string, u: string) => {
    total += Number(n) * (unit[u] ?? Number.NaN);
    return "";
  });
  if (rest.trim() !== "" || total === 0) throw new Error(`not a duration: ${span}`);
  return total;
}

function flagValue(argv: readonly string[], flag: string): string | undefined {
  for (const [i, a] of argv.entries()) {
    if (a === flag) return argv[i + 1];
    if (a.startsWith(`${flag}=`)) return a.slice(flag.length + 1);
  }
  return undefined;
}

// ---------------------------------------------------------------------------------------------
// Every example: its structure, and its command lines.

interface Example {
  file: string;
  /** At least this many clapper command lines: the test cannot pass on a file it failed to read. */
  min: number;
  extract(): Promise<CommandLine[]>;
}

/** A GitHub Actions workflow: every `run:` of every job, once per combination of the job's matrix. */
function githubExample(file: string, min: number): Example {
  return {
    file,
    min,
    async extract() {
      const wf = yamlOf(file, await read(file));
      const out: CommandLine[] = [];
      const wfEnv: Record<string, string> = { ...(wf.env ?? {}) };
      for (const [jobId, job] of Object.entries<any>(wf.jobs ?? {})) {
        for (const matrix of matrixCombinations(job.strategy)) {
          const jobEnv = { ...wfEnv, ...(job.env ?? {}) };
          const combo = Object.entries(matrix)
            .map(([k, v]) => `${k}=${String(v)}`)
            .join(",");
          for (const [n, step] of (job.steps ?? []).entries()) {
            if (typeof step.run !== "string") continue;
            const env: Record<string, string> = { ...PLATFORM.github, ...jobEnv, ...(step.env ?? {}) };
            for (const [k, v] of Object.entries(env)) env[k] = githubExpressions(String(v), env, matrix);
            out.push(
              ...fromShell(
                `${file} jobs.${jobId}${combo ? ` (matrix ${combo})` : ""}.steps[${n}] (${step.name ?? "run"})`,
                githubExpressions(step.run, env, matrix),
                env,
                jobId,
              ),
            );
          }
        }
      }
      return out;
    },
  };
}

/** The Job spec of a Job, or of a CronJob's jobTemplate; undefined for any other object. */
function jobSpecOf(doc: any): any {
  if (doc?.kind === "Job") return doc.spec;
  if (doc?.kind === "CronJob") return doc.spec?.jobTemplate?.spec;
  return undefined;
}

/**
 * Kubernetes: each container of each Job (or CronJob's Job), its `command` + `args` as the kubelet
 * runs them. An Indexed Job runs one pod per index, each with JOB_COMPLETION_INDEX set by Kubernetes:
 * one command line per index.
 */
function k8sExample(file: string, min: number): Example {
  return {
    file,
    min,
    async extract() {
      const out: CommandLine[] = [];
      for (const doc of k8sDocs(await read(file))) {
        const job = jobSpecOf(doc);
        if (!job) continue;
        const indexed = job.completionMode === "Indexed";
        const indexes: Array<number | undefined> = indexed
          ? Array.from({ length: Number(job.completions) }, (_, i) => i)
          : [undefined];
        for (const c of job.template.spec.containers as any[]) {
          for (const index of indexes) {
            const env: Record<string, string> = {};
            if (index !== undefined) env.JOB_COMPLETION_INDEX = String(index);
            for (const e of c.env ?? []) {
              env[e.name] = e.value ?? (e.valueFrom ? "example-value-from-a-secret" : "");
            }
            // The kubelet's own expansion of $(VAR) in command and args; $$ is a literal $. A
            // variable it cannot expand stays as written: never what was meant in an argument.
            const expand = (s: string) =>
              s.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m: string, name: string | undefined) =>
                name ? (env[name] ?? `${UNSET}${m}`) : "$",
              );
            const words = [...(c.command ?? ["clapper"]), ...(c.args ?? [])].map((w: unknown) => {
              expect(typeof w, `${file}: container ${c.name}: every command/args item is a string`).toBe(
                "string",
              );
              return expand(w as string);
            });
            const argv = clapperArgv(words);
            const at = index !== undefined ? ` (JOB_COMPLETION_INDEX=${index})` : "";
            if (argv) {
              out.push({
                where: `${file} ${doc.kind} ${doc.metadata?.name} container ${c.name}${at}`,
                unit: doc.metadata?.name,
                argv,
                env,
              });
            }
          }
        }
      }
      return out;
    },
  };
}

/** The services of a Compose file, merge keys resolved and every value interpolated. */
async function composeServices(file: string): Promise<{ compose: any; services: Record<string, any> }> {
  const compose = interpolateAll(yamlOf(file, await read(file), { merge: true }), COMPOSE_SHELL);
  return { compose, services: compose.services ?? {} };
}

/** Docker Compose: every service of clapper's image, its entrypoint (else clapper) + command. */
function composeExample(file: string, min: number): Example {
  return {
    file,
    min,
    async extract() {
      const { services } = await composeServices(file);
      const out: CommandLine[] = [];
      for (const [name, service] of Object.entries<any>(services)) {
        const where = `${file} services.${name}`;
        const entrypoint = composeWords(service.entrypoint, `${where}.entrypoint`);
        const command = composeWords(service.command, `${where}.command`);
        if (!runsClapperImage(service) && entrypoint.length === 0) continue;
        const words = [...(entrypoint.length > 0 ? entrypoint : ["clapper"]), ...command];
        const argv = clapperArgv(words);
        // A service of clapper's image runs clapper: the extractor must find its command line.
        if (runsClapperImage(service) && entrypoint.length === 0) {
          expect(argv?.length, `${where}: a clapper command line`).toBeGreaterThan(0);
        }
        if (argv) {
          out.push({ where, unit: name, argv, env: composeEnvironment(service.environment, COMPOSE_SHELL) });
        }
      }
      return out;
    },
  };
}

const examples: Example[] = [
  githubExample("github-actions/clapper.yml", 3),
  githubExample("github-actions/sharded.yml", 5),
  {
    file: "gitlab/.gitlab-ci.yml",
    min: 3,
    async extract() {
      const ci = yamlOf(this.file, await read(this.file));
      const out: CommandLine[] = [];
      for (const [name, job] of Object.entries<any>(ci)) {
        if (!job || typeof job !== "object" || Array.isArray(job)) continue;
        const env = { ...PLATFORM.gitlab, ...(ci.variables ?? {}), ...(job.variables ?? {}) };
        for (const part of ["before_script", "script", "after_script"]) {
          const lines: unknown = job[part];
          if (lines === undefined) continue;
          for (const [n, line] of [lines].flat().entries()) {
            out.push(...fromShell(`${this.file} ${name}.${part}[${n}]`, String(line), env));
          }
        }
      }
      return out;
    },
  },
  {
    file: "cron/crontab",
    min: 1,
    async extract() {
      const { env, entries } = parseCrontab(await read(this.file));
      return entries.flatMap((e, n) =>
        fromShell(`${this.file} entry ${n + 1}`, e.command, { ...PLATFORM.cron, ...env }),
      );
    },
  },
  {
    file: "systemd/clapper.service",
    min: 1,
    async extract() {
      const unit = parseUnit(await read(this.file));
      const env: Record<string, string> = { ...PLATFORM.systemd };
      for (const [k, v] of unit.get("Service") ?? []) {
        if (k !== "Environment") continue;
        for (const assignment of simpleCommands(v, () => undefined).flat()) {
          const eq = assignment.indexOf("=");
          env[assignment.slice(0, eq)] = assignment.slice(eq + 1);
        }
      }
      const credentials = PLATFORM.systemd.CREDENTIALS_DIRECTORY;
      return (unit.get("Service") ?? [])
        .filter(([k]) => k === "ExecStart")
        .flatMap(([, v], n) =>
          // Prefixes such as - @ : + ! change how systemd runs the command, not its words.
          fromShell(
            `${this.file} ExecStart[${n}]`,
            systemdSpecifiers(v.replace(/^[-@:+!|]+/, ""), credentials),
            env,
          ),
        );
    },
  },
  k8sExample("kubernetes/cronjob.yaml", 1),
  k8sExample("kubernetes/indexed-job.yaml", 4),
  k8sExample("kubernetes/sharded-cronjob.yaml", 4),
  composeExample("compose.yaml", 4),
];

function k8sDocs(text: string): any[] {
  const docs = parseAllDocuments(text);
  const list = Array.isArray(docs) ? docs : [docs];
  expect(list.flatMap((d) => d.errors.map((e) => e.message))).toEqual([]);
  return list.map((d) => d.toJS()).filter((d) => d !== null);
}

const found = new Map<string, CommandLine[]>();

async function commandLines(example: Example): Promise<CommandLine[]> {
  let lines = found.get(example.file);
  if (!lines) {
    lines = await example.extract();
    found.set(example.file, lines);
  }
  return lines;
}

/** The command lines of one example file, by its path under examples/. */
function linesOf(file: string): Promise<CommandLine[]> {
  const example = examples.find((e) => e.file === file);
  if (!example) throw new Error(`no example ${file}`);
  return commandLines(example);
}

// ---------------------------------------------------------------------------------------------
// Shards: what the sharded examples' `run` command lines select, as clapper resolves it.

interface Selected {
  line: CommandLine;
  args: Record<string, any>;
  shard: ResolvedShard;
}

/** Each `run` line parsed, and its shard resolved from its flags and its environment (the scheduler's index). */
async function shardsSelected(parse: ParseCommandLine, lines: readonly CommandLine[]): Promise<Selected[]> {
  const selected: Selected[] = [];
  for (const line of lines) {
    const result = await parse(line.argv, line.env);
    if (!result.ok) throw new Error(`${line.where}: refused: ${result.message}`);
    const args = result.args as Record<string, any>;
    const shard = resolveShard({
      shard: args.shard as Shard | undefined,
      shards: args.shards,
      env: line.env,
    });
    expect(shard, `${line.where}: selects a shard`).toBeDefined();
    selected.push({ line, args, shard: shard as ResolvedShard });
  }
  return selected;
}

/** The lines select shards 1..N of one N, each exactly once; returns N. */
function expectEveryShardOnce(selected: readonly Selected[]): number {
  expect(selected.length, "sharded run command lines").toBeGreaterThan(1);
  const totals = [...new Set(selected.map((s) => s.shard.total))];
  expect(totals, "one number of shards").toHaveLength(1);
  const total = totals[0] as number;
  expect(
    selected.map((s) => s.shard.index).sort((a, b) => a - b),
    `shards 1..${total}, each once`,
  ).toEqual(Array.from({ length: total }, (_, i) => i + 1));
  return total;
}

/**
 * The shards are one run: one manifest, one coordinator (it shares the points cap, counts the finished
 * shards and holds the locks; `--state s3://` needs it), one output and one state root in S3 (each
 * shard's state goes under it), one points cap.
 */
function expectOneSharedRun(selected: readonly Selected[]): void {
  const one = (values: unknown[], what: string) =>
    expect(new Set(values.map((v) => JSON.stringify(v))).size, what).toBe(1);
  for (const { line, args } of selected) {
    expect(
      args.coordinator,
      `${line.where}: a coordinator (--coordinator or CLAPPER_REDIS_URL)`,
    ).toBeDefined();
    expect(flagValue(line.argv, "--state"), `${line.where}: --state in S3`).toMatch(/^s3:\/\/[^/]+\/\S+/);
    expect(flagValue(line.argv, "--output"), `${line.where}: --output in S3`).toMatch(/^s3:\/\/[^/]+\/\S+/);
  }
  one(
    selected.map((s) => s.args.coordinator),
    "one coordinator",
  );
  one(
    selected.map((s) => s.line.argv[1]),
    "one manifest",
  );
  one(
    selected.map((s) => flagValue(s.line.argv, "--output")),
    "one output",
  );
  one(
    selected.map((s) => flagValue(s.line.argv, "--state")),
    "one state root",
  );
  one(
    selected.map((s) => flagValue(s.line.argv, "--max-points")),
    "one points cap",
  );
}

/** `plan MANIFEST --shards N --json`, offline (no key, no service): the jobs of each shard. */
async function planShards(
  dir: string,
  manifest: string,
  total: number,
): Promise<Array<{ index: number; jobs: number }>> {
  const path = join(dir, `plan-${total}-${Math.random().toString(36).slice(2)}.yaml`);
  await writeFile(path, manifest);
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(["plan", path, "--shards", String(total), "--json"], {
    env: {},
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    logger: createLogger("silent"),
  });
  expect({ code, err: err.join("\n") }).toEqual({ code: 0, err: "" });
  return JSON.parse(out.join("\n")).shards;
}

/** A DNS-1123 subdomain (object names) and label (container names, namespaces). */
const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^(?=.{1,63}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

// ---------------------------------------------------------------------------------------------

describe("the extractor", () => {
  const env: Record<string, string> = { MANIFEST: "jobs/nightly.yaml", FLAGS: "--json --sandbox" };
  const lookup: Lookup = (name) => env[name];

  it("splits shell words as sh does: quotes, continuations, variables, operators, redirections", () => {
    const script = [
      "# clapper run commented-out.yaml",
      'cd /srv && FOO=1 clapper run "$MANIFEST" \\',
      `  --output 's3://b/p q' --deadline "\${DEADLINE:-50m}" $FLAGS >>log.jsonl 2>&1 || echo "exit $?"`,
      "for attempt in 1 2; do node --enable-source-maps /opt/clapper/bin/clapper.js plan x.yaml; done",
      "env -u GITHUB_STEP_SUMMARY npx clapper report x.yaml --output ci | tee out",
      "logger -t clapper 'clapper run is mentioned here only as text'",
      'ln -s "$PWD/bin/clapper.js" /usr/local/bin/clapper',
    ].join("\n");
    const argvs = simpleCommands(script, lookup)
      .map(clapperArgv)
      .filter((a) => a !== undefined);
    expect(argvs).toEqual([
      ["run", "jobs/nightly.yaml", "--output", "s3://b/p q", "--deadline", "50m", "--json", "--sandbox"],
      ["plan", "x.yaml"],
      ["report", "x.yaml", "--output", "ci"],
    ]);
    // The completeness check (fromShell) counts what a reader sees: the three invocations, not the
    // comment, the quoted text or the symlink.
    expect(mentions(script)).toBe(3);
  });

  it("marks what it cannot know instead of guessing", () => {
    const [argv] = simpleCommands('clapper run "$(ls jobs | head -1)" --state "$NOPE"', lookup).map(
      clapperArgv,
    );
    expect(argv?.filter((a) => a.includes(UNSET))).toHaveLength(2);
  });

  it("reads systemd units and crontabs like systemd and cron", () => {
    const unit = parseUnit("[Service]\nType=oneshot\nExecStart=/usr/bin/clapper run a.yaml \\\n  --x 10%%\n");
    expect(unitValue(unit, "Service", "Type")).toBe("oneshot");
    expect(systemdSpecifiers(unitValue(unit, "Service", "ExecStart") ?? "", "/c")).toBe(
      "/usr/bin/clapper run a.yaml    --x 10%",
    );
    const tab = parseCrontab("A=b\n*/5 1-3 * * mon-fri clapper run x --max-failures 10\\% %stdin\n");
    expect(tab.env).toEqual({ A: "b" });
    expect(tab.entries).toEqual([
      { schedule: ["*/5", "1-3", "*", "*", "mon-fri"], command: "clapper run x --max-failures 10% " },
    ]);
  });
});

describe("the extractor: Compose and GitHub matrices", () => {
  it("interpolates as Compose does: defaults, required variables, alternatives and $$", () => {
    const shell = { SET: "x", EMPTY: "" };
    expect(composeInterpolate(`\${SET:-d} \${MISSING:-d} \${EMPTY:-d} \${EMPTY-d} $SET $$HOME`, shell)).toBe(
      "x d d  x $HOME",
    );
    expect(composeInterpolate(`\${SET:+alt}/\${MISSING:+alt}/\${EMPTY+alt}`, shell)).toBe("alt//alt");
    expect(composeInterpolate(`\${MISSING:?set it}`, shell)).toContain(UNSET);
    expect(composeInterpolate(`\${MISSING}`, shell)).toContain(UNSET);
    expect(interpolateAll({ a: [`\${SET}`, 3], b: { c: `\${NOPE:-0.5}` } }, shell)).toEqual({
      a: ["x", 3],
      b: { c: "0.5" },
    });
  });

  it("reads a Compose command as a list or a string, and environment as a map or a list", () => {
    expect(composeWords(["run", "a b.yaml"], "t")).toEqual(["run", "a b.yaml"]);
    expect(composeWords("run 'a b.yaml'\n  --shard 1/3", "t")).toEqual(["run", "a b.yaml", "--shard", "1/3"]);
    expect(composeWords(undefined, "t")).toEqual([]);
    expect(composeEnvironment({ A: "1", B: 2, C: null }, { C: "from-shell" })).toEqual({
      A: "1",
      B: "2",
      C: "from-shell",
    });
    expect(composeEnvironment(["A=1=2", "B", "C="], {})).toEqual({ A: "1=2", C: "" });
  });

  it("expands a GitHub matrix into its combinations, and matrix expressions from one of them", () => {
    expect(matrixCombinations(undefined)).toEqual([{}]);
    expect(matrixCombinations({ matrix: { shard: [1, 2], os: ["a"] } })).toEqual([
      { shard: 1, os: "a" },
      { shard: 2, os: "a" },
    ]);
    expect(() => matrixCombinations({ matrix: { shard: [1], include: [{ shard: 2 }] } })).toThrow();
    expect(githubExpressions(`--shard \${{ matrix.shard }}/4`, {}, { shard: 3 })).toBe("--shard 3/4");
    expect(githubExpressions(`--shard \${{ matrix.nope }}/4`, {}, { shard: 3 })).toContain(UNSET);
  });
});

describe("examples/", () => {
  let parse: ParseCommandLine;
  beforeAll(async () => {
    parse = await loadParser();
  });

  it("holds exactly the examples this test knows, and a README naming each", async () => {
    const files: string[] = [];
    const walk = async (dir: string) => {
      for (const entry of await readdir(dir, { withFileTypes: true })) {
        const path = join(dir, entry.name);
        if (entry.isDirectory()) await walk(path);
        else files.push(relative(EXAMPLES, path));
      }
    };
    await walk(EXAMPLES);
    expect(files.sort()).toEqual(
      [...examples.map((e) => e.file), "systemd/clapper.timer", "prometheus/alerts.yaml", "README.md"].sort(),
    );
    const readme = await read("README.md");
    for (const file of files.filter((f) => f !== "README.md")) expect(readme).toContain(file);
  });

  it("never holds a key: no key-shaped text, and no key flag other than --api-key-file", async () => {
    for (const e of examples) {
      // The sandbox's own default key is public (sandbox contract), and is checked below to go
      // nowhere but to the sandbox.
      const text = (await read(e.file)).replaceAll(SANDBOX_KEY, "");
      expect(text, e.file).not.toMatch(/sk-ml-[A-Za-z0-9]/);
      for (const line of await commandLines(e)) {
        expect(
          line.argv.filter((a) => /^--(api-?key|key|token)(=|$)/.test(a)),
          line.where,
        ).toEqual([]);
      }
    }
  });

  for (const example of examples) {
    describe(example.file, () => {
      it(`has at least ${example.min} clapper command line(s), each one accepted by clapper's parser`, async () => {
        const lines = await commandLines(example);
        expect(lines.length, `${example.file}: command lines found`).toBeGreaterThanOrEqual(example.min);
        for (const line of lines) {
          expect(
            line.argv.filter((a) => a.includes(UNSET)),
            `${line.where}: values with no plausible substitute`,
          ).toEqual([]);
          const result = await parse(line.argv, line.env);
          // Every example runs a command on a manifest, `plan M`, `run M ...`, `report M ...`, or
          // the sandbox.
          const onManifest = line.argv[0] !== "sandbox";
          expect({ where: line.where, argv: line.argv, result }).toMatchObject({
            where: line.where,
            argv: line.argv,
            result: {
              ok: true,
              command: line.argv[0],
              ...(onManifest ? { args: { manifest: line.argv[1] } } : {}),
            },
          });
        }
      });

      it("has a command line rejected once one of its flags is mistyped (the check is not vacuous)", async () => {
        const multiWord = (a: string) => /^--[a-z]+-[a-z]/.test(a);
        const line = (await commandLines(example)).find((l) => l.argv.some(multiWord));
        expect(line, `${example.file}: a command line with a multi-word flag to mistype`).toBeDefined();
        const argv = [...(line as CommandLine).argv];
        const at = argv.findIndex(multiWord);
        // --max-points -> --max-point, --api-key-file -> --api-key-fil: one letter dropped.
        argv[at] = (argv[at] as string).replace(/=.*$/, "").slice(0, -1);
        const result = await parse(argv, (line as CommandLine).env);
        expect({ argv, result }).toMatchObject({ argv, result: { ok: false } });
        // Refused for that flag, not for something else.
        expect(result.ok ? "" : result.message).toContain(argv[at]);
      });
    });
  }

  it("rejects an unknown command and a run without a manifest", async () => {
    expect(await parse(["rnu", "jobs/nightly.yaml"], {})).toMatchObject({ ok: false });
    expect(await parse(["run", "--deadline", "50m"], {})).toMatchObject({ ok: false });
  });
});

describe("examples/github-actions/clapper.yml", () => {
  it("plans pull requests and runs pushes to main, one run at a time, with its reports kept", async () => {
    const file = "github-actions/clapper.yml";
    const wf = yamlOf(file, await read(file));
    expect(Object.keys(wf.on)).toEqual(expect.arrayContaining(["pull_request", "push"]));
    expect(wf.on.push.branches).toContain("main");
    const jobs = Object.values<any>(wf.jobs);
    expect(jobs.length).toBeGreaterThanOrEqual(2);
    for (const job of jobs) {
      expect(job["runs-on"]).toBeTruthy();
      expect(Array.isArray(job.steps) && job.steps.length > 0).toBe(true);
    }
    const lines = await linesOf(file);
    const plan = lines.find((l) => l.argv[0] === "plan");
    const run = lines.find((l) => l.argv[0] === "run");
    expect(plan && run).toBeTruthy();
    for (const flag of ["--output", "--max-points", "--max-failures", "--deadline", "--log-format"]) {
      expect(run?.argv, flag).toContain(flag);
    }
    // The key comes from a secret, nowhere else.
    expect(run?.env.CLAPPER_API_KEY).toBe(GITHUB_EXPRESSIONS["secrets.CLAPPER_API_KEY"]);

    const runJob = jobs.find((j) => j.steps.some((s: any) => /clapper run/.test(s.run ?? "")));
    expect(runJob.concurrency?.group).toBeTruthy();
    expect(runJob.concurrency?.["cancel-in-progress"]).toBe(false);
    // The runner's timeout is above the run's deadline: clapper stops itself first.
    expect(runJob["timeout-minutes"]).toBeGreaterThan(50);
    const upload = runJob.steps.find((s: any) => String(s.uses).startsWith("actions/upload-artifact@"));
    expect(upload?.if).toBe("always()");
    expect(String(upload?.with?.path)).toMatch(/reports/);
    const junit = runJob.steps.find((s: any) => /junit/i.test(String(s.uses)));
    expect(junit?.if).toBe("always()");
    expect(String(junit?.with?.report_paths)).toMatch(/junit\.xml$/);
  });
});

describe("examples/gitlab/.gitlab-ci.yml", () => {
  it("plans merge requests, runs the default branch, keeps a JUnit report and retries exit 6 only", async () => {
    const file = "gitlab/.gitlab-ci.yml";
    const ci = yamlOf(file, await read(file));
    const { plan, render } = ci;
    expect(JSON.stringify(plan.rules)).toContain("merge_request_event");
    expect(JSON.stringify(render.rules)).toContain("$CI_DEFAULT_BRANCH");
    expect(render.artifacts.when).toBe("always");
    expect(render.artifacts.reports.junit).toMatch(/junit\.xml$/);
    expect(render.retry.max).toBeLessThanOrEqual(2);
    expect([render.retry.exit_codes].flat()).toEqual([6]);
    // `when` and `exit_codes` are alternatives: script_failure (or always) would retry every exit code.
    expect([render.retry.when ?? []].flat()).not.toContain("script_failure");
    expect([render.retry.when ?? []].flat()).not.toContain("always");
    expect(render.resource_group).toBeTruthy();
    expect(ci.variables?.CLAPPER_API_KEY).toBeUndefined();
    // GitLab's job timeout is above the run's deadline.
    const run = (await linesOf(file)).find((l) => l.argv[0] === "run");
    expect(seconds(String(render.timeout).replace(/\s+/g, ""))).toBeGreaterThan(
      seconds(flagValue(run?.argv ?? [], "--deadline") ?? ""),
    );
  });
});

describe("examples/cron/crontab", () => {
  it("has five valid time fields and a command that stops before the next window", async () => {
    const file = "cron/crontab";
    const { entries } = parseCrontab(await read(file));
    expect(entries).toHaveLength(1);
    const [entry] = entries;
    expect(entry?.schedule).toHaveLength(5);
    for (const [i, field] of (entry?.schedule ?? []).entries())
      expect(field).toMatch(CRON_FIELD[i] as RegExp);
    const [line] = await linesOf(file);
    expect(line?.argv).toEqual(expect.arrayContaining(["--log-format", "json", "--api-key-file"]));
    // Every 6 hours (*/6), the deadline below that.
    const every = Number(/^\*\/(\d+)$/.exec(entry?.schedule[1] ?? "")?.[1]);
    expect(seconds(flagValue(line?.argv ?? [], "--deadline") ?? "")).toBeLessThan(every * 3600);
    // The JSON log is appended (>>), not truncated at each run.
    expect(entry?.command).toMatch(/2>>\s*\S+\.jsonl/);
  });
});

describe("examples/systemd", () => {
  it("is a oneshot service with the key as a credential, and a persistent timer", async () => {
    const service = parseUnit(await read("systemd/clapper.service"));
    const timer = parseUnit(await read("systemd/clapper.timer"));
    expect(unitValue(service, "Service", "Type")).toBe("oneshot");
    expect(unitValue(service, "Service", "KillSignal")).toBe("SIGTERM");
    expect(seconds(unitValue(service, "Service", "TimeoutStopSec") ?? "")).toBeGreaterThanOrEqual(30);
    const credential = unitValue(service, "Service", "LoadCredential")?.split(":")[0];
    expect(credential).toBeTruthy();
    const [line] = await linesOf("systemd/clapper.service");
    expect(flagValue(line?.argv ?? [], "--api-key-file")).toBe(
      `${PLATFORM.systemd.CREDENTIALS_DIRECTORY}/${credential}`,
    );
    // The start timeout (none by default for oneshot) is set, above the run's own deadline.
    expect(seconds(unitValue(service, "Service", "TimeoutStartSec") ?? "")).toBeGreaterThan(
      seconds(flagValue(line?.argv ?? [], "--deadline") ?? ""),
    );
    expect(unitValue(service, "Service", "RestartPreventExitStatus")?.split(/\s+/)).not.toContain("6");
    expect(unitValue(timer, "Timer", "OnCalendar")).toMatch(/\S/);
    expect(unitValue(timer, "Timer", "Persistent")).toBe("true");
    expect(unitValue(timer, "Install", "WantedBy")).toBe("timers.target");
  });
});

describe("examples/kubernetes/cronjob.yaml", () => {
  let dir: TempDir;
  beforeAll(async () => {
    dir = await tempDir();
  });
  afterAll(() => dir.remove());

  it("is a batch/v1 CronJob: Forbid, deadlines consistent with --deadline, state on a claim, key from a Secret", async () => {
    const file = "kubernetes/cronjob.yaml";
    const docs = k8sDocs(await read(file));
    const cron = docs.find((d) => d.kind === "CronJob");
    expect(cron.apiVersion).toBe("batch/v1");
    expect(cron.spec.concurrencyPolicy).toBe("Forbid");
    expect(cron.spec.startingDeadlineSeconds).toBeGreaterThan(0);
    const job = cron.spec.jobTemplate.spec;
    const pod = job.template.spec;
    expect(job.backoffLimit).toBeGreaterThanOrEqual(0);
    expect(["Never", "OnFailure"]).toContain(pod.restartPolicy);
    if (job.podFailurePolicy) expect(pod.restartPolicy).toBe("Never");
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(pod.securityContext.runAsUser).toBeGreaterThan(0);

    const [line] = await linesOf(file);
    const container = pod.containers.find((c: any) => c.name === "clapper");
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    // The Job's deadline is above the run's; the grace period above clapper's graceful stop.
    const deadline = seconds(flagValue(line?.argv ?? [], "--deadline") ?? "");
    expect(job.activeDeadlineSeconds).toBeGreaterThan(deadline);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(30);

    // The state (--state, or the working folder when absent) is on a writable claim.
    const claims = new Set(
      pod.volumes.filter((v: any) => v.persistentVolumeClaim).map((v: any) => v.name as string),
    );
    const statePath = flagValue(line?.argv ?? [], "--state") ?? container.workingDir;
    const stateMount = container.volumeMounts.find(
      (m: any) => claims.has(m.name) && !m.readOnly && String(statePath).startsWith(`${m.mountPath}/`),
    );
    expect(stateMount, `a writable claim under ${statePath}`).toBeDefined();
    expect(docs.some((d) => d.kind === "PersistentVolumeClaim")).toBe(true);

    // The key: an env var from a Secret, or a file of a mounted Secret given to --api-key-file.
    const keyEnv = container.env?.find((e: any) => e.name === "CLAPPER_API_KEY");
    const keyFile = flagValue(line?.argv ?? [], "--api-key-file");
    const secretMounts = container.volumeMounts.filter((m: any) =>
      pod.volumes.some((v: any) => v.name === m.name && v.secret),
    );
    expect(
      Boolean(keyEnv?.valueFrom?.secretKeyRef?.name) ||
        (keyFile !== undefined && secretMounts.some((m: any) => keyFile.startsWith(`${m.mountPath}/`))),
    ).toBe(true);
    expect(keyEnv?.value).toBeUndefined();

    // The manifest it ships plans without errors (offline: no key, no service).
    const manifests = docs.find((d) => d.kind === "ConfigMap");
    const manifestMount = container.volumeMounts.find((m: any) => m.mountPath === line?.argv[1]);
    const manifest = manifests.data[manifestMount.subPath] as string;
    const path = join(dir.path, basename(line?.argv[1] ?? ""));
    await writeFile(path, manifest);
    const out: string[] = [];
    const err: string[] = [];
    const code = await main(["plan", path, "--json"], {
      env: {},
      stdout: (t) => out.push(t),
      stderr: (t) => err.push(t),
      logger: createLogger("silent"),
    });
    expect({ code, err: err.join("\n") }).toEqual({ code: 0, err: "" });
    expect(JSON.parse(out.join("\n")).jobs.length).toBeGreaterThan(0);
  });
});

describe("examples/kubernetes: every object carries what the API requires", () => {
  for (const file of [
    "kubernetes/cronjob.yaml",
    "kubernetes/indexed-job.yaml",
    "kubernetes/sharded-cronjob.yaml",
  ]) {
    it(file, async () => {
      const docs = k8sDocs(await read(file));
      expect(docs.length).toBeGreaterThan(0);
      const named = (kind: string) =>
        new Set(docs.filter((d) => d.kind === kind).map((d) => d.metadata.name));
      for (const d of docs) {
        const what = `${file}: ${d.kind} ${d.metadata?.name}`;
        expect(d.apiVersion, what).toMatch(/^(v1|[a-z0-9.-]+\/v\d+((alpha|beta)\d+)?)$/);
        expect(d.kind, what).toMatch(/^[A-Z][A-Za-z]+$/);
        expect(d.metadata?.name, what).toMatch(DNS_SUBDOMAIN);
        if (d.metadata?.namespace !== undefined) expect(d.metadata.namespace, what).toMatch(DNS_LABEL);
      }
      const jobs = docs.filter((d) => jobSpecOf(d) !== undefined);
      expect(jobs.length).toBeGreaterThan(0);
      for (const d of jobs) {
        const what = `${file}: ${d.kind} ${d.metadata.name}`;
        expect(d.apiVersion, what).toBe("batch/v1");
        if (d.kind === "CronJob") {
          // The controller appends 11 characters to name each Job.
          expect(d.metadata.name.length, what).toBeLessThanOrEqual(52);
          const fields = String(d.spec.schedule).trim().split(/\s+/);
          expect(fields, `${what}: schedule`).toHaveLength(5);
          for (const [i, field] of fields.entries()) expect(field, what).toMatch(CRON_FIELD[i] as RegExp);
          expect(d.spec.jobTemplate?.spec?.template, what).toBeDefined();
        }
        const job = jobSpecOf(d);
        const pod = job.template.spec;
        expect(["Never", "OnFailure"], `${what}: restartPolicy`).toContain(pod.restartPolicy);
        expect(pod.containers.length, what).toBeGreaterThan(0);
        const containers = new Set<string>();
        for (const c of pod.containers) {
          expect(c.name, what).toMatch(DNS_LABEL);
          expect(containers.has(c.name), `${what}: container names are unique`).toBe(false);
          containers.add(c.name);
          expect(
            typeof c.image === "string" && c.image.length > 0,
            `${what}: container ${c.name} image`,
          ).toBe(true);
          // Every mount names a volume of the pod.
          for (const m of c.volumeMounts ?? []) {
            expect(
              pod.volumes?.map((v: any) => v.name),
              `${what}: volume ${m.name}`,
            ).toContain(m.name);
          }
        }
        // What the file creates, it names: the ConfigMaps, claims and service account the pod uses.
        for (const v of pod.volumes ?? []) {
          if (v.configMap)
            expect(named("ConfigMap"), `${what}: ConfigMap ${v.configMap.name}`).toContain(v.configMap.name);
          if (v.persistentVolumeClaim) {
            expect(named("PersistentVolumeClaim"), what).toContain(v.persistentVolumeClaim.claimName);
          }
        }
        if (pod.serviceAccountName) expect(named("ServiceAccount"), what).toContain(pod.serviceAccountName);
        // The fields that only go together.
        if (job.completionMode === "Indexed") {
          expect(Number.isInteger(job.completions) && job.completions >= 1, `${what}: completions`).toBe(
            true,
          );
        }
        if (job.backoffLimitPerIndex !== undefined) {
          expect(job.completionMode, `${what}: backoffLimitPerIndex needs an Indexed Job`).toBe("Indexed");
          expect(pod.restartPolicy, `${what}: backoffLimitPerIndex needs restartPolicy Never`).toBe("Never");
        }
        if (job.podFailurePolicy) {
          expect(pod.restartPolicy, `${what}: podFailurePolicy needs restartPolicy Never`).toBe("Never");
          for (const rule of job.podFailurePolicy.rules) {
            expect(["FailJob", "FailIndex", "Ignore", "Count"], what).toContain(rule.action);
            if (rule.action === "FailIndex") {
              expect(job.backoffLimitPerIndex, `${what}: FailIndex needs backoffLimitPerIndex`).toBeDefined();
            }
            expect(
              [rule.onExitCodes, rule.onPodConditions].filter((x) => x !== undefined),
              `${what}: a rule has onExitCodes or onPodConditions`,
            ).toHaveLength(1);
            if (rule.onExitCodes) {
              const { containerName, operator, values } = rule.onExitCodes;
              if (containerName !== undefined) expect([...containers], what).toContain(containerName);
              expect(["In", "NotIn"], what).toContain(operator);
              // Unique and sorted; `In` may not hold 0.
              expect(values, what).toEqual([...new Set<number>(values)].sort((a, b) => a - b));
              if (operator === "In") expect(values, what).not.toContain(0);
            }
          }
        }
      }
    });
  }
});

describe("examples/kubernetes: the sharded Indexed Job and its CronJob", () => {
  let parse: ParseCommandLine;
  let dir: TempDir;
  beforeAll(async () => {
    parse = await loadParser();
    dir = await tempDir();
  });
  afterAll(() => dir.remove());

  it("indexed-job.yaml: its pods run shards 1..N of --shards N from JOB_COMPLETION_INDEX, one run, state and results in S3", async () => {
    const file = "kubernetes/indexed-job.yaml";
    const docs = k8sDocs(await read(file));
    const job = docs.find((d) => d.kind === "Job").spec;
    const pod = job.template.spec;
    expect(job.completionMode).toBe("Indexed");
    expect(job.parallelism).toBeGreaterThanOrEqual(1);
    expect(job.parallelism).toBeLessThanOrEqual(job.completions);

    const runs = (await linesOf(file)).filter((l) => l.argv[0] === "run");
    expect(runs).toHaveLength(job.completions);
    const selected = await shardsSelected(parse, runs);
    expect(expectEveryShardOnce(selected), "--shards N is the Job's completions").toBe(job.completions);
    for (const s of selected) {
      // From the index Kubernetes gives each pod: one pod template for every shard.
      expect(s.shard.source, s.line.where).toMatch(/^JOB_COMPLETION_INDEX=\d+$/);
      expect(flagValue(s.line.argv, "--shards"), s.line.where).toBe(String(job.completions));
    }
    // Without that index the same command line selects no shard: it depends on it.
    const { JOB_COMPLETION_INDEX: _index, ...noIndex } = selected[0]?.line.env ?? {};
    expect(() => resolveShard({ shards: selected[0]?.args.shards, env: noIndex })).toThrow(/which shard/);
    const container = pod.containers.find((c: any) => c.name === "clapper");
    expect(
      container.env.map((e: any) => e.name),
      "Kubernetes sets the index, not the file",
    ).not.toContain("JOB_COMPLETION_INDEX");
    expectOneSharedRun(selected);

    // No disk that outlives the pod: the state is in S3 (--state s3://, checked above).
    expect(docs.filter((d) => d.kind === "PersistentVolumeClaim")).toEqual([]);
    expect(pod.volumes.filter((v: any) => v.persistentVolumeClaim)).toEqual([]);

    // Retries per shard: 5 and 6 (and anything unforeseen) are retried; the codes another try would
    // not change fail the shard, or the Job (2: every shard's manifest); evictions are not counted.
    expect(job.backoffLimitPerIndex).toBeGreaterThanOrEqual(1);
    const rules: any[] = job.podFailurePolicy.rules;
    const codes = (action: string) =>
      rules
        .filter((r) => r.action === action && r.onExitCodes?.operator === "In")
        .flatMap((r) => r.onExitCodes.values as number[]);
    expect(codes("FailJob")).toEqual([2]);
    expect([...codes("FailJob"), ...codes("FailIndex")].sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 70]);
    expect(rules.filter((r) => r.onExitCodes?.operator === "NotIn")).toEqual([]);
    // An evicted pod exits 4 (SIGTERM, state saved): the eviction rule must come first, since the
    // first rule that matches decides.
    const evicted = rules.findIndex(
      (r) => r.action === "Ignore" && r.onPodConditions?.some((c: any) => c.type === "DisruptionTarget"),
    );
    expect(evicted).toBeGreaterThanOrEqual(0);
    expect(evicted).toBeLessThan(rules.findIndex((r) => r.onExitCodes?.values.includes(4)));

    // Deadlines: the Job's above the run's; time to save the state on SIGTERM.
    const deadline = seconds(flagValue(runs[0]?.argv ?? [], "--deadline") ?? "");
    expect(job.activeDeadlineSeconds).toBeGreaterThan(deadline);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(30);
    expect(pod.securityContext.runAsNonRoot).toBe(true);
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);

    // The key from a Secret; the coordinator's address expanded from the container's env.
    const keyEnv = container.env.find((e: any) => e.name === "CLAPPER_API_KEY");
    expect(keyEnv?.valueFrom?.secretKeyRef?.name).toBeTruthy();
    expect(keyEnv?.value).toBeUndefined();

    // The manifest it ships plans offline, and each of the N shards has work.
    const mount = container.volumeMounts.find((m: any) => m.mountPath === runs[0]?.argv[1]);
    const volume = pod.volumes.find((v: any) => v.name === mount.name);
    const configMap = docs.find((d) => d.kind === "ConfigMap" && d.metadata.name === volume.configMap.name);
    const tally = await planShards(dir.path, configMap.data[mount.subPath], job.completions);
    expect(tally.map((r) => r.index)).toEqual(selected.map((s) => s.shard.index).sort((a, b) => a - b));
    for (const r of tally) expect(r.jobs, `shard ${r.index} has jobs`).toBeGreaterThan(0);
  });

  it("sharded-cronjob.yaml: that Job every night, one at a time, with the same ServiceAccount and ConfigMap", async () => {
    const jobDocs = k8sDocs(await read("kubernetes/indexed-job.yaml"));
    const cronDocs = k8sDocs(await read("kubernetes/sharded-cronjob.yaml"));
    const cron = cronDocs.find((d) => d.kind === "CronJob");
    expect(cron.spec.concurrencyPolicy).toBe("Forbid");
    expect(cron.spec.startingDeadlineSeconds).toBeGreaterThan(0);
    // The jobTemplate is the Indexed Job's spec (a finished Job's removal is the CronJob's history).
    const { ttlSecondsAfterFinished: _ttl, ...spec } = jobDocs.find((d) => d.kind === "Job").spec;
    expect(cron.spec.jobTemplate.spec).toEqual(spec);
    const others = (docs: any[]) => docs.filter((d) => d.kind !== "Job" && d.kind !== "CronJob");
    expect(others(cronDocs)).toEqual(others(jobDocs));
    // Nightly (a fixed minute and hour, every day), and the Job's deadline within the day.
    const [minute, hour, ...rest] = String(cron.spec.schedule).split(/\s+/);
    expect([minute, hour]).toEqual([expect.stringMatching(/^\d+$/), expect.stringMatching(/^\d+$/)]);
    expect(rest).toEqual(["*", "*", "*"]);
    expect(spec.activeDeadlineSeconds).toBeLessThan(24 * 3600);
    const selected = await shardsSelected(
      parse,
      (await linesOf("kubernetes/sharded-cronjob.yaml")).filter((l) => l.argv[0] === "run"),
    );
    expect(expectEveryShardOnce(selected)).toBe(spec.completions);
  });
});

describe("examples/github-actions/sharded.yml", () => {
  let parse: ParseCommandLine;
  beforeAll(async () => {
    parse = await loadParser();
  });

  it("runs shards 1..N as a matrix of one run, then merges their reports in a job that waits for all", async () => {
    const file = "github-actions/sharded.yml";
    const wf = yamlOf(file, await read(file));
    const lines = await linesOf(file);
    const runs = lines.filter((l) => l.argv[0] === "run");
    const shardJobId = runs[0]?.unit as string;
    expect(new Set(runs.map((l) => l.unit))).toEqual(new Set([shardJobId]));
    const shardJob = wf.jobs[shardJobId];
    // A failed shard must not cancel the others, which are paying for their own tasks.
    expect(shardJob.strategy["fail-fast"]).toBe(false);

    const selected = await shardsSelected(parse, runs);
    const total = expectEveryShardOnce(selected);
    // The matrix's values are exactly 1..N of `--shard ${{ matrix.shard }}/N`.
    expect(shardJob.strategy.matrix.shard).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    const runStep = shardJob.steps.find((st: any) => /clapper run/.test(st.run ?? ""));
    expect(runStep.run).toMatch(new RegExp(`--shard \\$\\{\\{ matrix\\.shard \\}\\}/${total}\\b`));
    for (const s of selected) expect(s.shard.source).toBe("--shard");
    expectOneSharedRun(selected);
    for (const { line } of selected) {
      // The key and the coordinator's address (it holds a password) from secrets, never on the command line.
      expect(line.env.CLAPPER_API_KEY).toBe(GITHUB_EXPRESSIONS["secrets.CLAPPER_API_KEY"]);
      expect(line.env.CLAPPER_REDIS_URL).toBe(GITHUB_EXPRESSIONS["secrets.CLAPPER_REDIS_URL"]);
      expect(flagValue(line.argv, "--coordinator"), line.where).toBeUndefined();
      // The runner's timeout is above the run's deadline: clapper stops itself first.
      const deadline = (Date.parse(flagValue(line.argv, "--deadline") ?? "") - Date.now()) / 1000;
      expect(shardJob["timeout-minutes"] * 60).toBeGreaterThan(deadline);
    }
    // Only exit 6 is tried again.
    expect(runStep.run).toMatch(/if \[ "\$status" -ne 6 \]/);

    // The merge: after the shards, whatever became of them, over all N, from the output they wrote.
    const merges = lines.filter((l) => l.argv[0] === "report" && l.argv.includes("--merge"));
    expect(merges).toHaveLength(1);
    const merge = merges[0] as CommandLine;
    const mergeJob = wf.jobs[merge.unit as string];
    expect(merge.unit).not.toBe(shardJobId);
    expect([mergeJob.needs].flat()).toContain(shardJobId);
    expect(mergeJob.if).toBe("always()");
    expect(mergeJob.strategy).toBeUndefined();
    const parsed = await parse(merge.argv, merge.env);
    expect(parsed).toMatchObject({ ok: true, args: { merge: true, shards: total } });
    expect(merge.argv[1]).toBe(runs[0]?.argv[1]);
    expect(flagValue(merge.argv, "--output")).toBe(flagValue(runs[0]?.argv ?? [], "--output"));
    const upload = mergeJob.steps.find((st: any) => String(st.uses).startsWith("actions/upload-artifact@"));
    expect(upload?.if).toBe("always()");
    const junit = mergeJob.steps.find((st: any) => /junit/i.test(String(st.uses)));
    expect(junit?.if).toBe("always()");
    expect(String(junit?.with?.report_paths)).toMatch(/junit\.xml$/);
    // The merged files land where the upload and the check read them.
    const mergeStep = mergeJob.steps.find((st: any) => /clapper report/.test(st.run ?? ""));
    const folder = String(upload?.with?.path).replace(/\/$/, "");
    expect(mergeStep.run).toContain(` ${folder}/`);
    expect(String(junit?.with?.report_paths)).toBe(`${folder}/junit.xml`);

    // One run of the manifest at a time, never cancelled in the middle.
    expect(wf.concurrency?.group).toBeTruthy();
    expect(wf.concurrency?.["cancel-in-progress"]).toBe(false);
  });
});

describe("examples/compose.yaml", () => {
  let parse: ParseCommandLine;
  let dir: TempDir;
  beforeAll(async () => {
    parse = await loadParser();
    dir = await tempDir();
  });
  afterAll(() => dir.remove());

  it("runs shards 1..N, one service each, against the sandbox, Redis and an S3 store it starts first", async () => {
    const file = "compose.yaml";
    const { compose, services } = await composeServices(file);
    const lines = await linesOf(file);
    const runs = lines.filter((l) => l.argv[0] === "run");
    const selected = await shardsSelected(parse, runs);
    const total = expectEveryShardOnce(selected);
    expect(new Set(runs.map((l) => l.unit)).size, "one service per shard").toBe(total);
    for (const s of selected) expect(s.shard.source).toBe("--shard");
    expectOneSharedRun(selected);

    // The sandbox: clapper's image, listening on every address, naming in its URLs the address the
    // shards reach it at (the service's name).
    const sandboxes = lines.filter((l) => l.argv[0] === "sandbox");
    expect(sandboxes).toHaveLength(1);
    const sandbox = sandboxes[0] as CommandLine;
    const sandboxArgs = ((await parse(sandbox.argv, sandbox.env)) as { args: Record<string, any> }).args;
    expect(sandboxArgs.host).toBe("0.0.0.0");
    const publicUrl = new URL(sandboxArgs["public-url"]);
    expect(publicUrl.hostname).toBe(sandbox.unit);
    expect(Number(publicUrl.port)).toBe(sandboxArgs.port);

    const hostOf = (url: string | undefined) =>
      url !== undefined && URL.canParse(url) ? new URL(url).hostname : `(not a URL: ${url})`;
    const bucket = hostOf(flagValue(runs[0]?.argv ?? [], "--output"));
    expect(hostOf(flagValue(runs[0]?.argv ?? [], "--state"))).toBe(bucket);
    const bucketMakers = Object.entries<any>(services)
      .filter(([, svc]) =>
        new RegExp(`\\bmb\\b.*\\/${bucket}(\\s|$)`).test(
          [...composeWords(svc.entrypoint, "entrypoint"), ...composeWords(svc.command, "command")].join(" "),
        ),
      )
      .map(([name]) => name);
    expect(bucketMakers, `a service that creates the bucket ${bucket}`).toHaveLength(1);

    for (const { line } of selected) {
      const service = services[line.unit as string];
      const env = line.env;
      expect(env.CLAPPER_BASE_URL, line.where).toBe(sandboxArgs["public-url"]);
      // The sandbox's own public key, and only towards the sandbox.
      expect(env.CLAPPER_API_KEY, line.where).toBe(SANDBOX_KEY);
      const redis = services[hostOf(env.CLAPPER_REDIS_URL)];
      expect(String(redis?.image), `${line.where}: CLAPPER_REDIS_URL names the Redis service`).toMatch(
        /^redis:/,
      );
      const store = hostOf(env.AWS_ENDPOINT_URL_S3);
      expect(services[store], `${line.where}: AWS_ENDPOINT_URL_S3 names the store's service`).toBeDefined();
      if (services[store].environment?.MINIO_ROOT_USER !== undefined) {
        expect([env.AWS_ACCESS_KEY_ID, env.AWS_SECRET_ACCESS_KEY]).toEqual([
          services[store].environment.MINIO_ROOT_USER,
          services[store].environment.MINIO_ROOT_PASSWORD,
        ]);
      }
      // Started after what it needs: healthy sandbox and Redis, the bucket made.
      expect(service.depends_on).toMatchObject({
        [sandbox.unit as string]: { condition: "service_healthy" },
        [hostOf(env.CLAPPER_REDIS_URL)]: { condition: "service_healthy" },
        [bucketMakers[0] as string]: { condition: "service_completed_successfully" },
      });
      // The manifest: mounted where the command names it.
      const config = (service.configs ?? []).find((c: any) => c.target === line.argv[1]);
      expect(config, `${line.where}: ${line.argv[1]} mounted`).toBeDefined();
    }
    // Every service waited on for its health has a health check (clapper's image: its Dockerfile's).
    const dockerfile = await readFile(join(EXAMPLES, "..", "Dockerfile"), "utf8");
    for (const svc of Object.values<any>(services)) {
      for (const [name, dep] of Object.entries<any>(svc.depends_on ?? {})) {
        if (dep.condition !== "service_healthy") continue;
        const target = services[name];
        expect(
          target.healthcheck?.test !== undefined ||
            (runsClapperImage(target) && /^HEALTHCHECK /m.test(dockerfile)),
          `${name} has a health check`,
        ).toBe(true);
      }
    }
    // Anything published is published on the host's loopback only (the sandbox's control endpoints
    // take no key; the store's console has a well-known password).
    for (const [name, svc] of Object.entries<any>(services)) {
      for (const port of svc.ports ?? []) expect(String(port), name).toMatch(/^127\.0\.0\.1:/);
    }

    // One image, built once from the checkout's Dockerfile, run by the sandbox and the shards.
    const builders = Object.entries<any>(services).filter(([, svc]) => svc.build !== undefined);
    expect(builders).toHaveLength(1);
    const [, builder] = builders[0] as [string, any];
    const context = typeof builder.build === "string" ? builder.build : builder.build.context;
    expect(existsSync(join(EXAMPLES, context, "Dockerfile")), `${context}/Dockerfile`).toBe(true);
    for (const line of [sandbox, ...runs]) expect(services[line.unit as string].image).toBe(builder.image);

    // The inline manifest is the same for every shard, plans offline, and gives each shard work.
    const manifests = new Set(
      runs.map((l) => {
        const source = services[l.unit as string].configs.find((c: any) => c.target === l.argv[1]).source;
        return compose.configs[source].content as string;
      }),
    );
    expect(manifests.size).toBe(1);
    const tally = await planShards(dir.path, [...manifests][0] as string, total);
    for (const r of tally) expect(r.jobs, `shard ${r.index} has jobs`).toBeGreaterThan(0);

    // The sandbox's key appears nowhere but in services that talk to the sandbox.
    for (const [name, svc] of Object.entries<any>(services)) {
      const env = composeEnvironment(svc.environment, COMPOSE_SHELL);
      if (Object.values(env).includes(SANDBOX_KEY)) {
        expect(hostOf(env.CLAPPER_BASE_URL), name).toBe(sandbox.unit);
      }
    }
  });
});
