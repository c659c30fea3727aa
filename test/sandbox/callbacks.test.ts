// Status callbacks of the video service over real HTTP, as the spec's Events section describes them.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ValidationErrorBody } from "../../src/api/common.js";
import { VideoCreateResponse, type VideoTask, VideoTaskResponse } from "../../src/api/video.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { call, download, type Received, receiver, sandbox, until } from "../helpers/sandbox.js";

const cleanups: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

async function start(options: Parameters<typeof sandbox>[0] = {}): Promise<Sandbox> {
  const s = await sandbox(options);
  cleanups.push(() => s.close());
  return s;
}

async function hook(status?: (n: number, body: any) => number) {
  const r = await receiver(status);
  cleanups.push(() => r.close());
  return r;
}

async function create(base: string, body: Record<string, unknown>): Promise<string> {
  const res = await call(base, "POST", "/vid/v2/video_generation", {
    body: { model: "Vid-H3", content: [{ type: "text", text: "a lighthouse" }], ...body },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.RetCode, res.body.Message).toBeUndefined();
  return VideoCreateResponse.parse(res.body).task_id;
}

const prompt = (t: string) => [{ type: "text", text: t }];

async function getTask(base: string, id: string): Promise<VideoTask> {
  const res = await call(base, "GET", `/vid/v2/query/video_generation/${id}`);
  expect(res.status).toBe(200);
  return VideoTaskResponse.parse(res.body).task;
}

/** Each push's body is exactly `{task}` with the query's task shape. */
function tasksOf(received: Received[]): VideoTask[] {
  return received.map((r) => {
    expect(Object.keys(r.body)).toEqual(["task"]);
    return VideoTaskResponse.parse(r.body).task;
  });
}

const statuses = (received: Received[]) => received.map((r) => r.body.task.status as string);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function stats(base: string) {
  return (await call(base, "GET", "/_sandbox/stats", { key: null })).body as {
    tasks_created: { video: number };
    callbacks: { delivered: number; failed: number };
  };
}

/** A callback receiver whose answers may be redirects to `location`; records every request. */
async function redirector(status: (n: number, body: any) => number, location: string) {
  const hits: Array<{ at: number; body: any }> = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      hits.push({ at: Date.now(), body });
      const code = status(hits.length, body);
      res.writeHead(code, code >= 300 && code < 400 ? { location } : {}).end("moved");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, hits };
}

