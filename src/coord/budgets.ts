// `clapper budget`: the books of every shared budget the coordinator holds for an account.
import type { Link } from "./link.js";

export interface BudgetView {
  kind: "run" | "pool";
  /** The pool's name, or the run's `NAME:CAMPAIGN`. */
  name: string;
  /** Pools: `day`, `week`, `month` or `total`, and the period these figures are for. */
  period?: string;
  periodId?: string;
  cap: number;
  /** Points of reservations held now (tasks created, or about to be). */
  reserved: number;
  spent: number;
  /** Reservations held now. */
  reservations: number;
  /** Points held ahead by admitted processes that have not reserved them yet (a shard's estimate). */
  held: number;
}

/** At most this many ledgers are read (an account's pools and recent runs are far fewer). */
const MAX_LEDGERS = 10_000;

/** Every ledger of the account, or only those named (`ledger:REST` keys; a missing one is left out). */
export async function readBudgets(link: Link, only?: readonly string[]): Promise<BudgetView[]> {
  const keys = only ? [...only] : await listLedgers(link);
  const views: BudgetView[] = [];
  // A script per batch: each lapses the never-sent reservations of dead processes before reading.
  for (let i = 0; i < keys.length; i += 100) {
    const batch = keys.slice(i, i + 100);
    const rows = (await link.script("clapperLedgerView", batch, [link.now(), link.keys.prefix])) as Array<
      [string, string[], number, string?]
    >;
    for (const [, flat, open, held] of rows) {
      const h: Record<string, string> = {};
      for (let j = 0; j + 1 < flat.length; j += 2) h[flat[j] as string] = flat[j + 1] as string;
      const kind = h.kind === "pool" ? "pool" : "run";
      views.push({
        kind,
        name: h.name ?? "",
        ...(kind === "pool" ? { period: h.period ?? "", periodId: h.periodId ?? "" } : {}),
        cap: Number(h.cap ?? 0),
        reserved: round(Number(h.reserved ?? 0)),
        spent: round(Number(h.spent ?? 0)),
        reservations: Number(open),
        held: round(Number(held ?? 0)),
      });
    }
  }
  return views;
}

/** Totals are kept with HINCRBYFLOAT: whole points, shown whole. */
function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}

async function listLedgers(link: Link): Promise<string[]> {
  const keys: string[] = [];
  let cursor = "0";
  do {
    const [next, batch] = await link.run("list the budgets", () =>
      link.redis.scan(cursor, "MATCH", `${link.keys.ledgerPrefix}*`, "COUNT", 500),
    );
    cursor = next;
    keys.push(...batch);
  } while (cursor !== "0" && keys.length < MAX_LEDGERS);
  return keys;
}
