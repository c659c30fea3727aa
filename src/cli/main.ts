// The thin CLI: yargs maps flags (and their CLAPPER_* variables) to options and picks a command;
// the command's work returns an Outcome. Connections, logging, output and exit codes are handled
// here and nowhere else: every exit prints one answer (text for people, or exactly one JSON object
// on stdout with --json), every error is classified once (src/cli/errors.ts).
import { readFileSync } from "node:fs";
import { closest, distance } from "fastest-levenshtein";
import type { Logger } from "pino";
import yargs, { type Argv } from "yargs";
import { redact } from "../api/redact.js";
import { releaseHeldLocksSync } from "../engine/lock.js";
import { formatProblems, type Problem } from "../manifest/problems.js";
import type { SandboxArgs } from "./commands/sandbox/options.js";
import { sandboxOptions } from "./commands/sandbox/options.js";
// Loaded on use: the API clients (zod, undici) and the run pipeline are not needed to parse a
// command line, print help or refuse a flag.
import type { TaskKind } from "./commands/tasks/index.js";
import { TASK_STATUSES } from "./commands/tasks/statuses.js";
import type { ConnectExtras, Connection, ConnectionArgs, connect } from "./config.js";
import { type Classified, classify, ExitError, fsExit } from "./errors.js";
import {
  createCliLogger,
  defaultLogLevel,
  LOG_FORMATS,
  LOG_LEVELS,
  type LogFormat,
  type LogLevel,
} from "./logger.js";
import { type AddOption, type OptionContext, optionAdder } from "./options.js";
import { inGithubActions, json, type Outcome, workflowCommand } from "./output.js";
import { parseDeadline, parseMaxFailures } from "./values.js";

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
      process.exit(4);
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

