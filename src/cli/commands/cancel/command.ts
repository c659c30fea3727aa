// `clapper cancel MANIFEST`: its flags and handler.
import { defineCommand } from "../../command.js";
import { ExitCode } from "../../exit-code.js";
import { chosenShard, type StateArgs, s3Options, stateArgs } from "../flags.js";

export const cancel = defineCommand<StateArgs>({
  command: "cancel <manifest>",
  describe: "cancel the run's tasks still in flight (the next run records what became of them)",
  builder: (y, option) => stateArgs(y, option),
  async handler(args, rt) {
    const { cancelRun, renderCancelRow } = await import("./index.js");
    const { sandboxStatePath } = await import("../run/state.js");
    const { rows, never } = await cancelRun({
      manifest: args.manifest,
      cwd: process.cwd(),
      state: args.state,
      shard: chosenShard(args, rt.env),
      s3: s3Options(args),
      signal: rt.signal,
      connect: async (located) =>
        rt.tagged(
          await rt.connect(args, rt.env, rt.logger(), {
            ...(args.sandbox ? { sandboxStateFile: args["sandbox-state"] ?? sandboxStatePath(located) } : {}),
          }),
        ),
    });
    const json = { cancelled: rows };
    const text =
      rows.length === 0
        ? never
          ? "no tasks in flight: the run was never made"
          : "no tasks in flight"
        : rows.map(renderCancelRow).join("\n");
    // Tasks that had ended are no failure: there was nothing to cancel. Only a task the service
    // would not stop goes on running (and is paid for): not a success for a script.
    const refused = rows.filter((r) => r.outcome === "refused").length;
    if (refused === 0) return { code: ExitCode.Ok, json, text };
    return {
      code: ExitCode.Failed,
      json,
      text,
      message: `${refused} of ${rows.length} tasks could not be cancelled and go on running`,
    };
  },
});
