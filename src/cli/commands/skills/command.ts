// `clapper skills ...`: the subcommands' flags and handlers; the work is in ./index.ts.
import type { Argv } from "yargs";
import { type CommandGroup, defineCommand, withConnection, withList, withServices } from "../../command.js";
import { ExitCode } from "../../exit-code.js";

const skillArg = (y: Argv) =>
  y.positional("skill", { type: "string", demandOption: true, describe: "id or name" });
const fileArg = <T>(y: Argv<T>) =>
  y.positional("file", { type: "string", demandOption: true, describe: "Markdown file" });

const list = defineCommand<{ keyword?: string }>({
  command: "list",
  describe: "official and custom skills",
  builder: (y, option) => option(y, "keyword", { type: "string", describe: "filter by name or description" }),
  async handler(args, rt) {
    const m = await import("./index.js");
    return withList(
      rt,
      args,
      "skills",
      (c) =>
        m.listSkills({ clients: c, signal: rt.signal, ...(args.keyword ? { keyword: args.keyword } : {}) }),
      m.renderSkills,
    );
  },
});

const show = defineCommand<{ skill: string }>({
  command: "show <skill>",
  describe: "one skill, by id or name, with its content",
  builder: skillArg,
  async handler(args, rt) {
    const m = await import("./index.js");
    return withServices(
      rt,
      args,
      (c) => m.findSkill({ clients: c, signal: rt.signal }, args.skill),
      m.renderSkill,
    );
  },
});

const create = defineCommand<{ file: string; name?: string; description?: string }>({
  command: "create <file>",
  describe: "create a custom skill from a Markdown file (name from the file name or its front matter)",
  builder(y, option) {
    const b = option(fileArg(y), "name", { type: "string", describe: "skill name (overrides the file)" });
    return option(b, "description", { type: "string", describe: "skill description" });
  },
  async handler(args, rt) {
    const m = await import("./index.js");
    // Read before connecting: a bad file is a usage error, whatever the services.
    const file = await m.readSkillFile(args.file);
    return withServices(
      rt,
      args,
      (c) => {
        const description = args.description ?? file.description;
        return c.video.createSkill(
          { name: args.name ?? file.name, content: file.content, ...(description ? { description } : {}) },
          { signal: rt.signal },
        );
      },
      m.renderSkill,
    );
  },
});

const update = defineCommand<{ skill: string; file: string; name?: string; description?: string }>({
  command: "update <skill> <file>",
  describe: "replace a custom skill's content (and name/description) from a Markdown file",
  builder(y, option) {
    const b = option(fileArg(skillArg(y)), "name", { type: "string", describe: "new skill name" });
    return option(b, "description", { type: "string", describe: "new skill description" });
  },
  async handler(args, rt) {
    const m = await import("./index.js");
    const file = await m.readSkillFile(args.file);
    return withServices(
      rt,
      args,
      async (c) => {
        const existing = await m.findSkill({ clients: c, signal: rt.signal }, args.skill);
        const description = args.description ?? file.description ?? existing.description;
        return c.video.updateSkill(
          existing.id,
          {
            name: args.name ?? existing.name,
            content: file.content,
            ...(description ? { description } : {}),
          },
          { signal: rt.signal },
        );
      },
      m.renderSkill,
    );
  },
});

const remove = defineCommand<{ skill: string }>({
  command: "delete <skill>",
  describe: "delete a custom skill (by id or name)",
  builder: skillArg,
  async handler(args, rt) {
    const m = await import("./index.js");
    return withServices(
      rt,
      args,
      (c) => m.deleteSkill({ clients: c, signal: rt.signal }, args.skill),
      (r) => `deleted ${r.skill_id}`,
    );
  },
});

const push = defineCommand<{ dir: string; "dry-run": boolean }>({
  command: "push <dir>",
  describe: "sync DIR/*.md as custom skills by name: create missing, update changed, leave the rest",
  builder: (y, option) =>
    option(
      y.positional("dir", { type: "string", demandOption: true, describe: "folder of .md files" }),
      "dry-run",
      {
        type: "boolean",
        default: false,
        describe: "show what would change",
      },
    ),
  async handler(args, rt) {
    const m = await import("./index.js");
    return withConnection(rt, args, async (c) => {
      const { result, refusal } = await m.pushSkills({
        clients: c,
        signal: rt.signal,
        dir: args.dir,
        dryRun: args["dry-run"],
      });
      const text = m.renderPush(result);
      if (refusal === undefined) return { code: ExitCode.Ok, json: result, text };
      // A refusal, not a failure: nothing was created, what was found was updated (exit 2).
      return { code: ExitCode.Usage, json: result, text, message: refusal, notes: [`clapper: ${refusal}`] };
    });
  },
});

export const skills: CommandGroup = {
  command: "skills",
  describe: "list and manage prompt-optimization skills",
  commands: [list, show, create, update, remove, push],
  demand: "name a skills command: list, show, create, update, delete, push",
};
