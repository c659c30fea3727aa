// pino to stderr, so stdout stays for results (tables, --json). Keys are redacted by path as a
// second line of defence: no code path puts the key into a log object in the first place.
import pino, { type Logger } from "pino";
import { redact } from "../api/redact.js";

export type LogLevel = "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";

export function createLogger(
  level: LogLevel = "warn",
  destination: pino.DestinationStream = pino.destination(2),
): Logger {
  return pino(
    {
      level,
      base: undefined,
      redact: {
        paths: ["apiKey", "api_key", "authorization", "*.authorization", "headers.authorization", "*.apiKey"],
        censor: "[redacted]",
      },
      // Paths cannot see a key inside a message a service wrote: every line is redacted by value too.
      hooks: { streamWrite: redact },
    },
    destination,
  );
}
