// One run per state: a lock file created exclusively (O_EXCL) holding the owner's pid and host.
// A lock whose process is gone (same host, pid not alive) is stale and taken over.

import { open, readFile, rename, unlink } from "node:fs/promises";
import { hostname } from "node:os";

export interface LockOwner {
  pid: number;
  host: string;
  started_at: string;
}

export class LockHeldError extends Error {
  override name = "LockHeldError";
  constructor(
    readonly path: string,
    readonly owner: LockOwner | undefined,
  ) {
    super(
      owner
        ? `another run holds ${path} (pid ${owner.pid} on ${owner.host}, since ${owner.started_at})`
        : `another run holds ${path}`,
    );
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function readOwner(path: string): Promise<LockOwner | undefined> {
  try {
    const owner = JSON.parse(await readFile(path, "utf8")) as LockOwner;
    return typeof owner.pid === "number" && typeof owner.host === "string" ? owner : undefined;
  } catch {
    return undefined;
  }
}

export interface Lock {
  path: string;
  release(): Promise<void>;
}

/** Takes the lock or throws LockHeldError at once; never waits. */
export async function acquireLock(path: string): Promise<Lock> {
  const me: LockOwner = { pid: process.pid, host: hostname(), started_at: new Date().toISOString() };
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const handle = await open(path, "wx");
      try {
        await handle.write(JSON.stringify(me));
        await handle.datasync();
      } finally {
        await handle.close();
      }
      return {
        path,
        async release() {
          const owner = await readOwner(path);
          if (owner?.pid === me.pid && owner.host === me.host) await unlink(path).catch(() => undefined);
        },
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const owner = await readOwner(path);
    // A lock being written this instant has no owner yet: treat it as held.
    if (!owner || owner.host !== me.host || alive(owner.pid)) throw new LockHeldError(path, owner);
    // Stale: move it aside atomically so that of two processes taking over, only one succeeds.
    const aside = `${path}.stale-${process.pid}`;
    try {
      await rename(path, aside);
      const moved = await readOwner(aside);
      if (moved && (moved.pid !== owner.pid || moved.started_at !== owner.started_at)) {
        // Another process took over between our read and our rename: give its lock back.
        await rename(aside, path);
        throw new LockHeldError(path, moved);
      }
      await unlink(aside);
    } catch (error) {
      if (error instanceof LockHeldError) throw error;
      // Someone else moved it first; try again from the top.
    }
  }
  throw new LockHeldError(path, await readOwner(path));
}
