// `clapper sandbox`: the emulator of both services as a long-running process.
import { startSandbox } from "../../../sandbox/index.js";
import { ExitError } from "../../errors.js";
import type { SandboxArgs } from "./options.js";

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
