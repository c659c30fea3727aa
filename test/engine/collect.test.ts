// The rate floor of result downloads: a body that trickles in (each chunk inside the idle
// timeout) is stopped once its average rate stays under the floor past the grace period.
import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { rateFloor, SlowResultError } from "../../src/results/collect.js";

/** A body that sends `bytes` every `everyMs`, forever. */
function trickle(bytes: number, everyMs: number): Readable {
  return new Readable({
    read() {
      setTimeout(() => this.push(Buffer.alloc(bytes)), everyMs);
    },
  });
}

/** Reads `source` to its end as a sink does, telling the floor each chunk; the error it ended with. */
async function drain(source: Readable, graceMs: number, minRate: number): Promise<Error | undefined> {
  const floor = rateFloor("download shot/s01", source, graceMs, minRate);
  try {
    for await (const chunk of source) floor.bytes += (chunk as Buffer).length;
    return undefined;
  } catch (error) {
    return error as Error;
  } finally {
    floor.stop();
  }
}

describe("rateFloor", () => {
  it("stops a trickle once past the grace period, naming the rate", async () => {
    const started = Date.now();
    const error = await drain(trickle(10, 20), 200, 10_000);
    expect(error).toBeInstanceOf(SlowResultError);
    expect(error?.message).toMatch(/download shot\/s01: the result arrives at \d+ bytes\/s, under 10000/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(200);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it("lets a body at a good rate through to its end", async () => {
    const chunks = Array.from({ length: 20 }, () => Buffer.alloc(64 * 1024));
    const error = await drain(Readable.from(chunks), 50, 1024);
    expect(error).toBeUndefined();
  });

  it("stops a body nobody reads yet without an unheard error; its reader gets it once it reads", async () => {
    // The sink opens its file before it reads: the floor may fire in between.
    const body = trickle(10, 20);
    const floor = rateFloor("download shot/s01", body, 100, 10_000);
    const unheard: unknown[] = [];
    const onUncaught = (error: unknown) => unheard.push(error);
    process.on("uncaughtException", onUncaught);
    try {
      await new Promise((r) => setTimeout(r, 400));
      expect(body.destroyed).toBe(true);
      expect(unheard).toEqual([]);
      const error = await (async () => {
        try {
          for await (const _ of body);
          return undefined;
        } catch (e) {
          return e as Error;
        }
      })();
      expect(error).toBeInstanceOf(SlowResultError);
    } finally {
      floor.stop();
      process.off("uncaughtException", onUncaught);
    }
  });
});
