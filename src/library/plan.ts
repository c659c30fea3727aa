// The library's `plan()`: what `clapper plan --json` prints, made by the same code.
import { makePlan, planJson, planSandboxState } from "../cli/commands/plan/index.js";
import { tagServices } from "../cli/config.js";
import type { Shard } from "../run/shard.js";
import type { S3ClientOptions } from "../sinks/s3.js";
import type { LocatedRun } from "../state/locate.js";
import { type CommonOptions, type ConnectionOptions, common, connection, online } from "./connection.js";
import { asClapperError } from "./errors.js";

/** `plan()`'s options: the manifest, and the `plan` command's flags in camelCase. */
export interface PlanOptions extends ConnectionOptions, CommonOptions {
  /** The manifest (YAML or CSV), relative to `cwd`. */
  manifest: string;
  /** The run's state to read for what the next run does (default `.clapper/NAME/state.jsonl` beside the manifest). */
  state?: string | undefined;
  /** Points per 10 counted characters of speech, when no service is asked. */
  speechPrice?: number | undefined;
  /** Plan one shard of the manifest; `shards` alone says each job's shard. */
  shard?: Shard | undefined;
  shards?: number | undefined;
  /** The S3 client's settings, for a state in S3. */
  s3?: S3ClientOptions | undefined;
  /** With `sandbox: true`: the emulator's state file (default: the run's, when it has one). */
  sandboxState?: string | undefined;
}

/** What `clapper plan --json` prints: jobs, points, counts, balance, the next run, and the manifest's problems. */
export type PlanReport = ReturnType<typeof planJson>;

/**
 * Validates a manifest, expands it into jobs and prices them, and says what the next run generates,
 * reuses and spends, as `clapper plan --json` does; creates nothing. Asks the services (prices,
 * balance, voices, skills) when `sandbox` or an address and a key are given, else plans offline. A
 * manifest with errors resolves too: its `problems` name each by file, line and field, and
 * `error_count` is above 0.
 */
export async function plan(options: PlanOptions): Promise<PlanReport> {
  const { cwd, env, logger, signal } = common(options);
  try {
    const services = online(options, env) ? connection(options, env, "plan") : undefined;
    const { result, shards, next } = await makePlan({
      manifest: options.manifest,
      cwd,
      state: options.state,
      shard: options.shard,
      shards: options.shards,
      speechPrice: options.speechPrice,
      s3: options.s3,
      signal,
      ...(services
        ? {
            async connect(located: LocatedRun | undefined) {
              const sandboxStateFile = options.sandbox
                ? planSandboxState(options.sandboxState, located)
                : undefined;
              return tagServices(
                await services.connect(
                  services.args,
                  env,
                  logger,
                  sandboxStateFile ? { sandboxStateFile } : {},
                ),
              );
            },
          }
        : {}),
    });
    return planJson(result, shards, next);
  } catch (error) {
    throw asClapperError(error);
  }
}
