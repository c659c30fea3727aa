// The usage text: what --help says around the commands, and yargs' refusals made precise.
import { closest, distance } from "fastest-levenshtein";

export const USAGE =
  "$0 <command> [options]\n\nStoryboard manifests to finished video and speech, budgeted and resumable.";

export const EPILOG =
  "Every flag can also be set by a CLAPPER_* variable (--max-points: CLAPPER_MAX_POINTS); the flag wins. " +
  "The API key comes from CLAPPER_API_KEY or --api-key-file, never from the command line.\n" +
  "Exit codes: 0 done, 1 failed jobs or a refused request, 2 usage or manifest error, 3 budget, " +
  "4 interrupted, 5 locked, 6 unreachable, 70 internal error.";

/** yargs' usage messages, made precise: the unknown command or flag named, a close one suggested. */
export function usageMessage(message: string, argv: readonly string[], flags: ReadonlySet<string>): string {
  const recommended = /^Did you mean (.+)\?$/.exec(message);
  if (recommended?.[1]) {
    const words = argv.filter((a) => !a.startsWith("-"));
    const typed = words.length > 0 ? closest(recommended[1], words) : undefined;
    return `unknown command${typed ? ` ${JSON.stringify(typed)}` : ""}: did you mean ${recommended[1]}? (see clapper --help)`;
  }
  const unknown = /^Unknown arguments?: (.+)$/s.exec(message);
  if (unknown?.[1]) {
    const known = [...flags, "help", "version"];
    const names = unknown[1].split(", ");
    // yargs lists `maxPionts` beside `max-pionts`: one unknown flag, named once.
    const camel = (n: string) => n.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
    const distinct = names.filter((n) => !names.some((other) => other !== n && camel(other) === n));
    const parts = distinct.map((name) => {
      const asFlag = argv.some((a) => a === `--${name}` || a.startsWith(`--${name}=`) || a === `-${name}`);
      if (!asFlag) return name;
      const best = closest(name, known);
      return best && distance(name, best) <= Math.max(2, Math.floor(name.length / 3))
        ? `--${name} (did you mean --${best}?)`
        : `--${name}`;
    });
    return `unknown argument${parts.length === 1 ? "" : "s"}: ${parts.join(", ")} (see clapper --help)`;
  }
  const missing = /^Not enough non-option arguments: got (\d+), need at least (\d+)$/.exec(message);
  if (missing) {
    const words = argv.filter((a) => !a.startsWith("-"));
    return `missing ${Number(missing[2]) - Number(missing[1]) === 1 ? "an argument" : "arguments"}: see clapper ${words.join(" ")} --help`;
  }
  return message;
}
