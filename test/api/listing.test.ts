// Walking the lists of both services (defect 3, issue 22). The speech list pages by offset: a page
// that comes back short must not make the walk skip the tasks after it (it advanced by the page
// size asked for, and showed 4 tasks of 8). The video and skill lists page by number: after a
// short page the next pages are asked at the size served, where both readings of a short page
// place them. Every walk yields each item once, goes on until `total` distinct items or a page
// that adds nothing, says when it fell short, and is bounded. Scripted node:http servers play
// what the sandbox does not do; the sandbox's paging faults play short pages and repeats.
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { type Clients, createClients } from "../../src/api/index.js";
import {
  collectList,
  incompleteWarning,
  MAX_LIST_PAGES,
  walkByOffset,
  walkByPage,
} from "../../src/api/paginate.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { type Hit, proxy } from "../fixtures/servers.js";
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
    const walked = await collectList(connect(server.url).speech.listTasks({ limit: 3 }));
    expect(walked.items.map((t) => t.task_id)).toEqual(ids);
    // The third page ends at `total` (9) with 8 tasks seen, one of them twice: a fourth page is
    // asked, since the walk no longer stops at `total` when items were repeats (issue 22). It is
    // empty (the ninth task went in front): the walk ends, and says it saw 8 of 9.
    expect(server.hits).toHaveLength(4);
    expect(walked).toMatchObject({ total: 9, complete: false });
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

  it("yields each task once and stops once a page adds nothing new, whatever the pages hold", async () => {
    // A service that answers page 1 for every page number.
    const server = await serve(() => ({
      items: Array.from({ length: 10 }, (_, i) => videoTask(`t_${i}`, "succeeded", at)),
      total: 25,
    }));
    const walked = await collectList(connect(server.url).video.listTasks());
    expect(walked.items.map((t) => t.id)).toEqual(Array.from({ length: 10 }, (_, i) => `t_${i}`));
    // Page 2 (asked at the 10 served) adds nothing new: the walk ends there, short of the third
    // page `total` allows (issue 22), and says it saw 10 of 25.
    expect(server.hits).toHaveLength(2);
    expect(walked).toMatchObject({ total: 25, complete: false });
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

// ---------------------------------------------------------------------------------------------
// Issue 22: short pages placed either way, and repeated items. A second implementation of the
// services served fewer items a page than asked: clapper showed 4 of 6 skills and 4 of 11 video
// tasks, and with an item shown on two pages, 4 of 5 speech tasks. The sandbox's paging faults
// play both readings of a short page (page N at (N-1) x the size asked, or x the size served)
// and the repeat; every walk must reach `total`, yield each item once, and say when it cannot.
// ---------------------------------------------------------------------------------------------

/** Both readings of a short page, and repeats, as the sandbox's faults play them. */
const SHORT_PAGES = [
  { name: "short pages placed by the size asked", faults: { page_cap: 4, page_placement: "asked" } },
  { name: "short pages placed by the size served", faults: { page_cap: 4, page_placement: "served" } },
  {
    name: "short pages that repeat an item, placed by the size asked",
    faults: { page_cap: 2, page_placement: "asked", page_repeat: true },
  },
  {
    name: "short pages that repeat an item, placed by the size served",
    faults: { page_cap: 2, page_placement: "served", page_repeat: true },
  },
] as const;

const NO_FAULTS = { page_cap: 0, page_placement: "served", page_repeat: false };

describe("every list walk reaches `total` over short pages and repeated items (issue 22)", () => {
  let s: Sandbox;
  /** The lists as the sandbox serves them without faults: the expected walks. */
  const expected = { video: [] as string[], speech: [] as string[], skills: [] as string[] };
  const setFaults = async (faults: object) => {
    const r = await fetch(`${s.url}/_sandbox/faults`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ...NO_FAULTS, ...faults }),
    });
    expect(r.status).toBe(200);
  };
  const requests = async (route: string) =>
    ((await (await fetch(`${s.url}/_sandbox/stats`)).json()) as { requests: Record<string, number> })
      .requests[route] ?? 0;

  beforeAll(async () => {
    s = await sandbox({ points: 10_000_000 });
    const c = createClients({ baseUrl: s.url, apiKey: KEY });
    for (let i = 0; i < 11; i++) {
      await c.video.createTask({ model: "Vid-H3", content: [{ type: "text", text: `shot ${i}` }] });
    }
    for (let i = 0; i < 5; i++) {
      await c.speech.createTask({
        text: `Line ${i}.`,
        language: "EN",
        voice: { source: "preset", voice_id: "en_female_bright" },
      });
    }
    for (const name of ["alpha", "beta", "gamma"]) await c.video.createSkill({ name, content: `${name}.` });
    expected.video = (await c.video.listPage(1, { pageSize: 100 })).items.map((t) => t.id);
    expected.speech = (await c.speech.listPage(0, { limit: 100 })).items.map((t) => t.task_id);
    for await (const k of c.video.listSkills()) expected.skills.push(k.id);
    await c.close();
    expect([expected.video.length, expected.speech.length, expected.skills.length]).toEqual([11, 5, 6]);
  });
  afterAll(() => s.close());

  for (const variant of SHORT_PAGES) {
    it(`${variant.name}: all 11 video tasks, 6 skills and 5 speech tasks, each once, complete`, async () => {
      await setFaults(variant.faults);
      onTestFinished(() => setFaults(NO_FAULTS));
      const c = connect(s.url);
      const video = await collectList(c.video.listTasks());
      expect(video.items.map((t) => t.id)).toEqual(expected.video);
      expect(video).toMatchObject({ total: 11, complete: true });
      const skills = await collectList(c.video.listSkills());
      expect(skills.items.map((k) => k.id)).toEqual(expected.skills);
      expect(skills).toMatchObject({ total: 6, complete: true });
      const speech = await collectList(c.speech.listTasks());
      expect(speech.items.map((t) => t.task_id)).toEqual(expected.speech);
      expect(speech).toMatchObject({ total: 5, complete: true });
      // The same through `for await`, as callers that stop early use it.
      expect((await all(c.video.listTasks())).map((t) => t.id)).toEqual(expected.video);
    });
  }

  it("asks the pages after a short one at the size served: three pages for 11 tasks capped at 4", async () => {
    await setFaults({ page_cap: 4, page_placement: "asked" });
    onTestFinished(() => setFaults(NO_FAULTS));
    const before = await requests("GET /vid/v2/query/video_generation");
    const proxied = await proxy(s.url, () => undefined);
    closers.push(() => proxied.close());
    const walked = await collectList(connect(proxied.url).video.listTasks());
    expect(walked.items).toHaveLength(11);
    expect((await requests("GET /vid/v2/query/video_generation")) - before).toBe(3);
    const asked = proxied.hits.map((h) => {
      const q = new URL(h.url, "http://x").searchParams;
      return `${q.get("page_num")}x${q.get("page_size")}`;
    });
    expect(asked).toEqual(["1x100", "2x4", "3x4"]);
  });

  it("walks the speech list on past `total` when items were repeats (5 of 5, not 4)", async () => {
    await setFaults({ page_cap: 2, page_repeat: true });
    onTestFinished(() => setFaults(NO_FAULTS));
    const proxied = await proxy(s.url, () => undefined);
    closers.push(() => proxied.close());
    const walked = await collectList(connect(proxied.url).speech.listTasks());
    expect(walked.items.map((t) => t.task_id)).toEqual(expected.speech);
    const offsets = proxied.hits.map((h) => new URL(h.url, "http://x").searchParams.get("offset"));
    // Items served are 2, 3 (one a repeat) and 1: the offset goes on by the items served.
    expect(offsets).toEqual(["0", "2", "5"]);
  });
});

