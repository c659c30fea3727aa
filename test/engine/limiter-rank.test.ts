// The order the gate gives turns in: creates by rank (the longest job's create first, whichever
// service it is for and whenever its life reached the gate), and a ranked read (the URL of a task
// that succeeded) before any queued create.
import { describe, expect, it } from "vitest";
import { RateController } from "../../src/rate/controller.js";
import { PacedQueue } from "../../src/rate/limiter.js";

function queue(rps = 1000): PacedQueue {
  return new PacedQueue(new RateController({ ceiling: rps, fixed: true }));
}

/** Queues every request at once; the names in the order their turns came. */
async function order(q: PacedQueue, asks: Array<{ name: string; lane: "read" | "write"; rank?: number }>) {
  const got: string[] = [];
  await Promise.all(asks.map((a) => q.turn(a.lane, undefined, a.rank ?? 0).then(() => got.push(a.name))));
  return got;
}

describe("the gate's order of turns", () => {
  it("gives writes their turns highest rank first, and equal ranks in the order they came", async () => {
    // 10 ms apart: the ones queued together all wait for the second turn.
    const q = queue(100);
    // The first four turns go at once (the run's opening questions): fill them first.
    await order(
      q,
      Array.from({ length: 4 }, (_, i) => ({ name: `open${i}`, lane: "read" as const })),
    );
    const got = await order(q, [
      { name: "line-a", lane: "write", rank: 3_000 },
      { name: "shot-short", lane: "write", rank: 57_000 },
      { name: "line-b", lane: "write", rank: 3_000 },
      { name: "shot-long", lane: "write", rank: 120_000 },
      { name: "line-c", lane: "write", rank: 7_500 },
    ]);
    // The first of them goes at once (nothing waited before it); the rest wait and go by rank.
    expect(got).toEqual(["line-a", "shot-long", "shot-short", "line-c", "line-b"]);
  });

  it("lets a ranked read (a finished video's URL) go before every queued create", async () => {
    const q = queue(200);
    await order(
      q,
      Array.from({ length: 4 }, (_, i) => ({ name: `open${i}`, lane: "read" as const })),
    );
    const writes = Array.from({ length: 30 }, (_, i) => ({
      name: `create${i}`,
      lane: "write" as const,
      rank: 1,
    }));
    const got = await order(q, [
      ...writes,
      { name: "poll", lane: "read" },
      { name: "collect", lane: "read", rank: 1 },
    ]);
    // Within two turns (the first create was already let go when the reads queued).
    expect(got.indexOf("collect")).toBeLessThanOrEqual(1);
    // An unranked read keeps its place: one in ten while creates wait.
    expect(got.indexOf("poll")).toBeGreaterThan(1);
    expect(got.indexOf("poll")).toBeLessThan(12);
  });
});