describe("callback pushes", () => {
  it("queued right after creation, then one push per status change, each {task} like the query", async () => {
    const s = await start();
    const r = await hook();
    // [sandbox:slow]: queue 50 ms, then 550 ms of generation, so the pushes come well apart.
    const id = await create(s.url, {
      content: prompt("[sandbox:slow] a lighthouse"),
      callback_url: r.url,
      callback_token: "tok-123",
    });
    // Only the pushes are awaited: nobody queries the task, so the sandbox's own timers drive them.
    await until(
      async () => r.received,
      (rs) => rs.some((x) => x.body.task.status === "succeeded"),
    );
    await sleep(60);
    expect(statuses(r.received)).toEqual(["queued", "running", "succeeded"]);
    const [queued, running, succeeded] = tasksOf(r.received) as [VideoTask, VideoTask, VideoTask];
    for (const push of r.received) {
      expect(push.headers["content-type"]).toMatch(/^application\/json/);
      expect(push.headers["x-callback-token"]).toBe("tok-123");
    }
    for (const t of [queued, running]) {
      expect(t.id).toBe(id);
      expect(t.content).toBeUndefined();
      expect(t.usage.total_seconds).toBeUndefined();
      expect(t.usage.output_seconds).toBeUndefined();
      expect(t.estimated_remaining_seconds).toBeGreaterThanOrEqual(1);
    }
    expect(running.updated_at).toBeGreaterThanOrEqual(queued.updated_at);
    expect(succeeded.updated_at).toBeGreaterThanOrEqual(running.updated_at);
    expect(succeeded.usage).toMatchObject({ total_seconds: 5, output_seconds: 5 });
    expect(succeeded.estimated_remaining_seconds).toBe(0);
    expect(succeeded.content?.url).toMatch(
      new RegExp(`^${s.url}/_media/videos/${id}\\.mp4\\?expires=\\d+&signature=`),
    );

    // The same structure as the single-task query (whose URL is re-signed on every query).
    const queried = await getTask(s.url, id);
    const { content: _a, ...pushedRest } = succeeded;
    const { content: _b, ...queriedRest } = queried;
    expect(pushedRest).toEqual(queriedRest);
    expect(Object.keys(succeeded).sort()).toEqual(Object.keys(queried).sort());

    // The pushed URL downloads.
    const file = await download(succeeded.content!.url!);
    expect(file.status).toBe(200);
    expect(file.headers["content-type"]).toBe("video/mp4");
    expect((await stats(s.url)).callbacks).toEqual({ delivered: 3, failed: 0 });
  });

  it("the queued push arrives while the task is still queued; cancel pushes cancelled; no token, no header", async () => {
    const s = await start({ timeScale: 1 }); // the queue lasts 5 s
    const r = await hook();
    const id = await create(s.url, { callback_url: r.url });
    await until(
      async () => r.received.length,
      (n) => n === 1,
      3000,
    );
    expect(statuses(r.received)).toEqual(["queued"]);
    expect((await getTask(s.url, id)).status).toBe("queued");
    expect(r.received[0]!.headers).not.toHaveProperty("x-callback-token");
    expect((await call(s.url, "DELETE", `/vid/v2/video_generation/${id}`)).body.status).toBe("cancelled");
    await until(
      async () => r.received.length,
      (n) => n === 2,
      3000,
    );
    const [, cancelled] = tasksOf(r.received);
    expect(cancelled).toMatchObject({ id, status: "cancelled", estimated_remaining_seconds: 0 });
    expect(cancelled!.content).toBeUndefined();
    expect(r.received[1]!.headers).not.toHaveProperty("x-callback-token");
  });

  it("an empty callback_token sends no X-Callback-Token", async () => {
    const s = await start();
    const r = await hook();
    await create(s.url, { callback_url: r.url, callback_token: "" });
    await until(
      async () => r.received,
      (rs) => rs.some((x) => x.body.task.status === "succeeded"),
    );
    for (const push of r.received) expect(push.headers).not.toHaveProperty("x-callback-token");
  });

  it("a running cancel pushes queued, running, cancelled", async () => {
    const s = await start();
    const r = await hook();
    const id = await create(s.url, {
      content: prompt("[sandbox:slow] x"),
      callback_url: r.url,
      callback_token: "t",
    });
    await until(
      async () => r.received,
      (rs) => rs.some((x) => x.body.task.status === "running"),
    );
    const res = await call(s.url, "DELETE", `/vid/v2/video_generation/${id}`);
    expect(res.body.status).toBe("running");
    await until(
      async () => r.received,
      (rs) => rs.some((x) => x.body.task.status === "cancelled"),
    );
    await sleep(30);
    expect(statuses(r.received)).toEqual(["queued", "running", "cancelled"]);
  });

  it("a failing task pushes queued, running, failed with its error", async () => {
    const s = await start();
    const r = await hook();
    await create(s.url, { content: prompt("[sandbox:slow] [sandbox:fail]"), callback_url: r.url });
    await until(
      async () => r.received,
      (rs) => rs.some((x) => x.body.task.status === "failed"),
    );
    await sleep(30);
    expect(statuses(r.received)).toEqual(["queued", "running", "failed"]);
    const failed = tasksOf(r.received)[2]!;
    expect(failed.error).toMatchObject({ code: "generation_failed", message: expect.any(String) });
    expect(failed.content).toBeUndefined();
  });

  it("an upscale that fails pushes succeeded with resolution 768P", async () => {
    const s = await start();
    const r = await hook();
    await create(s.url, {
      resolution: "4K",
      content: prompt("[sandbox:upscale-fail]"),
      callback_url: r.url,
    });
    await until(
      async () => r.received,
      (rs) => rs.some((x) => x.body.task.status === "succeeded"),
    );
    const pushed = tasksOf(r.received);
    expect(pushed.find((t) => t.status === "queued")?.resolution).toBe("4K");
    expect(pushed.find((t) => t.status === "succeeded")?.resolution).toBe("768P");
  });

  it("any 2xx is a success: no retry", async () => {
    const s = await start();
    const codes = [201, 204, 299];
    const r = await hook((n) => codes[(n - 1) % codes.length]!);
    await create(s.url, { callback_url: r.url });
    await until(
      async () => r.received,
      (rs) => rs.some((x) => x.body.task.status === "succeeded"),
    );
    await sleep(60); // longer than the first retry interval (10 ms here)
    expect(r.received).toHaveLength(3);
    expect((await stats(s.url)).callbacks).toEqual({ delivered: 3, failed: 0 });
  });
});

