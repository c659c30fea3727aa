// The coordinator's failures, each naming the address as shown (never its password). The pipeline
// maps CoordinatorUnavailableError and CoordinatorLostError to exit 6.

/** The coordinator could not be reached at start: nothing was submitted. */
export class CoordinatorUnavailableError extends Error {
  override name = "CoordinatorUnavailableError";
  constructor(
    /** The address as shown (`display`). */
    readonly address: string,
    /** Why, in a few words: `ECONNREFUSED`, `no answer within 3000 ms`, `WRONGPASS ...`. */
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`the coordinator ${address} cannot be reached (${reason})`, options);
  }
}

/**
 * A command failed or timed out mid-run, or this process's lease lapsed. Sticky: every later call
 * fails with the same error, since what the coordinator holds for this process is no longer known.
 */
export class CoordinatorLostError extends Error {
  override name = "CoordinatorLostError";
  constructor(
    readonly address: string,
    /** What happened: `Command timed out`, `Connection is closed.`, `this process's lease lapsed`. */
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`the coordinator ${address} was lost mid-run (${reason})`, options);
  }
}

/** What a coordinator lock records about its holder. */
export interface CoordLockOwner {
  holder: string;
  host: string;
  pid: number;
  /** ISO time of the acquisition. */
  started: string;
  fence: number;
}

function seconds(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  return s >= 10 ? `${Math.round(s)} s` : `${Number(s.toFixed(1))} s`;
}

/** The lock is held by a live holder (its lease key exists). */
export class CoordLockHeldError extends Error {
  override name = "CoordLockHeldError";
  constructor(
    readonly lock: string,
    readonly address: string,
    readonly owner: CoordLockOwner | undefined,
    /** How long the lock's current lease still runs. */
    readonly expiresInMs: number,
    readonly leaseMs: number,
  ) {
    super(
      `another process holds the lock "${lock}" in the coordinator ${address} (${
        owner
          ? `pid ${owner.pid} on ${owner.host}, holder ${owner.holder}, since ${owner.started}`
          : "an owner whose record cannot be read"
      }; its lease runs ${seconds(expiresInMs)} more). A killed holder's lock frees itself within ${seconds(
        leaseMs,
      )} (its lease); if that run is gone, run again with --break-lock to clear it now`,
    );
  }
}

/** The lock was deleted or taken over while held: this process must stop using what it guards. */
export class CoordLockLostError extends Error {
  override name = "CoordLockLostError";
  constructor(
    readonly lock: string,
    readonly address: string,
    /** The new holder, when another process took it. */
    readonly owner: CoordLockOwner | undefined,
    detail?: string,
  ) {
    super(
      detail
        ? `the lock "${lock}" in the coordinator ${address} was lost: ${detail}`
        : owner
          ? `the lock "${lock}" in the coordinator ${address} was taken over by pid ${owner.pid} on ${owner.host} (holder ${owner.holder}, since ${owner.started})`
          : `the lock "${lock}" in the coordinator ${address} was removed while this process held it (its lease ran out while the process stalled, or it was deleted by hand)`,
    );
  }
}
