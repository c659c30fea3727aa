// What other processes read, used by this one (the shards of a run share an account, and every list
// page shows all of its tasks): a task another process saw end is settled without a request; what it
// saw of a task still running counts only while as fresh as a look of this one would be; and a
// sighting that is old, of another task, or cannot be had changes nothing. Real HTTP on loopback: a
// small server counts this poller's requests.
import { afterEach, describe, expect, it } from "vitest";
import { HttpClient } from "../../src/api/http.js";
import type { VideoTask } from "../../src/api/video.js";
import { VideoClient } from "../../src/api/video-client.js";
import type { Sightings } from "../../src/tracking/track.js";
import { VideoPoller } from "../../src/tracking/video-poller.js";
import { type Scripted, scripted } from "../fixtures/servers.js";
import { videoTask } from "../fixtures/tasks.js";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((c) => c()));
});

const NOW = () => Math.floor(Date.now() / 1000);

/** A service whose tasks stay `running` for ever: only a sighting can end them. */
async function neverEnding(): Promise<Scripted> {
  const server = await scripted((_n, hit) => {
    const id = decodeURIComponent(new URL(hit.url, "http://x").pathname.split("/").at(-1) ?? "");
    if (hit.url.includes("?")) return { status: 200, json: { items: [], total: 0 } };
    return { status: 200, json: { task: videoTask(id, "running", NOW()) } };
  });
  closers.push(() => server.close());
  return server;
}

function poller(url: string, sightings: Sightings<VideoTask>) {
  const http = new HttpClient({ baseUrl: url, apiKey: "sk-ml-sightings" });
  const stop = new AbortController();
  closers.push(async () => {
    stop.abort();
    await http.close();
  });
  const p = new VideoPoller(
    new VideoClient(http),
    { minIntervalMs: 40, maxIntervalMs: 60, batchThreshold: 3, giveUpMs: 5000 },
    stop.signal,
  );
  p.share(sightings);
  return p;
}

/** Sightings kept in memory, as the coordinator keeps them in Redis. */
function board() {
  const seen = new Map<string, { task: VideoTask; at: number }>();
  const told: string[] = [];
  const sightings: Sightings<VideoTask> = {
    async recall(ids) {
      return ids.map((id) => seen.get(id));
    },
    tell(tasks) {
      for (const t of tasks) {
        told.push(t.id);
        seen.set(t.id, { task: t, at: Date.now() });
      }
    },
  };
  return { seen, told, sightings };
}

/** Waits until `test` holds, for at most 10 s (then the assertions after it say what was missing). */
async function until(test: () => boolean): Promise<void> {
  for (const end = Date.now() + 10_000; !test() && Date.now() < end; )
    await new Promise((r) => setTimeout(r, 10));
}

const ended = (id: string) => videoTask(id, "succeeded", NOW()) as VideoTask;

describe("VideoPoller with sightings from other processes", () => {
  it("settles a task another process saw end, without a request of its own", async () => {
    const server = await neverEnding();
    const b = board();
    const p = poller(server.url, b.sightings);
    const done = p.track("t_1", NOW());
    done.catch(() => {});
    // This process looks (and tells what it saw); then another process reads the end. The server
    // counts the look when it arrives, the poller tells once the answer is read: wait for both.
    await until(() => server.hits.length > 0 && b.told.includes("t_1"));
    const before = server.hits.length;
    expect(before).toBeGreaterThanOrEqual(1);
    expect(b.told).toContain("t_1");
    b.seen.set("t_1", { task: ended("t_1"), at: Date.now() });
    const task = await done;
    expect(task.status).toBe("succeeded");
    expect(server.hits.length - before).toBeLessThanOrEqual(1);
    expect(p.sighted).toBe(1);
  });

  it("ignores what was seen before its own last look, stale statuses, and other tasks' sightings", async () => {
    const server = await neverEnding();
    const b = board();
    const p = poller(server.url, b.sightings);
    // An end read before this process started to follow the task: it is not this task's news.
    b.seen.set("t_old", { task: ended("t_old"), at: Date.now() - 60_000 });
    // A running status read long ago: a look of this process is due anyway.
    b.seen.set("t_stale", {
      task: videoTask("t_stale", "running", NOW()) as VideoTask,
      at: Date.now() - 5_000,
    });
    // A record filed under one id that holds another task.
    b.seen.set("t_mixed", { task: ended("t_other"), at: Date.now() + 60_000 });
    let settled = 0;
    // (The tasks are dropped, unsettled, when the test stops the poller.)
    for (const id of ["t_old", "t_stale", "t_mixed"])
      void p.track(id, NOW()).then(
        () => settled++,
        () => {},
      );
    // Until each was looked at by this process more than once (a busy machine runs the timers late).
    const looks = (id: string) => server.hits.filter((h) => h.url.endsWith(`/${id}`)).length;
    await until(() => ["t_old", "t_stale", "t_mixed"].every((id) => looks(id) > 1));
    expect(settled).toBe(0);
    expect(p.sighted).toBe(0);
    // Each was looked at by this process, more than once.
    for (const id of ["t_old", "t_stale", "t_mixed"])
      expect(server.hits.filter((h) => h.url.endsWith(`/${id}`)).length, id).toBeGreaterThan(1);
  });

  it("goes on with its own looks when the sightings cannot be read", async () => {
    const server = await neverEnding();
    const broken: Sightings<VideoTask> = {
      recall: () => Promise.reject(new Error("the coordinator is gone")),
      tell: () => {},
    };
    const p = poller(server.url, broken);
    let settled = false;
    void p.track("t_2", NOW()).then(
      () => {
        settled = true;
      },
      () => {},
    );
    await until(() => server.hits.filter((h) => h.url.endsWith("/t_2")).length > 2);
    expect(settled).toBe(false);
    expect(server.hits.filter((h) => h.url.endsWith("/t_2")).length).toBeGreaterThan(2);
  });
});
