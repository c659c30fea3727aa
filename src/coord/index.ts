// The coordinator: what every clapper process on one account shares through Redis (`--coordinator`).
// One request rate and one in-flight cap per service, the budgets (a run's cap across its
// processes, named pools across runs), and run locks with leases. The account is a hash the caller
// derives from the service address and the API key; the key itself never reaches Redis.
//
// Every read-modify-write is one Lua script (src/coord/scripts.ts), so it is atomic however many
// processes call at once; every key expires, so an account that stops using clapper leaves nothing
// behind; a process's slots and never-sent reservations are tied to its lease (src/coord/link.ts)
// and return when it dies.

import { acquireCoordLock, type CoordLock, type LockOptions } from "../locks/redis-lock.js";
import type { RateSettings } from "../rate/controller.js";
import { type BudgetView, readBudgets } from "./budgets.js";
import { type LedgerSpec, openLedger, RUN_TTL_MS, type SharedLedger } from "./ledger.js";
import { Link, type LinkOptions } from "./link.js";
import { RedisSharedRate, type SharedRate } from "./shared-rate.js";
import { SharedSightings } from "./sightings.js";
import { RedisSlots, type SharedSlots } from "./slots.js";
import { type CoordinatorUrl, parseCoordinatorUrl } from "./url.js";

/** How long the record of a sharded run's finished shards is kept: far beyond any run. */
const SHARDS_DONE_TTL_MS = 30 * 24 * 3600 * 1000;

export type { CoordLock, LockOptions as CoordLockOptions } from "../locks/redis-lock.js";
export type { BudgetView } from "./budgets.js";
export {
  CoordinatorLostError,
  CoordinatorUnavailableError,
  CoordLockHeldError,
  CoordLockLostError,
} from "./errors.js";
export type { LedgerSpec, SharedLedger } from "./ledger.js";
export { type PoolPeriod, periodId } from "./period.js";
export type { SharedRate } from "./shared-rate.js";
export type { RawSighting, SharedSightings } from "./sightings.js";
export type { SharedSlots } from "./slots.js";
export { type CoordinatorUrl, parseCoordinatorUrl } from "./url.js";

/** How long a process's lease lasts without a heartbeat: a killed process's slots return within it. */
export const DEFAULT_HOLDER_LEASE_MS = 30_000;
const CONNECT_TIMEOUT_MS = 3_000;
/** Every command's answer: a script is short, so a slower answer is a server in trouble. */
const COMMAND_TIMEOUT_MS = 5_000;

export interface ConnectOptions {
  /** The account's hash (never the key). */
  account: string;
  signal?: AbortSignal;
  /** Shorter in tests (CLAPPER_LOCK_LEASE_MS). */
  holderLeaseMs?: number;
  connectTimeoutMs?: number;
  commandTimeoutMs?: number;
  /** The coordinator was lost mid-run: the run halts (exit 6). Called once. */
  onLost?: (error: Error) => void;
  /** Tests: the time the scripts use instead of the server's clock. */
  now?: () => number;
}

export class Coordinator {
  private readonly rates = new Map<string, RedisSharedRate>();
  private readonly caps = new Map<string, RedisSlots>();
  private readonly seen = new Map<string, SharedSightings>();

  constructor(readonly link: Link) {}

  /** This process's name in the coordinator (host, pid, random). */
  get holder(): string {
    return this.link.holder;
  }

  /** The address, password hidden. */
  get address(): string {
    return this.link.address;
  }

  /** The account's data generation in this Redis (another one: the data was lost since). */
  get generation(): string {
    return this.link.generation;
  }

  /** The rate of `scope` (`key`, `video`, `speech`) that every process of the account shares. */
  rate(scope: string, settings: RateSettings): SharedRate {
    let rate = this.rates.get(scope);
    if (!rate) {
      rate = new RedisSharedRate(this.link, scope, settings);
      this.rates.set(scope, rate);
    }
    return rate;
  }

  /** The in-flight cap of `service` that every process of the account shares. */
  slots(service: string, cap: number): SharedSlots {
    let slots = this.caps.get(service);
    if (!slots) {
      slots = new RedisSlots(this.link, service, cap);
      this.caps.set(service, slots);
    }
    return slots;
  }