interface GlobalArgs extends ConnectionArgs {
  json: boolean;
  "log-level"?: LogLevel;
  "log-format"?: LogFormat;
  "sandbox-state"?: string;
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

/** What a command needs at run time, made once per invocation. */
interface Runtime {
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
  /** The account commands' modules, loaded for the command chosen. */
  m: CommandModules;
  /** The connection's clients, their errors marked with the service they came from. */
  tagged<T extends Pick<Connection, "video" | "speech">>(conn: T): T;
}

type CommandModules = typeof import("./commands/balance/index.js") &
  typeof import("./commands/skills/index.js") &
  typeof import("./commands/tasks/index.js") &
  typeof import("./commands/voices/index.js");

async function commandModules(): Promise<CommandModules> {
  const [balance, skills, tasks, voices] = await Promise.all([
    import("./commands/balance/index.js"),
    import("./commands/skills/index.js"),
    import("./commands/tasks/index.js"),
    import("./commands/voices/index.js"),
  ]);
  return { ...balance, ...skills, ...tasks, ...voices };
}

type Work = (rt: Runtime) => Promise<Outcome>;

interface Chosen {
  command: string;
  args: Record<string, unknown>;
  work: Work;
}

interface Parsed {
  chosen?: Chosen;
  /** What yargs printed instead of running a command: help, version, a completion script. */
  output?: string;
}

/** Every flag and command, and the work each command does; nothing is run while parsing. */
function buildCli(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  choose: (c: Chosen) => void,
): {
  cli: Argv;
  ctx: OptionContext;
} {
  const ctx: OptionContext = { argv, env, flags: new Set(), envErrors: [] };
  const option: AddOption = optionAdder(ctx);
  const pick =
    <A>(command: string, work: (args: A) => Work, check?: (args: A) => void) =>
    (args: unknown) => {
      if (ctx.envErrors[0]) throw ctx.envErrors[0];
      check?.(args as A);
      choose({ command, args: args as Record<string, unknown>, work: work(args as A) });
    };
  const manifest = <T>(y: Argv<T>) =>
    y.positional("manifest", { type: "string", demandOption: true, describe: "YAML or CSV manifest" });
  const state = <T>(y: Argv<T>, what = "read") =>
    option(y, "state", {
      type: "string",
      describe: `the run's state file to ${what} (default: .clapper/NAME/state.jsonl beside the manifest)`,
    });
  const output = <T>(y: Argv<T>, what: string) =>
    option(y, "output", {
      type: "string",
      describe: `${what} output folder or s3://bucket/prefix (default: the manifest's output; a folder is relative to the current folder)`,
    });

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
  cli = option(cli, "json", {
    type: "boolean",
    default: false,
    describe: "print one JSON object on stdout (for scripts)",
  });
  cli = option(cli, "sandbox", {
    type: "boolean",
    default: false,
    describe: "use an in-process emulator instead of the services",
  });
  cli = option(cli, "sandbox-state", {
    type: "string",
    describe:
      "with --sandbox: the emulator's state file (default for run, plan and cancel: beside the run's state; else none: an empty emulator)",
  });
  cli = option(cli, "base-url", {
    type: "string",
    noEnv: true,
    describe: "service address (default: $CLAPPER_BASE_URL)",
  });
  cli = option(cli, "api-key-file", {
    type: "string",
    describe: "file holding the API key (default: $CLAPPER_API_KEY)",
  });
  cli = option(cli, "timeout", {
    type: "number",
    rule: { min: 0, above: true, unit: "seconds" },
    describe: "seconds per HTTP attempt (default 30)",
  });
  cli = option(cli, "log-level", {
    type: "choice",
    choices: LOG_LEVELS,
    describe: "log level on stderr (default: info for a run's JSON log, else warn)",
  });
  cli = option(cli, "log-format", {
    type: "choice",
    choices: LOG_FORMATS,
    describe: "json: one object per line; pretty: readable lines (default on a terminal)",
  });
  cli = cli.group(
    [
      "json",
      "sandbox",
      "sandbox-state",
      "base-url",
      "api-key-file",
      "timeout",
      "log-level",
      "log-format",
      "help",
      "version",
    ],
    "Global options:",
  );

  cli = cli
    .command(
      "sandbox",
      "run the local emulator of the video and speech services",
      (y) => sandboxOptions(y, option),
      pick<SandboxArgs & GlobalArgs>("sandbox", (args) => async (rt) => {
        const { sandboxCommand } = await import("./commands/sandbox/index.js");
        return sandboxCommand(args, rt.signal, (url) =>
          // Scripts wait for exactly this first line (sandbox contract); with --json, its JSON twin.
          rt.print(args.json ? JSON.stringify({ sandbox: { url } }) : `clapper sandbox listening on ${url}`),
        );
      }),
    )
    .command(
      "plan <manifest>",
      "validate a manifest, expand it into jobs and estimate their points; creates nothing",
      (y) => {
        let b = manifest(y);
        b = option(b, "speech-price", {
          type: "number",
          rule: { min: 0, unit: "points per 10 counted characters" },
          describe: "points per 10 counted characters, when no service is configured",
        });
        return state(b, "find the sandbox state beside");
      },
      pick<GlobalArgs & { manifest: string; "speech-price"?: number; state?: string }>(
        "plan",
        (args) => (rt) => planCommand(rt, args),
      ),
    )
    .command(
      "run <manifest>",
      "render a manifest: budget checked, rate-limited, resumable; writes report.json, report.md, junit.xml",
      (y) => runOptions(manifest(y), option, output, state),
      pick<GlobalArgs & import("./commands/run/index.js").RunArgs>(
        "run",
        (args) => async (rt) => {
          const { runCommand } = await import("./commands/run/index.js");
          return runCommand({
            args,
            global: args,
            env: rt.env,
            signal: rt.signal,
            format: rt.format,
            logger: (writeLine) => rt.logger(writeLine),
            connect: rt.connect,
          });
        },
        (args) => {
          // The same checks as the run makes, without a file or the network (parseCommandLine too).
          if (args["callback-url"] || args["callback-listen"] !== undefined || args.only !== undefined) {
            checkRunFlags(args);
          }
        },
      ),
    )
    .command(
      "status <manifest>",
      "where the run stands, from its state (offline)",
      (y) => state(manifest(y)),
      pick<GlobalArgs & { manifest: string; state?: string }>("status", (args) => async () => {
        const { status, renderStatus } = await import("./commands/run/index.js");
        const report = await status({ manifest: args.manifest, cwd: process.cwd(), state: args.state });
        return { code: 0, json: report, text: renderStatus(report) };
      }),
    )
    .command(
      "report <manifest>",
      "write report.json, report.md and junit.xml again from the run's state",
      (y) => {
        let b = output(state(manifest(y)), "the run's");
        b = option(b, "s3-endpoint", { type: "string", describe: "S3-compatible endpoint" });
        return option(b, "s3-path-style", { type: "boolean", describe: "path-style S3 addressing" });
      },
      pick<
        GlobalArgs & {
          manifest: string;
          state?: string;
          output?: string;
          "s3-endpoint"?: string;
          "s3-path-style"?: boolean;
        }
      >("report", (args) => async (rt) => {
        const { rewriteReport } = await import("./commands/run/index.js");
        const { report, uris } = await rewriteReport({
          manifest: args.manifest,
          cwd: process.cwd(),
          env: rt.env,
          state: args.state,
          output: args.output,
          s3: {
            ...(args["s3-endpoint"] ? { endpoint: args["s3-endpoint"] } : {}),
            ...(args["s3-path-style"] !== undefined ? { forcePathStyle: args["s3-path-style"] } : {}),
          },
        });
        return { code: 0, json: report, text: uris.join("\n") };
      }),
    )
    .command(
      "cancel <manifest>",
      "cancel the run's tasks still in flight (the next run records what became of them)",
      (y) => state(manifest(y)),
      pick<GlobalArgs & { manifest: string; state?: string }>("cancel", (args) => async (rt) => {
        const { cancelRun, sandboxStatePath } = await import("./commands/run/index.js");
        const { rows, never } = await cancelRun({
          manifest: args.manifest,
          cwd: process.cwd(),
          state: args.state,
          signal: rt.signal,
          connect: async (located) =>
            rt.tagged(
              await rt.connect(args, rt.env, rt.logger(), {
                ...(args.sandbox
                  ? { sandboxStateFile: args["sandbox-state"] ?? sandboxStatePath(located.statePath) }
                  : {}),
              }),
            ),
        });
        const text =
          rows.length === 0
            ? never
              ? "no tasks in flight: the run was never made"
              : "no tasks in flight"
            : rows.map((r) => `${r.job} ${r.task_id}: ${r.status}`).join("\n");
        const refused = rows.filter((r) => r.failed).length;
        if (refused === 0) return { code: 0, json: rows, text };
        // Some tasks go on running (and will be paid for): not a success for a script.
        return {
          code: 1,
          json: rows,
          text,
          message: `${refused} of ${rows.length} tasks could not be cancelled`,
        };
      }),
    )
    .command(
      "balance",
      "points summary, packages and speech pricing",
      (y) => y,
      pick<GlobalArgs>(
        "balance",
        (args) => (rt) =>
          withServices(rt, args, (c) => rt.m.balance({ clients: c, signal: rt.signal }), rt.m.renderBalance),
      ),
    )
    .command("skills", "list and manage prompt-optimization skills", (y: Argv) =>
      y
        .command(
          "list",
          "official and custom skills",
          (yy) => option(yy, "keyword", { type: "string", describe: "filter by name or description" }),
          pick<GlobalArgs & { keyword?: string }>(
            "skills list",
            (args) => (rt) =>
              withServices(
                rt,
                args,
                (c) =>
                  rt.m.listSkills({
                    clients: c,
                    signal: rt.signal,
                    ...(args.keyword ? { keyword: args.keyword } : {}),
                  }),
                rt.m.renderSkills,
              ),
          ),
        )
        .command(
          "show <skill>",
          "one skill, by id or name, with its content",
          (yy) => yy.positional("skill", { type: "string", demandOption: true, describe: "id or name" }),
          pick<GlobalArgs & { skill: string }>(
            "skills show",
            (args) => (rt) =>
              withServices(
                rt,
                args,
                (c) => rt.m.findSkill({ clients: c, signal: rt.signal }, args.skill),
                rt.m.renderSkill,
              ),
          ),
        )
        .command(
          "create <file>",
          "create a custom skill from a Markdown file (name from the file name or its front matter)",
          (yy) => {
            let b = yy.positional("file", { type: "string", demandOption: true, describe: "Markdown file" });
            b = option(b, "name", { type: "string", describe: "skill name (overrides the file)" });
            return option(b, "description", { type: "string", describe: "skill description" });
          },
          pick<GlobalArgs & { file: string; name?: string; description?: string }>(
            "skills create",
            (args) => async (rt) => {
              // Read before connecting: a bad file is a usage error, whatever the services.
              const file = await rt.m.readSkillFile(args.file);
              return withServices(
                rt,
                args,
                (c) => {
                  const description = args.description ?? file.description;
                  return c.video.createSkill(
                    {
                      name: args.name ?? file.name,
                      content: file.content,
                      ...(description ? { description } : {}),
                    },
                    { signal: rt.signal },
                  );
                },
                rt.m.renderSkill,
              );
            },
          ),
        )
        .command(
          "update <skill> <file>",
          "replace a custom skill's content (and name/description) from a Markdown file",
          (yy) => {
            let b = yy
              .positional("skill", { type: "string", demandOption: true, describe: "id or name" })
              .positional("file", { type: "string", demandOption: true, describe: "Markdown file" });
            b = option(b, "name", { type: "string", describe: "new skill name" });
            return option(b, "description", { type: "string", describe: "new skill description" });
          },
          pick<GlobalArgs & { skill: string; file: string; name?: string; description?: string }>(
            "skills update",
            (args) => async (rt) => {
              const file = await rt.m.readSkillFile(args.file);
              return withServices(
                rt,
                args,
                async (c) => {
                  const existing = await rt.m.findSkill({ clients: c, signal: rt.signal }, args.skill);
                  const description = args.description ?? file.description ?? existing.description;
                  return c.video.updateSkill(
                    existing.id,
                    {
                      name: args.name ?? existing.name,
                      content: file.content,
                      ...(description ? { description } : {}),
                    },
                    { signal: rt.signal },
                  );
                },
                rt.m.renderSkill,
              );
            },
          ),
        )
        .command(
          "delete <skill>",
          "delete a custom skill (by id or name)",
          (yy) => yy.positional("skill", { type: "string", demandOption: true, describe: "id or name" }),
          pick<GlobalArgs & { skill: string }>(
            "skills delete",
            (args) => (rt) =>
              withServices(
                rt,
                args,
                async (c) => {
                  const existing = await rt.m.findSkill({ clients: c, signal: rt.signal }, args.skill);
                  return {
                    skill_id: await c.video.deleteSkill(existing.id, { signal: rt.signal }),
                    deleted: true,
                  };
                },
                (r) => `deleted ${r.skill_id}`,
              ),
          ),
        )
        .command(
          "push <dir>",
          "sync DIR/*.md as custom skills by name: create missing, update changed, leave the rest",
          (yy) =>
            option(
              yy.positional("dir", { type: "string", demandOption: true, describe: "folder of .md files" }),
              "dry-run",
              {
                type: "boolean",
                default: false,
                describe: "show what would change",
              },
            ),
          pick<GlobalArgs & { dir: string; "dry-run": boolean }>(
            "skills push",
            (args) => (rt) =>
              withServices(
                rt,
                args,
                (c) =>
                  rt.m.pushSkills({ clients: c, signal: rt.signal, dir: args.dir, dryRun: args["dry-run"] }),
                rt.m.renderPush,
              ),
          ),
        )
        .demandCommand(1, "name a skills command: list, show, create, update, delete, push"),
    )
    .command("voices", "list voices; create and delete custom voices", (y: Argv) =>
      y
        .command(
          "list",
          "preset voices (or the organization's custom voices with --custom)",
          (yy) =>
            option(yy, "custom", {
              type: "boolean",
              default: false,
              describe: "the organization's custom voices",
            }),
          pick<GlobalArgs & { custom: boolean }>(
            "voices list",
            (args) => (rt) =>
              withServices(
                rt,
                args,
                (c) => rt.m.listVoices({ clients: c, signal: rt.signal, custom: args.custom }),
                rt.m.renderVoices,
              ),
          ),
        )
        .command(
          "create <name> <file>",
          "upload a reference audio file (wav, mp3, flac, ogg, m4a; 0.5-15 s; 15 MiB) as a custom voice",
          (yy) =>
            yy
              .positional("name", { type: "string", demandOption: true, describe: "voice name" })
              .positional("file", { type: "string", demandOption: true, describe: "reference audio file" }),
          pick<GlobalArgs & { name: string; file: string }>("voices create", (args) => async (rt) => {
            // The file first: a missing one is a usage error, whatever the services.
            await readable(args.file, "read the reference audio file");
            return withServices(
              rt,
              args,
              (c) => rt.m.createVoice({ clients: c, signal: rt.signal, name: args.name, file: args.file }),
              (v) => `created voice ${v.voice_id} (${v.name})`,
            );
          }),
        )
        .command(
          "delete <id>",
          "delete a custom voice",
          (yy) => yy.positional("id", { type: "string", demandOption: true, describe: "voice id" }),
          pick<GlobalArgs & { id: string }>(
            "voices delete",
            (args) => (rt) =>
              withServices(
                rt,
                args,
                (c) => rt.m.deleteVoice({ clients: c, signal: rt.signal, id: args.id }),
                (r) => `deleted ${r.voice_id}`,
              ),
          ),
        )
        .demandCommand(1, "name a voices command: list, create, delete"),
    )
    .command("tasks", "look at and cancel tasks on both services", (y: Argv) =>
      option(y, "kind", {
        type: "choice",
        choices: ["video", "speech"],
        describe: "which service (default: both)",
      })
        .command(
          "list",
          "recent tasks, newest first",
          (yy) => {
            const b = option(yy, "status", {
              type: "choice",
              choices: TASK_STATUSES,
              describe: "only tasks in this status",
            });
            return option(b, "limit", {
              type: "number",
              rule: { min: 1, integer: true },
              default: 20,
              describe: "at most this many",
            });
          },
          pick<GlobalArgs & { kind?: TaskKind; status?: string; limit: number }>(
            "tasks list",
            (args) => (rt) =>
              withServices(
                rt,
                args,
                (c) =>
                  rt.m.listTasks({
                    clients: c,
                    signal: rt.signal,
                    limit: args.limit,
                    ...(args.kind ? { kind: args.kind } : {}),
                    ...(args.status ? { status: args.status } : {}),
                  }),
                rt.m.renderTasks,
              ),
          ),
        )
        .command(
          "get <id>",
          "one task",
          (yy) => yy.positional("id", { type: "string", demandOption: true, describe: "task id" }),
          pick<GlobalArgs & { kind?: TaskKind; id: string }>(
            "tasks get",
            (args) => (rt) =>
              withServices(
                rt,
                args,
                (c) =>
                  rt.m.getTask({
                    clients: c,
                    signal: rt.signal,
                    id: args.id,
                    ...(args.kind ? { kind: args.kind } : {}),
                  }),
                rt.m.renderTask,
              ),
          ),
        )
        .command(
          "cancel <id>",
          "cancel a task that has not ended",
          (yy) => yy.positional("id", { type: "string", demandOption: true, describe: "task id" }),
          pick<GlobalArgs & { kind?: TaskKind; id: string }>(
            "tasks cancel",
            (args) => (rt) =>
              withServices(
                rt,
                args,
                (c) =>
                  rt.m.cancelTask({
                    clients: c,
                    signal: rt.signal,
                    id: args.id,
                    ...(args.kind ? { kind: args.kind } : {}),
                  }),
                (r) => `${r.kind} task ${r.id}: ${r.status}`,
              ),
          ),
        )
        .demandCommand(1, "name a tasks command: list, get, cancel"),
    )
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
      throw new ExitError(2, usageMessage(message ?? error?.message ?? "usage error", argv, ctx.flags));
    });
  return { cli, ctx };
}

