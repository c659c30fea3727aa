// A run's lock in the coordinator: `SET NX PX` with a lease kept alive by a heartbeat, and a
// fencing token (INCR) that is higher for every later holder and recorded in the run's journal.
// The lock is free when its key expired (nobody renewed it for a lease) or when its holder's
// process lease is gone (the process died: src/coord/link.ts), so a killed container's lock frees
// itself within its lease, with no file left behind to judge.
import { hostname } from "node:os";
import { CoordLockHeldError, CoordLockLostError, type CoordLockOwner } from "../coord/errors.js";
import type { Link } from "../coord/link.js";
import { sleep } from "../coord/sleep.js";

const DEFAULT_LOCK_LEASE_MS = 30_000;
const DEFAULT_LOCK_HEARTBEAT_MS = 5_000;
/** Fencing counters outlive any lock by far: a token must never go back. */
const FENCE_TTL_MS = 400 * 86_400_000;

export interface LockOptions {
  leaseMs?: number;
  heartbeatMs?: number;
  /** Take the lock whatever its state (`--break-lock`). */
  breakLock?: boolean;
  /** The lock was lost while held (taken over, deleted): this process must stop writing. */
  onLost?: (error: CoordLockLostError) => void;
  /**
   * A held lock is watched for the rest of its lease instead of refused at once: renewed
   * meanwhile, its holder is alive (CoordLockHeldError); not renewed, it is taken over.
   */
  wait?: { signal?: AbortSignal; onWait?: (message: string, waitMs: number) => void };
}

export interface CoordLock {
  readonly name: string;
  readonly fence: number;
  readonly owner: CoordLockOwner;
  /** The previous holder's record when this acquisition replaced one (dead, expired or broken). */
  readonly replaced: CoordLockOwner | undefined;
  readonly lost: boolean;
  release(): Promise<void>;
}

function parseOwner(raw: unknown): CoordLockOwner | undefined {
  if (typeof raw !== "string" || raw === "") return undefined;
  try {
    const o = JSON.parse(raw) as Partial<CoordLockOwner>;
    if (typeof o.holder === "string" && typeof o.pid === "number" && typeof o.host === "string") {
      return {
        holder: o.holder,
        host: o.host,
        pid: o.pid,
        started: String(o.started ?? ""),
        fence: Number(o.fence ?? 0),
      };
    }
  } catch {
    // An unreadable record is shown as such.
  }
  return undefined;
}

export async function acquireCoordLock(link: Link, name: string, options: LockOptions): Promise<CoordLock> {
  const leaseMs = options.leaseMs ?? DEFAULT_LOCK_LEASE_MS;
  const heartbeatMs = Math.min(options.heartbeatMs ?? DEFAULT_LOCK_HEARTBEAT_MS, Math.floor(leaseMs / 2));
  const key = link.keys.lock(name);
  const record = JSON.stringify({
    holder: link.holder,
    host: hostname(),
    pid: process.pid,
    started: new Date().toISOString(),
  });
  const attempt = async (breakLock: boolean) =>
    (await link.script(
      "clapperLockAcquire",
      [key, link.keys.fence(name)],
      [record, leaseMs, link.keys.holder(""), breakLock ? "1" : "0", FENCE_TTL_MS],
    )) as [number, number | string, string?, string?];

  let answer = await attempt(options.breakLock === true);
  if (Number(answer[0]) !== 1 && options.wait) {
    // Watched for the rest of its lease: a renewal (its time to live went back up) proves a live
    // holder; otherwise it lapses and the next attempt takes it.
    const first = Number(answer[2]);
    const owner = parseOwner(answer[1]);
    const message = `the lock "${name}" in the coordinator ${link.address} is held by ${
      owner ? `pid ${owner.pid} on ${owner.host}` : "an unreadable owner"
    }; waiting up to ${Math.ceil(Math.max(0, first) / 1000)} s for its lease to run out (a killed holder's lock frees itself)`;
    options.wait.onWait?.(message, Math.max(0, first));
    // Renewed means its expiry moved later (its time to live alone also falls between looks).
    let expiresAt = Date.now() + first;
    for (;;) {
      await sleep(
        Math.max(20, Math.min(heartbeatMs, 250)),
        "the coordinator's lock",
        options.wait.signal,
        link.gone,
      );
      answer = await attempt(false);
      if (Number(answer[0]) === 1) break;
      const ttl = Number(answer[2]);
      if (Date.now() + ttl > expiresAt + 50) {
        throw new CoordLockHeldError(name, link.address, parseOwner(answer[1]), ttl, leaseMs);
      }
      expiresAt = Math.min(expiresAt, Date.now() + ttl);
    }
  }
  if (Number(answer[0]) !== 1) {
    throw new CoordLockHeldError(name, link.address, parseOwner(answer[1]), Number(answer[2]), leaseMs);
  }
  const fence = Number(answer[1]);
  const value = String(answer[2]);
  const replaced = parseOwner(answer[3]);
  const owner = parseOwner(value) as CoordLockOwner;
  let lost = false;
  let released = false;
  let timer: NodeJS.Timeout | undefined;
  const loseIt = (error: CoordLockLostError) => {
    if (lost || released) return;
    lost = true;
    clearTimeout(timer);
    options.onLost?.(error);
  };
  const beat = async () => {
    if (released || lost) return;
    try {
      const r = (await link.script("clapperLockRenew", [key], [value, leaseMs])) as [number, string?];
      if (Number(r[0]) !== 1) {
        loseIt(new CoordLockLostError(name, link.address, parseOwner(r[1])));
        return;
      }
    } catch {
      // A lost coordinator halts the run by itself (exit 6); the lock is then worth nothing either.
      return;
    }
    schedule();
  };
  const schedule = () => {
    timer = setTimeout(() => void beat(), heartbeatMs);
    timer.unref();
  };
  schedule();
  return {
    name,
    fence,
    owner,
    replaced,
    get lost() {
      return lost;
    },
    async release() {
      if (released) return;
      released = true;
      clearTimeout(timer);
      if (link.lost) return;
      await link.script("clapperLockRelease", [key], [value]).catch(() => undefined);
    },
  };
}
