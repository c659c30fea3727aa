// One run per state, held as a lease. The lock is a file created exclusively (O_EXCL) holding its
// owner (pid, host, pid namespace, start time and a random `instance` per acquisition); the holder
// touches its mtime every `heartbeatMs`, and a lock not touched for `leaseMs` is stale and taken over.
// A pid and a host name alone cannot tell a dead holder from a live one in containers: pid 1 and a
// fresh host name every run. Same host, same pid namespace and a dead pid is still stale at once.
//
// The heartbeat touches the mtime rather than rewriting a field: a touch is one metadata write that
// never changes the owner record (a reader never sees it half-written), while an atomic rewrite
// (write aside, rename over) would replace whatever is at the path, including the lock of a process
// that has taken over meanwhile. Ages are judged by the reader's clock against the mtime, so hosts
// sharing the state folder must agree on the time to well within the lease.
//
// Invariants:
// - The lock file's content is written once, by its creator, before the file takes the lock's name;
//   only the mtime changes afterwards.
// - A stale lock is removed only under a claim file named after its generation (its instance), so of
//   any number of processes taking over one stale lock, exactly one removes it; the others find the
//   claim taken or, once it is gone, the winner's fresh lock.
// - Nothing a taker moved is thrown away unless it is the generation that was judged stale.

import { randomBytes } from "node:crypto";
import { readFileSync, readlinkSync, unlinkSync } from "node:fs";
import { type FileHandle, link, open, readdir, rename, stat, unlink, utimes } from "node:fs/promises";
import { hostname } from "node:os";
import { basename, dirname, join } from "node:path";
import { processAlive } from "./process-alive.js";

export const DEFAULT_LEASE_MS = 30_000;
export const DEFAULT_HEARTBEAT_MS = 5_000;

export interface LockOwner {
  pid: number;
  host: string;
  started_at: string;
  /** Random per acquisition: tells the holder from a later process with the same pid and host. */
  instance?: string;
  /** The pid namespace (Linux): a pid says whether its process lives only within one namespace. */
  pidns?: string;
}

/** Seconds for messages: "0.2 s" for the short leases of tests, "41 s" for real ones. */
function seconds(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  return s >= 10 ? `${Math.round(s)} s` : `${Number(s.toFixed(1))} s`;
}

function describeOwner(owner: LockOwner | undefined): string {
  return owner
    ? `pid ${owner.pid} on ${owner.host}, since ${owner.started_at}`
    : "an owner whose record cannot be read (being written, or damaged)";
}

export class LockHeldError extends Error {
  override name = "LockHeldError";
  constructor(
    readonly path: string,
    readonly owner: LockOwner | undefined,
    /** Milliseconds since the holder last refreshed the lock. */
    readonly refreshedAgoMs: number,
    readonly leaseMs: number,
    /** Another process is taking the stale lock over at this moment. */
    readonly takingOver = false,
    /** Said by another kind of lock (a coordinator's), which knows its holder otherwise. */
    message?: string,
  ) {
    super(
      message ??
        `another run holds ${path} (${describeOwner(owner)}; refreshed ${seconds(refreshedAgoMs)} ago)` +
          (takingOver
            ? "; another process is taking it over right now"
            : `; it is taken over once not refreshed for ${seconds(leaseMs)}. If that run is gone, ` +
              "run again with --break-lock to clear it now"),
    );
  }
}

/** Given to `onLost`: the lock file is gone or belongs to someone else, so this run must stop. */
export class LockLostError extends Error {
  override name = "LockLostError";
  constructor(
    readonly path: string,
    /** The new holder, when the file names one. */
    readonly holder: LockOwner | undefined,
    /** False when the file was gone: removed by a process taking it over, or by hand. */
    readonly replaced: boolean,
  ) {
    super(
      !replaced
        ? `the lock ${path} was removed while this run held it (taken over after this process stalled past the lease, broken, or deleted by hand)`
        : holder
          ? `the lock ${path} was taken over by pid ${holder.pid} on ${holder.host} (since ${holder.started_at})`
          : `the lock ${path} was taken over by another process`,
    );
  }
}

