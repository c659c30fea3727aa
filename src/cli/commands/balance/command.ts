// `clapper balance`: no flags of its own.
import { defineCommand, withServices } from "../../command.js";

export const balance = defineCommand({
  command: "balance",
  describe: "points summary, packages and speech pricing",
  async handler(args, rt) {
    const m = await import("./index.js");
    return withServices(
      rt,
      args,
      (c) => m.balance({ clients: c, signal: rt.signal }),
      m.renderBalance,
      (r) => r.warnings ?? [],
    );
  },
});
