// Following tasks through hostile answers (issue 9, item 21): a task whose answers cannot be read
// (invalid JSON, an unknown status) is retried, every failure is reported, and after `giveUpMs`
// it is given up on for this run; a healthy task beside it is not held back, even when the list
// answer that carries both is spoilt by the bad one.
import { afterEach, describe, expect, it } from "vitest";
import { HttpClient } from "../../src/api/http.js";
import { VideoClient } from "../../src/api/video-client.js";
import { TaskUnreadableError } from "../../src/tracking/track.js";
import { VideoPoller } from "../../src/tracking/video-poller.js";
import { type Scripted, scripted } from "../fixtures/servers.js";

const servers: Scripted[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

const task = (id: string, status: string) => ({
  id,
  model: "Vid-H3",
  status,
  created_at: Math.floor(Date.now() / 1000),
  updated_at: Math.floor(Date.now() / 1000),
  resolution: "480P",
  duration: 4,
  ratio: "16:9",
  task_type: "generation",
  modality: "video",
  estimated_remaining_seconds: status === "succeeded" ? 0 : 1,
  usage: {},
  ...(status === "succeeded" ? { content: { url: "https://cdn.example.com/x.mp4" } } : {}),
});

async function poller(answer: (url: string) => { status: number; text: string }, giveUpMs: number) {
  const server = await scripted((_n, hit) => {
    const a = answer(hit.url);
    return { status: a.status, text: a.text, headers: { "content-type": "application/json" } };
  });
  servers.push(server);
  const http = new HttpClient({
    baseUrl: server.url,
    apiKey: "sk-ml-tracker-test",
    policies: { read: { maxRetries: 1, baseDelayMs: 1, maxDelayMs: 2 } },
  });
  const troubles: Array<{ taskId: string; failures: number; message: string }> = [];
  const stop = new AbortController();
  const p = new VideoPoller(
    new VideoClient(http),
    { minIntervalMs: 10, maxIntervalMs: 80, batchThreshold: 2, giveUpMs },
    stop.signal,
    (taskId, error, failures) => troubles.push({ taskId, failures, message: (error as Error).message }),
  );
  const close = async () => {
    stop.abort();
    await http.close();
  };
  return { server, p, troubles, close };
}

describe("VideoPoller with unreadable answers", () => {
  for (const [what, bad] of [
    ["invalid JSON", () => ({ status: 200, text: '{"task": {"id": "t_bad", "sta' })],
    ["an unknown status", () => ({ status: 200, text: JSON.stringify({ task: task("t_bad", "exploded") }) })],
  ] as const) {
    it(`gives up on a task answered with ${what} after giveUpMs, reporting every failure`, async () => {
      const { p, troubles, close } = await poller(bad, 300);
      const started = Date.now();
      const outcome = await p.track("t_bad", Math.floor(Date.now() / 1000)).catch((e: unknown) => e);
      const ms = Date.now() - started;
      await close();
      expect(outcome).toBeInstanceOf(TaskUnreadableError);
      expect((outcome as Error).message).toMatch(/t_bad could not be read for/);
      expect(ms).toBeGreaterThanOrEqual(300);
      expect(ms).toBeLessThan(2000);
      expect(troubles.length).toBeGreaterThanOrEqual(2);
      expect(troubles.map((t) => t.failures)).toEqual(troubles.map((_, i) => i + 1));
    });
  }

  it("a healthy task succeeds beside an unreadable one, though the list carrying both is spoilt", async () => {
    const { server, p, close } = await poller((url) => {
      if (url.startsWith("/vid/v2/query/video_generation?"))
        return {
          status: 200,
          text: JSON.stringify({ items: [task("t_ok", "succeeded"), task("t_bad", "exploded")], total: 2 }),
        };
      if (url.includes("t_ok"))
        return { status: 200, text: JSON.stringify({ task: task("t_ok", "succeeded") }) };
      if (url.includes("t_slow"))
        return { status: 200, text: JSON.stringify({ task: task("t_slow", "running") }) };
      return { status: 200, text: JSON.stringify({ task: task("t_bad", "exploded") }) };
    }, 400);
    const now = Math.floor(Date.now() / 1000);
    // A task still running keeps the loop alive, so the two below come due together: one list.
    void p.track("t_slow", now).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 30));
    const [ok, bad] = await Promise.allSettled([p.track("t_ok", now), p.track("t_bad", now)]);
    await close();
    expect(ok.status).toBe("fulfilled");
    expect((ok as PromiseFulfilledResult<{ status: string }>).value.status).toBe("succeeded");
    expect(bad.status).toBe("rejected");
    expect((bad as PromiseRejectedResult).reason).toBeInstanceOf(TaskUnreadableError);
    // The list was tried, then each task alone.
    expect(server.hits.some((h) => h.url.includes("/query/video_generation?"))).toBe(true);
    expect(
      server.hits.some((h) => h.url.endsWith("/t_ok")),
      server.hits.map((h) => h.url).join("\n"),
    ).toBe(true);
  });

  it("a task that becomes readable again is not given up on", async () => {
    let n = 0;
    const { p, close } = await poller(() => {
      n += 1;
      if (n % 3 !== 0) return { status: 200, text: "not json" };
      return {
        status: 200,
        text: JSON.stringify({ task: task("t_flaky", n > 12 ? "succeeded" : "running") }),
      };
    }, 250);
    const result = await p.track("t_flaky", Math.floor(Date.now() / 1000));
    await close();
    expect(result.status).toBe("succeeded");
  });
});
