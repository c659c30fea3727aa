// `clapper sandbox`: the emulator of both services as a long-running process.
import { startSandbox } from "../../../sandbox/index.js";
import { ExitError } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";
import type { Outcome } from "../../output.js";
import type { SandboxArgs } from "./command.js";

/**
 * Runs until SIGINT/SIGTERM: the first signal closes gracefully, a second exits at once. `ready`
 * prints the first line scripts wait for (sandbox contract), or its JSON twin with --json.
 */
export async function sandboxCommand(
  args: SandboxArgs,
  signal: AbortSignal,
  ready: (url: string) => void,
): Promise<Outcome> {
  let sandbox: Awaited<ReturnType<typeof startSandbox>>;
  try {
    sandbox = await startSandbox({
      host: args.host,
      port: args.port,
      keys: args.key && args.key.length > 0 ? args.key : ["sk-ml-sandbox=default"],
      points: args.points,
      timeScale: args["time-scale"],
      rateLimit: args["rate-limit"] ?? null,
      allowPrivateUrls: args["allow-private-urls"],
      plainVideos: args["plain-videos"] ?? false,
      ...(args["public-url"] ? { publicUrl: args["public-url"] } : {}),
    });
  } catch (error) {
    throw new ExitError(ExitCode.Usage, `sandbox: ${(error as Error).message}`);
  }
  ready(sandbox.url);
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener("abort", () => resolve(), { once: true });
  });
  await sandbox.close();
  return { code: ExitCode.Ok, printed: true };
}
