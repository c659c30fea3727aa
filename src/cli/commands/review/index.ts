// `clapper review`: the review page served from the run's state until Ctrl-C (or SIGTERM), with
// picks written to picks.yaml beside the manifest.
import { picksPath } from "../../../review/picks.js";
import { startReviewServer } from "../../../review/server.js";
import { outputs } from "../../../run/run.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import type { Runtime } from "../../command.js";
import { ExitError } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";
import type { Outcome } from "../../output.js";
import { locate, neverRun, ownState, readState, reportFromState } from "../run/state.js";

interface ReviewOptions {
  manifest: string;
  cwd: string;
  state?: string | undefined;
  output?: string | undefined;
  port: number;
  s3?: S3ClientOptions;
}

export async function reviewCommand(
  o: ReviewOptions,
  rt: Runtime,
  ready: (url: string) => void,
): Promise<Outcome> {
  const located = await locate(o.manifest, o.cwd, { state: o.state });
  const { manifest, statePath } = located;
  if (neverRun(await readState(statePath, o.s3))) {
    throw new ExitError(
      ExitCode.Usage,
      `no run of ${manifest.name} yet: nothing to review; run clapper run ${manifest.display} first`,
    );
  }
  const { sink } = outputs(
    { ...(o.output ? { output: o.output } : {}), ...(o.s3 ? { s3: o.s3 } : {}) },
    manifest,
    o.cwd,
  );
  const log = rt.logger((line) => process.stderr.write(`${line}\n`));
  let server: Awaited<ReturnType<typeof startReviewServer>>;
  try {
    server = await startReviewServer({
      port: o.port,
      sink,
      picksFile: picksPath(manifest.path),
      // Read again on each page load: a run going on beside it shows as it goes. No lock is
      // taken: this only reads the state.
      load: async () => {
        const state = await ownState(located, o.s3);
        return { report: await reportFromState(located, state, sink), jobs: located.loaded.jobs };
      },
      onWarning: (message) => log.warn({ event: "review-warning" }, message),
    });
  } catch (error) {
    throw new ExitError(
      ExitCode.Usage,
      `review: cannot listen on 127.0.0.1:${o.port}: ${(error as Error).message}`,
    );
  }
  ready(server.url);
  await new Promise<void>((resolve) => {
    if (rt.signal.aborted) resolve();
    rt.signal.addEventListener("abort", () => resolve(), { once: true });
  });
  await server.close();
  return { code: ExitCode.Ok, printed: true };
}
