// The thin CLI: yargs maps flags to options and calls each command's core function. Connections,
// logging, output and exit codes are handled here and nowhere else.
import { readFileSync } from "node:fs";
import type { Logger } from "pino";
import yargs, { type Argv } from "yargs";
import { AbortedError, ClapperApiError } from "../api/errors.js";
import { redact } from "../api/redact.js";
import { balance, renderBalance } from "./commands/balance/index.js";
import { sandboxOptions } from "./commands/sandbox/options.js";
import {
  findSkill,
  listSkills,
  pushSkills,
  readSkillFile,
  renderPush,
  renderSkill,
  renderSkills,
} from "./commands/skills/index.js";
import {
  cancelTask,
  getTask,
  listTasks,
  renderTask,
  renderTasks,
  type TaskKind,
} from "./commands/tasks/index.js";
import { createVoice, deleteVoice, listVoices, renderVoices } from "./commands/voices/index.js";
import { type Connection, type ConnectionArgs, connect } from "./config.js";
import { ExitError } from "./errors.js";
import { createLogger, type LogLevel } from "./logger.js";
import { json } from "./output.js";

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as {
    version: string;
  };
  return pkg.version;
}

/** Two-stage shutdown: the first SIGINT/SIGTERM aborts gracefully, the second exits at once. */
function shutdownSignal(): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const onSignal = (name: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      // The journal is flushed record by record, so leaving now loses nothing: exit as interrupted.
      process.stderr.write(`clapper: second ${name}, exiting now\n`);
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
  "log-level": LogLevel;
}

export interface MainIo {
  env: NodeJS.ProcessEnv;
  /** Results: one call per command, without the trailing newline. */
  stdout: (text: string) => void;
  /** The one-line reason of a failure, without the trailing newline. */
  stderr: (text: string) => void;
  logger?: Logger;
}

/** The optional string flags, without the undefined ones (exactOptionalPropertyTypes-friendly). */
function optional(args: { state?: string | undefined; output?: string | undefined }) {
  return { ...(args.state ? { state: args.state } : {}), ...(args.output ? { output: args.output } : {}) };
}

