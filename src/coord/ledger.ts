// Shared budgets: a run's cap across all its processes and named pools across runs, each a ledger
// in Redis (cap, reserved, spent). A reservation is named by its attempt's Idempotency-Key and
// records the ledgers it was made in, so whoever ends the attempt (this process, or the one that
// resumes the run after a kill) settles it in the right ledgers and period.
//
// Life of a reservation:
//   reserve (cap-checked, `pending`, tied to this process's lease)
//   -> the intent is written to the journal -> markSent (`sent`: kept until settled, whoever dies)
//   -> the create leaves -> settle (spent into the totals; a `settled` tombstone stays).
// A `pending` reservation whose holder died lapses (a `lapsed` tombstone): its create was never
// sent, since a create leaves only after markSent succeeded. The next run of that journal reserves
// it again under the cap, or withdraws the attempt when it no longer fits.

import type { Link } from "./link.js";
import { type PoolPeriod, periodId, periodTtlMs } from "./period.js";

export interface PoolSpec {
  name: string;
  maxPoints: number;
  period: PoolPeriod;
}

export interface LedgerSpec {
  /** The run's cap, shared by every process of the run (its shards): `NAME:CAMPAIGN`. */
  run?: { key: string; cap: number };
  pools: readonly PoolSpec[];
  /** Attempts the journal has open: their reservations are kept (or made again, or withdrawn). */
  adopt: ReadonlyArray<{ id: string; points: number }>;
  /**
   * What the journal says of a settled attempt: a reservation the coordinator still holds for it
   * (its process lost the coordinator before it could settle) is settled with this.
   */
  settled?: (id: string) => { spent: number } | undefined;
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
  /** What adopting found: reservations kept, restored (the coordinator had lost them), reserved again. */
  readonly adopted: { kept: number; restored: number; reserved: number; settled: number };
}

/** A run's ledger outlives its last write by this long (a run resumed a month later still finds it). */
const RUN_TTL_MS = 30 * 86_400_000;

interface Described {
  key: string;
  cap: number;
  ttl: number;
  kind: "run" | "pool";
  name: string;
  period: string;
  periodId: string;
}

export class ReservationLapsedError extends Error {
  override name = "ReservationLapsedError";
}

export async function openLedger(link: Link, spec: LedgerSpec): Promise<SharedLedger> {
  const ledger = new RedisLedger(link, spec);
  await ledger.adopt();
  return ledger;
}

class RedisLedger implements SharedLedger {
  withdraw: string[] = [];
  adopted = { kept: 0, restored: 0, reserved: 0, settled: 0 };
  private refused: string | undefined;

  constructor(
    private readonly link: Link,
    private readonly spec: LedgerSpec,
  ) {
    for (const p of spec.pools) {
      if (!Number.isInteger(p.maxPoints) || p.maxPoints < 0) {
        throw new RangeError(
          `Expected pool ${p.name}'s max_points to be an integer >= 0, got ${p.maxPoints}`,
        );
      }
    }
  }

  /** The ledgers a reservation made now goes into: the run's, and each pool's current period. */
  private described(): Described[] {
    const now = this.spec.now?.() ?? new Date();
    const out: Described[] = [];
    if (this.spec.run) {
      out.push({
        key: this.link.keys.ledger(`run:${this.spec.run.key}`),
        cap: this.spec.run.cap,
        ttl: RUN_TTL_MS,
        kind: "run",
        name: this.spec.run.key,
        period: "",
        periodId: "",
      });
    }
    for (const p of this.spec.pools) {
      const id = periodId(p.period, now);
      out.push({
        key: this.link.keys.ledger(`pool:${p.name}:${id}`),
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
    if (ledgers.length === 0) return;
    const pairs = this.spec.adopt.flatMap((a) => [a.id, a.points]);
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
    this.adopted = { kept: Number(r[0]), restored: Number(r[1]), reserved: Number(r[2]), settled: 0 };
    this.withdraw = Array.isArray(r[6]) ? r[6].map(String) : [];
    await this.reconcile(ledgers);
  }

  /** Reservations still held for attempts the journal settled (the settle never reached Redis). */
  private async reconcile(ledgers: Described[]): Promise<void> {
    const settled = this.spec.settled;
    if (!settled) return;
    const ids = new Set<string>();
    for (const l of ledgers) {
      const companion = `${this.link.keys.prefix}ledger-ids:${l.key.slice(this.link.keys.ledgerPrefix.length)}`;
      const held = await this.link.run("read a ledger", () => this.link.redis.hkeys(companion));
      for (const id of held) ids.add(id);
    }
    for (const id of ids) {
      const s = settled(id);
      if (!s) continue;
      const r = (await this.link.script(
        "clapperLedgerSettle",
        [],
        [this.link.now(), this.link.keys.prefix, id, s.spent, ""],
      )) as [number];
      if (Number(r[0]) === 1) this.adopted.settled += 1;
    }
  }

  async tryReserve(points: number, id?: string): Promise<boolean> {
    if (id === undefined) throw new Error("a shared reservation needs its attempt's idempotency key");
    this.refused = undefined;
    const ledgers = this.described();
    if (ledgers.length === 0) return true;
    const r = (await this.link.script(
      "clapperLedgerReserve",
      ledgers.map((l) => l.key),
      [
        this.link.now(),
        this.link.keys.prefix,
        id,
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

  async markSent(id: string): Promise<void> {
    if (this.described().length === 0) return;
    const r = await this.link.script(
      "clapperLedgerMarkSent",
      [],
      [this.link.now(), this.link.keys.prefix, id, this.link.holder],
    );
    if (Number(r) !== 1) {
      // This process's lease lapsed (it stalled) and others may have spent the points: not sent.
      throw new ReservationLapsedError(
        `the coordinator ${this.link.address} no longer holds the reservation of ${id} (this process's lease lapsed); the create was not sent`,
      );
    }
  }

  async settle(_reserved: number, spent: number, id?: string): Promise<void> {
    if (id === undefined || this.described().length === 0) return;
    await this.link.script(
      "clapperLedgerSettle",
      [],
      [this.link.now(), this.link.keys.prefix, id, spent, ""],
    );
  }

  async adjust(_from: number, to: number, id?: string): Promise<boolean> {
    const ledgers = this.described();
    if (id === undefined || ledgers.length === 0) return true;
    const r = (await this.link.script(
      "clapperLedgerAdjust",
      ledgers.map((l) => l.key),
      [
        this.link.now(),
        this.link.keys.prefix,
        id,
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
