// The coordinator's Lua scripts: every read-modify-write of the coordinator is one script, so it is
// atomic however many processes call at once. Each is its own file in src/coord/lua/, after the
// parts it shares with others (the prelude, the shared rate's or the ledgers' functions); what each
// takes and returns is said at the top of its file.
//
// The files are read as this module loads, beside it: vitest runs src/ and finds src/coord/lua/;
// `npm run build` copies them to dist/coord/lua/ (scripts/bundle.mjs), where both dist/coord/
// scripts.js and the bundle find them (the bundle's import.meta.url is each module's own file in
// dist/), and the package ships dist/. So there is no generated source to keep in step with the
// files, and they stay plain Lua that an editor or a linter can read. The rate's constants are one
// Lua table `R` put before the rate's scripts, built from RATE_RULES: not ARGV (every call would
// carry them) nor text substituted into the files (which would no longer be Lua).
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { RATE_RULES as ENGINE_RATE_RULES } from "../rate/controller.js";

/** RateController's rules (src/rate/controller.ts), as the shared rate applies them. */
export const RATE_RULES = {
  ...ENGINE_RATE_RULES,
  /** Accepted answers are counted per this many ms of server time (the callers group ages by 10 ms). */
  bucketMs: 10,
  /** Every process tells its accepted answers within this long (src/coord/shared-rate.ts FLUSH_MS, and a round trip). */
  reportLagMs: 40,
} as const;

type RateRules = { readonly [K in keyof typeof RATE_RULES]: number };

/** Every script by the name it is defined under (ioredis `defineCommand`), as the files it is made of. */
const PARTS = {
  clapperRateTurn: ["prelude", "rate", "rate-args", "rate-turn"],
  clapperRateLimit: ["prelude", "rate", "rate-args", "rate-limit"],
  clapperSlotsAcquire: ["prelude", "slots-acquire"],
  clapperSlotsRelease: ["slots-release"],
  clapperHolderRenew: ["holder-renew"],
  clapperLockAcquire: ["lock-acquire"],
  clapperLockRenew: ["lock-renew"],
  clapperLockRelease: ["lock-release"],
  clapperLedgerReserve: ["prelude", "ledger", "ledger-reserve"],
  clapperLedgerMarkSent: ["prelude", "ledger", "ledger-mark-sent"],
  clapperLedgerSettle: ["prelude", "ledger", "ledger-settle"],
  clapperLedgerAdjust: ["prelude", "ledger", "ledger-adjust"],
  clapperLedgerAdopt: ["prelude", "ledger", "ledger-adopt"],
  clapperLedgerView: ["prelude", "ledger", "ledger-view"],
  clapperLedgerHold: ["prelude", "ledger", "ledger-hold"],
  clapperLedgerRestore: ["prelude", "ledger", "ledger-restore"],
} as const;

export type ScriptName = keyof typeof PARTS;

function readPart(name: string): string {
  const url = new URL(`./lua/${name}.lua`, import.meta.url);
  try {
    return readFileSync(url, "utf8");
  } catch (error) {
    throw new Error(
      `The coordinator's script ${fileURLToPath(url)} cannot be read (${(error as Error).message}): \`npm run build\` copies src/coord/lua/ into dist/coord/lua/`,
    );
  }
}

/** `local R = { name = value, ... }`: the rules as the rate's Lua reads them. */
function rulesTable(rules: RateRules): string {
  const fields = Object.entries(rules).map(([name, value]) => {
    if (!Number.isFinite(value)) throw new RangeError(`RATE_RULES.${name} must be a finite number`);
    return `${name} = ${value}`;
  });
  return `local R = { ${fields.join(", ")} }\n`;
}

/** The scripts' text, the shared rate's built with `rules` (a test may change one, such as the report lag). */
export function buildScripts(rules: RateRules = RATE_RULES): Record<ScriptName, string> {
  const texts = new Map<string, string>();
  const part = (name: string) => {
    let text = texts.get(name);
    if (text === undefined) {
      text = name === "rate" ? rulesTable(rules) + readPart(name) : readPart(name);
      texts.set(name, text);
    }
    return text;
  };
  const out = {} as Record<ScriptName, string>;
  for (const [name, parts] of Object.entries(PARTS) as Array<[ScriptName, readonly string[]]>) {
    out[name] = parts.map(part).join("\n");
  }
  return out;
}

/** Every script by its name (ioredis `defineCommand`: EVALSHA, EVAL on NOSCRIPT). */
export const SCRIPTS = buildScripts();
