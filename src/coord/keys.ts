// Every key of one account, under `clapper:{ACCOUNT}:`. The braces are Redis Cluster's hash tag,
// so an account's keys would share one slot; the client is a single-node one today, and some
// scripts touch keys they do not declare (a reservation's own record, its ledgers' companions),
// so a cluster is not supported.

/** What an account id may be: the hash the caller derives from the service address and the key. */
const ACCOUNT = /^[\w.-]{1,128}$/;

export class Keys {
  readonly prefix: string;

  constructor(readonly account: string) {
    if (!ACCOUNT.test(account)) {
      throw new RangeError(
        `Expected the coordinator's account to be a hash of 1 to 128 letters, digits, "_", "." or "-", got ${JSON.stringify(account)}`,
      );
    }
    this.prefix = `clapper:{${account}}:`;
  }

  /**
   * A random name this Redis keeps for the account's data: another one means the data was lost
   * (a restart without persistence, a flush, a failover to an empty replica).
   */
  get generation(): string {
    return `${this.prefix}generation`;
  }

  /** A process's lease: while it exists, the process is alive. */
  holder(holder: string): string {
    return `${this.prefix}holder:${holder}`;
  }

  rate(scope: string): string {
    return `${this.prefix}rate:${scope}`;
  }

  /** Answers that were not a 429, per 100 ms of Redis time, from every process. */
  rateAccepted(scope: string): string {
    return `${this.prefix}rate-accepted:${scope}`;
  }

  slots(service: string): string {
    return `${this.prefix}slots:${service}`;
  }

  /** Pub/sub channel (not a key): a slot of the service was released. */
  slotsFreed(service: string): string {
    return `${this.prefix}slots-freed:${service}`;
  }

  /** A ledger's totals and description; `rest` is `run:KEY` or `pool:NAME:PERIOD-ID`. */
  ledger(rest: string): string {
    return `${this.prefix}ledger:${rest}`;
  }

  /** A pool's ledger in one period. */
  poolLedger(name: string, period: string): string {
    return this.ledger(`pool:${name}:${period}`);
  }

  /** A run's cap across its processes, for one campaign of its state. */
  runLedger(key: string): string {
    return this.ledger(`run:${key}`);
  }

  /** What processes read of a service's tasks in one window of time (a hash: task id -> sighting). */
  sightings(service: string, window: number): string {
    return `${this.prefix}seen:${service}:${window}`;
  }

  /** The shards of one campaign of a manifest split in N that have finished (a set of indexes). */
  shardsDone(run: string): string {
    return `${this.prefix}shards-done:${run}`;
  }

  get ledgerPrefix(): string {
    return `${this.prefix}ledger:`;
  }

  /** One reservation by id (the attempt's idempotency key), wherever it was made. */
  reservation(id: string): string {
    return `${this.prefix}res:${id}`;
  }

  lock(name: string): string {
    return `${this.prefix}lock:${name}`;
  }

  fence(name: string): string {
    return `${this.prefix}fence:${name}`;
  }
}