/** A lock that acquiring removed: worth a log line. */
export interface ReplacedLock {
  owner: LockOwner | undefined;
  /** "broken": removed by `breakLock`; "stale": its lease ran out or its process is gone. */
  kind: "broken" | "stale";
  /** Why it was removed, e.g. "not refreshed for 41 s". */
  reason: string;
  refreshedAgoMs: number;
  message: string;
}

export interface LockOptions {
  /** Remove an existing lock whatever its state (`--break-lock`) and take it. */
  breakLock?: boolean;
  /** A lock not refreshed for this long is stale. Default 30 s. */
  leaseMs?: number;
  /** How often the holder refreshes; at most half the lease. Default 5 s. */
  heartbeatMs?: number;
  /** The lock was taken over by another process (after this one stalled past the lease, or --break-lock). */
  onLost?: (error: LockLostError) => void;
  /** A refresh failed; it is tried again at the next beat. */
  onRefreshError?: (error: Error) => void;
  /**
   * A fresh lock whose holder cannot be checked from here (another host, another pid namespace: a
   * killed container's) is watched instead of refused: refreshed meanwhile, its holder is alive
   * (LockHeldError at once); not refreshed until its lease runs out, it is taken over. Without
   * this, a killed container locks every run out for a whole lease.
   */
  wait?: { signal?: AbortSignal; onWait?: (message: string, waitMs: number) => void };
}

export interface Lock {
  readonly path: string;
  /** This acquisition's owner record, as written into the file. */
  readonly owner: LockOwner;
  /** The lock this acquisition removed, if any. */
  readonly replaced: ReplacedLock | undefined;
  /** True once the lock was found taken over (after `onLost`). */
  readonly lost: boolean;
  /**
   * A coordinator's lock: its fencing token, higher for every later holder. Recorded in the
   * journal, so that a holder whose lease ran out never writes after a newer one.
   */
  readonly fence?: number;
  /** The coordinator's data generation the fencing token belongs to. */
  readonly generation?: string;
  /** Stops the heartbeat and removes the file if it is still this acquisition's. */
  release(): Promise<void>;
}

const code = (error: unknown) => (error as NodeJS.ErrnoException).code;

let pidNamespace: string | null | undefined;
function pidns(): string | undefined {
  if (pidNamespace === undefined) {
    try {
      pidNamespace = readlinkSync("/proc/self/ns/pid");
    } catch {
      pidNamespace = null;
    }
  }
  return pidNamespace ?? undefined;
}

/**
 * The instances this process holds, shared through the global registry so that two copies of this
 * module (src and dist in one test process) agree: a lock with our pid and host that is not in it
 * was left by an earlier process that had our pid.
 */
const registry = globalThis as { [key: symbol]: Set<string> | undefined };
const HELD = Symbol.for("clapper.lock.held");
registry[HELD] ??= new Set<string>();
const held: Set<string> = registry[HELD];
/** The paths of the locks this process holds, by instance: for a forced exit to give them back. */
const HELD_PATHS = Symbol.for("clapper.lock.paths");
const registryPaths = globalThis as { [key: symbol]: Map<string, string> | undefined };
registryPaths[HELD_PATHS] ??= new Map<string, string>();
const heldPaths: Map<string, string> = registryPaths[HELD_PATHS];

/**
 * Removes, synchronously, every lock file this process holds that still names it: for an exit that
 * cannot wait (a second Ctrl-C), so the next run does not wait out a lease. Never throws.
 */
export function releaseHeldLocksSync(): void {
  for (const [instance, path] of heldPaths) {
    try {
      const owner = parseOwner(readFileSync(path, "utf8"));
      if (owner?.instance === instance) unlinkSync(path);
    } catch {
      // Gone already, or unreadable: nothing of ours to remove.
    }
    heldPaths.delete(instance);
  }
}