describe("an incomplete list is reported, never passed off as whole", () => {
  const skill = (id: string) => ({ id, name: id, content: `${id}.`, official: false });

  it("stops when a page adds nothing new, and says how many of how many it saw", async () => {
    // Says 6, serves the same 4 whatever the page.
    const server = await serve(() => ({ items: ["a", "b", "c", "d"].map(skill), total: 6 }));
    const walked = await collectList(connect(server.url).video.listSkills());
    expect(walked.items.map((k) => k.id)).toEqual(["a", "b", "c", "d"]);
    expect(walked).toEqual({ items: walked.items, total: 6, complete: false });
    expect(server.hits).toHaveLength(2);
    expect(incompleteWarning("skills", walked)).toBe(
      "the service lists 6 skills but served 4 distinct ones; the list may be incomplete",
    );
  });

  it("stops at an empty page and reports the speech list incomplete", async () => {
    const server = await serve((q) => ({
      items: Number(q.get("offset")) === 0 ? [speechTask("s_1", "succeeded", at)] : [],
      total: 3,
      status_counts: {},
    }));
    const walked = await collectList(connect(server.url).speech.listTasks());
    expect(walked).toMatchObject({ total: 3, complete: false });
    expect(walked.items).toHaveLength(1);
  });

  it("voices and packages (no paging): duplicates dropped, an answer short of its `total` reported", async () => {
    const voice = (id: string) => ({
      voice_id: id,
      kind: "custom",
      name: id,
      style_tags: [],
      audio_url: `https://cdn.example.com/${id}.wav`,
      created_at: at,
    });
    const server = await serve(() => ({ items: [voice("v_1"), voice("v_2"), voice("v_1")], total: 3 }));
    const voices = await connect(server.url).speech.listVoices("custom");
    expect(voices.items.map((v) => v.voice_id)).toEqual(["v_1", "v_2"]);
    expect(voices).toMatchObject({ total: 3, complete: false });
    const pkg = (id: string) => ({
      id,
      code: id,
      name: id,
      status: "active",
      total_points: 10,
      remaining_points: 10,
      reserved_points: 0,
      available_points: 10,
      created_at: at,
    });
    const packages = await serve(() => ({ items: [pkg("p_1"), pkg("p_2")], total: 2 }));
    expect(await connect(packages.url).video.listPackages()).toMatchObject({ total: 2, complete: true });
  });
});

