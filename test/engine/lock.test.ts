// The run lock as a lease. Processes that race or die are real child processes running the built
// module (dist/), since a lease only means something between processes.
import { type ChildProcessWithoutNullStreams, spawn, spawnSync } from "node:child_process";
import { existsSync, readlinkSync, statSync } from "node:fs";
import { link, readdir, readFile, rename, rm, stat, symlink, utimes, writeFile } from "node:fs/promises";
import { hostname } from "node:os";
import { basename, dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath, pathToFileURL } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import {
  acquireLock,
  DEFAULT_HEARTBEAT_MS,
  DEFAULT_LEASE_MS,
  LockHeldError,
  type LockLostError,
} from "../../src/locks/file-lock.js";
import { tempDir } from "../helpers/temp.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const BUILT = join(ROOT, "dist/locks/file-lock.js");
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function tmp() {
  return join(await tempDir("clapper-lock-"), "state.lock");
}

/** A pid that certainly existed and is now gone: a child that has exited. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]);
  return Number(child.stdout.toString());
}

/** Writes a lock as another process would have, last refreshed `ageMs` ago. */
async function plant(path: string, owner: object | string, ageMs = 0) {
  await writeFile(path, typeof owner === "string" ? owner : JSON.stringify(owner));
  const at = new Date(Date.now() - ageMs);
  await utimes(path, at, at);
}