interface Seen {
  owner: LockOwner | undefined;
  /** The owner's instance, or the file's identity when its record cannot be read. */
  generation: string;
  mtimeMs: number;
  /** The mtime to the nanosecond: a refresh since a look changes it. */
  stamp: bigint;
}

function parseOwner(text: string): LockOwner | undefined {
  try {
    const owner = JSON.parse(text) as LockOwner;
    return typeof owner.pid === "number" && typeof owner.host === "string" ? owner : undefined;
  } catch {
    return undefined;
  }
}

/** The lock file as it is now, read through one handle so that record and mtime belong together. */
async function look(path: string): Promise<Seen | undefined> {
  let handle: FileHandle;
  try {
    handle = await open(path, "r");
  } catch (error) {
    if (code(error) === "ENOENT") return undefined;
    throw error;
  }
  try {
    const info = await handle.stat({ bigint: true });
    const owner = parseOwner(await handle.readFile("utf8"));
    return {
      owner,
      generation: owner?.instance ?? `${info.dev}-${info.ino}-${info.mtimeNs}`,
      mtimeMs: Number(info.mtimeMs),
      stamp: info.mtimeNs,
    };
  } finally {
    await handle.close();
  }
}

/** Why the lock is stale, or undefined while it is held. */
function staleness(seen: Seen, leaseMs: number, now: number): string | undefined {
  const age = now - seen.mtimeMs;
  if (age > leaseMs) return `not refreshed for ${seconds(age)}`;
  const o = seen.owner;
  // A pid is only meaningful on its own host and in its own pid namespace (when both are known).
  if (!o || o.host !== hostname() || (o.pidns !== undefined && o.pidns !== pidns())) return undefined;
  if (o.pid === process.pid) {
    return o.instance !== undefined && held.has(o.instance)
      ? undefined
      : `left by an earlier process with pid ${o.pid} on this host`;
  }
  return processAlive(o.pid) ? undefined : `its process (pid ${o.pid} on this host) is gone`;
}

/** Whether a live holder can be told from a dead one here (its pid means something on this host). */
function checkable(seen: Seen): boolean {
  const o = seen.owner;
  return o !== undefined && o.host === hostname() && (o.pidns === undefined || o.pidns === pidns());
}

/** How often a watched lock is looked at: well within a heartbeat. */
const WATCH_MS = 200;

/**
 * Watches a lock that cannot be judged by its owner until it is refreshed ("refreshed": alive),
 * replaced or removed ("changed"), or its lease runs out ("stale").
 */
async function watch(
  path: string,
  seen: Seen,
  leaseMs: number,
  signal: AbortSignal | undefined,
): Promise<"refreshed" | "changed" | "stale"> {
  // Judged by our own clock too: a holder whose clock runs ahead stamps mtimes in our future, and
  // an age read against them would keep us waiting for as long as its clock is off.
  const started = performance.now();
  for (;;) {
    await new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, WATCH_MS);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
    const now = await look(path);
    if (!now || now.generation !== seen.generation) return "changed";
    if (now.stamp !== seen.stamp) return "refreshed";
    if (Date.now() - now.mtimeMs > leaseMs || performance.now() - started > leaseMs) return "stale";
  }
}

/**
 * Creates the lock file with `owner` in it; false when one exists. The record is written beside the
 * lock and linked into place, so the lock never exists without its whole record: a process killed
 * between creating the file and writing it would otherwise leave an empty lock that nobody can
 * judge by its owner, holding every later run off for a whole lease.
 */
