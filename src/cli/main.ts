// The thin CLI: yargs maps flags to options and calls the core. Exit codes and the one-line
// failure message are handled here and nowhere else.
import { readFileSync } from "node:fs";
import yargs from "yargs";
import { sandboxCommand, sandboxOptions } from "./commands/sandbox.js";
import { ExitError } from "./errors.js";

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
      process.stderr.write(`clapper: second ${name}, exiting now\n`);
      process.exit(130);
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

export async function main(argv: string[]): Promise<number> {
  const shutdown = shutdownSignal();
  let code = 0;
  try {
    await yargs(argv)
      .scriptName("clapper")
      .usage(
        "$0 <command> [options]\n\nStoryboard manifests to finished video and speech, budgeted and resumable.",
      )
      .command(
        "sandbox",
        "run the local emulator of the video and speech services",
        (y) => sandboxOptions(y),
        async (args) => {
          code = await sandboxCommand(args, shutdown.signal);
        },
      )
      .demandCommand(1, "name a command; see clapper --help")
      .strict()
      .version(version())
      .help()
      .alias("h", "help")
      .wrap(Math.min(110, process.stdout.columns || 110))
      .fail((message, error) => {
        if (error) throw error;
        throw new ExitError(2, message);
      })
      .parseAsync();
  } catch (error) {
    if (error instanceof ExitError) {
      process.stderr.write(`clapper: ${error.message}\n`);
      return error.code;
    }
    throw error;
  } finally {
    shutdown.dispose();
  }
  return code;
}
