// `clapper run MANIFEST`: its flags, their checks, and the handler that hands them to the run.

import type { CoordinatorUrl } from "../../../coord/url.js";
import { pushgatewayUrl } from "../../../metrics/index.js";
import { DEFAULT_CEILING_RPS } from "../../../rate/controller.js";
import { DEFAULT_IN_FLIGHT, type MaxFailures } from "../../../run/types.js";
import { defineCommand } from "../../command.js";
import { ExitError } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";
import type { OptionSpec } from "../../options.js";
import { parseDeadline, parseMaxFailures, parseRps, type RpsValue } from "../../values.js";
import { coordinatorFlag, manifestArg, outputFlag, type ShardArgs, shardFlags, stateFlag } from "../flags.js";
import { callbackOptions } from "./callback.js";

export interface RunArgs extends ShardArgs {
  manifest: string;
  output?: string | undefined;
  staging?: string | undefined;
  "s3-endpoint"?: string | undefined;
  "s3-path-style"?: boolean | undefined;
  "callback-url"?: string | undefined;
  "callback-listen"?: string | undefined;
  state?: string | undefined;
  "max-points"?: number | undefined;
  only?: string | undefined;
  "retry-failed": boolean;
  fresh: boolean;
  "repair-state": boolean;
  "max-attempts": number;
  rps?: RpsValue | undefined;
  "rate-scope": "key" | "service";
  "in-flight": number;
  "poll-interval": number;
  "sandbox-time-scale": number;
  "break-lock": boolean;
  "max-result-mb"?: number | undefined;
  "allow-private-urls": boolean;
  "give-up-after": number;
  "max-failures"?: MaxFailures | undefined;
  deadline?: Date | undefined;
  coordinator?: CoordinatorUrl | undefined;
  "metrics-file"?: string | undefined;
  stills: boolean;
  pushgateway?: string | undefined;
}

/** `run`'s own flags, after --output and --state, in the order --help lists them. */
const RUN_FLAGS: ReadonlyArray<readonly [string, OptionSpec]> = [
  [
    "staging",
    {
      type: "string",
      describe: "s3://bucket/prefix for local materials (default: beside an S3 output; else Data URLs)",
    },
  ],
  [
    "callback-url",
    {
      type: "string",
      describe: "public URL the video service posts status callbacks to (polling stays as a safety net)",
    },
  ],
  [
    "callback-listen",
    {
      type: "string",
      describe:
        "[HOST:]PORT the callback listener binds (default: the URL's host if it is this machine's address, else 127.0.0.1; the URL's port)",
    },
  ],
  [
    "s3-endpoint",
    { type: "string", describe: "S3-compatible endpoint (default: the AWS SDK's configuration)" },
  ],
  [
    "s3-path-style",
    {
      type: "boolean",
      describe: "path-style S3 addressing (default: on with --s3-endpoint or AWS_ENDPOINT_URL_S3)",
    },
  ],
  [
    "max-points",
    {
      type: "number",
      rule: { min: 0, integer: true, unit: "points" },
      describe: "spend at most this many points in this run",
    },
  ],
  ["only", { type: "string", describe: "comma-separated job or row ids (shot/s01,line/n02,s03)" }],
  ["retry-failed", { type: "boolean", default: false, describe: "try failed and cancelled jobs again" }],
  [
    "stills",
    {
      type: "boolean",
      default: true,
      describe:
        "make a still of each video for report.html's grid (ffmpeg); --no-stills leaves them to `clapper report`",
    },
  ],
  [
    "fresh",
    {
      type: "boolean",
      default: false,
      describe: "forget earlier state and results; generate everything anew",
    },
  ],
  [
    "repair-state",
    {
      type: "boolean",
      default: false,
      describe:
        "rebuild a damaged state file from its readable lines (the damaged file is kept beside it), then run; lost creates are sent again with their own keys, so nothing is paid twice",
    },
  ],
  [
    "max-failures",
    {
      type: "value",
      parse: (raw, name) => parseMaxFailures(raw, name),
      describe: "stop submitting once N jobs failed, or P% of the jobs that ended (N or P%); exit 1",
    },
  ],
  [
    "deadline",
    {
      type: "value",
      // Read against the clock when the flag is parsed: a duration counts from the start.
      parse: (raw, name) => parseDeadline(raw, new Date(), name),
      describe:
        "stop at this time: a duration (90s, 45m, 2h, 1h30m) or a time with its zone (2026-11-25T06:00:00Z); state saved, exit 4",
    },
  ],
  [
    "max-attempts",
    {
      type: "number",
      rule: { min: 1, integer: true },
      default: 2,
      describe: "attempts per job (a failed task is retried with a new key)",
    },
  ],
  [
    "rps",
    {
      type: "value",
      parse: (raw, name) => parseRps(raw, name),
      describe: `highest request rate for the account (default ${DEFAULT_CEILING_RPS}); the rate is found as the run goes and remembered for the next run; fixed:N for a rate that never moves`,
    },
  ],
  [
    "rate-scope",
    {
      type: "choice",
      choices: ["key", "service"],
      default: "key",
      describe: "whether the service limits requests per API key (one rate for both services) or per service",
    },
  ],
  [
    "in-flight",
    {
      type: "number",
      rule: { min: 1, integer: true },
      default: DEFAULT_IN_FLIGHT,
      describe: "tasks in flight per service (bounds open files and sockets; see docs/configuration.md)",
    },
  ],
  [
    "poll-interval",
    {
      type: "number",
      rule: { min: 0.01, unit: "seconds" },
      default: 1,
      describe: "shortest wait in seconds between two looks at a task",
    },
  ],
  [
    "break-lock",
    {
      type: "boolean",
      default: false,
      describe: "take the run's lock even if another run seems to hold it (after a crash)",
    },
  ],
  [
    "max-result-mb",
    {
      type: "number",
      rule: { min: 1, unit: "MiB" },
      describe:
        "largest result to download, in MiB (default: derived from each job's duration and resolution)",
    },
  ],
  [
    "allow-private-urls",
    {
      type: "boolean",
      default: false,
      describe:
        "allow loopback and private addresses for result downloads and --callback-url (a local emulator; the services refuse them)",
    },
  ],
  [
    "give-up-after",
    {
      type: "number",
      rule: { min: 0.1, unit: "seconds" },
      default: 600,
      describe: "seconds a task may stay unreadable before the run leaves it for the next run",
    },
  ],
  [
    "metrics-file",
    {
      type: "string",
      describe: "write the run's Prometheus metrics to this file, every 15 s and at the end",
    },
  ],
  [
    "pushgateway",
    {
      type: "value",
      parse: (raw, name) => pushgatewayUrl(raw, (m) => new ExitError(ExitCode.Usage, `${name}: ${m}`)),
      describe: "push the run's metrics to this Prometheus Pushgateway at the end (job=clapper, run=NAME)",
    },
  ],
  [
    "sandbox-time-scale",
    {
      type: "number",
      rule: { min: 0, above: true },
      default: 0.01,
      hidden: true,
      describe: "with --sandbox: multiplier for every simulated duration",
    },
  ],
];

