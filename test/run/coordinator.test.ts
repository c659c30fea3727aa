// Several clapper processes sharing one account through a real redis-server (Debian's package,
// started here on a free loopback port) against one sandbox process: the shared request rate, the
// shared pool under random SIGKILLs, the run lock of a killed holder, and Redis itself killed in
// the middle of a run. Every check compares what the runs say with what the sandbox saw: tasks
// created, points committed at every moment, and the balance drop.
import { readFile, writeFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RedisServer, redisAvailable, redisSkipReason, startRedis } from "../coord/redis-server.js";
import {
  cli,
  cliEnv,
  journalRecords,
  KEY,
  readReport,
  rng,
  type SandboxProcess,
  settledBalance,
  staleBuild,
  startSandbox,
  verifyOutputs,
  type Workspace,
  watchCommitted,
  workspace,
} from "./harness.js";

const HAVE_REDIS = redisAvailable();
const SEED = Number(process.env.CLAPPER_KILL_SEED ?? Math.floor(Math.random() * 2 ** 31));
const random = rng(SEED);
const between = (lo: number, hi: number) => Math.floor(lo + random() * (hi - lo + 1));
// No stills: the runs here are about the shared rate and pool, and an ffmpeg beside them would only
// take CPU from the pacing they measure.
const FLAGS = ["--log-format", "json", "--poll-interval", "0.05", "--max-attempts", "1", "--no-stills"];

/** `n` 768P 4 s shots (40 points each), their prompts marked by `tag` so no two runs share a task. */
function shotsManifest(name: string, n: number, extra: string[] = []): string {
  const lines = [
    `name: ${name}`,
    "output: ./output",
    ...extra,
    "defaults:",
    '  shot: { model: Vid-H3, resolution: 768P, duration: 4, ratio: "16:9" }',
    "shots:",
  ];
  for (let i = 1; i <= n; i++)
    lines.push(`  - { id: s${String(i).padStart(2, "0")}, prompt: "${name}: take ${i}" }`);
  return `${lines.join("\n")}\n`;
}

/** Idempotency keys of every attempt a run's journal opened. */
async function attemptKeys(ws: Workspace): Promise<string[]> {
  const records = await journalRecords(ws.statePath);
  return records.flatMap((r) => (r.t === "intent" ? [r.key] : []));
}

