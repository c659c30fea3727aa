// `clapper plan MANIFEST`: its flags, and the plan made offline or with the services (and their
// prices, balance, voices, skills), with what the next run does when the run has a state.
import type { LocatedRun } from "../../../state/locate.js";
import { defineCommand, type GlobalArgs, type Runtime } from "../../command.js";
import { ExitCode } from "../../exit-code.js";
import type { Outcome } from "../../output.js";
import {
  chosenShard,
  manifestArg,
  type ShardArgs,
  s3Flags,
  s3Options,
  shardFlags,
  stateFlag,
} from "../flags.js";

interface PlanArgs extends ShardArgs {
  manifest: string;
  "speech-price"?: number;
  state?: string;
  "s3-endpoint"?: string;
  "s3-path-style"?: boolean;
}

export const plan = defineCommand<PlanArgs>({
  command: "plan <manifest>",
  describe:
    "validate a manifest, expand it into jobs and estimate their points, and say what the next run generates, reuses and spends; creates nothing",
  builder(y, option) {
    const b = option(manifestArg(y), "speech-price", {
      type: "number",
      rule: { min: 0, unit: "points per 10 counted characters" },
      describe: "points per 10 counted characters, when no service is configured",
    });
    const withState = stateFlag(b, option, "read (what the next run does) and find the sandbox state beside");
    return shardFlags(s3Flags(withState, option), option);
  },
  handler: planCommand,
});

async function planCommand(args: GlobalArgs & PlanArgs, rt: Runtime): Promise<Outcome> {
  const logger = rt.logger();
  // `--shards N` alone lists every job with its shard; an index (flag or scheduler) plans one shard.
  const shard = chosenShard(args, rt.env, true);
  // The services are optional here: with no key, the plan is made offline.
  const online = args.sandbox || Boolean(args["api-key-file"] || rt.env.CLAPPER_API_KEY);
  // Loaded on use: the manifest reader and the run pipeline are not needed by other commands.
  const { makePlan, planJson, planSandboxState, renderPlan, renderProblems } = await import("./index.js");
  const { result, shards, next } = await makePlan({
    manifest: args.manifest,
    cwd: process.cwd(),
    state: args.state,
    shard,
    shards: args.shards,
    speechPrice: args["speech-price"],
    s3: s3Options(args),
    signal: rt.signal,
    ...(online
      ? {
          async connect(located: LocatedRun | undefined) {
            const sandboxStateFile = args.sandbox
              ? planSandboxState(args["sandbox-state"], located)
              : undefined;
            return rt.tagged(
              await rt.connect(args, rt.env, logger, sandboxStateFile ? { sandboxStateFile } : {}),
            );
          },
        }
      : {}),
  });
  const problems = renderProblems(result);
  const failed = result.errors.length > 0;
  const n = result.errors.length + (result.omitted?.errors ?? 0);
  return {
    code: failed ? ExitCode.Usage : ExitCode.Ok,
    json: planJson(result, shards, next),
    ...(failed ? {} : { text: renderPlan(result, shards, next) }),
    ...(problems ? { notes: [problems] } : {}),
    ...(failed ? { message: `${args.manifest}: ${n} error${n === 1 ? "" : "s"}; nothing was done` } : {}),
    problems: [...result.errors, ...result.warnings],
  };
}
