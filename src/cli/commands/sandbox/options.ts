// The flags of `clapper sandbox`, apart from the command so that --help does not load the emulator.
import type { Argv } from "yargs";

export interface SandboxArgs {
  host: string;
  port: number;
  key: string[];
  points: number;
  "time-scale": number;
  "rate-limit"?: number;
  "allow-private-urls": boolean;
}

export function sandboxOptions(yargs: Argv): Argv<SandboxArgs> {
  return yargs
    .option("host", { type: "string", default: "127.0.0.1", describe: "address to listen on" })
    .option("port", { type: "number", default: 8787, describe: "port to listen on (0 picks a free one)" })
    .option("key", {
      type: "string",
      array: true,
      default: [] as string[],
      describe:
        "accepted API key and its organization, KEY[=ORG] (repeatable; default sk-ml-sandbox=default)",
    })
    .option("points", {
      type: "number",
      default: 100_000,
      describe: "points in each organization's first package",
    })
    .option("time-scale", { type: "number", default: 1, describe: "multiplier for every simulated duration" })
    .option("rate-limit", { type: "number", describe: "requests per second per API key before HTTP 429" })
    .option("allow-private-urls", {
      type: "boolean",
      default: false,
      describe: "accept loopback and private addresses for materials and callbacks (local tests only)",
    }) as unknown as Argv<SandboxArgs>;
}
