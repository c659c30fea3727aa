// Following many tasks through list requests. The video spec states no order for its task list,
// so the poller must find the tasks it follows wherever they are listed (defect 1); whatever a
// page says of any task it follows is news, due or not (defect 2); a speech page that comes back
// short must not end the walk early. Real HTTP on loopback: small node:http servers answer what
// the sandbox cannot (an oldest-first list, short pages), the sandbox shows the cost of the usual case.
import { afterEach, describe, expect, it } from "vitest";
import { HttpClient } from "../../src/api/http.js";
import { createClients } from "../../src/api/index.js";
import { SpeechClient } from "../../src/api/speech-client.js";
import { VideoClient } from "../../src/api/video-client.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { SpeechPoller } from "../../src/tracking/speech-poller.js";
import type { TrackOptions } from "../../src/tracking/track.js";
import { VideoPoller } from "../../src/tracking/video-poller.js";
import { type Hit, proxy, type Scripted, scripted } from "../fixtures/servers.js";
import { speechTask, videoTask } from "../fixtures/tasks.js";
import { KEY, sandbox } from "../helpers/sandbox.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

const NOW = () => Math.floor(Date.now() / 1000);

const FAST_READS = { read: { maxRetries: 1, baseDelayMs: 1, maxDelayMs: 2 } };

function trackOptions(over: Partial<TrackOptions> = {}): TrackOptions {
  return { minIntervalMs: 10, maxIntervalMs: 5000, batchThreshold: 3, giveUpMs: 5000, ...over };
}

/** A poller over `url`, closed (and stopped) after the test. */
function videoPoller(url: string, options: TrackOptions) {
  const http = new HttpClient({ baseUrl: url, apiKey: "sk-ml-tracker-lists", policies: FAST_READS });
  const stop = new AbortController();
  closers.push(async () => {
    stop.abort();
    await http.close();
  });
  return new VideoPoller(new VideoClient(http), options, stop.signal);
}

function speechPoller(url: string, options: TrackOptions) {
  const http = new HttpClient({ baseUrl: url, apiKey: "sk-ml-tracker-lists", policies: FAST_READS });
  const stop = new AbortController();
  closers.push(async () => {
    stop.abort();
    await http.close();
  });
  return new SpeechPoller(new SpeechClient(http), options, stop.signal);
}

async function serve(script: (hit: Hit) => unknown): Promise<Scripted> {
  const server = await scripted((_n, hit) => ({ status: 200, json: script(hit) }));
  closers.push(() => server.close());
  return server;
}

const isVideoList = (h: Hit) => h.url.startsWith("/vid/v2/query/video_generation?");
const isVideoSingle = (h: Hit) => h.url.startsWith("/vid/v2/query/video_generation/");

/**
 * A video service that lists oldest first (the spec allows any order) and honours page_num and
 * page_size. A followed task reads `running` the first time it is shown, `succeeded` after.
 */
async function oldestFirstVideo(old: number, followed: number) {
  const created = NOW();
  const tasks = [
    ...Array.from({ length: old }, (_, i) => ({ id: `t_old_${i}`, at: created - 7200 + i, views: 99 })),
    ...Array.from({ length: followed }, (_, i) => ({
      id: `t_new_${i}`,
      at: created - 5 + (i % 5),
      views: 0,
    })),
  ];
  const show = (t: (typeof tasks)[number]) =>
    videoTask(t.id, t.views++ === 0 ? "running" : "succeeded", t.at);
  const server = await serve((hit) => {
    const url = new URL(hit.url, "http://x");
    if (isVideoList(hit)) {
      const page = Number(url.searchParams.get("page_num") ?? 1);
      const size = Math.min(100, Number(url.searchParams.get("page_size") ?? 20));
      return { items: tasks.slice((page - 1) * size, page * size).map(show), total: tasks.length };
    }
    const id = decodeURIComponent(url.pathname.split("/").at(-1) ?? "");
    const task = tasks.find((t) => t.id === id);
    return { task: task ? show(task) : videoTask(id, "succeeded", created) };
  });
  return { server, ids: tasks.filter((t) => t.id.startsWith("t_new_")).map((t) => t.id), created };
}