async function create(path: string, owner: LockOwner): Promise<boolean> {
  const draft = `${path}.new-${owner.instance}`;
  let handle: FileHandle | undefined;
  try {
    handle = await open(draft, "wx");
    await handle.writeFile(JSON.stringify(owner));
    await handle.datasync();
    await handle.close();
    handle = undefined;
    try {
      await link(draft, path);
      return true;
    } catch (error) {
      // On NFS a link whose answer was lost is retried by the client and fails with EEXIST though
      // it succeeded: the lock then names this very acquisition.
      if (code(error) === "EEXIST")
        return (await look(path).catch(() => undefined))?.owner?.instance === owner.instance;
      if (!NO_LINKS.has(code(error) ?? "")) throw error;
    }
  } finally {
    await handle?.close().catch(() => undefined);
    await unlink(draft).catch(() => undefined);
  }
  return createInPlace(path, owner);
}

/** File systems without hard links (some network and FUSE mounts) answer link() with these. */
const NO_LINKS = new Set(["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS", "EXDEV"]);

/** Where there are no hard links: create exclusively, then write (a kill in between leaves it empty). */
async function createInPlace(path: string, owner: LockOwner): Promise<boolean> {
  let handle: FileHandle;
  try {
    handle = await open(path, "wx");
  } catch (error) {
    if (code(error) === "EEXIST") return false;
    throw error;
  }
  try {
    await handle.writeFile(JSON.stringify(owner));
    await handle.datasync();
  } catch (error) {
    await handle.close().catch(() => undefined);
    // Nobody takes over a lock this fresh: the file is still ours to remove.
    await unlink(path).catch(() => undefined);
    throw error;
  }
  await handle.close();
  return true;
}

/** Takes the claim on one stale generation; false while another process holds it. */
async function claim(path: string, leaseMs: number, me: LockOwner): Promise<boolean> {
  for (let attempt = 0; attempt < 2; attempt++) {
    // The claim names its taker, as the lock does: a taker killed mid-takeover is seen to be dead.
    if (await create(path, me)) return true;
    // A claim lives for milliseconds; one older than the lease, or whose taker is a dead process of
    // this host, belongs to a taker that died (a kill loop meets it). Two takers removing the same
    // dead claim at once may both hold it; then only the generation check after the rename below
    // keeps them apart, as it would without claims.
    const seen = await look(path).catch(() => undefined);
    if (seen && !staleness(seen, leaseMs, Date.now())) return false;
    await unlink(path).catch(() => undefined);
  }
  return false;
}

/**
 * Removes the stale lock `seen` so that the caller can create its own. "removed": it was that
 * generation and is gone; "changed": the lock is no longer what was judged (look again); "busy":
 * another process is taking it over.
 */
async function remove(
  path: string,
  seen: Seen,
  me: LockOwner,
  leaseMs: number,
): Promise<"removed" | "changed" | "busy"> {
  const instance = me.instance as string;
  const claimPath = `${path}.takeover-${seen.generation.replace(/[^\w-]/g, "_")}`;
  if (!(await claim(claimPath, leaseMs, me))) return "busy";
  try {
    // Under the claim no other taker moves this generation; its holder may still have refreshed it.
    const now = await look(path);
    if (!now || now.generation !== seen.generation || now.stamp !== seen.stamp) return "changed";
    const aside = `${path}.aside-${instance}`;
    try {
      await rename(path, aside);
    } catch (error) {
      if (code(error) === "ENOENT") return "changed";
      throw error;
    }
    const moved = await look(aside);
    if (moved?.generation === seen.generation) {
      await unlink(aside).catch(() => undefined);
      return "removed";
    }
    if (!moved) return "changed"; // swept away as a leftover: nothing to put back
    // Its holder released and someone created a new lock in the instant since we looked: put that
    // back, without replacing a lock created meanwhile (link fails then; that holder sees it lost).
    try {
      await link(aside, path);
      await unlink(aside);
    } catch (error) {
      if (code(error) === "EEXIST") await unlink(aside).catch(() => undefined);
      else await rename(aside, path).catch(() => undefined); // no hard links on this file system
    }
    return "changed";
  } finally {
    await unlink(claimPath).catch(() => undefined);
  }
}

