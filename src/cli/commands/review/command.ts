// `clapper review MANIFEST`: its flags and handler, apart from the server so that --help does not load it.
import { defineCommand } from "../../command.js";
import { outputFlag, type StateArgs, s3Options, stateArgs } from "../flags.js";

interface ReviewArgs extends StateArgs {
  output?: string;
  port: number;
}

export const review = defineCommand<ReviewArgs>({
  command: "review <manifest>",
  describe:
    "serve the review page on 127.0.0.1 and save the takes picked there to picks.yaml beside the manifest",
  builder(y, option) {
    return option(outputFlag(stateArgs(y, option), option, "the run's"), "port", {
      type: "number",
      rule: { min: 0, max: 65535, integer: true },
      default: 0,
      describe: "port to listen on (0 picks a free one)",
    });
  },
  async handler(args, rt) {
    const { reviewCommand } = await import("./index.js");
    return reviewCommand(
      {
        manifest: args.manifest,
        cwd: process.cwd(),
        state: args.state,
        output: args.output,
        port: args.port,
        s3: s3Options(args),
      },
      rt,
      // The first line says where the page is; with --json, one JSON line.
      (url) => rt.print(args.json ? JSON.stringify({ url }) : url),
    );
  },
});
