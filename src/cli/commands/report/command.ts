// `clapper report MANIFEST`: its flags and handler.
import { defineCommand } from "../../command.js";
import { manifestArg, outputFlag, s3Flags, s3Options, stateFlag } from "../flags.js";

interface ReportArgs {
  manifest: string;
  state?: string;
  output?: string;
  "s3-endpoint"?: string;
  "s3-path-style"?: boolean;
}

export const report = defineCommand<ReportArgs>({
  command: "report <manifest>",
  describe: "write report.json, report.md and junit.xml again from the run's state",
  builder(y, option) {
    return s3Flags(outputFlag(stateFlag(manifestArg(y), option), option, "the run's"), option);
  },
  async handler(args, rt) {
    const { rewriteReport } = await import("./index.js");
    const { report, uris } = await rewriteReport({
      manifest: args.manifest,
      cwd: process.cwd(),
      env: rt.env,
      state: args.state,
      output: args.output,
      s3: s3Options(args),
    });
    return { code: 0, json: report, text: uris.join("\n") };
  },
});
