// `clapper report MANIFEST`: its flags and handler.
import { defineCommand } from "../../command.js";
import { ExitCode } from "../../exit-code.js";
import { chosenShard, outputFlag, type StateArgs, s3Options, stateArgs } from "../flags.js";

interface ReportArgs extends StateArgs {
  output?: string;
  merge: boolean;
}

export const report = defineCommand<ReportArgs>({
  command: "report <manifest>",
  describe:
    "write report.json, report.md, junit.xml and report.html again from the run's state (a shard's with --shard; the shards' merged with --merge)",
  builder(y, option) {
    return option(outputFlag(stateArgs(y, option), option, "the run's"), "merge", {
      type: "boolean",
      default: false,
      describe:
        "merge the shards' reports (reports/shards/I-of-N in the output) into reports/report.json, report.md and junit.xml over every job",
    });
  },
  async handler(args, rt) {
    const { mergeReport, rewriteReport } = await import("./index.js");
    const common = {
      manifest: args.manifest,
      cwd: process.cwd(),
      env: rt.env,
      output: args.output,
      s3: s3Options(args),
    };
    if (args.merge) {
      // Every shard, so no index is needed: N from --shards, --shard's N, or the store's folders.
      const total = args.shards ?? args.shard?.total ?? chosenShard(args, rt.env, true)?.total;
      const { report, uris, missing, warnings } = await mergeReport({ ...common, total, signal: rt.signal });
      const notes = [
        ...(missing.length > 0
          ? [`warning: no report of shard ${missing.join(", ")}: see the merged report's note`]
          : []),
        ...warnings.map((w) => `warning: ${w}`),
      ];
      return {
        code: ExitCode.Ok,
        json: report,
        text: uris.join("\n"),
        ...(notes.length > 0 ? { notes } : {}),
      };
    }
    const { report, uris, warnings } = await rewriteReport({
      ...common,
      state: args.state,
      shard: chosenShard(args, rt.env),
      signal: rt.signal,
    });
    // What report.html could not show (a still, the picks) is said, and is no failure.
    const notes = warnings.map((w) => `warning: ${w}`);
    return { code: ExitCode.Ok, json: report, text: uris.join("\n"), ...(notes.length > 0 ? { notes } : {}) };
  },
});
