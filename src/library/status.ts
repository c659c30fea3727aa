// The library's `status()`: what `clapper status --json` prints, read from the run's state (offline).
import { type StatusReport, status as statusOf } from "../cli/commands/status/index.js";
import type { Shard } from "../run/shard.js";
import type { S3ClientOptions } from "../sinks/s3.js";
import { asClapperError } from "./errors.js";

export type { StatusReport };

/** `status()`'s options: the manifest, and the `status` command's flags in camelCase. */
export interface StatusOptions {
  /** The manifest (YAML or CSV), relative to `cwd`. */
  manifest: string;
  /** The folder the manifest and `state` are relative to (default: `process.cwd()`). */
  cwd?: string | undefined;
  /** The run's state file or `s3://BUCKET/PREFIX` (default `.clapper/NAME/state.jsonl` beside the manifest). */
  state?: string | undefined;
  /** One shard's state. */
  shard?: Shard | undefined;
  /** The S3 client's settings, for a state in S3. */
  s3?: S3ClientOptions | undefined;
}

/**
 * Where the run of a manifest stands, from its state, as `clapper status --json` prints it: the
 * report's shape, `run.status` `not-run` before the first run and `running` while a live process
 * holds the run. Rejects with a {@link ClapperError} for a manifest with errors (its `problems`).
 */
export async function status(options: StatusOptions): Promise<StatusReport> {
  try {
    return await statusOf({
      manifest: options.manifest,
      cwd: options.cwd ?? process.cwd(),
      state: options.state,
      shard: options.shard,
      ...(options.s3 ? { s3: options.s3 } : {}),
    });
  } catch (error) {
    throw asClapperError(error);
  }
}