/** `run`'s flags. */
function runOptions<T>(
  y: Argv<T>,
  option: AddOption,
  output: <U>(y: Argv<U>, what: string) => Argv<U>,
  state: <U>(y: Argv<U>, what?: string) => Argv<U>,
): Argv<T> {
  let b = output(y, "the run's");
  b = state(b, "keep (resumed when it exists)");
  b = option(b, "staging", {
    type: "string",
    describe: "s3://bucket/prefix for local materials (default: beside an S3 output; else Data URLs)",
  });
  b = option(b, "callback-url", {
    type: "string",
    describe: "public URL the video service posts status callbacks to (polling stays as a safety net)",
  });
  b = option(b, "callback-listen", {
    type: "string",
    describe:
      "[HOST:]PORT the callback listener binds (default: the URL's host if it is this machine's address, else 127.0.0.1; the URL's port)",
  });
  b = option(b, "s3-endpoint", {
    type: "string",
    describe: "S3-compatible endpoint (default: the AWS SDK's configuration)",
  });
  b = option(b, "s3-path-style", {
    type: "boolean",
    describe: "path-style S3 addressing (default: on with --s3-endpoint or AWS_ENDPOINT_URL_S3)",
  });
  b = option(b, "max-points", {
    type: "number",
    rule: { min: 0, integer: true, unit: "points" },
    describe: "spend at most this many points in this run",
  });
  b = option(b, "only", {
    type: "string",
    describe: "comma-separated job or row ids (shot/s01,line/n02,s03)",
  });
  b = option(b, "retry-failed", {
    type: "boolean",
    default: false,
    describe: "try failed and cancelled jobs again",
  });
  b = option(b, "fresh", {
    type: "boolean",
    default: false,
    describe: "forget earlier state and results; generate everything anew",
  });
  b = option(b, "max-failures", {
    type: "value",
    parse: (raw, name) => parseMaxFailures(raw, name),
    describe: "stop submitting once N jobs failed, or P% of the jobs that ended (N or P%); exit 1",
  });
  b = option(b, "deadline", {
    type: "value",
    parse: (raw, name) => parseDeadline(raw, new Date(), name),
    describe:
      "stop at this time: a duration (90s, 45m, 2h, 1h30m) or a time with its zone (2026-11-25T06:00:00Z); state saved, exit 4",
  });
  b = option(b, "max-attempts", {
    type: "number",
    rule: { min: 1, integer: true },
    default: 2,
    describe: "attempts per job (a failed task is retried with a new key)",
  });
  b = option(b, "rps", {
    type: "number",
    rule: { min: 0.1 },
    default: 10,
    describe: "requests per second per service (adapts down on 429)",
  });
  b = option(b, "in-flight", {
    type: "number",
    rule: { min: 1, integer: true },
    default: 32,
    describe: "tasks in flight per service",
  });
  b = option(b, "poll-interval", {
    type: "number",
    rule: { min: 0.01, unit: "seconds" },
    default: 1,
    describe: "shortest wait in seconds between two looks at a task",
  });
  b = option(b, "break-lock", {
    type: "boolean",
    default: false,
    describe: "take the run's lock even if another run seems to hold it (after a crash)",
  });
  b = option(b, "max-result-mb", {
    type: "number",
    rule: { min: 1, unit: "MiB" },
    describe: "largest result to download, in MiB (default: derived from each job's duration and resolution)",
  });
  b = option(b, "allow-private-urls", {
    type: "boolean",
    default: false,
    describe: "download results from private and loopback addresses too (default: public only)",
  });
  b = option(b, "give-up-after", {
    type: "number",
    rule: { min: 0.1, unit: "seconds" },
    default: 600,
    describe: "seconds a task may stay unreadable before the run leaves it for the next run",
  });
  return option(b, "sandbox-time-scale", {
    type: "number",
    rule: { min: 0, above: true },
    default: 0.01,
    hidden: true,
    describe: "with --sandbox: multiplier for every simulated duration",
  });
}

