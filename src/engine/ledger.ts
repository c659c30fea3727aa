// The run's own points ledger: every job's estimate is reserved here before its create and settled
// when its attempt ends, so the cap (budget and balance) holds however many creates run at once.
// An interface, so that shards can later share one ledger through Redis.

export interface PointsLedger {
  /** Reserves `points` if the cap allows; false otherwise (nothing reserved). */
  tryReserve(points: number): Promise<boolean>;
  /** Ends a reservation: `spent` is spent, the rest is freed. */
  settle(reserved: number, spent: number): Promise<void>;
  /**
   * Changes a reservation that is already held (the price moved, or the task's own cost became
   * known). Never refused, since the points are committed at the service either way; returns
   * whether the ledger is still within its cap.
   */
  adjust(from: number, to: number): Promise<boolean>;
  snapshot(): { cap: number; reserved: number; spent: number };
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

  async tryReserve(points: number): Promise<boolean> {
    // Invariant: reserved + spent <= cap after every call.
    if (this.reserved + this.spent + points > this.cap) return false;
    this.reserved += points;
    return true;
  }

  async settle(reserved: number, spent: number): Promise<void> {
    this.reserved = Math.max(0, this.reserved - reserved);
    this.spent += spent;
  }

  async adjust(from: number, to: number): Promise<boolean> {
    this.reserved = Math.max(0, this.reserved - from + to);
    return this.reserved + this.spent <= this.cap;
  }

  snapshot() {
    return { cap: this.cap, reserved: this.reserved, spent: this.spent };
  }
}
