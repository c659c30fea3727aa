// The library's `startSandbox()`: the emulator of both services, in this process, on loopback.
import { startSandbox as start } from "../sandbox/index.js";

/** The emulator's settings. */
export interface SandboxOptions {
  /** Address to listen on (default 127.0.0.1). */
  host?: string | undefined;
  /** Port (default 0: a free one, named in `url`). */
  port?: number | undefined;
  /** Accepted keys, `sk-ml-KEY` or `sk-ml-KEY=ORG` (default `sk-ml-sandbox`). */
  keys?: string[] | undefined;
  /** Points each organisation starts with (default 100000). */
  points?: number | undefined;
  /** Multiplier of every simulated duration (default 1; 0.01 makes a 10 s video in 0.1 s). */
  timeScale?: number | undefined;
  /** Requests per second per key before it answers 429 (default: no limit). */
  rateLimit?: number | null | undefined;
  /** Let the emulator fetch materials from loopback and private addresses. */
  allowPrivateUrls?: boolean | undefined;
  /** Keep the emulator's state in this file: loaded at start, saved after every change. */
  stateFile?: string | undefined;
}

/** A running sandbox. */
export interface SandboxHandle {
  /** `http://HOST:PORT`, no trailing slash: the `baseUrl` to give `run()`. */
  url: string;
  /** Stops listening and drops open connections. */
  close(): Promise<void>;
}

/**
 * Starts the emulator of the video and speech services (the one `clapper sandbox` serves): tasks,
 * points, results and faults, over real HTTP. Resolves once it listens.
 */
export async function startSandbox(options: SandboxOptions = {}): Promise<SandboxHandle> {
  const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const sandbox = await start({ port: 0, ...given });
  return { url: sandbox.url, close: () => sandbox.close() };
}
