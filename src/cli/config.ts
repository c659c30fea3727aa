// Where the services are and which key to use: defaults, then environment, then flags, resolved
// in this one place. `--sandbox` replaces all of it with an in-process emulator.

import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import type { RequestGate } from "../api/http.js";
import {
  type Clients,
  createClients,
  DEFAULT_POLICIES,
  type HttpClientOptions,
  type Logger,
} from "../api/index.js";
import { FILE_LIMITS, FileError, readRegularFile } from "../manifest/files.js";
import { accountId } from "../rate/remembered.js";
import type { Sandbox } from "../sandbox/index.js";
import { ExitError, fsExit, tagService } from "./errors.js";
import { ExitCode } from "./exit-code.js";

export interface ConnectionArgs {
  sandbox?: boolean;
  "api-key-file"?: string;
  "base-url"?: string;
  timeout?: number;
}

export interface Connection extends Clients {
  baseUrl: string;
  /** Names the account without its key (a hash of the address and the key): for remembered rates. */
  account: string;
  /** Set when `--sandbox` started an emulator; closed with the connection. */
  sandbox?: Sandbox;
}

const SANDBOX_KEY = "sk-ml-local-sandbox";

/**
 * The key in the file given to --api-key-file, read like every file a manifest names (a regular
 * file, not under /proc, /dev or /sys, at most 4 KiB: a FIFO does not hang, /dev/zero does not fill
 * memory), with a warning when others can read it. No message names the path: a key pasted where
 * the path belongs would be printed.
 */
export async function readApiKeyFile(path: string): Promise<{ key: string; warning?: string }> {
  let read: { data: Buffer; mode: number };
  try {
    read = await readRegularFile(path, { maxBytes: FILE_LIMITS.apiKey, what: "an API key file" });
  } catch (error) {
    const reason = error instanceof FileError ? error.message : "cannot be read";
    const missing = error instanceof FileError && error.problem === "missing";
    throw new ExitError(
      ExitCode.Usage,
      `cannot read --api-key-file: ${reason}${missing ? " (the path is not shown: it may be a key pasted by mistake)" : ""}`,
    );
  }
  const key = read.data.toString("utf8").trim();
  if (key === "") throw new ExitError(ExitCode.Usage, "--api-key-file: the file is empty");
  // Permission bits mean little on Windows, where every file reports 0o666.
  const shared = process.platform !== "win32" && (read.mode & 0o077) !== 0;
  if (!shared) return { key };
  const mode = (read.mode & 0o777).toString(8);
  return {
    key,
    warning: `the file given to --api-key-file can be read by other users (mode ${mode}): chmod 600 it`,
  };
}

/**
 * `CLAPPER_RETRY_BASE_MS` sets the first backoff of every retry policy (the cap follows at 32 times
 * it, never above the default): for tests and for impatient scripts against a local sandbox.
 */
export function retryPoliciesFromEnv(env: NodeJS.ProcessEnv): HttpClientOptions["policies"] | undefined {
  const text = env.CLAPPER_RETRY_BASE_MS?.trim();
  if (text === undefined || text === "") return undefined;
  if (!/^\d+$/.test(text)) {
    throw new ExitError(
      ExitCode.Usage,
      `CLAPPER_RETRY_BASE_MS must be a whole number of milliseconds, got ${JSON.stringify(text)}`,
    );
  }
  const base = Number(text);
  const policies: NonNullable<HttpClientOptions["policies"]> = {};
  for (const name of ["read", "create", "write"] as const) {
    const maxDelayMs = Math.min(DEFAULT_POLICIES[name].maxDelayMs, Math.max(base, base * 32));
    policies[name] = { baseDelayMs: base, maxDelayMs: Math.max(base, maxDelayMs) };
  }
  return policies;
}

export interface ConnectExtras {
  /** Per-service request limits applied to every API attempt. */
  gate?: RequestGate;
  /** With `--sandbox`: keep the emulator's state in this file, so a resumed run finds its tasks. */
  sandboxStateFile?: string;
  sandboxTimeScale?: number;
  /** Download results from private and loopback addresses too (`--allow-private-urls`). */
  allowPrivateUrls?: boolean;
}

/** Resolves base URL and key, then opens both clients. Never echoes the key, even when it is wrong. */
export async function connect(
  args: ConnectionArgs,
  env: NodeJS.ProcessEnv,
  logger: Logger,
  extras: ConnectExtras = {},
): Promise<Connection> {
  if (args.timeout !== undefined && !(Number.isFinite(args.timeout) && args.timeout > 0)) {
    throw new ExitError(
      ExitCode.Usage,
      `--timeout: expected a number of seconds > 0, got ${JSON.stringify(String(args.timeout))}`,
    );
  }
  const timeoutMs = args.timeout !== undefined ? Math.ceil(args.timeout * 1000) : undefined;
  const policies = retryPoliciesFromEnv(env);
  const common = {
    logger,
    ...(timeoutMs ? { timeoutMs } : {}),
    ...(policies ? { policies } : {}),
    ...(extras.gate ? { gate: extras.gate } : {}),
    ...(extras.allowPrivateUrls ? { allowPrivateUrls: true } : {}),
  };
  if (args.sandbox) return connectSandbox(extras, common);
  return connectService(args, env, logger, common);
}

type CommonOptions = Omit<Parameters<typeof createClients>[0], "baseUrl" | "apiKey">;

