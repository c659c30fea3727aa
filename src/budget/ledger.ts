// The run's own points ledger: every job's estimate is reserved here before its create and settled
// when its attempt ends, so the cap (budget and balance) holds however many creates run at once.
// An interface: with a coordinator, the shards of a run and the runs of a pool share one ledger in
// Redis (src/coord), where every reservation is named by its attempt's idempotency key so that
// whichever process ends the attempt settles it.

export interface PointsLedger {
  /** Reserves `points` for attempt `id` if the cap allows; false otherwise (nothing reserved). */
  tryReserve(points: number, id?: string): Promise<boolean>;
  /**
   * The attempt's intent is on disk and its create may leave at any moment: its reservation is
   * kept until the attempt is settled, by this process or the one that resumes it.
   */
  markSent?(id: string): Promise<void>;
  /** Ends a reservation: `spent` is spent, the rest is freed. */
  settle(reserved: number, spent: number, id?: string): Promise<void>;
  /**
   * Changes a reservation that is already held (the price moved, or the task's own cost became
   * known). Never refused, since the points are committed at the service either way; returns
   * whether the ledger is still within its cap.
   */
  adjust(from: number, to: number, id?: string): Promise<boolean>;
  snapshot(): { cap: number; reserved: number; spent: number };
  /**
   * Why the last `tryReserve` refused when a ledger other than the run's own did (a shared pool):
   * `the pool "studio" (day 2026-11-25) is spent (980 of 1000 committed`, closed by the caller.
   */
  refusal?(): string | undefined;
  /**
   * Attempts (by key) an earlier process left open whose create was never sent and which no longer
   * fit a shared budget: the run withdraws them instead of sending them.
   */
  readonly withdraw?: readonly string[];
}

export class LocalLedger implements PointsLedger {
  private reserved = 0;
  private spent = 0;

  /**
   * @param cap points this run may commit in all (reserved + spent)
   * @param reservedAlready reservations of attempts still open from an earlier process
   */
  constructor(
    private readonly cap: number,
    reservedAlready = 0,
  ) {
    this.reserved = reservedAlready;
  }

  async tryReserve(points: number, _id?: string): Promise<boolean> {
    // Invariant: reserved + spent <= cap after every call.
    if (this.reserved + this.spent + points > this.cap) return false;
    this.reserved += points;
    return true;
  }

  async settle(reserved: number, spent: number, _id?: string): Promise<void> {
    this.reserved = Math.max(0, this.reserved - reserved);
    this.spent += spent;
  }

  async adjust(from: number, to: number, _id?: string): Promise<boolean> {
    this.reserved = Math.max(0, this.reserved - from + to);
    return this.reserved + this.spent <= this.cap;
  }

  snapshot() {
    return { cap: this.cap, reserved: this.reserved, spent: this.spent };
  }
}
