// `clapper budget`: the shared budgets a coordinator holds for the account.
import type { CoordinatorUrl } from "../../../coord/url.js";
import { defineCommand } from "../../command.js";
import { ExitError } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";
import { coordinatorFlag } from "../flags.js";

export const budget = defineCommand<{ coordinator?: CoordinatorUrl | undefined }>({
  command: "budget",
  describe: "shared budgets on the coordinator: pools and run caps, reserved and spent",
  builder: (y, option) => coordinatorFlag(y, option),
  async handler(args, rt) {
    const coordinator = args.coordinator;
    if (!coordinator) {
      throw new ExitError(
        ExitCode.Usage,
        "budget: shared budgets live on a coordinator: pass --coordinator redis://HOST:PORT (or set CLAPPER_REDIS_URL)",
      );
    }
    const m = await import("./index.js");
    const conn = await rt.services(args);
    try {
      const data = await m.budgets({ url: coordinator, account: conn.account, signal: rt.signal });
      return { code: ExitCode.Ok, json: data, text: m.renderBudgets(data) };
    } finally {
      await conn.close();
    }
  },
});