function checkRunFlags(args: { "callback-url"?: string; "callback-listen"?: string; only?: string }): void {
  if (args["callback-listen"] !== undefined && !args["callback-url"]) {
    throw new ExitError(
      2,
      "--callback-listen: only with --callback-url (the public URL the service posts to)",
    );
  }
  if (args["callback-url"]) {
    // The same parser as the run's (pure: no socket is opened).
    const url = args["callback-url"];
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new ExitError(
        2,
        `--callback-url must be an absolute http or https URL, got ${JSON.stringify(url)}`,
      );
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new ExitError(2, `--callback-url must be an http or https URL, got ${JSON.stringify(url)}`);
    }
    const listen = args["callback-listen"];
    const m = (listen ?? "").match(/^(?:(.+):)?(\d+)$/);
    if (listen !== undefined && !m) {
      throw new ExitError(2, `--callback-listen must be [HOST:]PORT, got ${JSON.stringify(listen)}`);
    }
    if (m && Number(m[2]) > 65535)
      throw new ExitError(2, `--callback-listen port must be 0-65535, got ${m[2]}`);
  }
  if (args.only?.split(",").every((s) => s.trim() === "")) {
    throw new ExitError(
      2,
      `--only: expected comma-separated job or row ids (shot/s01,line/n02,s03), got ${JSON.stringify(args.only)}`,
    );
  }
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
  const { cli } = buildCli(argv, env, (c) => {
    chosen = c;
  });
  // With a callback, yargs hands over what it would print (help, version) instead of printing it.
  await cli.parseAsync([...argv], {}, (_error, _args, out) => {
    if (out) output = out;
  });
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
  const env = io.env ?? process.env;
  const rawStdout = io.stdout ?? ((text: string) => void process.stdout.write(`${text}\n`));
  const rawStderr = io.stderr ?? ((text: string) => void process.stderr.write(`${text}\n`));
  // Everything printed may quote a service or a file: redacted by value on the way out.
  let answered = false;
  const stdout = (text: string) => {
    answered = true;
    rawStdout(redact(text));
  };
  const stderr = (text: string) => rawStderr(redact(text));
  let jsonMode = wantsJson(argv, env);
  const shutdown = shutdownSignal(io.earlySignal, (name) => {
    // The one JSON object of this exit, unless the answer went out already.
    if (jsonMode && !answered)
      rawStdout(
        json({
          error: {
            code: 4,
            message: `second ${name}: exited at once; the state is saved, run again to resume`,
          },
        }),
      );
  });
  let baseUrl: string | undefined;
  let printedAlready = false;
  const loggers: Logger[] = [];
  try {
    let parsed: Parsed;
    try {
      parsed = await parse(argv, env);
    } catch (error) {
      return report(classify(error, { bugs: bugsUrl(packageInfo()) }));
    }
    if (!parsed.chosen) {
      const text = (parsed.output ?? "").replace(/\n+$/, "");
      // The shell's completion callback reads plain words, whatever CLAPPER_JSON says.
      const completing = argv.includes("--get-yargs-completions");
      if (!jsonMode || completing) stdout(text);
      else {
        const key = printedKind(argv);
        stdout(json({ [key]: text }));
      }
      return 0;
    }
    const { command, args, work } = parsed.chosen;
    const g = args as unknown as GlobalArgs;
    jsonMode = g.json === true;
    const format: LogFormat = g["log-format"] ?? (process.stderr.isTTY ? "pretty" : "json");
    const level = defaultLogLevel({ asked: g["log-level"], command, format });
    let made: Logger | undefined;
    let config: typeof import("./config.js") | undefined;
    const accounts = /^(balance|skills|voices|tasks)\b/.test(command);
    const rt: Runtime = {
      m: accounts ? await commandModules() : ({} as CommandModules),
      tagged: (conn) => (config ? config.tagServices(conn) : conn),
      env,
      signal: shutdown.signal,
      format,
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
        config ??= await import("./config.js");
        const conn = await config.connect(a, e, logger, extras);
        baseUrl = a.sandbox ? `the in-process sandbox (${conn.baseUrl})` : conn.baseUrl;
        return conn;
      },
      async services(a) {
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
      print(text) {
        printedAlready = true;
        stdout(text);
      },
    };
    let outcome: Outcome;
    try {
      // Test-only (documented in the README): an internal fault, to check exit 70 end to end. `run`
      // honours it later, with the run located and the services open.
      if (env.CLAPPER_TEST_FAULT === "internal" && command !== "run") {
        throw new Error("injected internal fault (CLAPPER_TEST_FAULT=internal)");
      }
      outcome = await work(rt);
    } catch (error) {
      const c = classify(error, { bugs: bugsUrl(packageInfo()), ...(baseUrl ? { baseUrl } : {}) });
      if (c.stack && (level === "debug" || level === "trace")) stderr(c.stack);
      return report(c);
    }
    emit(outcome);
    return outcome.code;
  } finally {
    for (const logger of loggers) logger.flush?.();
    shutdown.dispose();
  }

  function emit(o: Outcome): void {
    if (inGithubActions(env) && o.problems?.length) for (const p of o.problems) stderr(workflowCommand(p));
    if (jsonMode) {
      if (o.printed && printedAlready && o.code === 0) return;
      stdout(json(answer(o)));
      if (o.code !== 0 && o.message) stderr(`clapper: ${o.message}`);
      return;
    }
    if (o.text) (o.textTo === "stderr" ? stderr : stdout)(o.text);
    for (const note of o.notes ?? []) stderr(note);
    if (o.code !== 0 && o.message && !o.text && !o.notes?.length) stderr(`clapper: ${o.message}`);
  }

  /** A failure that reached the top, printed as one line (and its problems), or as `{error}`. */
  function report(c: Classified): number {
    const problems = (c.problems ?? []) as Problem[];
    const errors = problems.filter((p) => p.severity === "error");
    const warnings = problems.filter((p) => p.severity === "warning");
    const notes = [
      ...formatProblems(errors).map((line) => `  ${line}`),
      ...formatProblems(warnings).map((line) => `  warning: ${line}`),
    ];
    if (printedAlready && jsonMode) {
      // An answer went out already (the sandbox's first line): the failure goes to stderr only.
      stderr(`clapper: ${c.message}`);
      return c.code;
    }
    if (inGithubActions(env)) for (const p of problems) stderr(workflowCommand(p));
    if (jsonMode) {
      stdout(
        json(answer({ code: c.code, message: c.message, problems, ...(c.data ? { json: c.data } : {}) })),
      );
    }
    stderr(`clapper: ${c.message}`);
    for (const line of notes) stderr(line);
    return c.code;
  }
}

