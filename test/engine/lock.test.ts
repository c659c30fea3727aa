import { spawnSync } from "node:child_process";
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { acquireLock, LockHeldError } from "../../src/engine/lock.js";

async function tmp() {
  return join(await mkdtemp(join(tmpdir(), "clapper-lock-")), "state.lock");
}

describe("acquireLock", () => {
  it("refuses a second holder at once while the first is alive, and frees on release", async () => {
    const path = await tmp();
    const first = await acquireLock(path);
    const started = Date.now();
    await expect(acquireLock(path)).rejects.toBeInstanceOf(LockHeldError);
    expect(Date.now() - started).toBeLessThan(500);
    await expect(acquireLock(path)).rejects.toThrow(`pid ${process.pid}`);
    await first.release();
    const second = await acquireLock(path);
    await second.release();
  });

  it("takes over a lock left by a dead process on this host", async () => {
    const path = await tmp();
    // A pid that certainly existed and is now gone: a child that has exited.
    const child = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]);
    const deadPid = Number(child.stdout.toString());
    await writeFile(
      path,
      JSON.stringify({ pid: deadPid, host: hostname(), started_at: "2026-01-01T00:00:00Z" }),
    );
    const lock = await acquireLock(path);
    expect(JSON.parse(await readFile(path, "utf8")).pid).toBe(process.pid);
    await lock.release();
  });

  it("does not take over a lock of another host (its pid means nothing here)", async () => {
    const path = await tmp();
    await writeFile(
      path,
      JSON.stringify({ pid: 999999, host: "elsewhere", started_at: "2026-01-01T00:00:00Z" }),
    );
    await expect(acquireLock(path)).rejects.toThrow("on elsewhere");
  });
});
