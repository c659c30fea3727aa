// `clapper status MANIFEST`: its flags and handler.
import { defineCommand } from "../../command.js";
import {
  chosenShard,
  manifestArg,
  type ShardArgs,
  s3Flags,
  s3Options,
  shardFlags,
  stateFlag,
} from "../flags.js";

export const status = defineCommand<
  {
    manifest: string;
    state?: string;
    "s3-endpoint"?: string;
    "s3-path-style"?: boolean;
  } & ShardArgs
>({
  command: "status <manifest>",
  describe: "where the run stands, from its state (offline)",
  builder: (y, option) => shardFlags(s3Flags(stateFlag(manifestArg(y), option), option), option),
  async handler(args, rt) {
    const { status, renderStatus } = await import("./index.js");
    const report = await status({
      manifest: args.manifest,
      cwd: process.cwd(),
      state: args.state,
      shard: chosenShard(args, rt.env),
      s3: s3Options(args),
    });
    return { code: 0, json: report, text: renderStatus(report) };
  },
});
