// The thin CLI's entry: one invocation from its words to its exit code. The pieces each hold one
// concern: the commands (registry.ts, each defined in commands/*/command.ts), the yargs setup and
// usage text (parse.ts, usage.ts), the two-stage shutdown (shutdown.ts), what a command gets at run
// time (wiring.ts), and the one answer every exit prints, text for people or exactly one JSON
// object on stdout with --json (answers.ts). Every error is classified once (errors.ts).
import type { Logger } from "pino";
import { startStep } from "../trace.js";
import { Answers } from "./answers.js";
import { classify } from "./errors.js";
import { defaultLogLevel, type LogFormat } from "./logger.js";
import type { Outcome } from "./output.js";
import { bugsUrl, packageInfo } from "./package-info.js";
import { type Parsed, parse, wantsJson } from "./parse.js";
import { shutdownSignal } from "./shutdown.js";
import { openWiring, type Wiring } from "./wiring.js";

export { bugsUrl } from "./package-info.js";
export { parseCommandLine } from "./parse.js";

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

export async function main(argv: string[], io: Partial<MainIo> = {}): Promise<number> {
  startStep("main() called");
  const env = io.env ?? process.env;
  const out = new Answers(io, env, wantsJson(argv, env));
  const shutdown = shutdownSignal(io.earlySignal, (name) => out.forced(name));
  let wiring: Wiring | undefined;
  try {
    let parsed: Parsed;
    try {
      parsed = await parse(argv, env);
    } catch (error) {
      return out.failure(classify(error, { bugs: bugsUrl(packageInfo()) }));
    }
    if (!parsed.chosen) return out.instead(argv, parsed.output ?? "");
    startStep("command line parsed");
    const { command, args, work } = parsed.chosen;
    out.json = args.json === true;
    const format: LogFormat = args["log-format"] ?? (process.stderr.isTTY ? "pretty" : "json");
    const level = defaultLogLevel({ asked: args["log-level"], command, format });
    wiring = openWiring({ env, io, signal: shutdown.signal, format, level, print: (t) => out.print(t) });
    let outcome: Outcome;
    try {
      // Test-only (documented in docs/configuration.md): an internal fault, to check exit 70 end to end. `run`
      // honours it later, with the run located and the services open.
      if (env.CLAPPER_TEST_FAULT === "internal" && command !== "run") {
        throw new Error("injected internal fault (CLAPPER_TEST_FAULT=internal)");
      }
      outcome = await work(wiring.rt);
    } catch (error) {
      const baseUrl = wiring.baseUrl();
      const c = classify(error, { bugs: bugsUrl(packageInfo()), ...(baseUrl ? { baseUrl } : {}) });
      if (c.stack && (level === "debug" || level === "trace")) out.stderr(c.stack);
      return out.failure(c);
    }
    return out.outcome(outcome);
  } finally {
    wiring?.flush();
    shutdown.dispose();
  }
}
