// The sandbox's paging faults (beyond the contract, see the README's "Sandbox" section): a service
// that serves fewer items a page than asked, places page N by the size asked or by the size it
// served, and shows an item on two pages. The list clients are tested against them (test/api,
// test/cli), so what each fault serves is pinned here, page by page, over real HTTP.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/sandbox/index.js";
import { call, KEY, sandbox } from "../helpers/sandbox.js";

let s: Sandbox;
/** Newest first, as the sandbox lists both kinds of task. */
const video: string[] = [];
const speech: string[] = [];
let skills: string[] = [];

beforeAll(async () => {
  s = await sandbox({ points: 10_000_000 });
  for (let i = 0; i < 11; i++) {
    const r = await call(s.url, "POST", "/vid/v2/video_generation", {
      body: { model: "Vid-H3", content: [{ type: "text", text: `shot ${i}` }] },
    });
    video.unshift(r.body.task_id);
  }
  for (let i = 0; i < 5; i++) {
    const r = await call(s.url, "POST", "/audio/v1/speech/jobs", {
      body: { text: `Line ${i}.`, language: "EN", voice: { source: "preset", voice_id: "en_female_bright" } },
      idem: `paging-${i}`,
    });
    speech.unshift(r.body.task_id);
  }
  for (const name of ["alpha", "beta", "gamma"]) {
    await call(s.url, "POST", "/vid/v2/skills", { body: { name, content: `${name} rules` } });
  }
  skills = (await call(s.url, "GET", "/vid/v2/skills?page_size=100")).body.items.map(
    (k: { id: string }) => k.id,
  );
});
afterAll(() => s.close());

async function faults(body: Record<string, unknown>) {
  const r = await call(s.url, "POST", "/_sandbox/faults", { key: null, body });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

const OFF = { page_cap: 0, page_placement: "served", page_repeat: false };

async function ids(path: string): Promise<{ ids: string[]; total: number }> {
  const r = await call(s.url, "GET", path, { key: KEY });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return {
    ids: r.body.items.map((t: { id?: string; task_id?: string }) => t.id ?? t.task_id),
    total: r.body.total,
  };
}

describe("paging faults", () => {
  it("are off by default, echoed with the other faults, and validated", async () => {
    expect(await faults({})).toMatchObject(OFF);
    expect(await faults({ page_cap: 4, page_placement: "asked", page_repeat: true })).toMatchObject({
      page_cap: 4,
      page_placement: "asked",
      page_repeat: true,
      error_rate: 0,
    });
    for (const body of [
      { page_cap: -1 },
      { page_cap: 1.5 },
      { page_placement: "last" },
      { page_repeat: 1 },
    ]) {
      const r = await call(s.url, "POST", "/_sandbox/faults", { key: null, body });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toContain(Object.keys(body)[0]);
    }
    expect(await faults(OFF)).toMatchObject(OFF);
  });

  it("page_cap with placement by the size asked: page 2 of page_size 100 starts at item 100", async () => {
    await faults({ ...OFF, page_cap: 4, page_placement: "asked" });
    expect(await ids("/vid/v2/query/video_generation?page_size=100")).toEqual({
      ids: video.slice(0, 4),
      total: 11,
    });
    expect(await ids("/vid/v2/query/video_generation?page_num=2&page_size=100")).toEqual({
      ids: [],
      total: 11,
    });
    expect((await ids("/vid/v2/query/video_generation?page_num=2&page_size=5")).ids).toEqual(
      video.slice(5, 9),
    );
    expect((await ids("/vid/v2/query/video_generation?page_num=3&page_size=4")).ids).toEqual(
      video.slice(8, 11),
    );
    expect(await ids("/vid/v2/skills?page_size=100")).toEqual({ ids: skills.slice(0, 4), total: 6 });
    expect((await ids("/vid/v2/skills?page_num=2&page_size=100")).ids).toEqual([]);
    expect((await ids("/vid/v2/skills?page_num=2&page_size=4")).ids).toEqual(skills.slice(4, 6));
    await faults(OFF);
  });

  it("page_cap with placement by the size served: page 2 starts after the items page 1 served", async () => {
    await faults({ ...OFF, page_cap: 4, page_placement: "served" });
    expect((await ids("/vid/v2/query/video_generation?page_num=2&page_size=100")).ids).toEqual(
      video.slice(4, 8),
    );
    expect((await ids("/vid/v2/query/video_generation?page_num=3&page_size=5")).ids).toEqual(
      video.slice(8, 11),
    );
    expect((await ids("/vid/v2/skills?page_num=2&page_size=100")).ids).toEqual(skills.slice(4, 6));
    await faults(OFF);
  });

  it("page_cap on the speech list: at most N items from the offset asked", async () => {
    await faults({ ...OFF, page_cap: 2 });
    expect(await ids("/audio/v1/speech/jobs?offset=0&limit=100")).toEqual({
      ids: speech.slice(0, 2),
      total: 5,
    });
    expect((await ids("/audio/v1/speech/jobs?offset=3&limit=100")).ids).toEqual(speech.slice(3, 5));
    expect((await ids("/audio/v1/speech/jobs?offset=1&limit=1")).ids).toEqual(speech.slice(1, 2));
    await faults(OFF);
  });

  it("page_repeat: a page after the first also starts with the item listed just before it", async () => {
    await faults({ ...OFF, page_cap: 2, page_repeat: true });
    expect((await ids("/audio/v1/speech/jobs?offset=0&limit=100")).ids).toEqual(speech.slice(0, 2));
    expect((await ids("/audio/v1/speech/jobs?offset=2&limit=100")).ids).toEqual(speech.slice(1, 4));
    // Past the end, the item before it still shows.
    expect((await ids("/audio/v1/speech/jobs?offset=5&limit=100")).ids).toEqual(speech.slice(4, 5));
    expect((await ids("/vid/v2/query/video_generation?page_num=2&page_size=2")).ids).toEqual(
      video.slice(1, 4),
    );
    expect((await ids("/vid/v2/skills?page_num=3&page_size=2")).ids).toEqual(skills.slice(3, 6));
    await faults({ ...OFF, page_repeat: true });
    // Without a cap, a page holds what was asked plus the repeat.
    expect((await ids("/vid/v2/query/video_generation?page_num=2&page_size=5")).ids).toEqual(
      video.slice(4, 10),
    );
    await faults(OFF);
  });

  it("leaves the voices list and single reads alone", async () => {
    await faults({ page_cap: 1, page_repeat: true });
    expect((await call(s.url, "GET", "/audio/v1/voices")).body.items).toHaveLength(7);
    expect((await call(s.url, "GET", `/vid/v2/query/video_generation/${video[3]}`)).body.task.id).toBe(
      video[3],
    );
    await faults(OFF);
  });
});
