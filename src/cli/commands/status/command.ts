// `clapper status MANIFEST`: its flags and handler.
import { defineCommand } from "../../command.js";
import { manifestArg, stateFlag } from "../flags.js";

export const status = defineCommand<{ manifest: string; state?: string }>({
  command: "status <manifest>",
  describe: "where the run stands, from its state (offline)",
  builder: (y, option) => stateFlag(manifestArg(y), option),
  async handler(args) {
    const { status, renderStatus } = await import("./index.js");
    const report = await status({ manifest: args.manifest, cwd: process.cwd(), state: args.state });
    return { code: 0, json: report, text: renderStatus(report) };
  },
});
