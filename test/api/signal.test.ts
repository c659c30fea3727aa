import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, it } from "vitest";
import { linkedSignal } from "../../src/api/signal.js";

describe("linkedSignal", () => {
  it("aborts with the reason of the first parent that aborts", () => {
    const a = new AbortController();
    const b = new AbortController();
    const link = linkedSignal([a.signal, undefined, b.signal], 60_000);
    b.abort("b went");
    a.abort("a went");
    expect(link.signal.aborted).toBe(true);
    expect(link.signal.reason).toBe("b went");
    expect(link.timedOut).toBe(false);
    link.done();
  });

  it("starts aborted when a parent already is", () => {
    const a = new AbortController();
    a.abort("early");
    const link = linkedSignal([a.signal]);
    expect(link.signal.reason).toBe("early");
  });

  it("times out with a TimeoutError and says so", async () => {
    const link = linkedSignal([new AbortController().signal], 5);
    await sleep(30);
    expect(link.timedOut).toBe(true);
    expect((link.signal.reason as Error).name).toBe("TimeoutError");
  });

  it("a stopped timer never fires, and the signal still follows its parent", async () => {
    const a = new AbortController();
    const link = linkedSignal([a.signal], 5);
    link.stopTimer();
    await sleep(30);
    expect(link.signal.aborted).toBe(false);
    a.abort("later");
    expect(link.signal.reason).toBe("later");
    expect(link.timedOut).toBe(false);
  });
});