async function until(what: string, done: () => boolean | Promise<boolean>, timeoutMs = 5_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms: ${what}`);
    await sleep(10);
  }
}

const CONTAINER = { pid: 1, host: "clapper-7f9c6d-x2kq", started_at: "2026-01-01T00:00:00.000Z" };

describe("acquireLock", () => {
  it("refuses a second holder at once while the first is alive, and frees on release", async () => {
    const path = await tmp();
    const first = await acquireLock(path);
    expect(first.replaced).toBeUndefined();
    expect(first.owner).toMatchObject({ pid: process.pid, host: hostname() });
    expect(first.owner.instance).toMatch(/^[0-9a-f]{24}$/);
    const started = Date.now();
    await expect(acquireLock(path)).rejects.toBeInstanceOf(LockHeldError);
    expect(Date.now() - started).toBeLessThan(500);
    await expect(acquireLock(path)).rejects.toThrow(`pid ${process.pid}`);
    await first.release();
    await first.release(); // twice is harmless
    expect(existsSync(path)).toBe(false);
    const second = await acquireLock(path);
    await second.release();
  });

  it("takes over a lock left by a dead process on this host at once", async () => {
    const path = await tmp();
    const pid = deadPid();
    await plant(path, { pid, host: hostname(), started_at: "2026-01-01T00:00:00Z" });
    const lock = await acquireLock(path);
    expect(JSON.parse(await readFile(path, "utf8")).pid).toBe(process.pid);
    expect(lock.replaced).toMatchObject({ kind: "stale", owner: { pid } });
    expect(lock.replaced?.reason).toBe(`its process (pid ${pid} on this host) is gone`);
    expect(lock.replaced?.message).toContain(`took over the lock ${path} of pid ${pid} on ${hostname()}`);
    await lock.release();
  });

  it("holds a fresh lock of another host, and says who, since when, when refreshed and how to clear it", async () => {
    const path = await tmp();
    const owner = { ...CONTAINER, pid: 999999, host: "elsewhere", instance: "a1" };
    await plant(path, owner, 3_000);
    const error = await acquireLock(path).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockHeldError);
    expect((error as LockHeldError).message).toBe(
      `another run holds ${path} (pid 999999 on elsewhere, since 2026-01-01T00:00:00.000Z; ` +
        "refreshed 3 s ago); it is taken over once not refreshed for 30 s. " +
        "If that run is gone, run again with --break-lock to clear it now",
    );
    expect(error).toMatchObject({ owner, leaseMs: DEFAULT_LEASE_MS });
    expect((error as LockHeldError).refreshedAgoMs).toBeGreaterThanOrEqual(3_000);
    // Refused without touching it.
    expect(JSON.parse(await readFile(path, "utf8"))).toEqual(owner);
  });

  it("takes over a lock left by a killed container once it has not been refreshed for the lease", async () => {
    const path = await tmp();
    await plant(path, { ...CONTAINER, instance: "gone" }, 100);
    await expect(acquireLock(path, { leaseMs: 400, heartbeatMs: 100 })).rejects.toThrow(
      /\(pid 1 on clapper-7f9c6d-x2kq, since .*; refreshed 0\.\d s ago\); it is taken over once not refreshed for 0\.4 s/,
    );
    await sleep(400);
    const lock = await acquireLock(path, { leaseMs: 400, heartbeatMs: 100 });
    expect(lock.replaced).toMatchObject({ kind: "stale", owner: { host: CONTAINER.host } });
    expect(lock.replaced?.reason).toMatch(/^not refreshed for 0\.\d s$/);
    expect(JSON.parse(await readFile(path, "utf8")).instance).toBe(lock.owner.instance);
    await lock.release();
    // Nothing of the takeover is left beside the state.
    expect(await readdir(dirname(path))).toEqual([]);
  });

  it("judges an unreadable lock (its writer died mid-write) by its age alone", async () => {
    const path = await tmp();
    await plant(path, "");
    await expect(acquireLock(path, { leaseMs: 1_000, heartbeatMs: 100 })).rejects.toThrow(
      "an owner whose record cannot be read",
    );
    await plant(path, '{"pid":', 2_000);
    const lock = await acquireLock(path, { leaseMs: 1_000, heartbeatMs: 100 });
    expect(lock.replaced).toMatchObject({ kind: "stale", owner: undefined });
    await lock.release();
  });

  it("a taker killed mid-takeover leaves a claim naming a dead process: the next run takes over at once", async () => {
    const path = await tmp();
    const dead = { pid: deadPid(), host: hostname(), started_at: "x", instance: "gone" };
    await plant(path, dead, 0);
    // The claim the killed taker held on that generation, fresh.
    await plant(`${path}.takeover-gone`, { ...dead, instance: "taker" }, 0);
    const lock = await acquireLock(path, { leaseMs: 30_000, heartbeatMs: 1_000 });
    expect(lock.replaced).toMatchObject({ kind: "stale", owner: { instance: "gone" } });
    await lock.release();
    expect(await readdir(dirname(path))).toEqual([]);
  });

  it("with wait: a killed container's fresh lock is watched and taken over once its lease runs out", async () => {
    const path = await tmp();
    await plant(path, { ...CONTAINER, instance: "killed" }, 200);
    const waits: string[] = [];
    const started = Date.now();
    const lock = await acquireLock(path, {
      leaseMs: 1_000,
      heartbeatMs: 100,
      wait: { onWait: (message) => waits.push(message) },
    });
    // The rest of the lease (about 0.8 s), not at once and not much later.
    expect(Date.now() - started).toBeGreaterThan(650);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(waits).toHaveLength(1);
    expect(waits[0]).toMatch(/cannot be checked from here: waiting up to 0\.\d s/);
    expect(lock.replaced).toMatchObject({ kind: "stale", owner: { instance: "killed" } });
    await lock.release();
  });

  it("with wait: a lock that is refreshed while watched is held by a live run: refused at once", async () => {
    const path = await tmp();
    await plant(path, { ...CONTAINER, instance: "alive" }, 100);
    const refresh = setTimeout(() => void utimes(path, new Date(), new Date()), 300);
    const started = Date.now();
    await expect(acquireLock(path, { leaseMs: 5_000, heartbeatMs: 100, wait: {} })).rejects.toThrow(
      `another run holds ${path} (pid 1 on ${CONTAINER.host}`,
    );
    clearTimeout(refresh);
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it("with wait: a dead holder's mtime in our future (its clock ran ahead) is waited on for one lease, not the skew", async () => {
    const path = await tmp();
    await plant(path, { ...CONTAINER, instance: "ahead" }, -3_600_000);
    const waits: string[] = [];
    const started = Date.now();
    const lock = await acquireLock(path, {
      leaseMs: 600,
      heartbeatMs: 100,
      wait: { onWait: (message) => waits.push(message) },
    });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(waits[0]).toMatch(/waiting up to 0\.6 s/);
    await lock.release();
  });

  it("with wait: the watch ends when its signal is aborted", async () => {
    const path = await tmp();
    await plant(path, "{", 0);
    const stop = new AbortController();
    setTimeout(() => stop.abort(new Error("stop")), 300);
    await expect(
      acquireLock(path, { leaseMs: 10_000, heartbeatMs: 100, wait: { signal: stop.signal } }),
    ).rejects.toThrow("stop");
    // A lock of this host whose pid is alive is refused at once, waiting or not.
    const mine = await tmp();
    await plant(mine, { pid: process.pid === 1 ? 2 : 1, host: hostname(), started_at: "x" }, 0);
    const t0 = Date.now();
    await expect(acquireLock(mine, { leaseMs: 10_000, heartbeatMs: 100, wait: {} })).rejects.toThrow(
      LockHeldError,
    );
    expect(Date.now() - t0).toBeLessThan(500);
  });

  it("does not take a lock of an earlier process with our pid and host for its own (pid 1 in a restarted container)", async () => {
    const path = await tmp();
    const ns = (() => {
      try {
        return { pidns: readlinkSync("/proc/self/ns/pid") };
      } catch {
        return {};
      }
    })();
    // Same pid, same host, fresh: only the instance tells that this process did not write it.
    await plant(path, {
      pid: process.pid,
      host: hostname(),
      started_at: "2026-01-01T00:00:00Z",
      instance: "earlier",
      ...ns,
    });
    const lock = await acquireLock(path);
    expect(lock.replaced?.reason).toBe(`left by an earlier process with pid ${process.pid} on this host`);
    // ...while a lock this process holds stays held, whatever the pid says.
    await expect(acquireLock(path)).rejects.toThrow(`pid ${process.pid} on ${hostname()}`);
    await lock.release();
  });

  it.runIf(existsSync("/proc/self/ns/pid"))(
    "does not judge a pid of another pid namespace by its liveness here (same host name, other container)",
    async () => {
      const path = await tmp();
      await plant(path, {
        pid: deadPid(),
        host: hostname(),
        started_at: "2026-01-01T00:00:00Z",
        instance: "x",
        pidns: "pid:[1]",
      });
      await expect(acquireLock(path)).rejects.toBeInstanceOf(LockHeldError);
    },
  );

  it("takes over a lease that ran out even when its pid is alive on this host", async () => {
    const path = await tmp();
    // pid 1 always exists; only the lease can free this lock.
    await plant(path, { ...CONTAINER, host: hostname(), instance: "y" }, 500);
    const lock = await acquireLock(path, { leaseMs: 400, heartbeatMs: 100 });
    expect(lock.replaced?.kind).toBe("stale");
    await lock.release();
  });

  it("keeps its lock alive with the heartbeat past several lease periods, and stops beating on release", async () => {
    const path = await tmp();
    const errors: Error[] = [];
    // Beats ten times per lease, so that a busy machine delaying a few timers does not fail it.
    const lock = await acquireLock(path, {
      leaseMs: 600,
      heartbeatMs: 60,
      onRefreshError: (e) => errors.push(e),
    });
    const started = Date.now();
    let oldest = 0;
    while (Date.now() - started < 2_400) {
      oldest = Math.max(oldest, Date.now() - (await stat(path)).mtimeMs);
      await sleep(15);
    }
    expect(oldest).toBeLessThan(600);
    await expect(acquireLock(path, { leaseMs: 600, heartbeatMs: 60 })).rejects.toThrow(
      /refreshed 0(\.\d)? s ago\); it is taken over once not refreshed for 0\.6 s/,
    );
    await lock.release();
    expect(existsSync(path)).toBe(false);
    await sleep(150);
    expect(existsSync(path)).toBe(false);
    expect(errors).toEqual([]);
    expect(lock.lost).toBe(false);
  });

  it("reports a failed refresh and retries it at the next beat, keeping the lock", async () => {
    const path = await tmp();
    const errors: Error[] = [];
    const lost: LockLostError[] = [];
    const lock = await acquireLock(path, {
      leaseMs: 300,
      heartbeatMs: 30,
      onRefreshError: (e) => errors.push(e),
      onLost: (e) => lost.push(e),
    });
    // A lock file that cannot be opened: a symbolic link to itself put in its place in one rename
    // (a missing file would count as lost; file modes do not stop root).
    await link(path, `${path}.kept`);
    await symlink(basename(path), `${path}.loop`);
    await rename(`${path}.loop`, path);
    await until("a refresh error", () => errors.length >= 2);
    expect((errors[0] as NodeJS.ErrnoException).code).toBe("ELOOP");
    await rename(`${path}.kept`, path);
    const before = (await stat(path)).mtimeMs;
    await until("a refresh", async () => (await stat(path)).mtimeMs > before);
    expect(lost).toEqual([]);
    expect(lock.lost).toBe(false);
    await lock.release();
    expect(existsSync(path)).toBe(false);
  });

  it("reports a lock deleted while held as lost, and does not bring it back", async () => {
    const path = await tmp();
    const lost: LockLostError[] = [];
    const lock = await acquireLock(path, { leaseMs: 300, heartbeatMs: 30, onLost: (e) => lost.push(e) });
    await rm(path);
    await until("onLost", () => lost.length > 0);
    expect(lost[0]).toMatchObject({ replaced: false, holder: undefined });
    expect(lost[0]?.message).toBe(
      `the lock ${path} was removed while this run held it (taken over after this process stalled past the lease, broken, or deleted by hand)`,
    );
    await sleep(100);
    expect(existsSync(path)).toBe(false);
    expect(lost).toHaveLength(1);
    await lock.release();
  });

  it("reports a lock that now holds another instance as lost to that holder", async () => {
    const path = await tmp();
    const lost: LockLostError[] = [];
    const lock = await acquireLock(path, { leaseMs: 300, heartbeatMs: 30, onLost: (e) => lost.push(e) });
    // Another process's lock put in its place in one step, as a takeover leaves it.
    const other = { ...CONTAINER, instance: "other" };
    await writeFile(`${path}.new`, JSON.stringify(other));
    await rename(`${path}.new`, path);
    await until("onLost", () => lost.length > 0);
    expect(lost[0]).toMatchObject({ replaced: true, holder: other });
    expect(lost[0]?.message).toBe(
      `the lock ${path} was taken over by pid 1 on ${CONTAINER.host} (since ${CONTAINER.started_at})`,
    );
    expect(lock.lost).toBe(true);
    // The loser stops beating and leaves the new holder's lock alone.
    const mtime = (await stat(path)).mtimeMs;
    await sleep(100);
    await lock.release();
    expect((await stat(path)).mtimeMs).toBe(mtime);
    expect(JSON.parse(await readFile(path, "utf8"))).toEqual(other);
    expect(lost).toHaveLength(1);
  });

  it("--break-lock removes a live lock and takes it; the old holder is told it lost the lock", async () => {
    const path = await tmp();
    const lost: LockLostError[] = [];
    const first = await acquireLock(path, { leaseMs: 300, heartbeatMs: 30, onLost: (e) => lost.push(e) });
    const breaker = await acquireLock(path, { breakLock: true });
    expect(breaker.replaced).toMatchObject({ kind: "broken", reason: "--break-lock" });
    expect(breaker.replaced?.owner?.instance).toBe(first.owner.instance);
    expect(breaker.replaced?.message).toMatch(
      new RegExp(
        `^broke the lock .*state\\.lock of pid ${process.pid} on .*, last refreshed 0(\\.\\d)? s ago$`,
      ),
    );

    await until("onLost", () => lost.length > 0);
    expect(lost).toHaveLength(1);
    // A beat that ran while the breaker's file was not yet in place finds the lock gone instead.
    if (lost[0]?.replaced) expect(lost[0].holder?.instance).toBe(breaker.owner.instance);
    expect(first.lost).toBe(true);
    // The loser's release leaves the new holder's lock alone.
    await first.release();
    expect(JSON.parse(await readFile(path, "utf8")).instance).toBe(breaker.owner.instance);
    await breaker.release();
    expect(existsSync(path)).toBe(false);
  });

  it("--break-lock on a free lock just takes it", async () => {
    const path = await tmp();
    const lock = await acquireLock(path, { breakLock: true });
    expect(lock.replaced).toBeUndefined();
    await lock.release();
  });

  it("--break-lock takes over a lock of another host without waiting for its lease", async () => {
    const path = await tmp();
    await plant(path, { ...CONTAINER, instance: "z" }, 2_000);
    const lock = await acquireLock(path, { breakLock: true });
    expect(lock.replaced?.message).toMatch(
      `broke the lock ${path} of pid 1 on ${CONTAINER.host}, since ${CONTAINER.started_at}, last refreshed 2`,
    );
    expect(lock.replaced?.message).toMatch(/ s ago$/);
    await lock.release();
  });

  it("refuses a heartbeat that leaves no second chance within the lease", async () => {
    const path = await tmp();
    await expect(acquireLock(path, { leaseMs: 100, heartbeatMs: 60 })).rejects.toThrow(RangeError);
    expect(existsSync(path)).toBe(false);
    expect(DEFAULT_HEARTBEAT_MS * 2).toBeLessThanOrEqual(DEFAULT_LEASE_MS);
  });
});

// ---------------------------------------------------------------------------------------------
// other processes
// ---------------------------------------------------------------------------------------------

// race: says "ready", waits for a line, then acquires. hold: acquires at once. Either way it prints
// {won, instance} or {won: false, name, message}, then holds what it won until stdin closes.
const CHILD = `
import { createInterface } from "node:readline";
const [url, mode, path, leaseMs, heartbeatMs] = process.argv.slice(1);
const { acquireLock } = await import(url);
const lines = createInterface({ input: process.stdin });
const closed = new Promise((resolve) => lines.once("close", resolve));
if (mode === "race") {
  const go = new Promise((resolve) => lines.once("line", resolve));
  process.stdout.write("ready\\n");
  await go;
}
try {
  const lock = await acquireLock(path, { leaseMs: Number(leaseMs), heartbeatMs: Number(heartbeatMs) });
  process.stdout.write(JSON.stringify({ won: true, instance: lock.owner.instance }) + "\\n");
} catch (error) {
  process.stdout.write(JSON.stringify({ won: false, name: error.name, message: error.message }) + "\\n");
  process.exit(0);
}
await closed;
process.exit(0);
`;

interface Child {
  proc: ChildProcessWithoutNullStreams;
  line: () => Promise<string>;
  exited: Promise<NodeJS.Signals | number | null>;
}

function child(mode: "race" | "hold", path: string, leaseMs: number, heartbeatMs: number): Child {
  const proc = spawn(process.execPath, [
    "--input-type=module",
    "-e",
    CHILD,
    pathToFileURL(BUILT).href,
    mode,
    path,
    String(leaseMs),
    String(heartbeatMs),
  ]);
  proc.stderr.on("data", (d: Buffer) => process.stderr.write(d));
  const queue: string[] = [];
  const waiting: Array<(line: string) => void> = [];
  createInterface({ input: proc.stdout }).on("line", (line) => {
    const w = waiting.shift();
    if (w) w(line);
    else queue.push(line);
  });
  return {
    proc,
    line: () => {
      const queued = queue.shift();
      return queued !== undefined ? Promise.resolve(queued) : new Promise((resolve) => waiting.push(resolve));
    },
    exited: new Promise((resolve) => proc.once("close", (c, s) => resolve(s ?? c))),
  };
}

describe("acquireLock between processes", () => {
  beforeAll(() => {
    expect(
      existsSync(BUILT) && statSync(BUILT).mtimeMs >= statSync(join(ROOT, "src/locks/file-lock.ts")).mtimeMs,
      "dist/ is older than src/: run `npm run build` first",
    ).toBe(true);
  });

  it.each([
    ["a container's lock whose lease ran out", { ...CONTAINER, instance: "c1" }, 60_000],
    ["a lock of a dead process on this host", { pid: deadPid(), host: hostname(), started_at: "x" }, 0],
    ["an unreadable lock whose lease ran out", "{", 60_000],
  ])(
    "of eight processes taking over %s, exactly one wins (three rounds)",
    { timeout: 30_000 },
    async (_what, owner, age) => {
      // A takeover without its claim lets two or three win about one round in three.
      for (let round = 0; round < 3; round++) {
        const path = await tmp();
        await plant(path, owner, age);
        const racers = Array.from({ length: 8 }, () => child("race", path, 10_000, 1_000));
        try {
          for (const r of racers) expect(await r.line()).toBe("ready");
          for (const r of racers) r.proc.stdin.write("go\n");
          const results = await Promise.all(racers.map(async (r) => JSON.parse(await r.line())));
          const winners = results.filter((r) => r.won);
          expect(winners, `round ${round}: ${JSON.stringify(results)}`).toHaveLength(1);
          for (const loser of results.filter((r) => !r.won)) expect(loser.name).toBe("LockHeldError");
          expect(JSON.parse(await readFile(path, "utf8")).instance).toBe(winners[0].instance);
          expect((await readdir(dirname(path))).sort()).toEqual(["state.lock"]);
        } finally {
          for (const r of racers) r.proc.stdin.end();
          await Promise.all(racers.map((r) => r.exited));
        }
      }
    },
  );

  it("a holder killed with SIGKILL, posing as pid 1 of another host, is taken over once its lease runs out", {
    timeout: 30_000,
  }, async () => {
    const path = await tmp();
    const LEASE = 1_500;
    const holder = child("hold", path, LEASE, 100);
    try {
      const won = JSON.parse(await holder.line());
      expect(won.won).toBe(true);
      // The record a container leaves: pid 1 and a host name no later run will have. The instance
      // stays the holder's, so its heartbeat goes on refreshing it.
      const record = JSON.parse(await readFile(path, "utf8"));
      expect(record.instance).toBe(won.instance);
      await writeFile(path, JSON.stringify({ ...record, pid: 1, host: CONTAINER.host }));

      // Alive, it keeps the lock over several leases.
      const heldUntil = Date.now() + 3 * LEASE;
      while (Date.now() < heldUntil) {
        await expect(acquireLock(path, { leaseMs: LEASE, heartbeatMs: 100 })).rejects.toThrow(
          `(pid 1 on ${CONTAINER.host}`,
        );
        await sleep(100);
      }

      holder.proc.kill("SIGKILL");
      expect(await holder.exited).toBe("SIGKILL");
      const killedAt = Date.now();
      await expect(acquireLock(path, { leaseMs: LEASE, heartbeatMs: 100 })).rejects.toBeInstanceOf(
        LockHeldError,
      );
      let lock: Awaited<ReturnType<typeof acquireLock>> | undefined;
      while (!lock) {
        lock = await acquireLock(path, { leaseMs: LEASE, heartbeatMs: 100 }).catch(() => undefined);
        if (!lock) await sleep(25);
      }
      // Not before the lease since its last refresh, and not much after.
      expect(Date.now() - killedAt).toBeGreaterThan(LEASE - 150);
      expect(Date.now() - killedAt).toBeLessThan(LEASE + 1_000);
      expect(lock.replaced).toMatchObject({ kind: "stale", owner: { pid: 1, instance: won.instance } });
      await lock.release();
    } finally {
      holder.proc.kill("SIGKILL");
    }
  });

  it("a process killed while taking the lock never leaves a lock without its owner: the next run takes it at once", {
    timeout: 60_000,
  }, async () => {
    // The child takes and releases the lock as fast as it can; each SIGKILL lands at a random point,
    // often inside acquireLock. Its record names a dead pid of this host, so whatever it left must be
    // taken over at once, never held off for a lease as "an owner whose record cannot be read".
    const script = `const { acquireLock } = await import(process.argv[1]);
      process.stdout.write("ready\\n");
      for (;;) await (await acquireLock(process.argv[2], { leaseMs: 60000, heartbeatMs: 1000 })).release();`;
    for (let round = 0; round < 25; round++) {
      const path = await tmp();
      const proc = spawn(process.execPath, [
        "--input-type=module",
        "-e",
        script,
        pathToFileURL(BUILT).href,
        path,
      ]);
      const exited = new Promise((resolve) => proc.once("close", resolve));
      await new Promise((resolve) => proc.stdout.once("data", resolve));
      await sleep(5 + Math.random() * 60);
      proc.kill("SIGKILL");
      await exited;
      const lock = await acquireLock(path, { leaseMs: 60_000, heartbeatMs: 1_000 });
      if (lock.replaced) expect(lock.replaced.owner, `round ${round}`).toBeDefined();
      await lock.release();
      // A draft the killed process left is swept once older than the lease, not before.
      for (const name of await readdir(dirname(path))) expect(name).toMatch(/^state\.lock\.new-/);
    }
  });

  it("a process that ends without releasing is not kept alive by its heartbeat", {
    timeout: 15_000,
  }, async () => {
    const path = await tmp();
    const script = `const { acquireLock } = await import(${JSON.stringify(pathToFileURL(BUILT).href)});
      await acquireLock(${JSON.stringify(path)}, { leaseMs: 400, heartbeatMs: 50 });`;
    const started = Date.now();
    const r = spawnSync(process.execPath, ["--input-type=module", "-e", script], { timeout: 10_000 });
    expect(r.status, r.stderr.toString()).toBe(0);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(existsSync(path)).toBe(true);
  });
});