/** The one JSON object of an outcome: its data, and with a non-zero code `error` beside it. */
function answer(o: Outcome): unknown {
  if (o.code === 0 || o.whole) return o.json ?? {};
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

/** Refuses a file that cannot be opened for reading, naming it and why (exit 2). */
async function readable(path: string, action: string): Promise<void> {
  const { open } = await import("node:fs/promises");
  try {
    await (await open(path, "r")).close();
  } catch (error) {
    throw fsExit(error, { action, path });
  }
}

/** Opens the services for one command, does its work, and closes them. */
async function withServices<T>(
  rt: Runtime,
  args: GlobalArgs,
  work: (conn: Connection) => Promise<T>,
  render: (data: T) => string,
): Promise<Outcome> {
  const conn = await rt.services(args);
  try {
    const data = await work(conn);
    return { code: 0, json: data, text: render(data) };
  } finally {
    await conn.close();
  }
}

/** `clapper plan`: offline, or with the services (and their prices, balance, voices, skills). */
async function planCommand(
  rt: Runtime,
  args: GlobalArgs & { manifest: string; "speech-price"?: number; state?: string },
): Promise<Outcome> {
  const logger = rt.logger();
  // The services are optional here: with no key, the plan is made offline.
  const online = args.sandbox || Boolean(args["api-key-file"] || rt.env.CLAPPER_API_KEY);
  let sandboxStateFile: string | undefined;
  if (args.sandbox) {
    sandboxStateFile = args["sandbox-state"];
    if (!sandboxStateFile) {
      // The run's emulator state, when the run has one: the plan sees the balance the run left.
      const { locateRun } = await import("../pipeline/locate.js");
      const { sandboxStatePath } = await import("./commands/run/index.js");
      const found = await locateRun({
        manifest: args.manifest,
        cwd: process.cwd(),
        ...(args.state ? { state: args.state } : {}),
      }).catch(() => undefined);
      const candidate = found?.ok ? sandboxStatePath(found.run.statePath) : undefined;
      const { existsSync } = await import("node:fs");
      if (candidate && existsSync(candidate)) sandboxStateFile = candidate;
    }
  }
  const conn = online
    ? rt.tagged(await rt.connect(args, rt.env, logger, sandboxStateFile ? { sandboxStateFile } : {}))
    : undefined;
  try {
    // Loaded on use: the manifest reader and the run pipeline are not needed by other commands.
    const { plan } = await import("../pipeline/plan.js");
    const { planJson, renderPlan, renderProblems } = await import("./commands/plan/index.js");
    const result = await plan({
      manifest: args.manifest,
      ...(conn ? { clients: conn } : {}),
      ...(args["speech-price"] !== undefined ? { speechPrice: args["speech-price"] } : {}),
      signal: rt.signal,
    });
    const problems = renderProblems(result);
    const failed = result.errors.length > 0;
    const n = result.errors.length + (result.omitted?.errors ?? 0);
    return {
      code: failed ? 2 : 0,
      json: planJson(result),
      ...(failed ? {} : { text: renderPlan(result) }),
      ...(problems ? { notes: [problems] } : {}),
      ...(failed ? { message: `${args.manifest}: ${n} error${n === 1 ? "" : "s"}; nothing was done` } : {}),
      problems: [...result.errors, ...result.warnings],
    };
  } finally {
    await conn?.close();
  }
}
