// Shared budgets: a run's cap across all its processes and named pools across runs, each a ledger
// in Redis (cap, reserved, spent). A reservation is named by its journal (the state's id) and its
// attempt's Idempotency-Key, and records the ledgers it was made in, so whoever ends the attempt
// (this process, or the one that resumes the run after a kill) settles it in the right ledgers and
// period, and two journals whose keys happen to be equal never touch each other's.
//
// Life of a reservation:
//   reserve (cap-checked, `pending`, tied to this process's lease)
//   -> the intent is written to the journal -> markSent (`sent`: kept until settled, whoever dies)
//   -> the create leaves -> settle (spent into the totals; a `settled` tombstone stays).
// A `pending` reservation whose holder died lapses (a `lapsed` tombstone): its create was never
// sent, since a create leaves only after markSent succeeded, and markSent succeeds only for the
// holder whose lease still runs. The next run of that journal reserves it again under the cap, or
// withdraws the attempt when it no longer fits.
import type { Link } from "./link.js";
import { type PoolPeriod, periodId, periodTtlMs } from "./period.js";

interface PoolSpec {
  name: string;
  maxPoints: number;
  period: PoolPeriod;
}

export interface LedgerSpec {
  /**
   * The journal the reservations belong to (its state's id): attempt keys are unique only within
   * one, so every reservation id is `SCOPE/KEY`.
   */
  scope: string;
  /** The run's cap, shared by every process of the run: `key` names this campaign of its state. */
  run?: { key: string; name: string; cap: number };
  pools: readonly PoolSpec[];
  /** Attempts the journal has open: their reservations are kept (or made again, or withdrawn). */
  adopt: ReadonlyArray<{ id: string; points: number }>;
  /**
   * What the journal says of an attempt it does not have open: settled (with its cost), or not
   * known (withdrawn). A reservation the coordinator still holds for it (its process lost the
   * coordinator, or was killed, before it could say so) is settled with this, or with 0.
   */
  settled?: (id: string) => { spent: number } | undefined;
  /**
   * The coordinator lost its data since this journal last used it: the spending the journal
   * settled (each attempt's cost and the time of its intent) is counted again, once.
   */
  restore?: ReadonlyArray<{ id: string; spent: number; at: number; thisCampaign: boolean }>;
  /** Tests: the clock used to pick a pool's period. */
  now?: () => Date;
}

export interface SharedLedger {
  tryReserve(points: number, id?: string): Promise<boolean>;
  /** Why the last tryReserve was refused: `the pool "x" (day 2026-11-25) is spent (980 of 1000 committed`. */
  refusal(): string | undefined;
  /** The attempt's intent is durable: its create may leave. Throws when it must not (the reservation lapsed). */
  markSent(id: string): Promise<void>;
  settle(reserved: number, spent: number, id?: string): Promise<void>;
  adjust(from: number, to: number, id?: string): Promise<boolean>;
  /** Open attempts whose never-sent reservation lapsed and no longer fit: to be withdrawn, not sent. */
  readonly withdraw: readonly string[];
  /**
   * What adopting found: reservations kept, restored (the coordinator had lost them), reserved
   * again, settled from the journal, and settled spending counted again after a loss of data.
   */
  readonly adopted: { kept: number; restored: number; reserved: number; settled: number; recounted: number };
}

/** A run's ledger outlives its last write by this long (a run resumed a month later still finds it). */
export const RUN_TTL_MS = 30 * 86_400_000;
const SCOPE = /^[\w.-]{1,128}$/;

interface Described {
  key: string;
  cap: number;
  ttl: number;
  kind: "run" | "pool";
  name: string;
  period: string;
  periodId: string;
}

class ReservationLapsedError extends Error {
  override name = "ReservationLapsedError";
}

export async function openLedger(link: Link, spec: LedgerSpec): Promise<SharedLedger> {
  const ledger = new RedisLedger(link, spec);
  await ledger.adopt();
  return ledger;
}

