// The account's shared sightings in a real redis-server: what one process tells, another recalls
// (the newest of two windows), under keys that expire; values that are not sightings are dropped,
// oversized tasks are not kept.
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Coordinator, connectCoordinator } from "../../src/coord/index.js";
import { MAX_SIGHTING_BYTES } from "../../src/coord/sightings.js";
import { type RedisServer, redisAvailable, redisSkipReason, startRedis } from "./redis-server.js";

const HAVE_REDIS = redisAvailable();
let n = 0;

describe.skipIf(!HAVE_REDIS)(`shared sightings (${HAVE_REDIS ? "redis-server" : redisSkipReason})`, () => {
  let redis: RedisServer;
  let raw: Redis;
  const open: Coordinator[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    raw = new Redis(redis.port, "127.0.0.1");
  });
  afterAll(async () => {
    for (const c of open) await c.close();
    raw?.disconnect();
    await redis?.stop();
  });
  const proc = async (account: string) => {
    const c = await connectCoordinator(redis.url, { account });
    open.push(c);
    return c;
  };

  it("carries what one process read to another, newest first, under keys that expire", async () => {
    const account = `seen-${process.pid}-${++n}`;
    const [a, b] = await Promise.all([proc(account), proc(account)]);
    const told = a.sightings("video");
    told.tell([
      ["t1", JSON.stringify({ id: "t1", status: "running" })],
      ["t2", JSON.stringify({ id: "t2", status: "succeeded" })],
    ]);
    // Told within one flush: one write.
    told.tell([["t1", JSON.stringify({ id: "t1", status: "succeeded" })]]);
    await new Promise((r) => setTimeout(r, 60));
    const seen = await b.sightings("video").recall(["t1", "t2", "t3"]);
    expect(seen.map((s) => (s ? JSON.parse(s.task).status : undefined))).toEqual([
      "succeeded",
      "succeeded",
      undefined,
    ]);
    expect(seen[0]?.at).toBeGreaterThan(Date.now() - 5000);
    // Another service's sightings are apart.
    expect(await b.sightings("speech").recall(["t1"])).toEqual([undefined]);
    const keys = await raw.keys(`clapper:{${account}}:seen:*`);
    expect(keys).toHaveLength(1);
    for (const key of keys) {
      const ttl = await raw.pttl(key);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(240_000);
    }
  });

  it("drops values that are not sightings, and does not keep an oversized task", async () => {
    const account = `seen-${process.pid}-${++n}`;
    const c = await proc(account);
    const window = Math.floor(Date.now() / 120_000);
    const key = `clapper:{${account}}:seen:video:${window}`;
    await raw.hset(
      key,
      "bad1",
      "not json",
      "bad2",
      JSON.stringify({ at: "soon", task: "{}" }),
      "bad3",
      "x".repeat(20_000),
    );
    c.sightings("video").tell([["big", "y".repeat(MAX_SIGHTING_BYTES + 1)]]);
    await new Promise((r) => setTimeout(r, 60));
    expect(await c.sightings("video").recall(["bad1", "bad2", "bad3", "big"])).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    // The sighting of the window before counts when it is the only one.
    const before = `clapper:{${account}}:seen:video:${window - 1}`;
    await raw.hset(before, "old", JSON.stringify({ at: 5, task: "{}" }));
    expect(await c.sightings("video").recall(["old"])).toEqual([{ at: 5, task: "{}" }]);
  });
});
