// The command registry: every command clapper has, in the order --help lists them. Each command's
// folder defines its flags and its handler (commands/*/command.ts).
import type { Command } from "./command.js";
import { assemble } from "./commands/assemble/command.js";
import { balance } from "./commands/balance/command.js";
import { budget } from "./commands/budget/command.js";
import { cancel } from "./commands/cancel/command.js";
import { init } from "./commands/init/command.js";
import { plan } from "./commands/plan/command.js";
import { report } from "./commands/report/command.js";
import { review } from "./commands/review/command.js";
import { run } from "./commands/run/command.js";
import { sandbox } from "./commands/sandbox/command.js";
import { schema } from "./commands/schema/command.js";
import { skills } from "./commands/skills/command.js";
import { status } from "./commands/status/command.js";
import { tasks } from "./commands/tasks/command.js";
import { voices } from "./commands/voices/command.js";

/** In the order --help lists them. */
export const COMMANDS: readonly Command[] = [
  init,
  sandbox,
  plan,
  run,
  status,
  report,
  review,
  cancel,
  assemble,
  balance,
  budget,
  skills,
  voices,
  tasks,
  schema,
];
