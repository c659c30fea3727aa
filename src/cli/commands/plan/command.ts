// `clapper plan MANIFEST`: its flags, and the plan made offline or with the services (and their
// prices, balance, voices, skills), with what the next run does when the run has a state.
import { existsSync } from "node:fs";
import type { Shard } from "../../../run/shard.js";
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
  const shards = shard?.total ?? args.shards;
  // The run's manifest and state, found as `run` finds them; a manifest with errors has none (the
  // plan below says its errors), and a state that cannot be read is only a warning.
  const located = await locate(args, shard);
  const { readPlanStates, planNext } = await import("./state.js");
  const states = located
    ? await readPlanStates(located, { shards, stateGiven: args.state !== undefined, s3: s3Options(args) })
    : undefined;
  // The services are optional here: with no key, the plan is made offline.
  const online = args.sandbox || Boolean(args["api-key-file"] || rt.env.CLAPPER_API_KEY);
  const sandboxStateFile = args.sandbox ? await sandboxState(args, located) : undefined;
  const conn = online
    ? rt.tagged(await rt.connect(args, rt.env, logger, sandboxStateFile ? { sandboxStateFile } : {}))
    : undefined;
  try {
    // Loaded on use: the manifest reader and the run pipeline are not needed by other commands.
    const { plan } = await import("../../../run/plan.js");
    const { planJson, renderPlan, renderProblems } = await import("./index.js");
    // Shots timed to narration the state holds are fitted as the run fits them: their fingerprints
    // (and so whether they are reused) follow the fit.
    const jobs = located ? [...located.loaded.jobs] : [];
    if (located && states?.usable) {
      const { fitFromState } = await import("../../../episode/fitting.js");
      for (const group of states.groups) await fitFromState(jobs, group.state);
    }
    const planned = await plan({
      manifest: args.manifest,
      ...(located ? { loaded: { ...located.loaded, jobs } } : {}),
      ...(conn ? { clients: conn } : {}),
      ...(args["speech-price"] !== undefined ? { speechPrice: args["speech-price"] } : {}),
      ...(shard ? { shard } : {}),
      signal: rt.signal,
    });
    const result = states ? { ...planned, warnings: [...planned.warnings, ...states.warnings] } : planned;
    const problems = renderProblems(result);
    const failed = result.errors.length > 0;
    const n = result.errors.length + (result.omitted?.errors ?? 0);
    const next = !failed && located && states ? await planNext(result, located, states) : undefined;
    return {
      code: failed ? ExitCode.Usage : ExitCode.Ok,
      json: planJson(result, shards, next),
      ...(failed ? {} : { text: renderPlan(result, shards, next) }),
      ...(problems ? { notes: [problems] } : {}),
      ...(failed ? { message: `${args.manifest}: ${n} error${n === 1 ? "" : "s"}; nothing was done` } : {}),
      problems: [...result.errors, ...result.warnings],
    };
  } finally {
    await conn?.close();
  }
}

/** The run as `run` finds it; undefined for a manifest with errors or one that cannot be read (plan says why). */
async function locate(args: PlanArgs, shard: Shard | undefined): Promise<LocatedRun | undefined> {
  const { locateRun } = await import("../../../state/locate.js");
  const found = await locateRun({
    manifest: args.manifest,
    cwd: process.cwd(),
    ...(args.state ? { state: args.state } : {}),
    ...(shard ? { shard } : {}),
  }).catch(() => undefined);
  return found?.ok ? found.run : undefined;
}

/** --sandbox-state, else the run's emulator state when the run has one: the plan sees the balance the run left. */
async function sandboxState(
  args: GlobalArgs & PlanArgs,
  located: LocatedRun | undefined,
): Promise<string | undefined> {
  if (args["sandbox-state"]) return args["sandbox-state"];
  const { sandboxStatePath } = await import("../run/state.js");
  const candidate = located ? sandboxStatePath(located) : undefined;
  return candidate && existsSync(candidate) ? candidate : undefined;
}
