// Video status callbacks during a run: the listener takes pushes carrying the run's token, drops
// duplicates, hands the news to the tracker, and polling falls back to a slow safety net.
import { createServer } from "node:net";
import { networkInterfaces } from "node:os";
import { describe, expect, it } from "vitest";
import { callbackOptions } from "../../src/cli/commands/run/index.js";
import { ExitError } from "../../src/cli/errors.js";
import { created, runIn, setup } from "./helpers.js";

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const shots = (n: number) =>
  Array.from({ length: n }, (_, i) => ({
    id: `s${i + 1}`,
    prompt: `[sandbox:slow] shot ${i + 1} of a lighthouse`,
  }));

describe("run with --callback-url", () => {
  it("finishes on callbacks, looks at video tasks far less, and creates each task once", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: shots(4) });
    const port = await freePort();
    const callback = { url: `http://127.0.0.1:${port}/hooks/clapper`, listen: { host: "127.0.0.1", port } };
    const withHooks = await runIn(s, manifest, {
      callback,
      track: { minIntervalMs: 20, maxIntervalMs: 60_000 },
    });
    expect(withHooks.outcome.exitCode).toBe(0);
    const st = await s.stats();
    expect(created(st)).toBe(4);
    // queued, running and succeeded for each of the four tasks reached the listener.
    expect(s.world.stats.callbacks.delivered).toBeGreaterThanOrEqual(12);
    expect(s.world.stats.callbacks.failed).toBe(0);
    const polls =
      (st.requests["GET /vid/v2/query/video_generation"] ?? 0) +
      (st.requests["GET /vid/v2/query/video_generation/{task_id}"] ?? 0);

    // The same manifest without callbacks, polled at the same base interval, needs more looks.
    const { s: s2, w: w2 } = await setup();
    const plain = await runIn(s2, await w2.manifest({ shots: shots(4) }), {
      track: { minIntervalMs: 20, maxIntervalMs: 60_000 },
    });
    expect(plain.outcome.exitCode).toBe(0);
    const st2 = await s2.stats();
    const polls2 =
      (st2.requests["GET /vid/v2/query/video_generation"] ?? 0) +
      (st2.requests["GET /vid/v2/query/video_generation/{task_id}"] ?? 0);
    expect(polls).toBeLessThan(polls2);
  });

  it("refuses pushes without the run's token and drops duplicates", async () => {
    const { CallbackListener } = await import("../../src/run/callbacks.js");
    const seen: string[] = [];
    const listener = new CallbackListener({
      host: "127.0.0.1",
      port: 0,
      onTask: (t) => seen.push(`${t.id}:${t.status}`),
    });
    const { port } = await listener.start();
    try {
      const task = {
        id: "vtask_1",
        model: "Vid-H3",
        status: "running",
        created_at: 1,
        updated_at: 2,
        resolution: "768P",
        duration: 5,
        ratio: "16:9",
        task_type: "generation",
        modality: "video",
        estimated_remaining_seconds: 3,
        usage: {},
      };
      const post = (token: string | undefined, body: unknown) =>
        fetch(`http://127.0.0.1:${port}/`, {
          method: "POST",
          headers: { "content-type": "application/json", ...(token ? { "x-callback-token": token } : {}) },
          body: JSON.stringify(body),
        });
      expect((await post(undefined, { task })).status).toBe(401);
      expect((await post("not-the-token", { task })).status).toBe(401);
      expect((await post(listener.token, { task })).status).toBe(204);
      expect((await post(listener.token, { task })).status).toBe(204);
      expect(
        (await post(listener.token, { task: { ...task, status: "succeeded", updated_at: 3 } })).status,
      ).toBe(204);
      expect((await post(listener.token, { nonsense: true })).status).toBe(400);
      expect(seen).toEqual(["vtask_1:running", "vtask_1:succeeded"]);
      expect(listener.stats).toEqual({ received: 6, accepted: 2, duplicates: 1, refused: 3 });
    } finally {
      await listener.close();
    }
  });

  it("a listener port already taken is a usage error (exit 2), with nothing submitted", async () => {
    const { s, w } = await setup();
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const { port } = taken.address() as { port: number };
    try {
      const { outcome } = await runIn(s, await w.manifest({ shots: shots(1) }), {
        callback: { url: `http://127.0.0.1:${port}/hooks`, listen: { host: "127.0.0.1", port } },
      });
      expect(outcome.exitCode).toBe(2);
      expect(outcome.message).toMatch(
        /cannot listen on 127\.0\.0\.1:\d+ \(EADDRINUSE\): pass --callback-listen/,
      );
      expect(created(await s.stats())).toBe(0);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });

  it("reads --callback-listen as [HOST:]PORT, defaulting to loopback (or the URL's own local address) and the URL's port", () => {
    // A public name is reached through a tunnel or proxy: the listener stays on loopback unless told.
    expect(callbackOptions("https://hooks.example.com/clapper", undefined)).toEqual({
      url: "https://hooks.example.com/clapper",
      listen: { host: "127.0.0.1", port: 443 },
    });
    expect(callbackOptions("http://hooks.example.com:8080/x", "127.0.0.1:9000").listen).toEqual({
      host: "127.0.0.1",
      port: 9000,
    });
    expect(callbackOptions("http://hooks.example.com/x", "7000").listen).toEqual({
      host: "127.0.0.1",
      port: 7000,
    });
    // Every address only when asked for.
    expect(callbackOptions("http://hooks.example.com/x", "0.0.0.0:7000").listen.host).toBe("0.0.0.0");
    // An address of this machine in the URL is bound as it is; one that is not is never bound.
    const mine = Object.values(networkInterfaces())
      .flatMap((list) => list ?? [])
      .find((i) => i.family === "IPv4" && !i.internal)?.address;
    // (Addresses of test networks and private ones: accepted only with --allow-private-urls.)
    if (mine) expect(callbackOptions(`http://${mine}:9100/cb`, undefined, true).listen.host).toBe(mine);
    expect(callbackOptions("http://203.0.113.9:9100/cb", undefined, true).listen.host).toBe("127.0.0.1");
    expect(() => callbackOptions("http://203.0.113.9:9100/cb", undefined)).toThrow("--allow-private-urls");
    expect(() => callbackOptions("ftp://x/y", undefined)).toThrow(ExitError);
    expect(() => callbackOptions("http://x/y", "host:port")).toThrow("[HOST:]PORT");
  });
});