/** Removes drafts, claims and moved-aside locks of processes that died mid-way (older than the lease). */
async function sweep(path: string, leaseMs: number): Promise<void> {
  const dir = dirname(path);
  const prefix = `${basename(path)}.`;
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!["takeover-", "aside-", "new-"].some((kind) => name.startsWith(`${prefix}${kind}`))) continue;
    const file = join(dir, name);
    const info = await stat(file).catch(() => undefined);
    // ctime: a lock moved aside keeps its old mtime, but the rename that moved it sets the ctime.
    if (info && Date.now() - Math.max(info.mtimeMs, info.ctimeMs) > leaseMs)
      await unlink(file).catch(() => undefined);
  }
}

function safely<T>(callback: ((value: T) => void) | undefined, value: T): void {
  try {
    callback?.(value);
  } catch {
    // A callback that throws must not take the timer (and the process) down with it.
  }
}

/**
 * Who holds the lock now, for a reader beside the run (`status`): its owner when a live process
 * holds it (refreshed within the lease, and when of this host, its process alive), else undefined.
 * Only looks: never takes, removes or waits.
 */
export async function lockHolder(
  path: string,
  leaseMs = DEFAULT_LEASE_MS,
): Promise<{ owner: LockOwner | undefined } | undefined> {
  const seen = await look(path).catch(() => undefined);
  if (!seen || staleness(seen, leaseMs, Date.now()) !== undefined) return undefined;
  return { owner: seen.owner };
}

/** This process as a lock's owner, under a fresh instance id. */
function newOwner(): LockOwner {
  const ns = pidns();
  return {
    pid: process.pid,
    host: hostname(),
    started_at: new Date().toISOString(),
    instance: randomBytes(12).toString("hex"),
    ...(ns ? { pidns: ns } : {}),
  };
}

/**
 * A lock whose holder cannot be checked for life from here is watched for up to a lease:
 * "changed" when it changed hands or went (look again), its staleness when it stopped being
 * refreshed; throws LockHeldError when it is still refreshed.
 */
async function waitOutUncheckable(
  path: string,
  seen: Seen,
  leaseMs: number,
  now: number,
  wait: NonNullable<LockOptions["wait"]>,
): Promise<"changed" | { now: number; reason: string }> {
  const left = Math.min(leaseMs, Math.max(0, leaseMs - (now - seen.mtimeMs)));
  wait.onWait?.(
    `another run holds ${path} (${describeOwner(seen.owner)}; refreshed ${seconds(now - seen.mtimeMs)} ago), and whether it is alive cannot be checked from here: waiting up to ${seconds(left)} to see whether it is still refreshed`,
    left,
  );
  const watched = await watch(path, seen, leaseMs, wait.signal);
  const after = Date.now();
  if (watched === "changed") return "changed";
  if (watched === "stale")
    return { now: after, reason: `not refreshed for ${seconds(after - seen.mtimeMs)}` };
  throw new LockHeldError(path, seen.owner, 0, leaseMs);
}

/** What acquiring says of the lock it removed: whose it was, and why it could be taken. */
function replacedLock(
  path: string,
  seen: Seen,
  kind: ReplacedLock["kind"],
  reason: string,
  now: number,
): ReplacedLock {
  return {
    owner: seen.owner,
    kind,
    reason,
    refreshedAgoMs: now - seen.mtimeMs,
    message:
      `${kind === "broken" ? "broke" : "took over"} the lock ${path} of ${describeOwner(seen.owner)}, ` +
      `last refreshed ${seconds(now - seen.mtimeMs)} ago${kind === "stale" ? ` (${reason})` : ""}`,
  };
}

/**
 * Takes the lock or throws LockHeldError at once; never waits. A stale lock (not refreshed for
 * `leaseMs`, or left by a dead process of this host) is taken over, any lock with `breakLock`.
 */
