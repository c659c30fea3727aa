// `clapper tasks list` over lists the sandbox does not produce: a speech service whose pages come
// back short (the command showed 4 tasks of 8), and a video service that lists oldest first (the
// spec states no order; the command showed the oldest tasks as the "recent" ones), also with
// short pages (issue 22; test/cli/lists.test.ts has the rest). In process, over real HTTP to
// small node:http servers, and to the sandbox for the usual case.
import { afterEach, describe, expect, it } from "vitest";
import { createClients } from "../../src/api/index.js";
import { createLogger } from "../../src/cli/logger.js";
import { main } from "../../src/cli/main.js";
import type { Hit } from "../fixtures/servers.js";
import { jsonServer, speechTask, videoTask } from "../fixtures/tasks.js";
import { KEY, sandbox } from "../helpers/sandbox.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

async function json(argv: string[], baseUrl: string): Promise<Array<{ id: string; created_at: number }>> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...argv, "--json"], {
    env: { CLAPPER_BASE_URL: baseUrl, CLAPPER_API_KEY: KEY },
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    logger: createLogger("silent"),
  });
  expect({ code, err: err.join("\n") }).toEqual({ code: 0, err: "" });
  // One object (the brief: a list is wrapped), with no warnings: every list here is whole.
  const answer = JSON.parse(out.join("\n"));
  expect(Object.keys(answer)).toEqual(["tasks"]);
  return answer.tasks;
}

async function serve(script: (query: URLSearchParams, hit: Hit) => unknown) {
  const server = await jsonServer(script);
  closers.push(() => server.close());
  return server;
}

const NOW = Math.floor(Date.now() / 1000);

describe("clapper tasks list", () => {
  it("shows all 8 speech tasks when the service gives 4 a page though asked for 8", async () => {
    const tasks = Array.from({ length: 8 }, (_, i) => speechTask(`s_${8 - i}`, "succeeded", NOW - i));
    const server = await serve((q) => {
      const offset = Number(q.get("offset") ?? 0);
      return { items: tasks.slice(offset, offset + 4), total: tasks.length, status_counts: {} };
    });
    const rows = await json(["tasks", "list", "--kind", "speech", "--limit", "8"], server.url);
    expect(rows.map((r) => r.id)).toEqual(tasks.map((t) => t.task_id));
  });

  it("shows the newest video tasks of a service that lists oldest first, reading from the last page", async () => {
    // 250 tasks, oldest first: the newest three are the last items of page 3.
    const tasks = Array.from({ length: 250 }, (_, i) => videoTask(`t_${i}`, "succeeded", NOW - 10_000 + i));
    const server = await serve((q) => {
      const page = Number(q.get("page_num") ?? 1);
      const size = Number(q.get("page_size") ?? 20);
      return { items: tasks.slice((page - 1) * size, page * size), total: tasks.length };
    });
    const rows = await json(["tasks", "list", "--kind", "video", "--limit", "3"], server.url);
    expect(rows.map((r) => r.id)).toEqual(["t_249", "t_248", "t_247"]);
    expect(server.hits.map((h) => new URL(h.url, "http://x").searchParams.get("page_num"))).toEqual([
      "1",
      "3",
    ]);
  });

  it("reads the last page at the size served when an oldest-first list gives fewer a page than asked", async () => {
    // 250 tasks, oldest first, at most 30 a page, page N at (N-1) x the page_size asked (issue 22):
    // page 3 of 100 would start at task 200 and hold 200..229, not the newest.
    const tasks = Array.from({ length: 250 }, (_, i) => videoTask(`t_${i}`, "succeeded", NOW - 10_000 + i));
    const server = await serve((q) => {
      const page = Number(q.get("page_num") ?? 1);
      const size = Number(q.get("page_size") ?? 20);
      const start = (page - 1) * size;
      return { items: tasks.slice(start, start + Math.min(size, 30)), total: tasks.length };
    });
    const rows = await json(["tasks", "list", "--kind", "video", "--limit", "3"], server.url);
    expect(rows.map((r) => r.id)).toEqual(["t_249", "t_248", "t_247"]);
    const asked = server.hits.map((h) => {
      const q = new URL(h.url, "http://x").searchParams;
      return `${q.get("page_num")}x${q.get("page_size")}`;
    });
    expect(asked).toEqual(["1x100", "9x30"]);
  });

  it("reads one page of the sandbox (newest first) for the newest video tasks", async () => {
    const s = await sandbox({ points: 10_000_000 });
    closers.push(() => s.close());
    const c = createClients({ baseUrl: s.url, apiKey: KEY });
    closers.push(() => c.close());
    const body = { model: "Vid-H3" as const, content: [{ type: "text" as const, text: "a pier" }] };
    const ids: string[] = [];
    for (let i = 0; i < 105; i++) ids.push(await c.video.createTask(body));
    const before = (await fetch(`${s.url}/_sandbox/stats`).then((r) => r.json())) as {
      requests: Record<string, number>;
    };
    const rows = await json(["tasks", "list", "--kind", "video", "--limit", "5"], s.url);
    const after = (await fetch(`${s.url}/_sandbox/stats`).then((r) => r.json())) as {
      requests: Record<string, number>;
    };
    expect(rows.map((r) => r.id)).toEqual(ids.slice(-5).reverse());
    const lists = (n: { requests: Record<string, number> }) =>
      Object.entries(n.requests)
        .filter(([k]) => k.startsWith("GET /vid/v2/query/video_generation"))
        .reduce((sum, [, v]) => sum + v, 0);
    expect(lists(after) - lists(before)).toBe(1);
  });
});
