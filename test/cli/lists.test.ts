// The list commands over services that serve short pages (placed by the size asked or by the size
// served) and repeat items (issue 22): before, `skills list` showed 4 of 6 skills, `skills show`
// and `skills delete` answered "no skill" for skills on a later page, `skills push` created twins
// of skills that existed, `tasks list` showed 4 of 11 video tasks and 4 of 5 speech tasks. Every
// command must show every item once, in `{ tasks | skills | voices: [...] }` with --json, warn
// (and add `warnings`) when the service serves fewer distinct items than its `total`, and
// `skills push` must never create a skill while the list is incomplete. In process, over real
// HTTP to the sandbox (its paging faults) and to small scripted servers for incomplete lists.
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { createClients } from "../../src/api/index.js";
import { createLogger } from "../../src/cli/logger.js";
import { main } from "../../src/cli/main.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { type TempDir, tempDir } from "../fixtures/audio.js";
import { type Hit, type Scripted, scripted } from "../fixtures/servers.js";
import { speechTask } from "../fixtures/tasks.js";
import { call, KEY, sandbox } from "../helpers/sandbox.js";

interface Run {
  code: number;
  out: string;
  err: string;
}

async function run(argv: string[], baseUrl: string): Promise<Run> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, {
    env: { CLAPPER_BASE_URL: baseUrl, CLAPPER_API_KEY: KEY, CLAPPER_RETRY_BASE_MS: "1" },
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    logger: createLogger("silent"),
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

/** `--json`, exit 0, nothing on stderr: the one object on stdout. */
async function json(argv: string[], baseUrl: string) {
  const r = await run([...argv, "--json"], baseUrl);
  expect({ argv, code: r.code, err: r.err }).toEqual({ argv, code: 0, err: "" });
  return JSON.parse(r.out);
}

const NO_FAULTS = { page_cap: 0, page_placement: "served", page_repeat: false };
const VARIANTS = [
  { name: "short pages placed by the size asked", faults: { page_cap: 4, page_placement: "asked" } },
  { name: "short pages placed by the size served", faults: { page_cap: 4, page_placement: "served" } },
  {
    name: "short pages that repeat an item (asked)",
    faults: { page_cap: 2, page_placement: "asked", page_repeat: true },
  },
  {
    name: "short pages that repeat an item (served)",
    faults: { page_cap: 2, page_placement: "served", page_repeat: true },
  },
] as const;

let dir: TempDir;
let s: Sandbox;
const listed = { video: [] as string[], speech: [] as string[], skills: [] as string[] };
const skillId = new Map<string, string>();

async function setFaults(faults: object) {
  const r = await call(s.url, "POST", "/_sandbox/faults", { key: null, body: { ...NO_FAULTS, ...faults } });
  expect(r.status).toBe(200);
}

async function requests(route: string): Promise<number> {
  return (await call(s.url, "GET", "/_sandbox/stats", { key: null })).body.requests[route] ?? 0;
}

beforeAll(async () => {
  dir = await tempDir("clapper-lists-");
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
  // Three official skills, then these: gamma is the sixth, on the second page of four.
  for (const name of ["alpha", "beta", "gamma"]) {
    skillId.set(name, (await c.video.createSkill({ name, content: `${name} rules\n` })).id);
  }
  listed.video = (await c.video.listPage(1, { pageSize: 100 })).items.map((t) => t.id);
  listed.speech = (await c.speech.listPage(0, { limit: 100 })).items.map((t) => t.task_id);
  listed.skills = (await call(s.url, "GET", "/vid/v2/skills?page_size=100")).body.items.map(
    (k: { id: string }) => k.id,
  );
  await c.close();
  expect([listed.video.length, listed.speech.length, listed.skills.length]).toEqual([11, 5, 6]);
});
afterAll(async () => {
  await s.close();
  await dir.remove();
});

describe.each(VARIANTS)("$name", ({ faults }) => {
  beforeAll(() => setFaults(faults));
  afterAll(() => setFaults(NO_FAULTS));

  it("tasks list shows all 11 video tasks, all 5 speech tasks and both together, each once", async () => {
    const video = await json(["tasks", "list", "--kind", "video"], s.url);
    expect(video).toEqual({ tasks: expect.any(Array) });
    expect(video.tasks.map((t: { id: string }) => t.id)).toEqual(listed.video);
    const speech = await json(["tasks", "list", "--kind", "speech"], s.url);
    expect(speech.tasks.map((t: { id: string }) => t.id)).toEqual(listed.speech);
    const both = await json(["tasks", "list"], s.url);
    expect(new Set(both.tasks.map((t: { id: string }) => t.id))).toEqual(
      new Set([...listed.video, ...listed.speech]),
    );
    expect(both.tasks).toHaveLength(16);
    expect(both.warnings).toBeUndefined();
  });

  it("skills list shows all 6 skills once; show finds a skill on the second page by name and by id", async () => {
    const all = await json(["skills", "list"], s.url);
    expect(Object.keys(all)).toEqual(["skills"]);
    expect(all.skills.map((k: { id: string }) => k.id)).toEqual(listed.skills);
    const table = await run(["skills", "list"], s.url);
    expect(table.err).toBe("");
    expect(table.out.split("\n")).toHaveLength(1 + 6);
    const byName = await json(["skills", "show", "gamma"], s.url);
    expect(byName).toMatchObject({ id: skillId.get("gamma"), name: "gamma" });
    const byId = await json(["skills", "show", skillId.get("gamma") as string], s.url);
    expect(byId.name).toBe("gamma");
  });

  it("skills push creates only what is missing, never a twin of a skill on a later page; delete finds it there", async () => {
    const folder = await tempDir("clapper-push-");
    onTestFinished(() => folder.remove());
    for (const name of ["alpha", "beta", "gamma"]) await folder.file(`${name}.md`, `${name} rules\n`);
    await folder.file("delta.md", "delta rules\n");
    const posts = await requests("POST /vid/v2/skills");
    const pushed = await json(["skills", "push", folder.path], s.url);
    expect(pushed.created.map((k: { name: string }) => k.name)).toEqual(["delta"]);
    expect(pushed.unchanged.map((k: { name: string }) => k.name)).toEqual(["alpha", "beta", "gamma"]);
    expect(pushed.warnings).toEqual([]);
    expect((await requests("POST /vid/v2/skills")) - posts).toBe(1);
    // Again: nothing to create, whatever page each skill is on.
    const again = await json(["skills", "push", folder.path], s.url);
    expect(again.created).toEqual([]);
    expect((await requests("POST /vid/v2/skills")) - posts).toBe(1);
    // delta is the seventh skill, on the last page: delete finds it by name.
    const deleted = await run(["skills", "delete", "delta"], s.url);
    expect(deleted).toMatchObject({ code: 0, out: `deleted ${pushed.created[0].id}`, err: "" });
    // Back to the six, read through the faulty pages too.
    const after = await json(["skills", "list"], s.url);
    expect(after.skills.map((k: { id: string }) => k.id)).toEqual(listed.skills);
  });
});

// ---------------------------------------------------------------------------------------------
// Lists the walk cannot complete: a scripted video and speech service that says `total` 6 but
// serves the same 4 skills on every page, 2 of 3 voices, and the same 2 speech tasks at any offset.
// ---------------------------------------------------------------------------------------------

const skill = (name: string, official = false) => ({
  id: `skill_${name}`,
  name,
  content: `${name} rules\n`,
  official,
  created_at: 1_700_000_000,
  updated_at: 1_700_000_000,
});
const voice = (id: string) => ({
  voice_id: id,
  kind: "preset",
  name: id,
  style_tags: [],
  audio_url: `https://cdn.example.com/${id}.wav`,
  created_at: 1_700_000_000,
});

interface Incomplete extends Scripted {
  writes: () => string[];
}

async function incomplete(): Promise<Incomplete> {
  const served = [skill("official_one", true), skill("alpha"), skill("beta"), skill("gamma")];
  const server = await scripted((_n, hit: Hit) => {
    const url = new URL(hit.url, "http://x");
    const path = url.pathname;
    if (hit.method === "GET" && path === "/vid/v2/skills")
      return { status: 200, json: { items: served, total: 6 } };
    if (hit.method === "GET" && path === "/audio/v1/voices") {
      return { status: 200, json: { items: [voice("v_one"), voice("v_two")], total: 3 } };
    }
    if (hit.method === "GET" && path === "/audio/v1/speech/jobs") {
      const items = [
        speechTask("s_2", "succeeded", 1_700_000_002),
        speechTask("s_1", "succeeded", 1_700_000_001),
      ];
      return { status: 200, json: { items, total: 5, status_counts: {} } };
    }
    const id = decodeURIComponent(path.split("/").at(-1) ?? "");
    if (hit.method === "PUT" && path.startsWith("/vid/v2/skills/")) {
      const body = JSON.parse(hit.body);
      return { status: 200, json: { skill: { ...skill(body.name), id, content: body.content } } };
    }
    if (hit.method === "DELETE" && path.startsWith("/vid/v2/skills/")) {
      return { status: 200, json: { skill_id: id } };
    }
    if (hit.method === "POST" && path === "/vid/v2/skills") {
      const body = JSON.parse(hit.body);
      return { status: 200, json: { skill: { ...skill(body.name), content: body.content } } };
    }
    return {
      status: 404,
      json: { RetCode: 40401, Message: `not found: ${hit.method} ${path}`, request_uuid: "r" },
    };
  });
  onTestFinished(() => server.close());
  return {
    ...server,
    writes: () =>
      server.hits
        .filter((h) => h.method !== "GET")
        .map((h) => `${h.method} ${new URL(h.url, "http://x").pathname}`),
  };
}

const WARNING = "the service lists 6 skills but served 4 distinct ones; the list may be incomplete";

describe("a list the service serves incompletely", () => {
  it("skills list warns, with both counts, on stderr and in `warnings`", async () => {
    const server = await incomplete();
    const data = await run(["skills", "list", "--json"], server.url);
    expect(data.code).toBe(0);
    expect(JSON.parse(data.out)).toEqual({ skills: expect.any(Array), warnings: [WARNING] });
    expect(JSON.parse(data.out).skills).toHaveLength(4);
    const text = await run(["skills", "list"], server.url);
    expect(text.code).toBe(0);
    expect(text.out.split("\n")).toHaveLength(1 + 4);
    expect(text.err).toBe(`warning: ${WARNING}`);
  });

  it("skills push updates the skills it found and refuses to create any: no POST, exit 2, the reason", async () => {
    const server = await incomplete();
    const folder = await tempDir("clapper-push-");
    onTestFinished(() => folder.remove());
    await folder.file("alpha.md", "alpha rules, revised\n");
    await folder.file("beta.md", "beta rules\n");
    await folder.file("zeta.md", "zeta rules\n");
    const r = await run(["skills", "push", folder.path, "--json"], server.url);
    expect(r.code).toBe(2);
    const answer = JSON.parse(r.out);
    expect(answer.created).toEqual([]);
    expect(answer.refused).toEqual([{ name: "zeta", file: join(folder.path, "zeta.md") }]);
    expect(answer.updated).toEqual([{ name: "alpha", id: "skill_alpha" }]);
    expect(answer.unchanged).toEqual([{ name: "beta", id: "skill_beta" }]);
    expect(answer.error.code).toBe(2);
    expect(answer.error.message).toContain(
      "refused to create 1 skill (zeta): the service lists 6 skills but served 4",
    );
    expect(r.err).toContain("clapper: refused to create 1 skill (zeta)");
    expect(server.writes()).toEqual(["PUT /vid/v2/skills/skill_alpha"]);
    // A dry run says the same without writing anything.
    const dry = await run(["skills", "push", folder.path, "--dry-run"], server.url);
    expect(dry.code).toBe(2);
    expect(dry.out).toContain("updated    alpha  skill_alpha");
    expect(dry.err).toContain("refused to create 1 skill (zeta)");
    expect(server.writes()).toEqual(["PUT /vid/v2/skills/skill_alpha"]);
  });

  it("skills delete of an id the list did not show still asks the service; show says the list may be incomplete", async () => {
    const server = await incomplete();
    const deleted = await run(["skills", "delete", "skill_on_a_page_never_served"], server.url);
    expect(deleted).toMatchObject({ code: 0, out: "deleted skill_on_a_page_never_served", err: "" });
    expect(server.writes()).toEqual(["DELETE /vid/v2/skills/skill_on_a_page_never_served"]);
    const found = await run(["skills", "delete", "beta"], server.url);
    expect(found.out).toBe("deleted skill_beta");
    const shown = await run(["skills", "show", "zeta"], server.url);
    expect(shown.code).toBe(1);
    expect(shown.err).toBe(`clapper: no skill with id or name "zeta" among the 4 served; ${WARNING}`);
  });

  it("voices list and tasks list wrap their items and add `warnings`", async () => {
    const server = await incomplete();
    const voices = await json(["voices", "list"], server.url);
    expect(voices).toEqual({
      voices: [
        expect.objectContaining({ voice_id: "v_one" }),
        expect.objectContaining({ voice_id: "v_two" }),
      ],
      warnings: ["the service lists 3 preset voices but served 2 distinct ones; the list may be incomplete"],
    });
    const tasks = await json(["tasks", "list", "--kind", "speech"], server.url);
    expect(tasks.tasks.map((t: { id: string }) => t.id)).toEqual(["s_2", "s_1"]);
    expect(tasks.warnings).toEqual([
      "the service lists 5 speech tasks but served 2 distinct ones; the list may be incomplete",
    ]);
  });
});

it("every list command answers one object with --json, also when it fails", async () => {
  const down = await sandbox();
  const url = down.url;
  await down.close();
  for (const argv of [
    ["tasks", "list"],
    ["skills", "list"],
    ["voices", "list"],
  ]) {
    const r = await run([...argv, "--json"], url);
    expect(r.code).toBe(6);
    const answer = JSON.parse(r.out);
    expect(Array.isArray(answer)).toBe(false);
    expect(answer.error.code).toBe(6);
  }
});