class RedisLedger implements SharedLedger {
  withdraw: string[] = [];
  adopted = { kept: 0, restored: 0, reserved: 0, settled: 0, recounted: 0 };
  private refused: string | undefined;
  /** `SCOPE/`: what every reservation id of this journal starts with. */
  private readonly prefix: string;

  constructor(
    private readonly link: Link,
    private readonly spec: LedgerSpec,
  ) {
    if (!SCOPE.test(spec.scope)) {
      throw new RangeError(
        `Expected a ledger scope of 1 to 128 letters, digits, "_", "." or "-", got ${JSON.stringify(spec.scope)}`,
      );
    }
    this.prefix = `${spec.scope}/`;
    for (const p of spec.pools) {
      if (!Number.isInteger(p.maxPoints) || p.maxPoints < 0) {
        throw new RangeError(
          `Expected pool ${p.name}'s max_points to be an integer >= 0, got ${p.maxPoints}`,
        );
      }
    }
  }

  /** The ledgers a reservation made at `at` (default now) goes into: the run's, and each pool's period. */
  private described(at?: Date): Described[] {
    const now = at ?? this.spec.now?.() ?? new Date();
    const out: Described[] = [];
    if (this.spec.run) {
      out.push({
        key: this.link.keys.runLedger(this.spec.run.key),
        cap: this.spec.run.cap,
        ttl: RUN_TTL_MS,
        kind: "run",
        name: this.spec.run.name,
        period: "",
        periodId: "",
      });
    }
    for (const p of this.spec.pools) {
      const id = periodId(p.period, now);
      out.push({
        key: this.link.keys.poolLedger(p.name, id),
        cap: p.maxPoints,
        ttl: periodTtlMs(p.period),
        kind: "pool",
        name: p.name,
        period: p.period,
        periodId: id,
      });
    }
    return out;
  }

  private args(ledgers: Described[]): Array<string | number> {
    return ledgers.flatMap((l) => [l.cap, l.ttl, l.kind, l.name, l.period, l.periodId]);
  }

  /** A reservation lives as long as the longest ledger it is in. */
  private resTtl(ledgers: Described[]): number {
    return Math.max(RUN_TTL_MS, ...ledgers.map((l) => l.ttl));
  }

  async adopt(): Promise<void> {
    const ledgers = this.described();
    const pairs = this.spec.adopt.flatMap((a) => [this.prefix + a.id, a.points]);
    const r = (await this.link.script(
      "clapperLedgerAdopt",
      ledgers.map((l) => l.key),
      [
        this.link.now(),
        this.link.keys.prefix,
        this.link.holder,
        this.resTtl(ledgers),
        "",
        ...this.args(ledgers),
        ...pairs,
      ],
    )) as [number, number, number, string, string, string, string[] | undefined];
    this.adopted.kept = Number(r[0]);
    this.adopted.restored = Number(r[1]);
    this.adopted.reserved = Number(r[2]);
    this.withdraw = Array.isArray(r[6]) ? r[6].map((id) => String(id).slice(this.prefix.length)) : [];
    await this.reconcile();
    if (this.spec.restore && this.spec.restore.length > 0) await this.recount(this.spec.restore);
  }

  /**
   * This journal's reservations that the coordinator still holds and the journal does not have
   * open: settled with what the journal says (a process killed or cut off before it told Redis),
   * or with 0 when the journal withdrew the attempt. Found by their own records, wherever they
   * were made (a pool since removed from the manifest included).
   */
  private async reconcile(): Promise<void> {
    const open = new Set(this.spec.adopt.map((a) => a.id));
    const records = this.link.keys.reservation("");
    const ids: string[] = [];
    let cursor = "0";
    do {
      const [next, batch] = await this.link.run("read the reservations", () =>
        this.link.redis.scan(cursor, "MATCH", `${records}${this.prefix}*`, "COUNT", 1000),
      );
      cursor = next;
      for (const key of batch) ids.push(key.slice(records.length));
    } while (cursor !== "0");
    for (const id of ids) {
      const key = id.slice(this.prefix.length);
      if (open.has(key)) continue;
      const spent = this.spec.settled?.(key)?.spent ?? 0;
      const r = (await this.link.script(
        "clapperLedgerSettle",
        [],
        [this.link.now(), this.link.keys.prefix, id, spent, ""],
      )) as [number];
      if (Number(r[0]) === 1) this.adopted.settled += 1;
    }
  }

