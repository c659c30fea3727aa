// `clapper status MANIFEST`: its flags and handler.
import { defineCommand } from "../../command.js";
import { chosenShard, manifestArg, type ShardArgs, shardFlags, stateFlag } from "../flags.js";

export const status = defineCommand<{ manifest: string; state?: string } & ShardArgs>({
  command: "status <manifest>",
  describe: "where the run stands, from its state (offline)",
  builder: (y, option) => shardFlags(stateFlag(manifestArg(y), option), option),
  async handler(args, rt) {
    const { status, renderStatus } = await import("./index.js");
    const report = await status({
      manifest: args.manifest,
      cwd: process.cwd(),
      state: args.state,
      shard: chosenShard(args, rt.env),
    });
    return { code: 0, json: report, text: renderStatus(report) };
  },
});