export async function acquireLock(path: string, options: LockOptions = {}): Promise<Lock> {
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const heartbeatMs = options.heartbeatMs ?? DEFAULT_HEARTBEAT_MS;
  // At least two beats per lease: one failed refresh is retried before the lease runs out.
  if (!(leaseMs > 0) || !(heartbeatMs > 0) || heartbeatMs * 2 > leaseMs) {
    throw new RangeError(`lock heartbeat ${heartbeatMs} ms must be at most half the lease ${leaseMs} ms`);
  }
  const me = newOwner();
  const instance = me.instance as string;
  let replaced: ReplacedLock | undefined;
  let last: Seen | undefined;
  let takingOver = false;
  // Registered before the file exists: an acquire elsewhere in this process that reads it in
  // between must see a live holder, not a file left by an earlier process with our pid.
  held.add(instance);
  try {
    for (let attempt = 0; attempt < 5; attempt++) {
      if (await create(path, me)) {
        heldPaths.set(instance, path);
        await sweep(path, leaseMs);
        return hold(path, me, replaced, { ...options, heartbeatMs });
      }
      const seen = await look(path);
      if (!seen) continue; // released since: create again
      last = seen;
      let now = Date.now();
      let reason = options.breakLock ? "--break-lock" : staleness(seen, leaseMs, now);
      if (!reason && options.wait && !checkable(seen)) {
        const waited = await waitOutUncheckable(path, seen, leaseMs, now, options.wait);
        if (waited === "changed") continue;
        ({ now, reason } = waited);
      }
      if (!reason) throw new LockHeldError(path, seen.owner, now - seen.mtimeMs, leaseMs);
      const outcome = await remove(path, seen, me, leaseMs);
      takingOver = outcome === "busy";
      if (takingOver) break;
      if (outcome === "removed")
        replaced = replacedLock(path, seen, options.breakLock ? "broken" : "stale", reason, now);
    }
    const now = Date.now();
    throw new LockHeldError(path, last?.owner, last ? now - last.mtimeMs : 0, leaseMs, takingOver);
  } catch (error) {
    held.delete(instance);
    heldPaths.delete(instance);
    throw error;
  }
}

/** The held lock: its heartbeat and its release. */
function hold(
  path: string,
  me: LockOwner,
  replaced: ReplacedLock | undefined,
  options: LockOptions & { heartbeatMs: number },
): Lock {
  const instance = me.instance as string;
  let timer: NodeJS.Timeout | undefined;
  let beating: Promise<void> | undefined;
  let stopped = false;
  let lost = false;

  const beat = async (): Promise<void> => {
    try {
      const seen = await look(path);
      if (stopped) return;
      if (!seen || seen.owner?.instance !== instance) {
        // Gone counts as lost too: it was judged stale (this process stalled past the lease) or
        // broken, and whoever took it may have run and finished since. Re-creating it would let this
        // run go on from a state that another run has moved past.
        stopped = true;
        lost = true;
        held.delete(instance);
        heldPaths.delete(instance);
        safely(options.onLost, new LockLostError(path, seen?.owner, seen !== undefined));
        return;
      }
      // Taken over between the look and this touch: the new holder's lease is refreshed once, which
      // is harmless, and the next beat finds its record.
      const now = new Date();
      await utimes(path, now, now);
    } catch (error) {
      safely(options.onRefreshError, error as Error);
    }
  };
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      beating = beat().finally(() => {
        beating = undefined;
        schedule();
      });
    }, options.heartbeatMs);
    // The lease must never keep a finished process alive.
    timer.unref();
  };
  schedule();

  let released: Promise<void> | undefined;
  return {
    path,
    owner: me,
    replaced,
    get lost() {
      return lost;
    },
    release() {
      released ??= (async () => {
        stopped = true;
        clearTimeout(timer);
        // A beat under way would find the file gone and report the lock lost.
        await beating;
        try {
          if (lost) return;
          // Only a holder that stalled past the lease can lose the lock between this look and the unlink.
          const seen = await look(path).catch(() => undefined);
          if (seen?.owner?.instance === instance) await unlink(path).catch(() => undefined);
        } finally {
          held.delete(instance);
          heldPaths.delete(instance);
        }
      })();
      return released;
    },
  };
}
