// `clapper schema`: no flags of its own.
import { defineCommand } from "../../command.js";
import { ExitCode } from "../../exit-code.js";

export const schema = defineCommand({
  command: "schema",
  describe: "print the manifest's JSON Schema, for editors: clapper schema > manifest.schema.json",
  async handler() {
    const { schema } = await import("./index.js");
    const answer = await schema();
    // The text without its last newline: one is added as it is printed, so stdout is the file.
    return { code: ExitCode.Ok, json: answer.schema, text: answer.text.replace(/\n$/, "") };
  },
});
