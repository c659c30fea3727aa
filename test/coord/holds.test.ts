// Holds on a run's shared cap, against a real redis-server: a shard's admission holds its whole
// estimate beside every other shard's hold, reservations and spending, atomically, so that shards
// admitted at the same moment never both take what is left; its reservations come out of its hold;
// a dead holder's hold lapses with its lease.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Coordinator, connectCoordinator } from "../../src/coord/index.js";
import { type RedisServer, redisAvailable, redisSkipReason, startRedis } from "./redis-server.js";

const HAVE_REDIS = redisAvailable();
let n = 0;

describe.skipIf(!HAVE_REDIS)(
  `holds on a run's cap (${HAVE_REDIS ? "redis-server" : redisSkipReason})`,
  () => {
    let redis: RedisServer;
    const open: Coordinator[] = [];
    beforeAll(async () => {
      redis = await startRedis();
    });
    afterAll(async () => {
      for (const c of open) await c.close().catch(() => undefined);
      await redis?.stop();
    });
    const proc = async (account: string) => {
      const c = await connectCoordinator(redis.url, { account, holderLeaseMs: 400 });
      open.push(c);
      return c;
    };
    const runOf = (cap: number) => ({ key: `shards:board:2:${++n}`, name: "board (campaign 1)", cap });

    it("admits one of two shards that hold at the same moment when only one fits", async () => {
      const account = `holds-${process.pid}-${++n}`;
      const procs = await Promise.all([1, 2, 3, 4].map(() => proc(account)));
      const run = runOf(100);
      // Four shards of 40 at once: two fit in 100, whatever the order.
      const held = await Promise.all(procs.map((c) => c.holdRun(run, 40)));
      expect(held.filter((h) => h.ok)).toHaveLength(2);
      for (const h of held.filter((x) => !x.ok)) expect(h.committed).toBe(80);
      const [view] = [await procs[0]?.run(run.key)];
      expect(view).toMatchObject({ reserved: 0, spent: 0, held: 80 });
    });

    it("turns a hold into reservations, refuses what goes beyond it and the cap, and lets the rest go", async () => {
      const account = `holds-${process.pid}-${++n}`;
      const [a, b] = await Promise.all([proc(account), proc(account)]);
      const run = runOf(100);
      expect((await a.holdRun(run, 60)).ok).toBe(true);
      const la = await a.ledger({ scope: "shard-a", run, pools: [], adopt: [] });
      // 3 x 20 out of A's hold: the books do not move past 60.
      for (const id of ["a1", "a2", "a3"]) expect(await la.tryReserve(20, id)).toBe(true);
      expect(await a.run(run.key)).toMatchObject({ reserved: 60, held: 0 });
      // B holds what is left, 40; A's next 10 (beyond its hold) no longer fits.
      expect((await b.holdRun(run, 40)).ok).toBe(true);
      expect(await la.tryReserve(10, "a4")).toBe(false);
      // B gives back the 40 it did not use: A's 10 fits again.
      expect((await b.holdRun(run, 0)).ok).toBe(true);
      expect(await la.tryReserve(10, "a4")).toBe(true);
      expect(await a.run(run.key)).toMatchObject({ reserved: 70, held: 0 });
    });

    it("lets the hold of a dead holder lapse with its lease", async () => {
      const account = `holds-${process.pid}-${++n}`;
      const [a, b] = await Promise.all([proc(account), proc(account)]);
      const run = runOf(50);
      expect((await a.holdRun(run, 50)).ok).toBe(true);
      expect((await b.holdRun(run, 10)).ok).toBe(false);
      a.link.fail(new Error("killed by the test"));
      await new Promise((r) => setTimeout(r, 700));
      expect((await b.holdRun(run, 50)).ok).toBe(true);
    });
  },
);
