// `clapper report MANIFEST`: its flags and handler.
import { defineCommand } from "../../command.js";
import { manifestArg, outputFlag, stateFlag } from "../flags.js";

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
    const b = outputFlag(stateFlag(manifestArg(y), option), option, "the run's");
    return option(
      option(b, "s3-endpoint", { type: "string", describe: "S3-compatible endpoint" }),
      "s3-path-style",
      {
        type: "boolean",
        describe: "path-style S3 addressing",
      },
    );
  },
  async handler(args, rt) {
    const { rewriteReport } = await import("./index.js");
    const { report, uris } = await rewriteReport({
      manifest: args.manifest,
      cwd: process.cwd(),
      env: rt.env,
      state: args.state,
      output: args.output,
      s3: {
        ...(args["s3-endpoint"] ? { endpoint: args["s3-endpoint"] } : {}),
        ...(args["s3-path-style"] !== undefined ? { forcePathStyle: args["s3-path-style"] } : {}),
      },
    });
    return { code: 0, json: report, text: uris.join("\n") };
  },
});