describe("VideoPoller.pollMany assumes no list order (defect 1)", () => {
  it("finds 42 followed tasks on the second page of an oldest-first list without single looks", async () => {
    const { server, ids, created } = await oldestFirstVideo(120, 42);
    const p = videoPoller(server.url, trackOptions());
    const done = await Promise.all(ids.map((id) => p.track(id, created)));
    expect(done.every((t) => t.status === "succeeded")).toBe(true);
    const lists = server.hits.filter(isVideoList).length;
    const singles = server.hits.filter(isVideoSingle).length;
    // Round 1 reads page 1 (all older tasks), then page 2; round 2 goes to page 2 at once. (A task
    // that comes due a moment after the others is now and then looked at alone: one single look in
    // about five runs. The old tracker made 84.)
    expect(lists).toBe(3);
    expect(singles).toBeLessThanOrEqual(1);
    expect(p.requests).toBe(lists + singles);
  });

  it("stays within the page budget on a long oldest-first list and looks at the rest alone", async () => {
    // 2,000 older tasks: 20 pages. The order learned on page 1 leads to the last page at once.
    const { server, ids, created } = await oldestFirstVideo(2000, 10);
    const p = videoPoller(server.url, trackOptions());
    const done = await Promise.all(ids.map((id) => p.track(id, created)));
    expect(done.every((t) => t.status === "succeeded")).toBe(true);
    const pages = server.hits.filter(isVideoList).map((h) => new URL(h.url, "http://x").searchParams);
    expect(pages.map((q) => q.get("page_num"))).toEqual(["1", "21", "21"]);
    // As above, a task that comes due a moment after the others is now and then looked at alone
    // (CI saw one such look in about 1,400 tests); a walk that lost the order would make ten.
    expect(server.hits.filter(isVideoSingle).length).toBeLessThanOrEqual(1);
  });

  it("never reads more pages than the followed tasks need plus a margin, nor past `total`", async () => {
    // A list in no order at all that never shows the followed tasks: the budget ends the walk,
    // then each due task is asked about once.
    const created = NOW();
    const server = await serve((hit) => {
      const url = new URL(hit.url, "http://x");
      if (isVideoList(hit)) {
        const page = Number(url.searchParams.get("page_num"));
        const items = Array.from({ length: 100 }, (_, i) =>
          videoTask(`t_other_${page}_${i}`, "succeeded", created - ((i * 7919) % 5000)),
        );
        return { items, total: 100_000 };
      }
      const id = decodeURIComponent(url.pathname.split("/").at(-1) ?? "");
      return { task: videoTask(id, "succeeded", created) };
    });
    const p = videoPoller(server.url, trackOptions());
    const ids = Array.from({ length: 5 }, (_, i) => `t_hidden_${i}`);
    await Promise.all(ids.map((id) => p.track(id, created)));
    // ceil(5 / 100) pages for the tasks, plus a margin of 2.
    expect(server.hits.filter(isVideoList)).toHaveLength(3);
    expect(server.hits.filter(isVideoSingle)).toHaveLength(5);

    const small = await serve((hit) => {
      if (isVideoList(hit)) return { items: [videoTask("t_other", "succeeded", created)], total: 1 };
      const id = decodeURIComponent(new URL(hit.url, "http://x").pathname.split("/").at(-1) ?? "");
      return { task: videoTask(id, "succeeded", created) };
    });
    const q = videoPoller(small.url, trackOptions());
    await Promise.all(ids.map((id) => q.track(id, created)));
    // `total` says one page holds everything: no second page is asked for.
    expect(small.hits.filter(isVideoList)).toHaveLength(1);
  });

  it("reads one page per round against the sandbox (newest first), with tasks beyond the first page", async () => {
    const s: Sandbox = await sandbox({ timeScale: 0.01, points: 10_000_000 });
    closers.push(() => s.close());
    const counter = await proxy(s.url, () => undefined);
    closers.push(() => counter.close());
    const c = createClients({ baseUrl: s.url, apiKey: KEY });
    closers.push(() => c.close());
    const body = { model: "Vid-H3" as const, content: [{ type: "text" as const, text: "a pier at dawn" }] };
    for (let i = 0; i < 120; i++) await c.video.createTask(body);
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push(await c.video.createTask(body));
    const http = new HttpClient({ baseUrl: counter.url, apiKey: KEY });
    closers.push(() => http.close());
    const stop = new AbortController();
    closers.push(async () => stop.abort());
    const p = new VideoPoller(new VideoClient(http), trackOptions({ minIntervalMs: 50 }), stop.signal);
    const done = await Promise.all(ids.map((id) => p.track(id, NOW())));
    expect(done.every((t) => t.status === "succeeded")).toBe(true);
    const pages = counter.hits.filter(isVideoList).map((h) => new URL(h.url, "http://x").searchParams);
    expect(pages.length).toBeGreaterThan(0);
    expect(pages.every((q) => q.get("page_num") === "1")).toBe(true);
    expect(p.requests).toBe(counter.hits.length);
  });
});

