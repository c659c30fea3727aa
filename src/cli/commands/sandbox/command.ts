// `clapper sandbox`: its flags and handler, apart from the emulator so that --help does not load it.
import type { Argv } from "yargs";
import { defineCommand } from "../../command.js";
import type { AddOption } from "../../options.js";

export interface SandboxArgs {
  host: string;
  port: number;
  key: string[];
  points: number;
  "time-scale": number;
  "rate-limit"?: number;
  "plain-videos"?: boolean;
  "allow-private-urls": boolean;
  "public-url"?: string;
}

function sandboxOptions(yargs: Argv, option: AddOption): Argv<SandboxArgs> {
  let y = option(yargs, "host", { type: "string", default: "127.0.0.1", describe: "address to listen on" });
  y = option(y, "port", {
    type: "number",
    rule: { min: 0, max: 65535, integer: true },
    default: 8787,
    describe: "port to listen on (0 picks a free one)",
  });
  y = option(y, "key", {
    type: "string",
    array: true,
    describe: "accepted API key and its organization, KEY[=ORG] (repeatable; default sk-ml-sandbox=default)",
  });
  y = option(y, "points", {
    type: "number",
    rule: { min: 0, integer: true },
    default: 100_000,
    describe: "points in each organization's first package",
  });
  y = option(y, "time-scale", {
    type: "number",
    rule: { min: 0, above: true },
    default: 1,
    describe: "multiplier for every simulated duration",
  });
  y = option(y, "rate-limit", {
    type: "number",
    rule: { min: 0, above: true },
    describe: "requests per second per API key before HTTP 429",
  });
  y = option(y, "allow-private-urls", {
    type: "boolean",
    default: false,
    describe: "accept loopback and private addresses for materials and callbacks (local tests only)",
  });
  y = option(y, "plain-videos", {
    type: "boolean",
    default: false,
    describe:
      "every result video one plain picture per size and length, made once (load tests: no CPU spent on pictures)",
  });
  y = option(y, "public-url", {
    type: "string",
    describe:
      "address clients reach the sandbox at, named in result and upload URLs (default: the address listened on; e.g. http://clapper-sandbox:8787 on a Docker network)",
  });
  return y as unknown as Argv<SandboxArgs>;
}

export const sandbox = defineCommand<SandboxArgs>({
  command: "sandbox",
  describe: "run the local emulator of the video and speech services",
  builder: sandboxOptions,
  async handler(args, rt) {
    const { sandboxCommand } = await import("./index.js");
    return sandboxCommand(args, rt.signal, (url) =>
      // Scripts wait for exactly this first line (sandbox contract); with --json, its JSON twin.
      rt.print(args.json ? JSON.stringify({ sandbox: { url } }) : `clapper sandbox listening on ${url}`),
    );
  },
});
