// The two-stage shutdown every command runs under.
import { releaseHeldLocksSync } from "../locks/file-lock.js";
import { ExitCode } from "./exit-code.js";

/** Two-stage shutdown: the first SIGINT/SIGTERM aborts gracefully, the second exits at once. */
export function shutdownSignal(
  early: AbortSignal | undefined,
  onForce: (name: NodeJS.Signals) => void,
): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  // A stop that came while the CLI was still loading (bin/clapper.js kept it): this run starts stopped.
  if (early?.aborted) controller.abort(early.reason);
  const onSignal = (name: NodeJS.Signals) => {
    if (controller.signal.aborted) {
      // The journal is flushed record by record, so leaving now loses nothing: exit as interrupted,
      // giving back the locks this process holds so that the next run need not wait out a lease.
      releaseHeldLocksSync();
      process.stderr.write(`clapper: second ${name}, exiting now\n`);
      onForce(name);
      process.exit(ExitCode.Interrupted);
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