/** The in-process emulator, and both clients pointed at it. */
async function connectSandbox(extras: ConnectExtras, common: CommonOptions): Promise<Connection> {
  const stateFile = extras.sandboxStateFile;
  if (stateFile) {
    // The emulator writes its state after every change: a folder it cannot write would turn
    // every change into a service error.
    try {
      await mkdir(dirname(stateFile), { recursive: true });
    } catch (error) {
      throw fsExit(error, {
        action: "create the folder of the sandbox state",
        path: dirname(stateFile),
        hint: "pass --sandbox-state FILE in a writable place",
      });
    }
  }
  const { startSandbox } = await import("../sandbox/index.js");
  let sandbox: Sandbox;
  try {
    sandbox = await startSandbox({
      port: 0,
      timeScale: extras.sandboxTimeScale ?? 0.01,
      keys: [SANDBOX_KEY],
      // Local trials stage materials on local stores (a MinIO on localhost): let the emulator fetch them.
      allowPrivateUrls: true,
      // A fixed secret keeps result URLs signed before a restart valid after it (local use only).
      ...(stateFile ? { stateFile, secret: "clapper-local-sandbox" } : {}),
    });
  } catch (error) {
    // A state file that cannot be read (not JSON, a folder, no permission) is the user's to fix.
    if (stateFile) {
      throw new ExitError(
        ExitCode.Usage,
        `the sandbox state ${stateFile} cannot be used: ${(error as Error).message}; pass another --sandbox-state FILE or remove it`,
      );
    }
    throw error;
  }
  const clients = createClients({ baseUrl: sandbox.url, apiKey: SANDBOX_KEY, ...common });
  return {
    ...clients,
    baseUrl: sandbox.url,
    // The emulator's port changes from run to run; its (absent) limit does not.
    account: "local-sandbox",
    sandbox,
    async close() {
      await clients.close();
      await sandbox.close();
    },
  };
}

/** The services at --base-url (or CLAPPER_BASE_URL), with the key checked before any request. */
async function connectService(
  args: ConnectionArgs,
  env: NodeJS.ProcessEnv,
  logger: Logger,
  common: CommonOptions,
): Promise<Connection> {
  const baseUrl = args["base-url"] ?? env.CLAPPER_BASE_URL;
  if (!baseUrl) {
    throw new ExitError(
      ExitCode.Usage,
      "no service address: set CLAPPER_BASE_URL (or pass --base-url URL, or use --sandbox)",
    );
  }
  const source = args["base-url"] ? "--base-url" : "CLAPPER_BASE_URL";
  let parsed: URL;
  try {
    parsed = new URL(baseUrl);
  } catch {
    throw new ExitError(ExitCode.Usage, `${source} is not an absolute URL: ${JSON.stringify(baseUrl)}`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new ExitError(
      ExitCode.Usage,
      `${source} must be an http or https URL, got ${JSON.stringify(parsed.protocol)}`,
    );
  }
  let apiKey = env.CLAPPER_API_KEY?.trim();
  if (args["api-key-file"]) {
    const read = await readApiKeyFile(args["api-key-file"]);
    if (read.warning) logger.warn({}, read.warning);
    apiKey = read.key;
  }
  if (!apiKey) {
    throw new ExitError(
      ExitCode.Usage,
      "no API key: set CLAPPER_API_KEY or pass --api-key-file FILE (or use --sandbox)",
    );
  }
  if (!apiKey.startsWith("sk-ml-")) {
    throw new ExitError(
      ExitCode.Usage,
      "the API key does not look like a model API key (expected the prefix sk-ml-)",
    );
  }
  // Checked here, not left to the HTTP client, whose refusal of the header would be far less clear.
  if (/[\s\p{Cc}]/u.test(apiKey)) {
    throw new ExitError(
      ExitCode.Usage,
      "the API key contains whitespace or control characters (is the key file more than one line?)",
    );
  }
  const clients = createClients({ baseUrl, apiKey, ...common });
  return { ...clients, baseUrl, account: accountId(baseUrl, apiKey) };
}

/**
 * The connection's clients, marking every API error they throw with the service it came from, so
 * the message at the top can say "the video service at URL is unreachable".
 */
export function tagServices<T extends Pick<Clients, "video" | "speech">>(conn: T): T {
  return { ...conn, video: tagged(conn.video, "video"), speech: tagged(conn.speech, "speech") };
}

function tagged<T extends object>(client: T, service: string): T {
  const mark = (error: unknown) => tagService(error, service);
  return new Proxy(client, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof value !== "function") return value;
      return (...args: unknown[]) => {
        let result: unknown;
        try {
          result = (value as (...a: unknown[]) => unknown).apply(target, args);
        } catch (error) {
          throw mark(error);
        }
        if (result instanceof Promise) {
          return result.catch((error: unknown) => {
            throw mark(error);
          });
        }
        if (result && typeof (result as AsyncIterable<unknown>)[Symbol.asyncIterator] === "function") {
          return taggedIterable(result as AsyncIterable<unknown>, mark);
        }
        return result;
      };
    },
  });
}

async function* taggedIterable<T>(
  it: AsyncIterable<T>,
  mark: (error: unknown) => unknown,
): AsyncGenerator<T, unknown> {
  try {
    // What the walk returns (how a list walk ended: whether it saw every item) passes through.
    return yield* it;
  } catch (error) {
    throw mark(error);
  }
}
