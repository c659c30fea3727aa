// The lists a run reads (issue 22): the skills a run syncs by name before its first create, and
// the voices and skills `plan` checks. Over short pages the run found a manifest skill that existed
// on a later page missing, and created a twin of it; plan reported skills and voices "not found"
// that were only on pages it never read. Now: found wherever they are listed; a list the service
// serves incompletely is a refusal to create (exit 2, nothing submitted) in a run and a warning,
// not an error, in plan. Real HTTP to the sandbox, through a forwarding proxy where a list must
// come back incomplete.
import { describe, expect, it, onTestFinished } from "vitest";
import { type Answer, type Hit, proxy } from "../fixtures/servers.js";
import { call } from "../helpers/sandbox.js";
import { cli, KEY, manifestText, runIn, type Sb, setup, type Workspace } from "../run/helpers.js";

/** A manifest whose one shot uses the manifest's skill `noir`, synced by name before the run. */
async function noirManifest(w: Workspace): Promise<string> {
  await w.write("noir.md", "# Noir\nHard light, deep shadows.\n");
  const base = manifestText({
    shots: [{ id: "s01", prompt: "a pier at night", skill: "noir", use_context_ir: true }],
  });
  return w.write("manifest.yaml", `${base}skills:\n  noir: noir.md\n`);
}

/** Custom skills `a`, `b`, then `name`: with the three official ones, `name` is the sixth. */
async function skillsBefore(s: Sb, name: string, content = "old rules\n"): Promise<string> {
  for (const other of ["a", "b"]) {
    await call(s.url, "POST", "/vid/v2/skills", { key: KEY, body: { name: other, content: "x" } });
  }
  const r = await call(s.url, "POST", "/vid/v2/skills", { key: KEY, body: { name, content } });
  return r.body.skill.id;
}

async function skillNames(s: Sb): Promise<string[]> {
  const r = await call(s.url, "GET", "/vid/v2/skills?page_size=100", { key: KEY });
  return r.body.items.map((k: { name: string }) => k.name);
}

/** A proxy to the sandbox that answers the lists matching `lists` itself (incomplete ones). */
async function lying(s: Sb, lists: (hit: Hit) => Answer | undefined) {
  const p = await proxy(s.url, (_n, hit) => (hit.method === "GET" ? lists(hit) : undefined));
  onTestFinished(() => p.close());
  return p;
}

const SHORT_PAGES = [
  { page_cap: 2, page_placement: "asked" },
  { page_cap: 2, page_placement: "served" },
  { page_cap: 2, page_placement: "asked", page_repeat: true },
] as const;

describe("a run's skill sync", () => {
  it.each(SHORT_PAGES)(
    "finds the manifest's skill on a later page and updates it, never a twin (%o)",
    async (faults) => {
      const { s, w } = await setup();
      const id = await skillsBefore(s, "noir");
      const manifest = await noirManifest(w);
      await s.faults(faults);
      const { outcome } = await runIn(s, manifest, { allowPrivateUrls: true });
      expect(outcome.exitCode, outcome.message).toBe(0);
      await s.faults({ page_cap: 0, page_repeat: false });
      const stats = await s.stats();
      // The three skills created above, and no more.
      expect(stats.requests["POST /vid/v2/skills"]).toBe(3);
      expect(stats.requests["PUT /vid/v2/skills/{skill_id}"]).toBe(1);
      expect((await skillNames(s)).filter((n) => n === "noir")).toHaveLength(1);
      const journal = await w.journal();
      expect(journal.find((e) => e.t === "skill")).toMatchObject({ name: "noir", id });
    },
  );

  it("refuses to create a skill while the service lists it incompletely: exit 2, nothing created", async () => {
    const { s, w } = await setup();
    await skillsBefore(s, "harbour");
    const manifest = await noirManifest(w);
    const all = (await call(s.url, "GET", "/vid/v2/skills?page_size=100", { key: KEY })).body.items;
    // Says 6, serves the first 2 whatever the page: `noir` might be on a page never served.
    const p = await lying(s, (hit) =>
      hit.url.startsWith("/vid/v2/skills")
        ? { status: 200, json: { items: all.slice(0, 2), total: 6 } }
        : undefined,
    );
    const before = await s.stats();
    const r = await cli(undefined, ["run", manifest, "--json", "--allow-private-urls"], {
      CLAPPER_BASE_URL: p.url,
      CLAPPER_API_KEY: KEY,
    });
    expect(r.code, r.err).toBe(2);
    const answer = JSON.parse(r.out);
    expect(answer.error.message).toContain(
      'refused to create skill "noir": the service lists 6 skills but served 2 distinct ones',
    );
    expect(answer.error.message).toContain("nothing was submitted");
    const after = await s.stats();
    expect(after.requests["POST /vid/v2/skills"]).toBe(before.requests["POST /vid/v2/skills"]);
    expect(after.tasks_created).toEqual(before.tasks_created);
  });
});

describe("plan's checks of named skills and voices", () => {
  const harbourManifest = (w: Workspace, voice = "preset:en_female_bright") =>
    w.manifest({
      shots: [{ id: "s01", prompt: "a harbour", skill: "harbour", use_context_ir: true }],
      lines: [{ id: "n01", text: "Hello.", voice }],
    });

  it.each(SHORT_PAGES)("finds a skill listed on a later page (%o)", async (faults) => {
    const { s, w } = await setup();
    await skillsBefore(s, "harbour");
    const manifest = await harbourManifest(w);
    await s.faults(faults);
    const r = await cli(s, ["plan", manifest, "--json"]);
    expect(r.code, r.out).toBe(0);
    expect(JSON.parse(r.out)).toMatchObject({ errors: [], warnings: [] });
  });

  it("warns, instead of reporting it missing, when the skill or voice list is incomplete", async () => {
    const { s, w } = await setup();
    await skillsBefore(s, "harbour");
    const all = (await call(s.url, "GET", "/vid/v2/skills?page_size=100", { key: KEY })).body.items;
    const manifest = await harbourManifest(w, "custom:voice_unseen");
    const p = await lying(s, (hit) => {
      if (hit.url.startsWith("/vid/v2/skills"))
        return { status: 200, json: { items: all.slice(0, 2), total: 6 } };
      if (hit.url.startsWith("/audio/v1/voices")) return { status: 200, json: { items: [], total: 1 } };
      return undefined;
    });
    const r = await cli(undefined, ["plan", manifest, "--json"], {
      CLAPPER_BASE_URL: p.url,
      CLAPPER_API_KEY: KEY,
    });
    expect(r.code, r.out).toBe(0);
    const answer = JSON.parse(r.out);
    expect(answer.errors).toEqual([]);
    expect(answer.warnings).toEqual([
      expect.stringContaining(
        'skill: skill "harbour" is not among the 2 skills the service served, but it lists 6: the list may be incomplete',
      ),
      expect.stringContaining(
        'voice: custom voice "voice_unseen" is not among the 0 custom voices the service served, but it lists 1: the list may be incomplete',
      ),
    ]);
  });
});