export async function main(argv: string[], io: Partial<MainIo> = {}): Promise<number> {
  const env = io.env ?? process.env;
  const rawStdout = io.stdout ?? ((text: string) => void process.stdout.write(`${text}\n`));
  const rawStderr = io.stderr ?? ((text: string) => void process.stderr.write(`${text}\n`));
  // Everything printed may quote a service or a file: redacted by value on the way out.
  const stdout = (text: string) => rawStdout(redact(text));
  const stderr = (text: string) => rawStderr(redact(text));
  const shutdown = shutdownSignal();
  const signal = shutdown.signal;
  let code = 0;

  /** Opens the services for one command, prints its result, and closes in reverse order. */
  const withServices = async <T>(
    args: GlobalArgs,
    work: (conn: Connection) => Promise<T>,
    render: (data: T) => string,
  ): Promise<void> => {
    const logger = io.logger ?? createLogger(args["log-level"]);
    const conn = await connect(args, env, logger);
    try {
      const data = await work(conn);
      stdout(args.json ? json(data) : render(data));
    } finally {
      await conn.close();
    }
  };

  const cli = yargs(argv)
    .scriptName("clapper")
    .usage(
      "$0 <command> [options]\n\nStoryboard manifests to finished video and speech, budgeted and resumable.",
    )
    .env(false)
    .option("json", { type: "boolean", default: false, describe: "print results as JSON (for scripts)" })
    .option("sandbox", {
      type: "boolean",
      default: false,
      describe: "use an in-process sandbox instead of the services",
    })
    .option("base-url", { type: "string", describe: "service address (default: $CLAPPER_BASE_URL)" })
    .option("api-key-file", {
      type: "string",
      describe: "file holding the API key (default: $CLAPPER_API_KEY)",
    })
    .option("timeout", { type: "number", describe: "seconds per HTTP attempt (default 30)" })
    .option("log-level", {
      choices: ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const,
      default: (env.CLAPPER_LOG_LEVEL as LogLevel | undefined) ?? "warn",
      describe: "log level of the JSON log on stderr ($CLAPPER_LOG_LEVEL)",
    })
    .group(["json", "sandbox", "base-url", "api-key-file", "timeout", "log-level"], "Global options:")
    .command(
      "sandbox",
      "run the local emulator of the video and speech services",
      (y) => sandboxOptions(y),
      async (args) => {
        const { sandboxCommand } = await import("./commands/sandbox/index.js");
        code = await sandboxCommand(args, signal);
      },
    )
    .command(
      "plan <manifest>",
      "validate a manifest, expand it into jobs and estimate their points; creates nothing",
      (y) =>
        y
          .positional("manifest", { type: "string", demandOption: true, describe: "YAML or CSV manifest" })
          .option("speech-price", {
            type: "number",
            describe: "points per 10 counted characters, when no service is configured",
          }),
      async (args) => {
        const g = args as unknown as GlobalArgs;
        const logger = io.logger ?? createLogger(g["log-level"]);
        // The services are optional here: with no key, the plan is made offline.
        const online = g.sandbox || Boolean(g["api-key-file"] || env.CLAPPER_API_KEY);
        const conn = online ? await connect(g, env, logger) : undefined;
        try {
          // Loaded on use: the manifest reader and the run pipeline are not needed by other commands.
          const { plan } = await import("../pipeline/plan.js");
          const { planJson, renderPlan, renderProblems } = await import("./commands/plan/index.js");
          const result = await plan({
            manifest: args.manifest,
            ...(conn ? { clients: conn } : {}),
            ...(args["speech-price"] !== undefined ? { speechPrice: args["speech-price"] } : {}),
            signal,
          });
          if (g.json) stdout(json(planJson(result)));
          else {
            if (result.errors.length === 0) stdout(renderPlan(result));
            const problems = renderProblems(result);
            if (problems) stderr(problems);
          }
          if (result.errors.length > 0) code = 2;
        } finally {
          await conn?.close();
        }
      },
    )
    .command(
      "run <manifest>",
      "render a manifest: budget checked, rate-limited, resumable; writes report.json, report.md, junit.xml",
      (y) =>
        y
          .positional("manifest", { type: "string", demandOption: true, describe: "YAML or CSV manifest" })
          .option("output", {
            type: "string",
            describe: "output folder or s3://bucket/prefix (default: the manifest's output)",
          })
          .option("staging", {
            type: "string",
            describe: "s3://bucket/prefix for local materials (default: beside an S3 output; else Data URLs)",
          })
          .option("callback-url", {
            type: "string",
            describe:
              "public URL the video service posts status callbacks to (polling stays as a safety net)",
          })
          .option("callback-listen", {
            type: "string",
            describe:
              "[HOST:]PORT the callback listener binds (default: the URL's host if it is this machine's address, else 127.0.0.1; the URL's port)",
          })
          .option("s3-endpoint", {
            type: "string",
            describe: "S3-compatible endpoint (default: the AWS SDK's configuration)",
          })
          .option("s3-path-style", {
            type: "boolean",
            describe: "path-style S3 addressing (default: on with --s3-endpoint or AWS_ENDPOINT_URL_S3)",
          })
          .option("state", {
            type: "string",
            describe: "state file (default: .clapper/NAME/state.jsonl beside the manifest)",
          })
          .option("max-points", { type: "number", describe: "spend at most this many points in this run" })
          .option("only", {
            type: "string",
            describe: "comma-separated job or row ids (shot/s01,line/n02,s03)",
          })
          .option("retry-failed", {
            type: "boolean",
            default: false,
            describe: "try failed and cancelled jobs again",
          })
          .option("fresh", {
            type: "boolean",
            default: false,
            describe: "forget earlier state and results; generate everything anew",
          })
          .option("max-attempts", {
            type: "number",
            default: 2,
            describe: "attempts per job (a failed task is retried with a new key)",
          })
          .option("rps", {
            type: "number",
            default: 10,
            describe: "requests per second per service (adapts down on 429)",
          })
          .option("in-flight", { type: "number", default: 32, describe: "tasks in flight per service" })
          .option("poll-interval", {
            type: "number",
            default: 1,
            describe: "shortest wait in seconds between two looks at a task",
          })
          .option("log-format", {
            choices: ["json", "pretty"] as const,
            describe: "json: one line per event; pretty: live progress (default on a terminal)",
          })
          .option("break-lock", {
            type: "boolean",
            default: false,
            describe: "take the run's lock even if another run seems to hold it (after a crash)",
          })
          .option("max-result-mb", {
            type: "number",
            describe:
              "largest result to download, in MiB (default: derived from each job's duration and resolution)",
          })
          .option("allow-private-urls", {
            type: "boolean",
            default: false,
            describe: "download results from private and loopback addresses too (default: public only)",
          })
          .option("give-up-after", {
            type: "number",
            default: 600,
            describe: "seconds a task may stay unreadable before the run leaves it for the next run",
          })
          .option("sandbox-time-scale", { type: "number", default: 0.01, hidden: true }),
      async (args) => {
        const g = args as unknown as GlobalArgs;
        const { runCommand } = await import("./commands/run/index.js");
        code = await runCommand({
          args: { ...args, manifest: args.manifest },
          global: g,
          env,
          stdout,
          stderr,
          signal,
          ...(io.logger ? { logger: io.logger } : {}),
        });
      },
    )
    .command(
      "status <manifest>",
      "where the run stands, from its state",
      (y) =>
        y
          .positional("manifest", { type: "string", demandOption: true })
          .option("state", { type: "string", describe: "state file (default: beside the manifest)" })
          .option("output", { type: "string" }),
      async (args) => {
        const { status, renderStatus } = await import("./commands/run/index.js");
        const report = await status({ manifest: args.manifest, cwd: process.cwd(), ...optional(args) });
        stdout((args as unknown as GlobalArgs).json ? json(report) : renderStatus(report));
      },
    )
    .command(
      "report <manifest>",
      "write report.json, report.md and junit.xml again from the run's state",
      (y) =>
        y
          .positional("manifest", { type: "string", demandOption: true })
          .option("state", { type: "string" })
          .option("output", { type: "string", describe: "the run's output folder or s3://bucket/prefix" })
          .option("s3-endpoint", { type: "string", describe: "S3-compatible endpoint" })
          .option("s3-path-style", { type: "boolean", describe: "path-style S3 addressing" }),
      async (args) => {
        const { rewriteReport } = await import("./commands/run/index.js");
        const { report, uris } = await rewriteReport({
          manifest: args.manifest,
          cwd: process.cwd(),
          env,
          ...optional(args),
          s3: {
            ...(args["s3-endpoint"] ? { endpoint: args["s3-endpoint"] } : {}),
            ...(args["s3-path-style"] !== undefined ? { forcePathStyle: args["s3-path-style"] } : {}),
          },
        });
        stdout((args as unknown as GlobalArgs).json ? json(report) : uris.join("\n"));
      },
    )
    .command(
      "cancel <manifest>",
      "cancel the run's tasks still in flight (the next run records what became of them)",
      (y) =>
        y.positional("manifest", { type: "string", demandOption: true }).option("state", { type: "string" }),
      (args) =>
        withServices(
          args as unknown as GlobalArgs,
          async (c) => {
            const { cancelRun } = await import("./commands/run/index.js");
            return cancelRun({
              manifest: args.manifest,
              cwd: process.cwd(),
              clients: c,
              signal,
              ...optional(args),
            });
          },
          (rows) =>
            rows.length === 0
              ? "no tasks in flight"
              : rows.map((r) => `${r.job} ${r.task_id}: ${r.status}`).join("\n"),
        ),
    )
    .command("balance", "points summary, packages and speech pricing", {}, (args) =>
      withServices(args as unknown as GlobalArgs, (c) => balance({ clients: c, signal }), renderBalance),
    )
    .command("skills", "list and manage prompt-optimization skills", (y: Argv) =>
      y
        .command(
          "list",
          "official and custom skills",
          (yy) => yy.option("keyword", { type: "string", describe: "filter by name or description" }),
          (args) =>
            withServices(
              args as unknown as GlobalArgs,
              (c) => listSkills({ clients: c, signal, ...(args.keyword ? { keyword: args.keyword } : {}) }),
              renderSkills,
            ),
        )
        .command(
          "show <skill>",
          "one skill, by id or name, with its content",
          (yy) => yy.positional("skill", { type: "string", demandOption: true }),
          (args) =>
            withServices(
              args as unknown as GlobalArgs,
              (c) => findSkill({ clients: c, signal }, args.skill),
              renderSkill,
            ),
        )
        .command(
          "create <file>",
          "create a custom skill from a Markdown file (name from the file name or its front matter)",
          (yy) =>
            yy
              .positional("file", { type: "string", demandOption: true })
              .option("name", { type: "string", describe: "skill name (overrides the file)" })
              .option("description", { type: "string" }),
          (args) =>
            withServices(
              args as unknown as GlobalArgs,
              async (c) => {
                const file = await readSkillFile(args.file);
                const description = args.description ?? file.description;
                return c.video.createSkill(
                  {
                    name: args.name ?? file.name,
                    content: file.content,
                    ...(description ? { description } : {}),
                  },
                  { signal },
                );
              },
              renderSkill,
            ),
        )
        .command(
          "update <skill> <file>",
          "replace a custom skill's content (and name/description) from a Markdown file",
          (yy) =>
            yy
              .positional("skill", { type: "string", demandOption: true, describe: "id or name" })
              .positional("file", { type: "string", demandOption: true })
              .option("name", { type: "string" })
              .option("description", { type: "string" }),
          (args) =>
            withServices(
              args as unknown as GlobalArgs,
              async (c) => {
                const existing = await findSkill({ clients: c, signal }, args.skill);
                const file = await readSkillFile(args.file);
                const description = args.description ?? file.description ?? existing.description;
                return c.video.updateSkill(
                  existing.id,
                  {
                    name: args.name ?? existing.name,
                    content: file.content,
                    ...(description ? { description } : {}),
                  },
                  { signal },
                );
              },
              renderSkill,
            ),
        )
        .command(
          "delete <skill>",
          "delete a custom skill (by id or name)",
          (yy) => yy.positional("skill", { type: "string", demandOption: true }),
          (args) =>
            withServices(
              args as unknown as GlobalArgs,
              async (c) => {
                const existing = await findSkill({ clients: c, signal }, args.skill);
                return { skill_id: await c.video.deleteSkill(existing.id, { signal }), deleted: true };
              },
              (r) => `deleted ${r.skill_id}`,
            ),
        )
        .command(
          "push <dir>",
          "sync DIR/*.md as custom skills by name: create missing, update changed, leave the rest",
          (yy) =>
            yy
              .positional("dir", { type: "string", demandOption: true })
              .option("dry-run", { type: "boolean", default: false, describe: "show what would change" }),
          (args) =>
            withServices(
              args as unknown as GlobalArgs,
              (c) => pushSkills({ clients: c, signal, dir: args.dir, dryRun: args["dry-run"] }),
              renderPush,
            ),
        )
        .demandCommand(1, "name a skills command: list, show, create, update, delete, push"),
    )
    .command("voices", "list voices; create and delete custom voices", (y: Argv) =>
      y
        .command(
          "list",
          "preset voices (or the organization's custom voices with --custom)",
          (yy) => yy.option("custom", { type: "boolean", default: false }),
          (args) =>
            withServices(
              args as unknown as GlobalArgs,
              (c) => listVoices({ clients: c, signal, custom: args.custom }),
              renderVoices,
            ),
        )
        .command(
          "create <name> <file>",
          "upload a reference audio file (wav, mp3, flac, ogg, m4a; 0.5-15 s; 15 MiB) as a custom voice",
          (yy) =>
            yy
              .positional("name", { type: "string", demandOption: true })
              .positional("file", { type: "string", demandOption: true }),
          (args) =>
            withServices(
              args as unknown as GlobalArgs,
              (c) => createVoice({ clients: c, signal, name: args.name, file: args.file }),
              (v) => `created voice ${v.voice_id} (${v.name})`,
            ),
        )
        .command(
          "delete <id>",
          "delete a custom voice",
          (yy) => yy.positional("id", { type: "string", demandOption: true }),
          (args) =>
            withServices(
              args as unknown as GlobalArgs,
              (c) => deleteVoice({ clients: c, signal, id: args.id }),
              (r) => `deleted ${r.voice_id}`,
            ),
        )
        .demandCommand(1, "name a voices command: list, create, delete"),
    )
    .command("tasks", "look at and cancel tasks on both services", (y: Argv) =>
      y
        .option("kind", { choices: ["video", "speech"] as const, describe: "which service (default: both)" })
        .command(
          "list",
          "recent tasks, newest first",
          (yy) =>
            yy
              .option("status", { type: "string", describe: "only tasks in this status" })
              .option("limit", { type: "number", default: 20, describe: "at most this many" }),
          (args) =>
            withServices(
              args as unknown as GlobalArgs,
              (c) =>
                listTasks({
                  clients: c,
                  signal,
                  limit: args.limit,
                  ...(args.kind ? { kind: args.kind as TaskKind } : {}),
                  ...(args.status ? { status: args.status } : {}),
                }),
              renderTasks,
            ),
        )
        .command(
          "get <id>",
          "one task",
          (yy) => yy.positional("id", { type: "string", demandOption: true }),
          (args) =>
            withServices(
              args as unknown as GlobalArgs,
              (c) =>
                getTask({
                  clients: c,
                  signal,
                  id: args.id,
                  ...(args.kind ? { kind: args.kind as TaskKind } : {}),
                }),
              renderTask,
            ),
        )
        .command(
          "cancel <id>",
          "cancel a task that has not ended",
          (yy) => yy.positional("id", { type: "string", demandOption: true }),
          (args) =>
            withServices(
              args as unknown as GlobalArgs,
              (c) =>
                cancelTask({
                  clients: c,
                  signal,
                  id: args.id,
                  ...(args.kind ? { kind: args.kind as TaskKind } : {}),
                }),
              (r) => `${r.kind} task ${r.id}: ${r.status}`,
            ),
        )
        .demandCommand(1, "name a tasks command: list, get, cancel"),
    )
    .demandCommand(1, "name a command; see clapper --help")
    .strict()
    .version(version())
    .help()
    .alias("h", "help")
    .wrap(Math.min(110, process.stdout.columns || 110))
    // main() returns the exit code: yargs must not exit the process (after --help, --version).
    .exitProcess(false)
    .fail((message, error) => {
      if (error) throw error;
      throw new ExitError(2, message);
    });

  try {
    // With a callback, yargs hands over what it would print (help, version) instead of printing it.
    await cli.parseAsync(argv, {}, (_error, _args, output) => {
      if (output) stdout(output);
    });
  } catch (error) {
    if (error instanceof ExitError) {
      stderr(`clapper: ${error.message}`);
      return error.code;
    }
    if (error instanceof ClapperApiError) {
      stderr(`clapper: ${error.message}`);
      return 1;
    }
    if (error instanceof AbortedError) {
      stderr(`clapper: ${error.message}`);
      return 130;
    }
    throw error;
  } finally {
    shutdown.dispose();
  }
  return code;
}
