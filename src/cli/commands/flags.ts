// The positional and the flags that the commands of a manifest's run share (plan, run, status,
// report, cancel), worded once so that their help reads the same.
import type { Argv } from "yargs";
import { parseCoordinatorUrl } from "../../coord/url.js";
import { checkStateFlag } from "../../pipeline/state-location.js";
import type { AddOption } from "../options.js";
import { ValueError } from "../values.js";

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
    parse: (raw, name) => {
      try {
        return parseCoordinatorUrl(raw, name);
      } catch (error) {
        throw new ValueError((error as Error).message);
      }
    },
    describe:
      "redis://HOST:PORT[/DB] (or rediss://) shared by every clapper process on the account: one request rate, one in-flight cap, shared budgets and the run's lock (env CLAPPER_REDIS_URL)",
  });
}
