// `clapper status MANIFEST`: its flags and handler.
import { defineCommand } from "../../command.js";
import { ExitCode } from "../../exit-code.js";
import { chosenShard, type StateArgs, s3Options, stateArgs } from "../flags.js";

export const status = defineCommand<StateArgs>({
  command: "status <manifest>",
  describe: "where the run stands, from its state (offline)",
  builder: (y, option) => stateArgs(y, option),
  async handler(args, rt) {
    const { status, renderStatus } = await import("./index.js");
    const report = await status({
      manifest: args.manifest,
      cwd: process.cwd(),
      state: args.state,
      shard: chosenShard(args, rt.env),
      s3: s3Options(args),
    });
    return { code: ExitCode.Ok, json: report, text: renderStatus(report) };
  },
});