describe("retries", () => {
  it("non-2xx answers are retried at 10/30/60/120/300 s (scaled) and then given up", async () => {
    // At 0.006 the intervals are 60, 180, 360, 720, 1800 ms: long enough that a loaded machine's 25 ms of
    // timer lateness (seen in CI on the first gap) does not bend the ratios checked below.
    const s = await start({ timeScale: 0.006 });
    const r = await hook((_, b) => (b.task.status === "queued" ? 500 : 200));
    await create(s.url, { callback_url: r.url });
    const queuedPushes = () => r.received.filter((x) => x.body.task.status === "queued");
    await until(
      async () => queuedPushes().length,
      (n) => n === 6,
      10_000,
    );
    await sleep(400);
    expect(queuedPushes()).toHaveLength(6); // 1 attempt + 5 retries
    const at = queuedPushes().map((x) => x.at);
    const gaps = at.slice(1).map((t, i) => t - at[i]!);
    const expected = [60, 180, 360, 720, 1800];
    gaps.forEach((gap, i) => {
      expect(gap, `gap ${i}: ${gaps}`).toBeGreaterThanOrEqual(expected[i]! * 0.9 - 2);
      expect(gap, `gap ${i}: ${gaps}`).toBeLessThan(expected[i]! * 1.6 + 40);
    });
    // Ratios between successive gaps: 3, 2, 2, 2.5.
    for (let i = 1; i < gaps.length; i++) {
      const ratio = gaps[i]! / gaps[i - 1]!;
      const want = expected[i]! / expected[i - 1]!;
      expect(ratio, `ratio ${i}: ${gaps}`).toBeGreaterThan(want * 0.6);
      expect(ratio, `ratio ${i}: ${gaps}`).toBeLessThan(want * 1.5);
    }
    // Every retry carries the same body.
    for (const push of queuedPushes()) expect(push.body).toEqual(queuedPushes()[0]!.body);
    // The other statuses went through once each.
    expect(statuses(r.received).filter((st) => st !== "queued")).toEqual(["running", "succeeded"]);
    expect((await stats(s.url)).callbacks).toEqual({ delivered: 2, failed: 6 });
  });

  it("a push answered non-2xx, then 2xx, stops retrying and resends the identical body", async () => {
    const s = await start();
    let terminal = 0;
    const r = await hook((_, b) => {
      if (b.task.status !== "succeeded") return 200;
      terminal += 1;
      return terminal === 1 ? 503 : terminal === 2 ? 404 : 200;
    });
    await create(s.url, { callback_url: r.url, callback_token: "tok" });
    const terminalPushes = () => r.received.filter((x) => x.body.task.status === "succeeded");
    await until(
      async () => terminalPushes().length,
      (n) => n === 3,
    );
    await sleep(200); // the next interval would have been 60 ms
    expect(terminalPushes()).toHaveLength(3);
    const [a, b, c] = terminalPushes() as [Received, Received, Received];
    expect(b.body).toEqual(a.body);
    expect(c.body).toEqual(a.body);
    expect(c.headers["x-callback-token"]).toBe("tok");
    expect(a.body.task.content.url).toBeDefined();
    expect((await stats(s.url)).callbacks).toEqual({ delivered: 3, failed: 2 });
  });

  it("3xx redirects are not followed: they count as failures and are retried", async () => {
    const s = await start();
    const target = await hook();
    const redirects = [301, 302, 307, 308];
    let queued = 0;
    const r = await redirector((_, b) => {
      if (b.task.status !== "queued") return 200;
      queued += 1;
      return redirects[queued - 1] ?? 200;
    }, target.url);
    await create(s.url, { callback_url: r.url });
    const queuedHits = () => r.hits.filter((h) => h.body.task.status === "queued");
    await until(
      async () => queuedHits().length,
      (n) => n === 5,
    );
    await until(
      async () => r.hits.some((h) => h.body.task.status === "succeeded"),
      (done) => done,
    );
    await sleep(100);
    expect(queuedHits()).toHaveLength(5); // four redirects, each retried, then a 200
    expect(target.received).toHaveLength(0); // the Location was never requested
    expect(r.hits.map((h) => h.body.task.status).filter((st) => st !== "queued")).toEqual([
      "running",
      "succeeded",
    ]);
    expect((await stats(s.url)).callbacks).toEqual({ delivered: 3, failed: 4 });
  });

  it("an intermediate push that exhausts its retries does not stop the terminal push", async () => {
    const s = await start(); // intervals 10, 30, 60, 120, 300 ms
    const r = await hook((_, b) => (b.task.status === "running" ? 500 : 200));
    await create(s.url, { callback_url: r.url });
    const count = (status: string) => statuses(r.received).filter((st) => st === status).length;
    await until(
      async () => count("running"),
      (n) => n === 6,
      5000,
    );
    await sleep(100);
    expect(count("queued")).toBe(1);
    expect(count("running")).toBe(6);
    expect(count("succeeded")).toBe(1);
    // The terminal push was delivered while the running push was still being retried.
    const firstSucceeded = statuses(r.received).indexOf("succeeded");
    expect(firstSucceeded).toBeLessThan(statuses(r.received).lastIndexOf("running"));
    expect((await stats(s.url)).callbacks).toEqual({ delivered: 2, failed: 6 });
  });

  it("network errors are retried too", async () => {
    const s = await start();
    // A port that was just free and is closed again: connection refused.
    const closed = await receiver();
    await closed.close();
    await create(s.url, { callback_url: closed.url });
    await until(
      () => stats(s.url),
      (st) => st.callbacks.failed === 18,
      5000,
    );
    await sleep(100);
    // 3 statuses x (1 attempt + 5 retries), nothing delivered.
    expect((await stats(s.url)).callbacks).toEqual({ delivered: 0, failed: 18 });
  });
});

