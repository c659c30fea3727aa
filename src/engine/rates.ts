// The request rates a run found, kept beside its state (`rates.json`) for the next run on the same
// account, so it starts where the last one settled instead of finding the limit again. An account
// is named by a hash of the service address and the key: the key itself is never written.
import { createHash } from "node:crypto";
import { readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { z } from "zod";
import type { RememberedRate } from "./rate.js";

const Remembered = z.object({ rps: z.number().positive().finite(), settled: z.boolean(), at: z.string() });
const RatesFile = z.object({
  version: z.literal(1),
  accounts: z.record(z.string(), z.record(z.string(), Remembered)),
});
type RatesFile = z.infer<typeof RatesFile>;

/** A file this large is not one clapper wrote. */
const MAX_BYTES = 1024 * 1024;
/** A rate older than this says little about the account today. */
const MAX_AGE_MS = 30 * 24 * 3600 * 1000;

export function ratesPath(statePath: string): string {
  return join(dirname(statePath), "rates.json");
}

export function accountId(baseUrl: string, apiKey: string): string {
  return createHash("sha256").update(`${baseUrl}\n${apiKey}`).digest("hex").slice(0, 16);
}

async function load(path: string): Promise<RatesFile | undefined> {
  try {
    const text = await readFile(path, "utf8");
    if (text.length > MAX_BYTES) return undefined;
    const parsed = RatesFile.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    // Missing or unreadable: a cache, not a record; the run finds the rate again.
    return undefined;
  }
}

/** The rates remembered for this account, by scope name; none when the file is missing or old. */
export async function readRates(
  path: string,
  account: string,
  now = Date.now(),
): Promise<Record<string, RememberedRate>> {
  const file = await load(path);
  const out: Record<string, RememberedRate> = {};
  for (const [scope, r] of Object.entries(file?.accounts[account] ?? {})) {
    const at = Date.parse(r.at);
    if (Number.isFinite(at) && now - at < MAX_AGE_MS) out[scope] = { rps: r.rps, settled: r.settled };
  }
  return out;
}

/** Keeps this account's rates (other accounts' entries stay); written whole, then renamed. */
export async function writeRates(
  path: string,
  account: string,
  rates: Record<string, RememberedRate>,
  now = new Date(),
): Promise<void> {
  const file = (await load(path)) ?? { version: 1 as const, accounts: {} };
  const at = now.toISOString();
  file.accounts[account] = Object.fromEntries(
    Object.entries(rates).map(([scope, r]) => [scope, { rps: r.rps, settled: r.settled, at }]),
  );
  const temp = `${path}.${process.pid}.tmp`;
  await writeFile(temp, `${JSON.stringify(file, null, 2)}\n`);
  await rename(temp, path);
}