  /** After a loss of data: each ledger of a period running now counts the journal's spending in it again. */
  private async recount(restore: NonNullable<LedgerSpec["restore"]>): Promise<void> {
    const current = new Map(this.described().map((l) => [l.key, l]));
    const groups = new Map<string, Array<string | number>>();
    for (const a of restore) {
      if (!(a.spent > 0)) continue;
      for (const l of this.described(new Date(a.at))) {
        // The run's cap counts this campaign's spending only (as the local ledger does).
        if (!current.has(l.key) || (l.kind === "run" && !a.thisCampaign)) continue;
        const pairs = groups.get(l.key) ?? [];
        // One tombstone per attempt and ledger kind: the run's and the pool's are counted apart.
        pairs.push(`${this.prefix}${a.id}#${l.kind}`, a.spent);
        groups.set(l.key, pairs);
      }
    }
    for (const [key, pairs] of groups) {
      const ledger = current.get(key) as Described;
      const n = await this.link.script(
        "clapperLedgerRestore",
        [key],
        [this.link.now(), this.link.keys.prefix, this.resTtl([ledger]), "", ...this.args([ledger]), ...pairs],
      );
      this.adopted.recounted += Number(n);
    }
  }

  async tryReserve(points: number, key?: string): Promise<boolean> {
    if (key === undefined) throw new Error("a shared reservation needs its attempt's idempotency key");
    this.refused = undefined;
    const ledgers = this.described();
    if (ledgers.length === 0) return true;
    const r = (await this.link.script(
      "clapperLedgerReserve",
      ledgers.map((l) => l.key),
      [
        this.link.now(),
        this.link.keys.prefix,
        this.prefix + key,
        points,
        this.link.holder,
        this.resTtl(ledgers),
        "",
        ...this.args(ledgers),
      ],
    )) as [number, number, string, string];
    if (Number(r[0]) === 1) return true;
    const l = ledgers[Number(r[1]) - 1];
    const committed = Number(r[2]);
    const cap = Number(r[3]);
    this.refused =
      l?.kind === "pool"
        ? `the pool "${l.name}" (${l.period === "total" ? "in total" : `${l.period} ${l.periodId}`}) is spent (${committed} of ${cap} committed by every run that names it`
        : `the run's points cap, shared by all its processes, was reached (${committed} of ${cap} committed`;
    return false;
  }

  refusal(): string | undefined {
    return this.refused;
  }

  async markSent(key: string): Promise<void> {
    if (this.described().length === 0) return;
    const r = await this.link.script(
      "clapperLedgerMarkSent",
      [],
      [this.link.now(), this.link.keys.prefix, this.prefix + key, this.link.holder],
    );
    if (Number(r) !== 1) {
      // This process's lease lapsed (it stalled): its reservation may be lapsed or adopted, not sent.
      throw new ReservationLapsedError(
        `the coordinator ${this.link.address} no longer holds the reservation of ${key} for this process (its lease lapsed); the create was not sent`,
      );
    }
  }

  async settle(_reserved: number, spent: number, key?: string): Promise<void> {
    // Settled through the reservation's own record, whatever the manifest names now.
    if (key === undefined) return;
    await this.link.script(
      "clapperLedgerSettle",
      [],
      [this.link.now(), this.link.keys.prefix, this.prefix + key, spent, ""],
    );
  }

  async adjust(_from: number, to: number, key?: string): Promise<boolean> {
    const ledgers = this.described();
    if (key === undefined || ledgers.length === 0) return true;
    const r = (await this.link.script(
      "clapperLedgerAdjust",
      ledgers.map((l) => l.key),
      [
        this.link.now(),
        this.link.keys.prefix,
        this.prefix + key,
        to,
        this.link.holder,
        this.resTtl(ledgers),
        "",
        ...this.args(ledgers),
      ],
    )) as [number];
    return Number(r[0]) === 1;
  }
}