/** `run --help`'s groups of flags: every flag of the command in one of them. */
const RUN_GROUPS: ReadonlyArray<readonly [string, readonly string[]]> = [
  ["What to run:", ["only", "retry-failed", "fresh", "repair-state"]],
  ["Where results and state go:", ["output", "state", "staging", "s3-endpoint", "s3-path-style", "stills"]],
  ["Spending and stopping:", ["max-points", "max-attempts", "max-failures", "deadline"]],
  [
    "The services:",
    [
      "rps",
      "rate-scope",
      "in-flight",
      "poll-interval",
      "give-up-after",
      "max-result-mb",
      "allow-private-urls",
    ],
  ],
  ["Callbacks:", ["callback-url", "callback-listen"]],
  ["Metrics:", ["metrics-file", "pushgateway"]],
  ["Many machines:", ["shard", "shards", "coordinator", "break-lock"]],
];

const RUN_EXAMPLES: ReadonlyArray<readonly [string, string]> = [
  ["$0 run storyboard.yaml --sandbox", "try a manifest against the built-in emulator: no key, nothing spent"],
  ["$0 run storyboard.yaml --max-points 500", "the real run, spending at most 500 points"],
  ["$0 run storyboard.yaml", "again: resumes, reuses what is stored, generates only what changed"],
  ["$0 run storyboard.yaml --only s03,n05", "only the rows s03 (every take of the shot) and n05"],
  [
    "$0 run storyboard.yaml --retry-failed",
    "give failed jobs a new task (paid results are fetched again first)",
  ],
  ["$0 run storyboard.yaml --output s3://bucket/renders", "results and reports into S3"],
];

export const run = defineCommand<RunArgs>({
  command: "run <manifest>",
  describe:
    "render a manifest: budget checked, rate-limited, resumable; writes report.json, report.md, junit.xml",
  builder(y, option) {
    let b = outputFlag(manifestArg(y), option, "the run's");
    b = stateFlag(b, option, "keep (resumed when it exists)");
    b = shardFlags(b, option);
    for (const [name, spec] of RUN_FLAGS) b = option(b, name, spec);
    b = coordinatorFlag(b, option);
    // --help reads by what a person wants to change, with the common cases first.
    for (const [title, flags] of RUN_GROUPS) b = b.group([...flags], title);
    for (const [example, what] of RUN_EXAMPLES) b = b.example(example, what);
    return b;
  },
  check(args) {
    // The same checks as the run makes, without a file or the network (parseCommandLine too).
    if (args["callback-url"] || args["callback-listen"] !== undefined || args.only !== undefined) {
      checkRunFlags(args);
    }
  },
  async handler(args, rt) {
    const { runCommand } = await import("./index.js");
    return runCommand({
      args,
      global: args,
      env: rt.env,
      signal: rt.signal,
      format: rt.format,
      logger: (writeLine) => rt.logger(writeLine),
      connect: rt.connect,
    });
  },
});

function checkRunFlags(args: {
  "callback-url"?: string;
  "callback-listen"?: string;
  "allow-private-urls"?: boolean;
  only?: string;
}): void {
  if (args["callback-listen"] !== undefined && !args["callback-url"]) {
    throw new ExitError(
      ExitCode.Usage,
      "--callback-listen: only with --callback-url (the public URL the service posts to)",
    );
  }
  // The same parser as the run's (pure: no socket is opened).
  if (args["callback-url"])
    callbackOptions(args["callback-url"], args["callback-listen"], args["allow-private-urls"] === true);
  if (args.only?.split(",").every((s) => s.trim() === "")) {
    throw new ExitError(
      ExitCode.Usage,
      `--only: expected comma-separated job or row ids (shot/s01,line/n02,s03), got ${JSON.stringify(args.only)}`,
    );
  }
}
