// `clapper tasks ...`: the subcommands' flags and handlers; the work is in ./index.ts.
import type { Argv } from "yargs";
import { type CommandGroup, defineCommand, withList, withServices } from "../../command.js";
import type { TaskKind } from "./index.js";
import { TASK_STATUSES } from "./statuses.js";

const idArg = (y: Argv) => y.positional("id", { type: "string", demandOption: true, describe: "task id" });

const list = defineCommand<{ kind?: TaskKind; status?: string; limit: number }>({
  command: "list",
  describe: "recent tasks, newest first",
  builder(y, option) {
    const b = option(y, "status", {
      type: "choice",
      choices: TASK_STATUSES,
      describe: "only tasks in this status",
    });
    return option(b, "limit", {
      type: "number",
      rule: { min: 1, integer: true },
      default: 20,
      describe: "at most this many",
    });
  },
  async handler(args, rt) {
    const m = await import("./index.js");
    return withList(
      rt,
      args,
      "tasks",
      (c) =>
        m.listTasks({
          clients: c,
          signal: rt.signal,
          limit: args.limit,
          ...(args.kind ? { kind: args.kind } : {}),
          ...(args.status ? { status: args.status } : {}),
        }),
      m.renderTasks,
    );
  },
});

const get = defineCommand<{ kind?: TaskKind; id: string }>({
  command: "get <id>",
  describe: "one task",
  builder: idArg,
  async handler(args, rt) {
    const m = await import("./index.js");
    return withServices(
      rt,
      args,
      (c) =>
        m.getTask({ clients: c, signal: rt.signal, id: args.id, ...(args.kind ? { kind: args.kind } : {}) }),
      m.renderTask,
    );
  },
});

const cancel = defineCommand<{ kind?: TaskKind; id: string }>({
  command: "cancel <id>",
  describe: "cancel a task that has not ended",
  builder: idArg,
  async handler(args, rt) {
    const m = await import("./index.js");
    return withServices(
      rt,
      args,
      (c) =>
        m.cancelTask({
          clients: c,
          signal: rt.signal,
          id: args.id,
          ...(args.kind ? { kind: args.kind } : {}),
        }),
      m.renderCancelled,
    );
  },
});

export const tasks: CommandGroup = {
  command: "tasks",
  describe: "look at and cancel tasks on both services",
  builder: (y, option) =>
    option(y, "kind", {
      type: "choice",
      choices: ["video", "speech"],
      describe: "which service (default: both)",
    }),
  commands: [list, get, cancel],
  demand: "name a tasks command: list, get, cancel",
};