describe("a list page's news of tasks not yet due is used (defect 2)", () => {
  it("settles a video task whose end a list page shows long before its own next look", async () => {
    const created = NOW();
    const server = await serve((hit) => {
      const url = new URL(hit.url, "http://x");
      if (isVideoList(hit)) {
        const items = ["t_a", "t_b", "t_c", "t_slow"].map((id) => videoTask(id, "succeeded", created));
        return { items, total: items.length };
      }
      // A single look at the slow task says a minute remains: its next look is far off.
      const id = decodeURIComponent(url.pathname.split("/").at(-1) ?? "");
      return { task: videoTask(id, "running", created, 60) };
    });
    const p = videoPoller(server.url, trackOptions({ maxIntervalMs: 20_000 }));
    let firstLook: () => void = () => {};
    const looked = new Promise<void>((r) => {
      firstLook = r;
    });
    const slow = p.track("t_slow", created, () => firstLook());
    await looked;
    const started = Date.now();
    await Promise.all(["t_a", "t_b", "t_c"].map((id) => p.track(id, created)));
    const result = await slow;
    expect(result.status).toBe("succeeded");
    expect(Date.now() - started).toBeLessThan(2000);
    expect(server.hits.filter(isVideoSingle).map((h) => h.url)).toEqual([
      "/vid/v2/query/video_generation/t_slow",
    ]);
  });

  it("settles a speech task that a list page shows ended while it was not due", async () => {
    const created = NOW();
    const server = await serve((hit) => {
      const url = new URL(hit.url, "http://x");
      if (url.pathname === "/audio/v1/speech/jobs") {
        const items = ["s_a", "s_b", "s_c", "s_slow"].map((id) => speechTask(id, "succeeded", created));
        return { items, total: items.length, status_counts: { succeeded: items.length } };
      }
      const id = decodeURIComponent(url.pathname.split("/").at(-1) ?? "");
      return { task: speechTask(id, "queued", created) };
    });
    const p = speechPoller(server.url, trackOptions({ minIntervalMs: 20_000, maxIntervalMs: 20_000 }));
    let firstLook: () => void = () => {};
    const looked = new Promise<void>((r) => {
      firstLook = r;
    });
    const slow = p.track("s_slow", created, () => firstLook());
    await looked;
    const started = Date.now();
    // Due at once, though the slow one was just looked at: one list answers for all four.
    const others = ["s_a", "s_b", "s_c"].map((id) => p.track(id, created));
    await Promise.all([...others, slow]);
    expect(Date.now() - started).toBeLessThan(2000);
  });
});

describe("SpeechPoller.pollMany over short pages", () => {
  it("walks on when a page comes back shorter than asked, by the items received", async () => {
    const created = NOW();
    const ids = Array.from({ length: 8 }, (_, i) => `s_${i}`);
    const server = await serve((hit) => {
      const url = new URL(hit.url, "http://x");
      if (url.pathname === "/audio/v1/speech/jobs") {
        // This service never gives more than 3 items a page, whatever the limit.
        const offset = Number(url.searchParams.get("offset") ?? 0);
        const items = ids.slice(offset, offset + 3).map((id) => speechTask(id, "succeeded", created));
        return { items, total: ids.length, status_counts: { succeeded: ids.length } };
      }
      const id = decodeURIComponent(url.pathname.split("/").at(-1) ?? "");
      return { task: speechTask(id, "succeeded", created) };
    });
    const p = speechPoller(server.url, trackOptions());
    const done = await Promise.all(ids.map((id) => p.track(id, created)));
    expect(done.map((t) => t.status)).toEqual(ids.map(() => "succeeded"));
    const lists = server.hits.filter((h) => h.url.startsWith("/audio/v1/speech/jobs?"));
    const offsets = lists.map((h) => new URL(h.url, "http://x").searchParams.get("offset"));
    expect(offsets).toEqual(["0", "3", "6"]);
    expect(server.hits.length - lists.length).toBe(0);
  });
});

describe("VideoPoller.pollMany over short pages (issue 22)", () => {
  it("asks the pages after a short one at the length it learnt, so pages placed by the size asked are read", async () => {
    // Newest first, at most 4 a page, page N at (N-1) x the page_size asked: page 2 of 100 holds
    // tasks 100..103. The 11 followed tasks are the newest of 120.
    const created = NOW();
    const tasks = Array.from({ length: 120 }, (_, i) => ({
      id: `t_${i}`,
      at: created - i,
      views: i < 11 ? 0 : 9,
    }));
    const followed = tasks.slice(0, 11);
    const show = (t: (typeof tasks)[number]) =>
      videoTask(t.id, t.views++ === 0 ? "running" : "succeeded", t.at);
    const server = await serve((hit) => {
      const url = new URL(hit.url, "http://x");
      if (isVideoList(hit)) {
        const page = Number(url.searchParams.get("page_num") ?? 1);
        const size = Number(url.searchParams.get("page_size") ?? 20);
        const start = (page - 1) * size;
        return { items: tasks.slice(start, start + Math.min(size, 4)).map(show), total: tasks.length };
      }
      const id = decodeURIComponent(url.pathname.split("/").at(-1) ?? "");
      const task = tasks.find((t) => t.id === id);
      return { task: task ? show(task) : videoTask(id, "succeeded", created) };
    });
    const p = videoPoller(server.url, trackOptions());
    const done = await Promise.all(followed.map((t) => p.track(t.id, created)));
    expect(done.every((t) => t.status === "succeeded")).toBe(true);
    const pages = server.hits.filter(isVideoList).map((h) => new URL(h.url, "http://x").searchParams);
    // Round 1: page 1 at 100 (4 tasks), then pages 2 and 3 at the 4 learnt; round 2 likewise at 4.
    expect(pages.slice(0, 3).map((q) => `${q.get("page_num")}x${q.get("page_size")}`)).toEqual([
      "1x100",
      "2x4",
      "3x4",
    ]);
    expect(pages.slice(3).every((q) => q.get("page_size") === "4")).toBe(true);
    // Every task was found on a list page: (as above) at most one looked at alone by timing.
    expect(server.hits.filter(isVideoSingle).length).toBeLessThanOrEqual(1);
  });
});
