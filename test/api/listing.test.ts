// Walking the task lists of both services (defect 3). The speech list pages by offset: a page that
// comes back short must not make the walk skip the tasks after it (it advanced by the page size
// asked for, and showed 4 tasks of 8). The video list pages by number at a fixed page size, so a
// short page does not shift the numbering; both walks yield each task once, stop at `total` or an
// empty page, and are bounded. Scripted node:http servers play what the sandbox does not do.
import { afterEach, describe, expect, it } from "vitest";
import { type Clients, createClients } from "../../src/api/index.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import type { Hit } from "../fixtures/servers.js";
import { jsonServer, speechTask, videoTask } from "../fixtures/tasks.js";
import { KEY, sandbox } from "../helpers/sandbox.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

function connect(url: string): Clients {
  const c = createClients({ baseUrl: url, apiKey: KEY });
  closers.push(() => c.close());
  return c;
}

async function serve(script: (query: URLSearchParams, hit: Hit) => unknown) {
  const server = await jsonServer(script);
  closers.push(() => server.close());
  return server;
}

const at = Math.floor(Date.now() / 1000);

async function all<T>(walk: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of walk) out.push(item);
  return out;
}

describe("SpeechClient.listTasks", () => {
  it("walks on by the items received when pages come back shorter than asked (8 of 8, not 4)", async () => {
    const ids = Array.from({ length: 8 }, (_, i) => `s_${8 - i}`);
    // Asked for 8 a page, this service gives at most 4.
    const server = await serve((q) => {
      const offset = Number(q.get("offset"));
      return {
        items: ids.slice(offset, offset + 4).map((id) => speechTask(id, "succeeded", at)),
        total: 8,
        status_counts: {},
      };
    });
    const tasks = await all(connect(server.url).speech.listTasks({ limit: 8 }));
    expect(tasks.map((t) => t.task_id)).toEqual(ids);
    expect(server.hits.map((h) => new URL(h.url, "http://x").searchParams.get("offset"))).toEqual(["0", "4"]);
  });

  it("yields each task once when a new task moves the list down during the walk", async () => {
    const ids = Array.from({ length: 8 }, (_, i) => `s_${8 - i}`);
    const server = await serve((q, hit) => {
      // After the first page a ninth task is created: newest first, it goes in front.
      const now = hit.n === 1 ? ids : ["s_9", ...ids];
      const offset = Number(q.get("offset"));
      const limit = Number(q.get("limit"));
      const items = now.slice(offset, offset + limit).map((id) => speechTask(id, "succeeded", at));
      return { items, total: now.length, status_counts: {} };
    });
    const tasks = await all(connect(server.url).speech.listTasks({ limit: 3 }));
    expect(tasks.map((t) => t.task_id)).toEqual(ids);
    expect(server.hits).toHaveLength(3);
  });

  it("stops at an empty page though `total` says more", async () => {
    const server = await serve((q) => {
      const offset = Number(q.get("offset"));
      const items =
        offset === 0 ? [speechTask("s_1", "succeeded", at), speechTask("s_2", "succeeded", at)] : [];
      return { items, total: 50, status_counts: {} };
    });
    const tasks = await all(connect(server.url).speech.listTasks());
    expect(tasks).toHaveLength(2);
    expect(server.hits).toHaveLength(2);
  });

  it("lists every task of the sandbox once, newest first, in pages of the size asked", async () => {
    const s: Sandbox = await sandbox();
    closers.push(() => s.close());
    const c = connect(s.url);
    const created: string[] = [];
    for (let i = 0; i < 7; i++) {
      created.push(
        await c.speech.createTask({
          text: `Line ${i}.`,
          language: "EN",
          voice: { source: "preset", voice_id: "en_female_bright" },
        }),
      );
    }
    const tasks = await all(c.speech.listTasks({ limit: 3 }));
    expect(tasks.map((t) => t.task_id)).toEqual(created.reverse());
  });
});

describe("VideoClient.listTasks", () => {
  it("keeps page numbers consistent when the service gives fewer items a page than asked", async () => {
    const ids = Array.from({ length: 75 }, (_, i) => `t_${i}`);
    // Asked for 100 a page, this service cuts its pages at 30: pages 1, 2, 3.
    const server = await serve((q) => {
      const page = Number(q.get("page_num"));
      return {
        items: ids.slice((page - 1) * 30, page * 30).map((id) => videoTask(id, "succeeded", at)),
        total: ids.length,
      };
    });
    const tasks = await all(connect(server.url).video.listTasks());
    expect(tasks.map((t) => t.id)).toEqual(ids);
    expect(server.hits.map((h) => new URL(h.url, "http://x").searchParams.get("page_num"))).toEqual([
      "1",
      "2",
      "3",
    ]);
  });

  it("yields each task once and stops at the last page `total` allows, whatever the pages hold", async () => {
    // A service that answers page 1 for every page number.
    const server = await serve(() => ({
      items: Array.from({ length: 10 }, (_, i) => videoTask(`t_${i}`, "succeeded", at)),
      total: 25,
    }));
    const tasks = await all(connect(server.url).video.listTasks());
    expect(tasks.map((t) => t.id)).toEqual(Array.from({ length: 10 }, (_, i) => `t_${i}`));
    expect(server.hits).toHaveLength(3);
  });

  it("lists every task of the sandbox once across pages", async () => {
    const s: Sandbox = await sandbox({ points: 10_000_000 });
    closers.push(() => s.close());
    const c = connect(s.url);
    const body = { model: "Vid-H3" as const, content: [{ type: "text" as const, text: "a pier" }] };
    const created = new Set<string>();
    for (let i = 0; i < 23; i++) created.add(await c.video.createTask(body));
    const tasks = await all(c.video.listTasks({ pageSize: 10 }));
    expect(new Set(tasks.map((t) => t.id))).toEqual(created);
    expect(tasks).toHaveLength(23);
  });
});
