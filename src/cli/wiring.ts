// Dependency wiring: what the chosen command gets at run time (its loggers, its one way to the
// services), made once per invocation.
import type { Logger } from "pino";
import type { GlobalArgs, Runtime } from "./command.js";
import type { ConnectExtras } from "./config.js";
import { createCliLogger, type LogFormat, type LogLevel } from "./logger.js";

export interface Wiring {
  rt: Runtime;
  /** The services' address, for the message of a failure: known once a command connects. */
  baseUrl(): string | undefined;
  /** Writes out what the loggers still hold, before the process exits. */
  flush(): void;
}

/** The runtime of the chosen command: its loggers, and its one way to the services. */
export function openWiring(o: {
  env: NodeJS.ProcessEnv;
  io: { logger?: Logger | undefined };
  signal: AbortSignal;
  format: LogFormat;
  level: LogLevel;
  print: (text: string) => void;
}): Wiring {
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
