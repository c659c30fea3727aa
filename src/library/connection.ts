// How the library reaches the services: the in-process sandbox, or an address and a key, through
// the same connect as the CLI's (the same checks of the address and the key, the same messages).
import pino, { type Logger } from "pino";
import { type ConnectExtras, type Connection, type ConnectionArgs, connect } from "../cli/config.js";
import { ExitCode } from "../cli/exit-code.js";
import { ClapperError } from "./errors.js";

/** Where the services are: `sandbox: true`, or `baseUrl` and `apiKey` (else CLAPPER_BASE_URL and CLAPPER_API_KEY in `env`). */
export interface ConnectionOptions {
  /** The services' address, `https://...` (default: `env.CLAPPER_BASE_URL`). */
  baseUrl?: string | undefined;
  /** The API key, `sk-ml-...` (default: `env.CLAPPER_API_KEY`). It is never logged or written. */
  apiKey?: string | undefined;
  /** Use an emulator of both services started in this process instead: no key, nothing spent. */
  sandbox?: boolean | undefined;
  /** Seconds an API request may take (default 30). */
  timeout?: number | undefined;
}

/** What every entry point shares: where it works, its environment, its logs and its stop. */
export interface CommonOptions {
  /** The folder the manifest, `output` and `state` are relative to (default: `process.cwd()`). */
  cwd?: string | undefined;
  /** The environment clapper reads its `CLAPPER_*` settings from (default: `process.env`). */
  env?: NodeJS.ProcessEnv | undefined;
  /** A pino logger for clapper's log lines (default: none; nothing is written to stdout or stderr). */
  logger?: Logger | undefined;
  /** Aborting stops the work: a run stops submitting, saves its state and resolves as interrupted. */
  signal?: AbortSignal | undefined;
}

/** The defaults of the common options, filled in. */
export function common(o: CommonOptions): {
  cwd: string;
  env: NodeJS.ProcessEnv;
  logger: Logger;
  signal: AbortSignal;
} {
  return {
    cwd: o.cwd ?? process.cwd(),
    env: o.env ?? process.env,
    logger: o.logger ?? pino({ level: "silent" }),
    signal: o.signal ?? new AbortController().signal,
  };
}

/** The connection as the CLI's flags would give it, and a connect that hands it the key. */
export function connection(
  o: ConnectionOptions,
  env: NodeJS.ProcessEnv,
  what: string,
): {
  args: ConnectionArgs;
  connect(
    args: ConnectionArgs,
    env: NodeJS.ProcessEnv,
    logger: Logger,
    extras?: ConnectExtras,
  ): Promise<Connection>;
} {
  if (!o.sandbox && !o.baseUrl && !env.CLAPPER_BASE_URL) {
    throw new ClapperError(
      `${what}: no service address: give baseUrl and apiKey (or set CLAPPER_BASE_URL and CLAPPER_API_KEY), or sandbox: true`,
      { code: ExitCode.Usage },
    );
  }
  const args: ConnectionArgs = {
    ...(o.sandbox ? { sandbox: true } : {}),
    ...(o.baseUrl ? { "base-url": o.baseUrl } : {}),
    ...(o.timeout !== undefined ? { timeout: o.timeout } : {}),
  };
  return {
    args,
    // The key travels as the CLI's variable would, only to the connect: never in the run's env.
    connect: (a, e, logger, extras) =>
      connect(a, o.apiKey ? { ...e, CLAPPER_API_KEY: o.apiKey } : e, logger, extras),
  };
}

/** Whether `plan` can ask the services (prices, balance, voices, skills), as the CLI decides it. */
export function online(o: ConnectionOptions, env: NodeJS.ProcessEnv): boolean {
  return Boolean(o.sandbox || ((o.baseUrl || env.CLAPPER_BASE_URL) && (o.apiKey || env.CLAPPER_API_KEY)));
}
