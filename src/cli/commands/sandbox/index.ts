// `clapper sandbox`: the emulator of both services as a long-running process.
import type { Argv } from "yargs";
import { startSandbox } from "../../../sandbox/index.js";
import { ExitError } from "../../errors.js";

export interface SandboxArgs {
  host: string;
  port: number;
  key: string[];
  points: number;
  "time-scale": number;
  "rate-limit"?: number;
  "allow-private-urls": boolean;
}

export function sandboxOptions(yargs: Argv): Argv<SandboxArgs> {
  return yargs
    .option("host", { type: "string", default: "127.0.0.1", describe: "address to listen on" })
    .option("port", { type: "number", default: 8787, describe: "port to listen on (0 picks a free one)" })
    .option("key", {
      type: "string",
      array: true,
      default: [] as string[],
      describe:
        "accepted API key and its organization, KEY[=ORG] (repeatable; default sk-ml-sandbox=default)",
    })
    .option("points", {
      type: "number",
      default: 100_000,
      describe: "points in each organization's first package",
    })
    .option("time-scale", { type: "number", default: 1, describe: "multiplier for every simulated duration" })
    .option("rate-limit", { type: "number", describe: "requests per second per API key before HTTP 429" })
    .option("allow-private-urls", {
      type: "boolean",
      default: false,
      describe: "accept loopback and private addresses for materials and callbacks (local tests only)",
    }) as unknown as Argv<SandboxArgs>;
}

/** Runs until SIGINT/SIGTERM: the first signal closes gracefully, a second exits at once. */
export async function sandboxCommand(args: SandboxArgs, signal: AbortSignal): Promise<number> {
  let sandbox: Awaited<ReturnType<typeof startSandbox>>;
  try {
    sandbox = await startSandbox({
      host: args.host,
      port: args.port,
      keys: args.key.length > 0 ? args.key : ["sk-ml-sandbox=default"],
      points: args.points,
      timeScale: args["time-scale"],
      rateLimit: args["rate-limit"] ?? null,
      allowPrivateUrls: args["allow-private-urls"],
    });
  } catch (error) {
    throw new ExitError(2, `sandbox: ${(error as Error).message}`);
  }
  // Scripts wait for exactly this first line (sandbox contract).
  process.stdout.write(`clapper sandbox listening on ${sandbox.url}\n`);
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
  await sandbox.close();
  return 0;
}
