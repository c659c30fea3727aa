// The request rates a run found, kept beside its state (`rates.json`; a state in S3 keeps them under
// its prefix, src/state/store.ts) for the next run on the same account, so it starts where
// the last one settled instead of finding the limit again. An account is named by a hash of the
// service address and the key: the key itself is never written.
import { createHash } from "node:crypto";
import { readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { z } from "zod";
import type { RememberedRate } from "./controller.js";

const Remembered = z.object({ rps: z.number().positive().finite(), settled: z.boolean(), at: z.string() });
const RatesFile = z.object({
  version: z.literal(1),
  accounts: z.record(z.string(), z.record(z.string(), Remembered)),
});
type RatesFile = z.infer<typeof RatesFile>;

/** A file this large is not one clapper wrote. */
export const RATES_MAX_BYTES = 1024 * 1024;
/** A rate older than this says little about the account today. */
const MAX_AGE_MS = 30 * 24 * 3600 * 1000;

export function ratesPath(statePath: string): string {
  return join(dirname(statePath), "rates.json");
}

export function accountId(baseUrl: string, apiKey: string): string {
  return createHash("sha256").update(`${baseUrl}\n${apiKey}`).digest("hex").slice(0, 16);
}

/** The remembered rates in `text`; undefined when it is not what clapper writes. */
export function parseRates(text: string): RatesFile | undefined {
  if (text.length > RATES_MAX_BYTES) return undefined;
  try {
    const parsed = RatesFile.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

async function load(path: string): Promise<RatesFile | undefined> {
  try {
    return parseRates(await readFile(path, "utf8"));
  } catch {
    // Missing or unreadable: a cache, not a record; the run finds the rate again.
    return undefined;
  }
}

/** This account's rates in `file`, by scope name; none when missing or old. */
export function ratesFor(
  file: RatesFile | undefined,
  account: string,
  now = Date.now(),
): Record<string, RememberedRate> {
  const out: Record<string, RememberedRate> = {};
  for (const [scope, r] of Object.entries(file?.accounts[account] ?? {})) {
    const at = Date.parse(r.at);
    if (Number.isFinite(at) && now - at < MAX_AGE_MS) out[scope] = { rps: r.rps, settled: r.settled };
  }
  return out;
}

/** `file` with this account's rates replaced (other accounts' entries stay), as text. */
export function ratesText(
  file: RatesFile | undefined,
  account: string,
  rates: Record<string, RememberedRate>,
  now = new Date(),
): string {
  const out = file ?? { version: 1 as const, accounts: {} };
  const at = now.toISOString();
  out.accounts[account] = Object.fromEntries(
    Object.entries(rates).map(([scope, r]) => [scope, { rps: r.rps, settled: r.settled, at }]),
  );
  return `${JSON.stringify(out, null, 2)}\n`;
}

/** The rates remembered for this account, by scope name; none when the file is missing or old. */
export async function readRates(
  path: string,
  account: string,
  now = Date.now(),
): Promise<Record<string, RememberedRate>> {
  return ratesFor(await load(path), account, now);
}

/** Keeps this account's rates (other accounts' entries stay); written whole, then renamed. */
export async function writeRates(
  path: string,
  account: string,
  rates: Record<string, RememberedRate>,
  now = new Date(),
): Promise<void> {
  const text = ratesText(await load(path), account, rates, now);
  const temp = `${path}.${process.pid}.tmp`;
  await writeFile(temp, text);
  await rename(temp, path);
}
