// The positional and the flags that the commands of a manifest's run share (plan, run, status,
// report, cancel), worded once so that their help reads the same.
import type { Argv } from "yargs";
import { parseCoordinatorUrl } from "../../coord/url.js";
import {
  parseShard,
  parseShards,
  type ResolvedShard,
  resolveShard,
  type Shard,
  ShardError,
} from "../../run/shard.js";
import { checkStateFlag } from "../../state/location.js";
import { ExitError } from "../errors.js";
import { ExitCode } from "../exit-code.js";
import type { AddOption } from "../options.js";
import { ValueError } from "../values.js";

/** A parser whose refusals (any error: they name the flag and quote the value) are usage errors. */
export function refusing<V>(parse: (raw: string, name: string) => V): (raw: string, name: string) => V {
  return (raw, name) => {
    try {
      return parse(raw, name);
    } catch (error) {
      throw new ValueError((error as Error).message);
    }
  };
}

export function manifestArg<T>(y: Argv<T>) {
  return y.positional("manifest", { type: "string", demandOption: true, describe: "YAML or CSV manifest" });
}

export function stateFlag<T>(y: Argv<T>, option: AddOption, what = "read"): Argv<T> {
  return option(y, "state", {
    type: "value",
    // An s3:// state is checked as typed: a typo is a usage error before anything is read.
    parse: (raw, name) => {
      try {
        return checkStateFlag(raw);
      } catch (error) {
        throw new ValueError(`${name}: ${(error as Error).message}`);
      }
    },
    describe: `the run's state file to ${what}, or s3://BUCKET/PREFIX (default: .clapper/NAME/state.jsonl beside the manifest)`,
  });
}

/** The S3 client's flags, for the commands that read an output or a state in S3 (report, status, cancel). */
export function s3Flags<T>(y: Argv<T>, option: AddOption): Argv<T> {
  const b = option(y, "s3-endpoint", { type: "string", describe: "S3-compatible endpoint" });
  return option(b, "s3-path-style", { type: "boolean", describe: "path-style S3 addressing" });
}

export function s3Options(args: {
  "s3-endpoint"?: string | undefined;
  "s3-path-style"?: boolean | undefined;
}) {
  return {
    ...(args["s3-endpoint"] ? { endpoint: args["s3-endpoint"] } : {}),
    ...(args["s3-path-style"] !== undefined ? { forcePathStyle: args["s3-path-style"] } : {}),
  };
}

export function outputFlag<T>(y: Argv<T>, option: AddOption, what: string): Argv<T> {
  return option(y, "output", {
    type: "string",
    describe: `${what} output folder or s3://bucket/prefix (default: the manifest's output; a folder is relative to the current folder)`,
  });
}

/**
 * `--coordinator redis://HOST:PORT[/DB]` (or CLAPPER_REDIS_URL): the Redis every clapper process
 * on the account shares. Checked as typed; a password never appears in a message.
 */
export function coordinatorFlag<T>(y: Argv<T>, option: AddOption): Argv<T> {
  return option(y, "coordinator", {
    type: "value",
    env: "CLAPPER_REDIS_URL",
    parse: refusing(parseCoordinatorUrl),
    describe:
      "redis://HOST:PORT[/DB] (or rediss://) shared by every clapper process on the account: one request rate, one in-flight cap, shared budgets and the run's lock (env CLAPPER_REDIS_URL)",
  });
}

/**
 * `--shard I/N` and `--shards N`: which part of the manifest this process works on. A scheduler's
 * index (JOB_COMPLETION_INDEX, AWS_BATCH_JOB_ARRAY_INDEX, CI_NODE_INDEX) is read where the shard is
 * resolved (src/run/shard.ts), so that every command finds the same shard.
 */
export function shardFlags<T>(y: Argv<T>, option: AddOption): Argv<T> {
  const b = option(y, "shard", {
    type: "value",
    parse: refusing(parseShard),
    describe:
      "work on shard I of N (1-based): jobs go to shards by a stable hash of their shot; the shard has its own state and reports (env CLAPPER_SHARD)",
  });
  return option(b, "shards", {
    type: "value",
    parse: refusing(parseShards),
    describe:
      "the number of shards, when a scheduler gives the index: JOB_COMPLETION_INDEX (Kubernetes) or AWS_BATCH_JOB_ARRAY_INDEX (AWS Batch), both 0-based",
  });
}

export interface ShardArgs {
  shard?: Shard | undefined;
  shards?: number | undefined;
}

/**
 * The shard the flags and the scheduler's variables name, found the same way by every command; a
 * setting that cannot be read is a usage error (exit 2) before anything is opened.
 */
export function chosenShard(
  args: ShardArgs,
  env: NodeJS.ProcessEnv,
  indexOptional = false,
): ResolvedShard | undefined {
  try {
    return resolveShard({ shard: args.shard, shards: args.shards, env, indexOptional });
  } catch (error) {
    if (error instanceof ShardError) throw new ExitError(ExitCode.Usage, error.message);
    throw error;
  }
}

/** What status, report and cancel are given to find a run's state: the manifest, and where and which shard. */
export interface StateArgs extends ShardArgs {
  manifest: string;
  state?: string;
  "s3-endpoint"?: string;
  "s3-path-style"?: boolean;
}

/** The manifest and the flags that find its state (a file or S3, and the shard), for status, report and cancel. */
export function stateArgs<T>(y: Argv<T>, option: AddOption, what?: string): Argv<T> {
  return shardFlags(s3Flags(stateFlag(manifestArg(y), option, what), option), option);
}
