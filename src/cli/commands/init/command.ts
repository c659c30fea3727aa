// `clapper init [DIR]`: its flags and handler.
import { defineCommand } from "../../command.js";
import { ExitCode } from "../../exit-code.js";

interface InitArgs {
  dir: string;
  force: boolean;
}

export const init = defineCommand<InitArgs>({
  command: "init [dir]",
  describe:
    "start a project: a commented storyboard.yaml that runs as it is, its JSON Schema for editors, and a .gitignore",
  builder(y, option) {
    const b = y.positional("dir", {
      type: "string",
      default: ".",
      describe: "the project folder (made when missing)",
    });
    return option(b, "force", {
      type: "boolean",
      default: false,
      describe: "replace an existing storyboard.yaml and manifest.schema.json with the starter's",
    });
  },
  async handler(args) {
    const { init, renderInit } = await import("./index.js");
    const answer = await init({ dir: args.dir, cwd: process.cwd(), force: args.force });
    return { code: ExitCode.Ok, json: { files: answer.files, next: answer.next }, text: renderInit(answer) };
  },
});
