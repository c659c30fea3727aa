// `clapper voices ...`: the subcommands' flags and handlers; the work is in ./index.ts.
import { open } from "node:fs/promises";
import { type CommandGroup, defineCommand, withList, withServices } from "../../command.js";
import { fsExit } from "../../errors.js";

const list = defineCommand<{ custom: boolean }>({
  command: "list",
  describe: "preset voices (or the organization's custom voices with --custom)",
  builder: (y, option) =>
    option(y, "custom", { type: "boolean", default: false, describe: "the organization's custom voices" }),
  async handler(args, rt) {
    const m = await import("./index.js");
    return withList(
      rt,
      args,
      "voices",
      (c) => m.listVoices({ clients: c, signal: rt.signal, custom: args.custom }),
      m.renderVoices,
    );
  },
});

const create = defineCommand<{ name: string; file: string }>({
  command: "create <name> <file>",
  describe: "upload a reference audio file (wav, mp3, flac, ogg, m4a; 0.5-15 s; 15 MiB) as a custom voice",
  builder: (y) =>
    y
      .positional("name", { type: "string", demandOption: true, describe: "voice name" })
      .positional("file", { type: "string", demandOption: true, describe: "reference audio file" }),
  async handler(args, rt) {
    const m = await import("./index.js");
    // The file first: a missing one is a usage error, whatever the services.
    await readable(args.file, "read the reference audio file");
    return withServices(
      rt,
      args,
      (c) => m.createVoice({ clients: c, signal: rt.signal, name: args.name, file: args.file }),
      m.renderCreatedVoice,
    );
  },
});

const remove = defineCommand<{ id: string }>({
  command: "delete <id>",
  describe: "delete a custom voice",
  builder: (y) => y.positional("id", { type: "string", demandOption: true, describe: "voice id" }),
  async handler(args, rt) {
    const m = await import("./index.js");
    return withServices(
      rt,
      args,
      (c) => m.deleteVoice({ clients: c, signal: rt.signal, id: args.id }),
      (r) => `deleted ${r.voice_id}`,
    );
  },
});

export const voices: CommandGroup = {
  command: "voices",
  describe: "list voices; create and delete custom voices",
  commands: [list, create, remove],
  demand: "name a voices command: list, create, delete",
};

/** Refuses a file that cannot be opened for reading, naming it and why (exit 2). */
async function readable(path: string, action: string): Promise<void> {
  try {
    await (await open(path, "r")).close();
  } catch (error) {
    throw fsExit(error, { action, path });
  }
}
