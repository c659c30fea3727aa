// `clapper assemble MANIFEST`: its flags and handler.

import { parseShards } from "../../../run/shard.js";
import { defineCommand } from "../../command.js";
import { ExitCode } from "../../exit-code.js";
import { manifestArg, refusing, s3Flags, s3Options, stateFlag } from "../flags.js";

interface AssembleArgs {
  manifest: string;
  state?: string;
  output?: string;
  force: boolean;
  shards?: number;
  "ffmpeg-timeout"?: number;
  ffmpeg?: string;
  "s3-endpoint"?: string;
  "s3-path-style"?: boolean;
}

export const assemble = defineCommand<AssembleArgs>({
  command: "assemble <manifest>",
  describe:
    "cut the run's stored shots, each with its narration (and the manifest's assemble: music), into one episode; nothing is done when nothing changed",
  builder(y, option) {
    let b = s3Flags(stateFlag(manifestArg(y), option), option);
    b = option(b, "output", {
      type: "string",
      describe:
        "the episode's file (default: episode.mp4 in the run's output folder, beside shots/ and lines/)",
    });
    b = option(b, "force", {
      type: "boolean",
      default: false,
      describe: "assemble again even when the inputs recorded with the episode are unchanged",
    });
    b = option(b, "shards", {
      type: "value",
      parse: refusing(parseShards),
      describe: "a sharded run's number of shards: their states together hold every shot and line",
    });
    b = option(b, "ffmpeg", {
      type: "string",
      // CLAPPER_FFMPEG is read where ffmpeg is chosen, so the answer can say which of the two named it.
      noEnv: true,
      describe:
        "the ffmpeg to run (default: $CLAPPER_FFMPEG, then ffmpeg on PATH, then the one packaged with clapper)",
    });
    return option(b, "ffmpeg-timeout", {
      type: "number",
      rule: { min: 0, above: true, unit: "seconds" },
      describe: "seconds ffmpeg may take for the episode (default: 120 plus 6 per second of episode)",
    });
  },
  async handler(args, rt) {
    const { assemble, renderAssemble } = await import("./index.js");
    const answer = await assemble({
      manifest: args.manifest,
      cwd: process.cwd(),
      state: args.state,
      s3: s3Options(args),
      output: args.output,
      force: args.force,
      shards: args.shards,
      timeoutSeconds: args["ffmpeg-timeout"],
      ffmpeg: args.ffmpeg,
      env: rt.env,
      signal: rt.signal,
      logger: rt.logger(),
    });
    return { code: ExitCode.Ok, json: answer, text: renderAssemble(answer) };
  },
});