describe.skipIf(!HAVE_REDIS)(`with a coordinator (${HAVE_REDIS ? "redis-server" : redisSkipReason})`, () => {
  let redis: RedisServer;
  const spaces: Workspace[] = [];
  const sandboxes: SandboxProcess[] = [];
  beforeAll(async () => {
    expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.stop();
    for (const sb of sandboxes) await sb.close();
    for (const w of spaces) await w.remove();
  });
  const sandbox = async (timeScale: number, extra: string[] = []) => {
    const sb = await startSandbox(timeScale, extra);
    sandboxes.push(sb);
    return sb;
  };
  const space = async (name: string, text: string) => {
    const w = await workspace(name, { text });
    spaces.push(w);
    return w;
  };

  it("refuses an unreachable coordinator before anything is submitted: exit 6, naming the address", async () => {
    const sb = await sandbox(0.02);
    const w = await space("unreachable", shotsManifest("unreachable", 2));
    const r = await cli(["run", w.manifest, ...FLAGS, "--coordinator", "redis://127.0.0.1:1"], {
      cwd: w.dir,
      env: cliEnv(sb),
    }).done;
    expect(r.code, r.messages.join("\n")).toBe(6);
    expect(r.messages.join("\n")).toContain("redis://127.0.0.1:1");
    expect((await sb.stats()).tasks_created).toEqual({ video: 0, speech: 0 });
  });

  it("refuses a pool without a coordinator (exit 2) and a bad address (exit 2, the password hidden)", async () => {
    const sb = await sandbox(0.02);
    const pool = ["budget:", "  pool: { name: nightly, max_points: 500, period: day }"];
    const w = await space("needs-coord", shotsManifest("needs-coord", 1, pool));
    const r = await cli(["run", w.manifest, ...FLAGS], { cwd: w.dir, env: cliEnv(sb) }).done;
    expect(r.code).toBe(2);
    expect(r.messages.join("\n")).toMatch(/budget\.pool "nightly".*--coordinator/);
    const bad = await cli(["run", w.manifest, ...FLAGS], {
      cwd: w.dir,
      env: { ...cliEnv(sb), CLAPPER_REDIS_URL: "http://user:s3cret-pw@127.0.0.1:6379" },
    }).done;
    expect(bad.code).toBe(2);
    expect(bad.messages.join("\n")).toContain("CLAPPER_REDIS_URL");
    expect(bad.messages.join("\n")).not.toContain("s3cret-pw");
    expect((await sb.stats()).tasks_created).toEqual({ video: 0, speech: 0 });
  });

  it("shares one rate: three processes under a 40 requests/s limit find it once, settle near it, and meet a handful of 429s after", {
    timeout: 120_000,
  }, async () => {
    type Round = { requests: number; limited: number; late: number; rates: number[] };
    const rounds: Record<string, Round> = {};
    for (const coordinated of [true, false]) {
      // Plain videos: the sandbox shares the two cores with the three runs, and making each task's own
      // picture would take CPU from the pacing measured here.
      const sb = await sandbox(0.02, ["--rate-limit", "40", "--plain-videos"]);
      const label = coordinated ? "coordinated" : "alone";
      const ws = await Promise.all(
        [1, 2, 3].map((i) => space(`rate-${label}-${i}`, shotsManifest(`rate-${label}-${i}`, 100))),
      );
      const runs = await Promise.all(
        ws.map(
          (w) =>
            cli(["run", w.manifest, ...FLAGS, ...(coordinated ? ["--coordinator", redis.url] : [])], {
              cwd: w.dir,
              env: { ...cliEnv(sb), CLAPPER_RETRY_BASE_MS: "50" },
            }).done,
        ),
      );
      for (const r of runs) expect(r.code, r.messages.join("\n")).toBe(0);
      const stats = await sb.stats();
      const requests = Object.entries(stats.requests)
        .filter(([k]) => !k.includes("/_sandbox/") && !k.includes("/_media/"))
        .reduce((n, [, v]) => n + v, 0);
      const limited = runs.reduce(
        (n, r) => n + Number(r.events.find((e) => e.event === "rate")?.limited ?? 0),
        0,
      );
      // When each 429 was answered (every one is retried, and each retry is a log line).
      const refused = runs.flatMap((r) =>
        r.events.filter((e) => e.event === "retry" && Number(e.status) === 429).map((e) => Number(e.time)),
      );
      const first = Math.min(...refused);
      const rates = runs.map((r) => {
        const rate = r.events.find((e) => e.event === "rate") as { rates?: { key?: { rps?: number } } };
        return Number(rate?.rates?.key?.rps);
      });
      rounds[label] = { requests, limited, late: refused.filter((t) => t > first + 2500).length, rates };
    }
    console.log(`rates shared: ${JSON.stringify(rounds)}`);
    const c = rounds.coordinated as Round;
    const a = rounds.alone as Round;
    // One rate, and every process ends within a tenth of the service's limit, as one process does
    // (test/engine/limiter.test.ts). Measured in 10 rounds on a quiet machine and with a core kept
    // busy beside it: 38.1-39.1/s.
    for (const rps of c.rates) {
      expect(rps).toBeGreaterThanOrEqual(36);
      expect(rps).toBeLessThanOrEqual(44);
    }
    // Found once: the 429s of finding the limit (the service's burst of a second hides it, and slow
    // start meets it at 160/s or more) are met by one shared search, not three.
    expect(c.limited).toBeGreaterThanOrEqual(1);
    expect(a.limited).toBeGreaterThan(c.limited);
    // Once found, a handful: after the first 429's cut, its recut and the settling at the end of
    // its grace (2.5 s in all), the rest of the round (about 14 s) meets at most 3.
    // The total is not bounded here: it is the cold start's, and this sandbox shares two cores
    // with the three runs, so under load it takes requests late and in bunches, and its bucket
    // refuses the bunch. Measured (about 650 requests a round): 10-16 429s quiet, up to 47 with a
    // busy core beside it, 0-1 of them late in either case.
    expect(c.late).toBeLessThanOrEqual(3);
  });

  it("never lets three runs of one pool commit more than its max_points, under random SIGKILLs and SIGTERMs", {
    timeout: 180_000,
  }, async () => {
    const sb = await sandbox(0.02);
    const CAP = 1000;
    // Each run alone fits (16 x 40 = 640); together they need 1,920 of the pool's 1,000.
    const pool = ["budget:", `  pool: { name: kills-${SEED}, max_points: ${CAP}, period: day }`];
    const ws = await Promise.all(
      [1, 2, 3].map((i) => space(`pool-${i}`, shotsManifest(`pool-${i}`, 16, pool))),
    );
    const before = await settledBalance(sb);
    const watch = watchCommitted(sb, before);
    const logs: string[][] = [[], [], []];
    // A killed run's lock (in Redis) frees itself within its lease: 2 s here, so its next run waits little.
    await Promise.all(
      ws.map(async (w, i) => {
        const log = logs[i] as string[];
        for (let k = 0; k < 8; k++) {
          // A stop at a random moment (SIGKILL), or right after the m-th create (SIGKILL or SIGTERM):
          // a timed stop alone may land before the first create of a slow start.
          const stop =
            k < 5 && random() < 0.7 ? (["timed", "KILL", "TERM"] as const)[between(0, 2)] : undefined;
          const m = between(1, 8);
          let created = 0;
          const r = await cli(["run", w.manifest, ...FLAGS, "--coordinator", redis.url], {
            cwd: w.dir,
            env: { ...cliEnv(sb), CLAPPER_LOCK_LEASE_MS: "2000" },
            ...(stop === "timed" ? { killAfterMs: between(500, 2500) } : {}),
            ...(stop === "KILL" || stop === "TERM"
              ? {
                  on: (e) => (e.event === "created" && ++created === m ? (`SIG${stop}` as const) : undefined),
                }
              : {}),
          }).done;
          if (r.signal) {
            log.push(`killed at ${r.ms} ms`);
            continue;
          }
          if (r.code === 4) {
            log.push(`terminated at ${r.ms} ms`);
            continue;
          }
          log.push(`exit ${r.code}`);
          // 0: done; 1: stopped when the pool was spent; 3: the pool could not fit it at all.
          expect([0, 1, 3], `${w.name}: ${r.messages.join("\n")}`).toContain(r.code);
          break;
        }
      }),
    );
    const deepest = await watch.stop();
    const after = await settledBalance(sb);
    console.log(
      `pool runs (seed ${SEED}): ${logs.map((l) => l.join(" -> ")).join(" | ")}; deepest ${deepest}`,
    );
    for (const l of logs) expect(l.at(-1)).toMatch(/^exit /);
    // The pool held at every moment, and in the end.
    expect(deepest).toBeLessThanOrEqual(CAP);
    expect(before.total_points - after.total_points).toBeLessThanOrEqual(CAP);
    // Nothing paid twice: no two journals share an attempt's key (a withdrawn intent's key comes
    // back with its job's next try, never sent twice), and the sandbox made at most one task a key.
    const keys = (await Promise.all(ws.map(async (w) => [...new Set(await attemptKeys(w))]))).flat();
    expect(new Set(keys).size).toBe(keys.length);
    const stats = await sb.stats();
    expect(stats.tasks_created.video).toBeLessThanOrEqual(keys.length);
    // Every point paid lands in a report. A run refused at admission (exit 3) leaves the tasks of its
    // killed predecessors open until a run of its journal is admitted: each such journal is ended
    // under a second, larger pool, whose run follows them (settling them in the first pool) and
    // does the rest.
    const poolSpent = before.total_points - after.total_points;
    const spentIn = async (w: Workspace) =>
      (
        JSON.parse(await readFile(w.reportPath, "utf8").catch(() => "null")) as {
          points: { spent: number };
        } | null
      )?.points.spent ?? 0;
    let reported = 0;
    for (const [i, w] of ws.entries()) {
      if (logs[i]?.at(-1) !== "exit 3") {
        reported += await spentIn(w);
        continue;
      }
      const drain = ["budget:", `  pool: { name: drain-${SEED}, max_points: 100000, period: day }`];
      await writeFile(w.manifest, shotsManifest(w.name, 16, drain));
      const r = await cli(["run", w.manifest, ...FLAGS, "--coordinator", redis.url], {
        cwd: w.dir,
        env: { ...cliEnv(sb), CLAPPER_LOCK_LEASE_MS: "2000" },
      }).done;
      expect(r.code, r.messages.join("\n")).toBe(0);
      reported += await spentIn(w);
    }
    const end = await settledBalance(sb);
    expect(reported).toBe(before.total_points - end.total_points);
    // Every result a report says was produced is on disk, whole: its size and sha256 as reported.
    for (const w of ws) {
      const report = await readReport(w);
      const produced = report.jobs.filter((j) => j.status === "succeeded" || j.status === "skipped");
      expect(produced.every((j) => j.output !== undefined)).toBe(true);
      expect(await verifyOutputs({ ...report, jobs: produced })).toEqual([]);
    }
    // And the coordinator's books agree with the balance: the first pool holds what was paid under it.
    const b = await cli(["budget", "--json", "--coordinator", redis.url], {
      cwd: ws[0]?.dir ?? ".",
      env: { ...cliEnv(sb), CLAPPER_LOCK_LEASE_MS: "2000" },
    }).done;
    expect(b.code, b.messages.join("\n")).toBe(0);
    const books = JSON.parse(b.stdout) as {
      budgets: Array<{ kind: string; name: string; cap: number; reserved: number; spent: number }>;
    };
    // Each task is settled in the pool its reservation was made in: a create a killed run had
    // reserved under the first pool but not yet sent is sent by the drain run and paid there too.
    const entry = books.budgets.find((x) => x.kind === "pool" && x.name === `kills-${SEED}`);
    expect(entry).toMatchObject({ cap: CAP, reserved: 0 });
    expect(entry?.spent).toBeGreaterThanOrEqual(poolSpent);
    expect(entry?.spent).toBeLessThanOrEqual(CAP);
    const drained = books.budgets.find((x) => x.kind === "pool" && x.name === `drain-${SEED}`);
    expect(drained?.reserved ?? 0).toBe(0);
    expect((entry?.spent ?? 0) + (drained?.spent ?? 0)).toBe(before.total_points - end.total_points);
    // Every task the sandbox made is one a journal knows.
    const tasks = new Set(
      (await Promise.all(ws.map((w) => journalRecords(w.statePath))))
        .flat()
        .flatMap((r) => (r.t === "created" ? [r.task_id] : [])),
    );
    expect(tasks.size).toBe((await sb.stats()).tasks_created.video);
  });

  it("frees a SIGKILLed holder's lock within its lease; the next run takes it over and pays nothing twice", {
    timeout: 60_000,
  }, async () => {
    const sb = await sandbox(0.05);
    const w = await space("lock-kill", shotsManifest("lock-kill", 6));
    const env = { ...cliEnv(sb), CLAPPER_LOCK_LEASE_MS: "1500" };
    const args = ["run", w.manifest, ...FLAGS, "--coordinator", redis.url];
    const first = cli(args, { cwd: w.dir, env, on: (e) => (e.event === "created" ? "SIGKILL" : undefined) });
    const killed = await first.done;
    expect(killed.signal).toBe("SIGKILL");
    const t0 = Date.now();
    const second = await cli(args, { cwd: w.dir, env }).done;
    expect(second.code, second.messages.join("\n")).toBe(0);
    // It waited for the lease (not forever, not for a default 30 s).
    expect(Date.now() - t0).toBeLessThan(15_000);
    const keys = await attemptKeys(w);
    expect(new Set(keys).size).toBe(6);
    expect((await sb.stats()).tasks_created.video).toBe(6);
  });

  it("stops at once when Redis dies mid-run (exit 6, state saved); restarted, the next run finishes paying nothing twice", {
    timeout: 90_000,
  }, async () => {
    const own = await startRedis();
    try {
      const sb = await sandbox(0.05);
      const CAP = 2000;
      const pool = ["budget:", `  pool: { name: outage-${SEED}, max_points: ${CAP}, period: total }`];
      const w = await space("redis-dies", shotsManifest("redis-dies", 20, pool));
      const args = ["run", w.manifest, ...FLAGS, "--coordinator", own.url];
      const before = await settledBalance(sb);
      let n = 0;
      const r = await cli(args, {
        cwd: w.dir,
        env: cliEnv(sb),
        on: (e) => {
          if (e.event === "created" && ++n === 5) own.kill();
          return undefined;
        },
      }).done;
      expect(r.code, r.messages.join("\n")).toBe(6);
      expect(r.messages.join("\n")).toContain("coordinator");
      const createdThen = (await sb.stats()).tasks_created.video;
      expect(createdThen).toBeLessThan(20);
      await own.restart();
      const again = await cli(args, { cwd: w.dir, env: cliEnv(sb) }).done;
      expect(again.code, again.messages.join("\n")).toBe(0);
      const after = await settledBalance(sb);
      expect((await sb.stats()).tasks_created.video).toBe(20);
      expect(before.total_points - after.total_points).toBe(20 * 40);
      // The restarted Redis lost the pool's books: the run counted what it had paid before again.
      expect(again.events.some((e) => e.event === "coordinator-data-lost")).toBe(true);
      const b = await cli(["budget", "--json", "--coordinator", own.url], { cwd: w.dir, env: cliEnv(sb) })
        .done;
      const books = JSON.parse(b.stdout) as {
        budgets: Array<{ name: string; spent: number; reserved: number }>;
      };
      expect(books.budgets.find((x) => x.name === `outage-${SEED}`)).toMatchObject({
        spent: 20 * 40,
        reserved: 0,
      });
    } finally {
      await own.stop();
    }
  });

  it("takes the state's lock file too: a run without the coordinator on the same state is refused (exit 5)", {
    timeout: 60_000,
  }, async () => {
    const sb = await sandbox(0.2);
    const w = await space("both-locks", shotsManifest("both-locks", 3));
    const coordinated = cli(["run", w.manifest, ...FLAGS, "--coordinator", redis.url], {
      cwd: w.dir,
      env: cliEnv(sb),
    });
    // Once it is creating, it holds both locks.
    await new Promise<void>((resolve) => {
      const timer = setInterval(async () => {
        if ((await sb.stats()).tasks_created.video > 0) {
          clearInterval(timer);
          resolve();
        }
      }, 50);
    });
    const plain = await cli(["run", w.manifest, ...FLAGS], { cwd: w.dir, env: cliEnv(sb) }).done;
    expect(plain.code, plain.messages.join("\n")).toBe(5);
    const first = await coordinated.done;
    expect(first.code, first.messages.join("\n")).toBe(0);
    expect((await sb.stats()).tasks_created.video).toBe(3);
  });

  // Last: by now the runs above have written every kind of key there is.
  it("never lets the API key reach Redis: no key name and no value of any kind holds it", async () => {
    const { Redis } = await import("ioredis");
    const r = new Redis(redis.port, "127.0.0.1");
    try {
      const keys = await r.keys("*");
      expect(keys.length).toBeGreaterThan(10);
      const dump: string[] = [];
      for (const key of keys) {
        dump.push(key);
        const type = await r.type(key);
        if (type === "string") dump.push(String(await r.get(key)));
        else if (type === "hash") dump.push(...(await r.hgetall(key).then((h) => Object.entries(h).flat())));
        else if (type === "zset") dump.push(...(await r.zrange(key, 0, -1)));
        else dump.push(`unexpected type ${type}`);
      }
      const all = dump.join("\n");
      expect(all).not.toContain("unexpected type");
      expect(all).not.toContain(KEY);
      expect(all).not.toMatch(/sk-ml-/);
    } finally {
      r.disconnect();
    }
  });
});
