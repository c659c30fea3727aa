// The coordinator's parts against a real redis-server (test/coord/redis-server.ts): shared budgets
// exact under concurrency and under the death of their holders, the in-flight cap across
// processes, the run lock's lease and fencing, the shared rate, key expiry, and what happens when
// Redis is unreachable or goes away. A "process" here is one connection with its own lease; a
// death is a connection dropped without a word (Link.fail), so its lease runs out as a killed
// process's would. The CLI-level tests (test/run/coordinator.test.ts) kill real processes.
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  type Coordinator,
  CoordinatorLostError,
  CoordinatorUnavailableError,
  CoordLockHeldError,
  connectCoordinator,
  parseCoordinatorUrl,
} from "../../src/coord/index.js";
import { type RedisServer, redisAvailable, redisSkipReason, startRedis } from "./redis-server.js";

const HAVE_REDIS = redisAvailable();
let n = 0;

describe.skipIf(!HAVE_REDIS)(`the coordinator (${HAVE_REDIS ? "redis-server" : redisSkipReason})`, () => {
  let redis: RedisServer;
  let raw: Redis;
  const open: Coordinator[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    raw = new Redis(redis.port, "127.0.0.1");
  });
  afterEach(async () => {
    for (const c of open.splice(0)) await c.close();
  });
  afterAll(async () => {
    raw?.disconnect();
    await redis?.stop();
  });
  /** A process on `account` with a short lease, so that its death is seen quickly. */
  const proc = async (account: string, holderLeaseMs = 400, onLost?: (e: Error) => void) => {
    const c = await connectCoordinator(redis.url, {
      account,
      holderLeaseMs,
      ...(onLost ? { onLost } : {}),
    });
    open.push(c);
    return c;
  };
  /** Dies without a word: no lease removed, no slot released, no reservation settled. */
  const kill = (c: Coordinator) => {
    c.link.fail(new Error("killed by the test"));
  };
  const account = () => `acct-${process.pid}-${++n}`;
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  describe("budgets", () => {
    it("never commits more than a pool's max_points, however many processes reserve at once", async () => {
      const a = account();
      const procs = await Promise.all([proc(a), proc(a), proc(a)]);
      const pools = [{ name: "nightly", maxPoints: 100, period: "day" as const }];
      const ledgers = await Promise.all(procs.map((c) => c.ledger({ scope: "j1", pools, adopt: [] })));
      // 3 x 30 reservations of 7 points at once: 14 fit in 100.
      const results = await Promise.all(
        ledgers.flatMap((l, i) => Array.from({ length: 30 }, (_, k) => l.tryReserve(7, `p${i}-${k}`))),
      );
      expect(results.filter(Boolean)).toHaveLength(14);
      const [books] = await procs[0]!.budgets();
      expect(books).toMatchObject({
        kind: "pool",
        name: "nightly",
        cap: 100,
        reserved: 98,
        spent: 0,
        reservations: 14,
      });
      const refused = ledgers.find((l) => l.refusal());
      expect(refused?.refusal()).toMatch(
        /^the pool "nightly" \(day \d{4}-\d{2}-\d{2}\) is spent \(98 of 100 committed/,
      );
    });

    it("keeps a pool exact across its run cap and its pool together: both must have room", async () => {
      const a = account();
      const c = await proc(a);
      const l = await c.ledger({
        scope: "j1",
        run: { key: "ep01:1", name: "ep01 (campaign 1)", cap: 50 },
        pools: [{ name: "studio", maxPoints: 1000, period: "total" }],
        adopt: [],
      });
      expect(await l.tryReserve(40, "k1")).toBe(true);
      expect(await l.tryReserve(20, "k2")).toBe(false);
      expect(l.refusal()).toMatch(
        /the run's points cap, shared by all its processes, was reached \(40 of 50/,
      );
      await l.markSent("k1");
      await l.settle(40, 38, "k1");
      const books = await c.budgets();
      expect(books.find((b) => b.kind === "run")).toMatchObject({
        name: "ep01 (campaign 1)",
        cap: 50,
        reserved: 0,
        spent: 38,
      });
      expect(books.find((b) => b.kind === "pool")).toMatchObject({ name: "studio", reserved: 0, spent: 38 });
      // A second settle of the same attempt (a resumed run) changes nothing.
      await l.settle(40, 38, "k1");
      expect((await c.budgets()).find((b) => b.kind === "pool")).toMatchObject({ spent: 38 });
    });

    it("lets a dead process's never-sent reservation lapse with its lease, and keeps a sent one until settled", async () => {
      const a = account();
      const pools = [{ name: "p", maxPoints: 100, period: "total" as const }];
      const dying = await proc(a, 300);
      const dl = await dying.ledger({ scope: "j1", pools, adopt: [] });
      expect(await dl.tryReserve(60, "never-sent")).toBe(true);
      expect(await dl.tryReserve(30, "sent")).toBe(true);
      await dl.markSent("sent");
      kill(dying);
      const other = await proc(a);
      const ol = await other.ledger({ scope: "j2", pools, adopt: [] });
      // The lease still runs: the dead process's 90 points still count.
      expect(await ol.tryReserve(20, "x1")).toBe(false);
      await sleep(450);
      // Lapsed: the never-sent 60 are back; the sent 30 stay (its task exists at the service).
      expect(await ol.tryReserve(60, "x2")).toBe(true);
      expect(await ol.tryReserve(20, "x3")).toBe(false);
      const [books] = await other.budgets();
      expect(books).toMatchObject({ reserved: 90, spent: 0, reservations: 2 });
      // The run that resumes the dead one adopts its sent attempt and settles it.
      const heir = await proc(a);
      const hl = await heir.ledger({ scope: "j1", pools, adopt: [{ id: "sent", points: 30 }] });
      expect(hl.adopted).toMatchObject({ kept: 1, restored: 0 });
      await hl.settle(30, 30, "sent");
      expect((await heir.budgets())[0]).toMatchObject({ reserved: 60, spent: 30 });
    });

    it("refuses to send a reservation that lapsed while its process stalled", async () => {
      const a = account();
      const pools = [{ name: "p", maxPoints: 100, period: "total" as const }];
      const slow = await proc(a, 300);
      const sl = await slow.ledger({ scope: "j1", pools, adopt: [] });
      expect(await sl.tryReserve(80, "late")).toBe(true);
      // The lease lapses (as if the process stalled past it) and another process lapses the reservation.
      await raw.del(`clapper:{${a}}:holder:${slow.holder}`);
      const other = await proc(a);
      const ol = await other.ledger({ scope: "j2", pools, adopt: [] });
      expect(await ol.tryReserve(80, "theirs")).toBe(true);
      await expect(sl.markSent("late")).rejects.toThrow(/no longer holds the reservation of late/);
    });

    it("on resume: reserves a lapsed intent again when it fits, withdraws it when it does not", async () => {
      const a = account();
      const pools = [{ name: "p", maxPoints: 100, period: "total" as const }];
      const dying = await proc(a, 300);
      const dl = await dying.ledger({ scope: "j1", pools, adopt: [] });
      await dl.tryReserve(50, "fits");
      await dl.tryReserve(40, "too-big");
      kill(dying);
      await sleep(450);
      const other = await proc(a);
      const ol = await other.ledger({ scope: "j2", pools, adopt: [] });
      expect(await ol.tryReserve(30, "meanwhile")).toBe(true);
      const heir = await proc(a);
      const hl = await heir.ledger({
        scope: "j1",
        pools,
        adopt: [
          { id: "fits", points: 50 },
          { id: "too-big", points: 40 },
        ],
      });
      expect(hl.adopted).toMatchObject({ kept: 0, restored: 0, reserved: 1 });
      expect(hl.withdraw).toEqual(["too-big"]);
      expect((await heir.budgets())[0]).toMatchObject({ reserved: 80 });
    });

    it("restores the reservations of open attempts when the coordinator lost its data, and settles what the journal settled", async () => {
      const a = account();
      const pools = [{ name: "p", maxPoints: 100, period: "total" as const }];
      const c = await proc(a);
      const l = await c.ledger({ scope: "j1", pools, adopt: [] });
      await l.tryReserve(25, "settled-in-journal");
      await l.markSent("settled-in-journal");
      // The journal settled it, the coordinator never heard (the process lost it first).
      const heir = await proc(a);
      const hl = await heir.ledger({
        scope: "j1",
        pools,
        adopt: [{ id: "open-unknown", points: 10 }],
        settled: (id) => (id === "settled-in-journal" ? { spent: 25 } : undefined),
      });
      expect(hl.adopted).toMatchObject({ restored: 1, settled: 1 });
      expect((await heir.budgets())[0]).toMatchObject({ reserved: 10, spent: 25, reservations: 1 });
    });

    it("counts a day pool in the day of the reservation, in UTC", async () => {
      const a = account();
      const c = await proc(a);
      let now = new Date("2026-11-25T23:59:59.500Z");
      const l = await c.ledger({
        scope: "j1",
        pools: [{ name: "daily", maxPoints: 10, period: "day" }],
        adopt: [],
        now: () => now,
      });
      expect(await l.tryReserve(10, "d1")).toBe(true);
      expect(await l.tryReserve(1, "d2")).toBe(false);
      now = new Date("2026-11-26T00:00:00.100Z");
      expect(await l.tryReserve(10, "d3")).toBe(true);
      // Settled the next day, the first reservation still lands in its own day.
      await l.markSent("d1");
      await l.settle(10, 10, "d1");
      const books = await c.budgets();
      const byDay = Object.fromEntries(books.map((b) => [b.periodId, b]));
      expect(byDay["2026-11-25"]).toMatchObject({ reserved: 0, spent: 10 });
      expect(byDay["2026-11-26"]).toMatchObject({ reserved: 10, spent: 0 });
    });
    it("keeps two journals apart even when their attempt keys are equal (two checkouts of one manifest)", async () => {
      const a = account();
      const pools = [{ name: "p", maxPoints: 40, period: "total" as const }];
      const [x, y, z] = await Promise.all([proc(a), proc(a), proc(a)]);
      const xl = await x.ledger({ scope: "checkout-x", pools, adopt: [] });
      const yl = await y.ledger({ scope: "checkout-y", pools, adopt: [] });
      expect(await xl.tryReserve(40, "same-key")).toBe(true);
      // Y's reservation of the same key is its own, and the pool has no room for it.
      expect(await yl.tryReserve(40, "same-key")).toBe(false);
      // X withdraws its attempt: the pool has room again, for exactly one of them.
      await xl.settle(40, 0, "same-key");
      expect(await yl.tryReserve(40, "same-key")).toBe(true);
      await yl.markSent("same-key");
      const zl = await z.ledger({ scope: "checkout-z", pools, adopt: [] });
      expect(await zl.tryReserve(40, "other")).toBe(false);
      expect((await z.budgets())[0]).toMatchObject({ reserved: 40, spent: 0 });
    });

    it("sends nothing for a process whose lease lapsed, even once another process adopted its attempt", async () => {
      const a = account();
      const pools = [{ name: "p", maxPoints: 100, period: "total" as const }];
      const stalled = await proc(a, 300);
      const sl = await stalled.ledger({ scope: "run-s", pools, adopt: [] });
      expect(await sl.tryReserve(40, "k")).toBe(true);
      await raw.del(`clapper:{${a}}:holder:${stalled.holder}`);
      // The run's next process (it took the run's lock once the lease ran out) adopts the intent.
      const next = await proc(a);
      const nl = await next.ledger({ scope: "run-s", pools, adopt: [{ id: "k", points: 40 }] });
      expect(nl.adopted.kept + nl.adopted.reserved).toBe(1);
      await expect(sl.markSent("k")).rejects.toThrow(/its lease lapsed/);
      await nl.markSent("k");
    });

    it("settles on resume what the journal withdrew or settled but Redis still holds, even in a pool the manifest no longer names", async () => {
      const a = account();
      const c = await proc(a);
      const l = await c.ledger({
        scope: "run-w",
        pools: [{ name: "old", maxPoints: 100, period: "total" }],
        adopt: [],
      });
      await l.tryReserve(30, "withdrawn");
      await l.markSent("withdrawn");
      await l.tryReserve(20, "paid");
      await l.markSent("paid");
      kill(c);
      // The next run's manifest names no pool; its journal withdrew one attempt and settled the other.
      const heir = await proc(a);
      const hl = await heir.ledger({
        scope: "run-w",
        pools: [],
        adopt: [],
        settled: (id) => (id === "paid" ? { spent: 20 } : undefined),
      });
      expect(hl.adopted.settled).toBe(2);
      expect((await heir.budgets()).find((b) => b.name === "old")).toMatchObject({
        reserved: 0,
        spent: 20,
        reservations: 0,
      });
    });

    it("counts a journal's settled spending again, once, after the coordinator lost its data", async () => {
      const own = await startRedis();
      try {
        const a = account();
        const pools = [{ name: "p", maxPoints: 100, period: "day" as const }];
        const c1 = await connectCoordinator(own.url, { account: a });
        const before = c1.generation;
        const l1 = await c1.ledger({ scope: "run-g", pools, adopt: [] });
        await l1.tryReserve(60, "k1");
        await l1.markSent("k1");
        await l1.settle(60, 60, "k1");
        await c1.close();
        await own.restart();
        const c2 = await connectCoordinator(own.url, { account: a });
        open.push(c2);
        expect(c2.generation).not.toBe(before);
        const restore = [{ id: "k1", spent: 60, at: Date.now(), thisCampaign: true }];
        const l2 = await c2.ledger({ scope: "run-g", pools, adopt: [], restore });
        expect(l2.adopted.recounted).toBe(1);
        expect(await l2.tryReserve(50, "k2")).toBe(false);
        // A second run with the same journal counts nothing twice.
        const l3 = await c2.ledger({ scope: "run-g", pools, adopt: [], restore });
        expect(l3.adopted.recounted).toBe(0);
        expect((await c2.budgets())[0]).toMatchObject({ spent: 60, reserved: 0 });
      } finally {
        await own.stop();
      }
    });
  });

  describe("in-flight slots", () => {
    it("holds at most the cap across processes, and a dead holder's slots return within its lease", async () => {
      const a = account();
      const [p1, p2] = await Promise.all([proc(a, 300), proc(a, 300)]);
      const s1 = p1.slots("video", 3);
      const s2 = p2.slots("video", 3);
      let held = 0;
      let peak = 0;
      const work = async (s: typeof s1) => {
        const slot = await s.acquire();
        held += 1;
        peak = Math.max(peak, held);
        await sleep(30);
        held -= 1;
        await slot.release();
      };
      await Promise.all([
        ...Array.from({ length: 10 }, () => work(s1)),
        ...Array.from({ length: 10 }, () => work(s2)),
      ]);
      expect(peak).toBe(3);
      // p1 dies holding all three slots.
      await Promise.all([s1.acquire(), s1.acquire(), s1.acquire()]);
      kill(p1);
      const t0 = Date.now();
      const slot = await s2.acquire();
      expect(Date.now() - t0).toBeLessThan(2000);
      await slot.release();
    });

    it("leaves the queue on abort without taking a slot", async () => {
      const a = account();
      const c = await proc(a);
      const s = c.slots("speech", 1);
      const first = await s.acquire();
      const ac = new AbortController();
      const waiting = s.acquire(ac.signal);
      ac.abort();
      await expect(waiting).rejects.toThrow(/aborted while waiting for an in-flight slot/);
      await first.release();
      const again = await s.acquire();
      await again.release();
      expect(s.held).toBe(0);
    });
  });

  describe("run locks", () => {
    it("refuses a held lock, takes over a dead holder's within its lease with a higher fencing token", async () => {
      const a = account();
      const first = await proc(a, 400);
      // The lock's own lease is long; its holder's process lease (400 ms) is what frees it.
      const l1 = await first.lock("state:/x", { leaseMs: 10_000, heartbeatMs: 60 });
      const second = await proc(a);
      await expect(second.lock("state:/x")).rejects.toBeInstanceOf(CoordLockHeldError);
      await expect(second.lock("state:/x")).rejects.toThrow(/--break-lock/);
      kill(first);
      const t0 = Date.now();
      const l2 = await second.lock("state:/x", { wait: {} });
      expect(Date.now() - t0).toBeLessThan(1500);
      expect(l2.fence).toBeGreaterThan(l1.fence);
      expect(l2.replaced?.holder).toBe(first.holder);
      await l2.release();
    });

    it("tells a live holder within a heartbeat while waiting, and --break-lock takes it and tells the old holder", async () => {
      const a = account();
      const holder = await proc(a, 2000);
      const lostSeen: Error[] = [];
      const l1 = await holder.lock("state:/y", {
        leaseMs: 2000,
        heartbeatMs: 100,
        onLost: (e) => lostSeen.push(e),
      });
      const other = await proc(a);
      const t0 = Date.now();
      await expect(other.lock("state:/y", { leaseMs: 2000, wait: {} })).rejects.toBeInstanceOf(
        CoordLockHeldError,
      );
      expect(Date.now() - t0).toBeLessThan(1000);
      const l2 = await other.lock("state:/y", { leaseMs: 2000, breakLock: true });
      expect(l2.fence).toBe(l1.fence + 1);
      await sleep(250);
      expect(l1.lost).toBe(true);
      expect(lostSeen[0]?.message).toMatch(/taken over by pid/);
      await l2.release();
    });
  });

  describe("the shared rate", () => {
    it("gives two processes one rate between them", async () => {
      const a = account();
      const [p1, p2] = await Promise.all([proc(a), proc(a)]);
      const settings = { ceiling: 40, fixed: true };
      const r1 = p1.rate("key", settings);
      const r2 = p2.rate("key", settings);
      const t0 = Date.now();
      await Promise.all([
        (async () => {
          for (let i = 0; i < 30; i++) await r1.turn();
        })(),
        (async () => {
          for (let i = 0; i < 30; i++) await r2.turn();
        })(),
      ]);
      // 60 turns at 40/s: about 1.5 s (two processes alone would take 0.75 s).
      expect(Date.now() - t0).toBeGreaterThan(1300);
    });

    it("slows every process when one meets a 429", async () => {
      const a = account();
      const [p1, p2] = await Promise.all([proc(a), proc(a)]);
      const r1 = p1.rate("key", { ceiling: 200, initial: { rps: 100, settled: false } });
      const r2 = p2.rate("key", { ceiling: 200, initial: { rps: 100, settled: false } });
      for (let i = 0; i < 20; i++) {
        await r1.turn();
        r1.accept();
      }
      const before = r2.current;
      await r1.limit(undefined, Date.now() - 5);
      await r2.turn();
      expect(r2.current).toBeLessThan(Math.max(before, 100));
      expect(r1.current).toBe(r2.current);
    });
    it("pauses every process for a long Retry-After, but never longer than 30 s, whatever the service asks", async () => {
      const a = account();
      const [p1, p2] = await Promise.all([proc(a), proc(a)]);
      const r1 = p1.rate("key", { ceiling: 50 });
      const r2 = p2.rate("key", { ceiling: 50 });
      await r1.turn();
      // About three years: Node would fire a timer that long at once, and the run would wait for ever.
      await r1.limit(99_999_999_000, Date.now() - 5);
      const stop = new AbortController();
      const waited = Date.now();
      const turn = r2.turn(stop.signal).then(
        () => Date.now() - waited,
        () => -1,
      );
      // Paused: nothing within a second; the wait asked of the coordinator is at most 30 s.
      const early = await Promise.race([turn, new Promise<number>((r) => setTimeout(() => r(0), 1000))]);
      expect(early).toBe(0);
      stop.abort();
      expect(await turn).toBe(-1);
      // The shared state, read as the coordinator keeps it (the server's clock, in ms).
      const [key] = await raw.keys(`*${a}*rate:key`);
      const pausedUntil = Number(await raw.hget(key as string, "pausedUntil"));
      const [sec, usec] = await raw.time();
      const pausedForMs = pausedUntil - (Number(sec) * 1000 + Number(usec) / 1000);
      expect(pausedForMs).toBeGreaterThan(25_000);
      expect(pausedForMs).toBeLessThanOrEqual(30_000);
    });
    it("caps a pause it reads back at 30 s, whoever stored a longer one (the key's expiry never lapses while in use)", async () => {
      const a = account();
      const [p1, p2] = await Promise.all([proc(a), proc(a)]);
      await p1.rate("key", { ceiling: 50 }).turn();
      const [key] = await raw.keys(`*${a}*rate:key`);
      const serverNow = async () => {
        const [sec, usec] = await raw.time();
        return Number(sec) * 1000 + Number(usec) / 1000;
      };
      // As a process from before the cap left it: paused, and the next moment reserved, years ahead.
      const years = (await serverNow()) + 1e11;
      await raw.hset(key as string, "pausedUntil", String(years), "tat", String(years));
      const stop = new AbortController();
      const turn = p2
        .rate("key", { ceiling: 50 })
        .turn(stop.signal)
        .then(
          () => "sent",
          () => "aborted",
        );
      const early = await Promise.race([
        turn,
        new Promise<string>((r) => setTimeout(() => r("waiting"), 1000)),
      ]);
      expect(early).toBe("waiting");
      stop.abort();
      expect(await turn).toBe("aborted");
      const now = await serverNow();
      expect(Number(await raw.hget(key as string, "pausedUntil")) - now).toBeLessThanOrEqual(30_000);
      expect(Number(await raw.hget(key as string, "tat")) - now).toBeLessThanOrEqual(60_000);
    });
  });

  it("sets an expiry on every key it writes", async () => {
    const a = account();
    const c = await proc(a);
    const l = await c.ledger({
      scope: "j1",
      run: { key: "r:1", name: "r (campaign 1)", cap: 10 },
      pools: [{ name: "p", maxPoints: 10, period: "week" }],
      adopt: [],
    });
    await l.tryReserve(5, "e1");
    await l.markSent("e1");
    const slot = await c.slots("video", 2).acquire();
    await c.rate("key", { ceiling: 10 }).turn();
    const lock = await c.lock("state:/z");
    const keys = await raw.keys(`clapper:{${a}}:*`);
    expect(keys.length).toBeGreaterThan(8);
    for (const key of keys) expect(await raw.pttl(key), key).toBeGreaterThan(0);
    await slot.release();
    await lock.release();
  });

  describe("failures", () => {
    it("names the address when unreachable at start, hiding a password", async () => {
      const url = parseCoordinatorUrl("redis://user:hunter2@127.0.0.1:1/3");
      const error = await connectCoordinator(url, { account: "x" }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CoordinatorUnavailableError);
      expect((error as Error).message).toBe(
        "the coordinator redis://user:***@127.0.0.1:1/3 cannot be reached (ECONNREFUSED)",
      );
    });

    it("is lost for good when Redis dies: told once, every later call fails the same way", async () => {
      const own = await startRedis();
      try {
        const lost: Error[] = [];
        const c = await connectCoordinator(own.url, { account: account(), onLost: (e) => lost.push(e) });
        open.push(c);
        const l = await c.ledger({
          scope: "j1",
          pools: [{ name: "p", maxPoints: 10, period: "total" }],
          adopt: [],
        });
        own.kill();
        await expect(l.tryReserve(1, "a")).rejects.toBeInstanceOf(CoordinatorLostError);
        await expect(c.slots("video", 1).acquire()).rejects.toBeInstanceOf(CoordinatorLostError);
        await own.restart();
        // Back, and still lost: what it held for this process is no longer known.
        await expect(l.tryReserve(1, "b")).rejects.toBeInstanceOf(CoordinatorLostError);
        expect(lost).toHaveLength(1);
        expect(lost[0]?.message).toMatch(/^the coordinator redis:\/\/127\.0\.0\.1:\d+ was lost mid-run/);
      } finally {
        await own.stop();
      }
    });

    it("refuses malformed addresses with precise messages", () => {
      expect(() => parseCoordinatorUrl("http://h:1")).toThrow(
        'Expected --coordinator to be redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB], got "http://h:1"',
      );
      expect(() => parseCoordinatorUrl("redis://h:1/16", "CLAPPER_REDIS_URL")).toThrow(
        'Expected the database in CLAPPER_REDIS_URL to be an integer from 0 to 15, got "16"',
      );
      expect(parseCoordinatorUrl("rediss://:pw@cache.example:6380/2")).toMatchObject({
        tls: true,
        host: "cache.example",
        port: 6380,
        db: 2,
        display: "rediss://:***@cache.example:6380/2",
      });
    });
  });
});