describe("callback_url address rules at creation", () => {
  it("without allowPrivateUrls, loopback, private, link-local and user-info URLs are refused with 400", async () => {
    const s = await start({ allowPrivateUrls: false });
    const r = await hook();
    const cases: Array<[string, string]> = [
      [r.url, "loopback"],
      ["http://localhost:8080/hook", "loopback"],
      ["http://[::1]:8080/hook", "loopback"],
      ["http://127.1/hook", "loopback"],
      ["http://10.1.2.3/hook", "private-network"],
      ["http://192.168.0.10/hook", "private-network"],
      ["http://172.20.0.5/hook", "private-network"],
      ["http://169.254.169.254/latest", "link-local"],
      ["http://0.0.0.0:9/hook", "unspecified"],
      ["http://[::ffff:10.0.0.1]/hook", "private-network"],
      ["https://user:secret@example.com/hook", "user information"],
    ];
    for (const [url, why] of cases) {
      const res = await call(s.url, "POST", "/vid/v2/video_generation", {
        body: { model: "Vid-H3", content: prompt("x"), callback_url: url },
      });
      expect(res.status, url).toBe(400);
      const b = ValidationErrorBody.parse(res.body);
      expect(b.error.http_code).toBe("400");
      expect(b.error.message, url).toContain("callback_url: ");
      expect(b.error.message, url).toContain(why);
      expect(b.error.message).not.toContain("secret");
    }
    expect((await stats(s.url)).tasks_created.video).toBe(0);
    await sleep(30);
    expect(r.received).toHaveLength(0);
  });
});