  /** What every process of the account reads of `service`'s tasks (see sightings.ts). */
  sightings(service: string): SharedSightings {
    let seen = this.seen.get(service);
    if (!seen) {
      seen = new SharedSightings(this.link, service);
      this.seen.set(service, seen);
    }
    return seen;
  }

  lock(name: string, options: LockOptions = {}): Promise<CoordLock> {
    return acquireCoordLock(this.link, name, options);
  }

  /** A ledger over the run's shared cap and the named pools; adopts the attempts a run left open. */
  ledger(spec: LedgerSpec): Promise<SharedLedger> {
    return openLedger(this.link, spec);
  }

  /** Every budget the coordinator holds for the account (never-sent reservations of dead processes lapsed first). */
  budgets(): Promise<BudgetView[]> {
    return readBudgets(this.link);
  }

  /** One pool's books in one period (`2026-11-25`, `2026-W48`, `2026-11`, `total`); undefined when untouched. */
  async pool(name: string, period: string): Promise<BudgetView | undefined> {
    const [view] = await readBudgets(this.link, [this.link.keys.poolLedger(name, period)]);
    return view;
  }

  /**
   * Records that shard `index` of the run `run` (`runLedgerKey`) finished; true once the set of `total`
   * is complete: the shard that sees it writes the merged report. Kept 30 days.
   */
  async shardFinished(run: string, index: number, total: number): Promise<boolean> {
    const key = this.link.keys.shardsDone(run);
    const [, , [, count]] = (await this.link.run("record a finished shard", () =>
      this.link.redis.multi().sadd(key, String(index)).pexpire(key, SHARDS_DONE_TTL_MS).scard(key).exec(),
    )) as [unknown, unknown, [unknown, number]];
    // Every shard that finds the set complete merges: a merge is written whole, so a second one is harmless.
    return count >= total;
  }

  /**
   * Holds `points` of the run's shared cap (`runLedgerKey`) ahead for this process, when they fit
   * beside what every process reserved, spent and holds: a shard's admission, all of its work or
   * none, exact however many shards are admitted at once. Its reservations then come out of the
   * hold; the rest goes with `points` 0, or with this process's lease. `committed`: the others'.
   */
  async holdRun(run: { key: string; name: string; cap: number }, points: number) {
    const r = (await this.link.script(
      "clapperLedgerHold",
      [this.link.keys.runLedger(run.key)],
      [
        this.link.now(),
        this.link.keys.prefix,
        this.link.holder,
        points,
        run.cap,
        RUN_TTL_MS,
        "run",
        run.name,
        "",
        "",
      ],
    )) as [number, string];
    return { ok: Number(r[0]) === 1, committed: Number(r[1]) };
  }

  /** A run's shared cap (`runLedgerKey`): its books; undefined when untouched. */
  async run(key: string): Promise<BudgetView | undefined> {
    const [view] = await readBudgets(this.link, [this.link.keys.runLedger(key)]);
    return view;
  }

  /** Ends this process's lease (its slots return, its never-sent reservations lapse) and disconnects. */
  async close(): Promise<void> {
    // What was read last is told before the connection goes (best effort, bounded by its timeout).
    await Promise.all([...this.seen.values()].map((s) => s.close()));
    return this.link.close();
  }
}

/**
 * Connects and takes this process's lease. Unreachable (refused, no answer within the connect
 * timeout, a wrong password): CoordinatorUnavailableError naming the address, nothing else done.
 */
export async function connectCoordinator(
  url: string | CoordinatorUrl,
  options: ConnectOptions,
): Promise<Coordinator> {
  const parsed = typeof url === "string" ? parseCoordinatorUrl(url) : url;
  const linkOptions: LinkOptions = {
    account: options.account,
    connectTimeoutMs: options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS,
    commandTimeoutMs: options.commandTimeoutMs ?? COMMAND_TIMEOUT_MS,
    holderLeaseMs: options.holderLeaseMs ?? DEFAULT_HOLDER_LEASE_MS,
    signal: options.signal,
    onLost: options.onLost,
    now: options.now,
  };
  const link = await Link.open(parsed, linkOptions);
  return new Coordinator(link);
}