// Moved from test/api/http.test.ts with the old `paginate` (0-based pages), which listSkills used:
// the one page walker now, its pages numbered from 1 as the spec numbers them.
describe("walkByPage", () => {
  const pages = (total: number, size: number) => {
    const fetched: number[] = [];
    const fetchPage = async (page: number) => {
      fetched.push(page);
      const from = (page - 1) * size;
      const items = Array.from({ length: Math.max(0, Math.min(size, total - from)) }, (_, i) => from + i);
      return { items, total };
    };
    return { fetched, fetchPage };
  };
  const key = (n: number) => String(n);

  it("walks every page until total", async () => {
    const p = pages(23, 5);
    const got: number[] = [];
    for await (const n of walkByPage(p.fetchPage, key, 5)) got.push(n);
    expect(got).toEqual(Array.from({ length: 23 }, (_, i) => i));
    expect(p.fetched).toEqual([1, 2, 3, 4, 5]);
  });

  it("stops on an exact multiple without fetching an extra page, and on an empty page", async () => {
    const p = pages(10, 5);
    for await (const _ of walkByPage(p.fetchPage, key, 5)) {
      // drain
    }
    expect(p.fetched).toEqual([1, 2]);
    const shrinking = [
      { items: [1, 2], total: 10 },
      { items: [], total: 10 },
    ];
    let calls = 0;
    const got: number[] = [];
    for await (const n of walkByPage(async (page) => {
      calls++;
      return shrinking[page - 1] ?? { items: [99], total: 10 };
    }, key))
      got.push(n);
    expect(got).toEqual([1, 2]);
    expect(calls).toBe(2);
  });

  it("fetches no further page once the consumer stops", async () => {
    const p = pages(100, 5);
    const got: number[] = [];
    for await (const n of walkByPage(p.fetchPage, key, 5)) {
      got.push(n);
      if (got.length === 7) break;
    }
    expect(p.fetched).toEqual([1, 2]);
  });

  it("is bounded in pages when a service invents new items and a growing `total` forever", async () => {
    let page = 0;
    const walked = await collectList(
      walkByPage(async (n) => {
        page = n;
        return { items: [n * 2, n * 2 + 1], total: n * 10 };
      }, key),
    );
    expect(walked.complete).toBe(false);
    expect(page).toBe(MAX_LIST_PAGES);
    let offsets = 0;
    const byOffset = await collectList(
      walkByOffset(async (offset) => {
        offsets += 1;
        return { items: [offset], total: offset + 10 };
      }, key),
    );
    expect(byOffset.complete).toBe(false);
    expect(offsets).toBe(MAX_LIST_PAGES);
  });

  it("goes on from the page holding the next unseen item when the items seen are no multiple of the new size", async () => {
    // 100 a page asked; the service serves 100 on page 1, then caps at 30, placing pages by the
    // size asked: page 2 holds 100..129. At 30 a page, item 130 is on page 5 (120..149).
    const items = Array.from({ length: 150 }, (_, i) => i);
    const asked: string[] = [];
    const walked = await collectList(
      walkByPage(async (n, size) => {
        asked.push(`${n}x${size}`);
        const served = n === 1 ? size : Math.min(size, 30);
        return { items: items.slice((n - 1) * size, (n - 1) * size + served), total: 150 };
      }, key),
    );
    expect(walked.items).toEqual(items);
    expect(walked.complete).toBe(true);
    expect(asked).toEqual(["1x100", "2x100", "5x30"]);
  });
});
