// `clapper plan MANIFEST`: its flags, and the plan made offline or with the services (and their
// prices, balance, voices, skills).
import { existsSync } from "node:fs";
import { defineCommand, type GlobalArgs, type Runtime } from "../../command.js";
import type { Outcome } from "../../output.js";
import { chosenShard, manifestArg, type ShardArgs, shardFlags, stateFlag } from "../flags.js";

interface PlanArgs extends ShardArgs {
  manifest: string;
  "speech-price"?: number;
  state?: string;
}

export const plan = defineCommand<PlanArgs>({
  command: "plan <manifest>",
  describe: "validate a manifest, expand it into jobs and estimate their points; creates nothing",
  builder(y, option) {
    const b = option(manifestArg(y), "speech-price", {
      type: "number",
      rule: { min: 0, unit: "points per 10 counted characters" },
      describe: "points per 10 counted characters, when no service is configured",
    });
    return shardFlags(stateFlag(b, option, "find the sandbox state beside"), option);
  },
  handler: planCommand,
});

async function planCommand(args: GlobalArgs & PlanArgs, rt: Runtime): Promise<Outcome> {
  const logger = rt.logger();
  // `--shards N` alone lists every job with its shard; an index (flag or scheduler) plans one shard.
  const shard = chosenShard(args, rt.env, true);
  const shards = shard?.total ?? args.shards;
  // The services are optional here: with no key, the plan is made offline.
  const online = args.sandbox || Boolean(args["api-key-file"] || rt.env.CLAPPER_API_KEY);
  const sandboxStateFile = args.sandbox ? await sandboxState(args) : undefined;
  const conn = online
    ? rt.tagged(await rt.connect(args, rt.env, logger, sandboxStateFile ? { sandboxStateFile } : {}))
    : undefined;
  try {
    // Loaded on use: the manifest reader and the run pipeline are not needed by other commands.
    const { plan } = await import("../../../pipeline/plan.js");
    const { planJson, renderPlan, renderProblems } = await import("./index.js");
    const result = await plan({
      manifest: args.manifest,
      ...(conn ? { clients: conn } : {}),
      ...(args["speech-price"] !== undefined ? { speechPrice: args["speech-price"] } : {}),
      ...(shard ? { shard } : {}),
      signal: rt.signal,
    });
    const problems = renderProblems(result);
    const failed = result.errors.length > 0;
    const n = result.errors.length + (result.omitted?.errors ?? 0);
    return {
      code: failed ? 2 : 0,
      json: planJson(result, shards),
      ...(failed ? {} : { text: renderPlan(result, shards) }),
      ...(problems ? { notes: [problems] } : {}),
      ...(failed ? { message: `${args.manifest}: ${n} error${n === 1 ? "" : "s"}; nothing was done` } : {}),
      problems: [...result.errors, ...result.warnings],
    };
  } finally {
    await conn?.close();
  }
}

/** --sandbox-state, else the run's emulator state when the run has one: the plan sees the balance the run left. */
async function sandboxState(args: GlobalArgs & PlanArgs): Promise<string | undefined> {
  if (args["sandbox-state"]) return args["sandbox-state"];
  const { locateRun } = await import("../../../pipeline/locate.js");
  const { sandboxStatePath } = await import("../run/state.js");
  const found = await locateRun({
    manifest: args.manifest,
    cwd: process.cwd(),
    ...(args.state ? { state: args.state } : {}),
  }).catch(() => undefined);
  const candidate = found?.ok ? sandboxStatePath(found.run) : undefined;
  return candidate && existsSync(candidate) ? candidate : undefined;
}
