// The account commands through `main(argv, {env, stdout, stderr})` against a sandbox started here:
// balance, skills, voices and tasks, tables and --json, configuration and exit codes.
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { PointsPackage, PointsSummary } from "../../src/api/common.js";
import { createClients } from "../../src/api/index.js";
import { Pricing } from "../../src/api/speech.js";
import { Skill } from "../../src/api/video.js";
import { createLogger } from "../../src/cli/logger.js";
import { main } from "../../src/cli/main.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/index.js";
import { type TempDir, tempDir } from "../fixtures/audio.js";
import { call, KEY, sandbox, until } from "../helpers/sandbox.js";

interface Run {
  code: number;
  out: string;
  err: string;
}

async function run(argv: string[], env: Record<string, string | undefined>): Promise<Run> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, {
    env,
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
    logger: createLogger("silent"),
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

/** Runs and insists on success, showing stderr when it fails. */
async function ok(argv: string[], env: Record<string, string | undefined>): Promise<string> {
  const r = await run(argv, env);
  expect({ argv, code: r.code, err: r.err }).toEqual({ argv, code: 0, err: "" });
  return r.out;
}

const envFor = (s: Sandbox) => ({ CLAPPER_BASE_URL: s.url, CLAPPER_API_KEY: KEY });

const stats = async (s: Sandbox) => (await call(s.url, "GET", "/_sandbox/stats", { key: null })).body;

async function fresh(options: SandboxOptions = {}): Promise<Sandbox> {
  const s = await sandbox(options);
  onTestFinished(() => s.close());
  return s;
}

let dir: TempDir;
beforeAll(async () => {
  dir = await tempDir();
});
afterAll(() => dir.remove());

describe("balance", () => {
  it("prints the points summary, the packages and speech pricing as a table", async () => {
    const s = await fresh({ points: 5000 });
    await call(s.url, "POST", "/_sandbox/orgs/acme/packages", {
      key: null,
      body: { total_points: 700, status: "pending", name: "Starter" },
    });
    const out = await ok(["balance"], envFor(s));
    expect(out).toContain("points: 5000 available, 0 reserved, 5000 total");
    const lines = out.split("\n");
    const header = lines.find((l) => l.startsWith("PACKAGE"));
    expect(header).toMatch(/PACKAGE\s+ID\s+STATUS\s+REMAINING\s+RESERVED\s+AVAILABLE\s+EXPIRES/);
    expect(lines.find((l) => l.includes("active"))).toMatch(/\s5000\s+0\s+5000\s+\d{4}-\d{2}-\d{2}/);
    expect(lines.find((l) => l.startsWith("Starter"))).toMatch(/pending\s+700\s+0\s+0\s+-$/);
    expect(out).toContain("speech: 2 points per 10 counted characters (pricing version 1)");
    expect(out).toContain("video: points per second 480P 5, 768P 10, 1080P 19, 2K 20, 4K 22");
  });

  it("--json gives the three answers for scripts", async () => {
    const s = await fresh();
    const c = createClients({ baseUrl: s.url, apiKey: KEY });
    await c.video.createTask({ model: "Vid-H3", content: [{ type: "text", text: "[sandbox:slow] x" }] });
    await c.close();
    const data = JSON.parse(await ok(["balance", "--json"], envFor(s)));
    expect(PointsSummary.parse(data.summary)).toMatchObject({
      reserved_points: 50,
      available_points: 100_000 - 50,
    });
    expect(data.packages.map((p: unknown) => PointsPackage.parse(p).status)).toEqual(["active"]);
    expect(Pricing.parse(data.pricing).enabled).toBe(true);
  });

  it("says when speech billing is disabled", async () => {
    const s = await fresh();
    await call(s.url, "POST", "/_sandbox/pricing", { key: null, body: { enabled: false } });
    expect(await ok(["balance"], envFor(s))).toContain("speech: billing is disabled");
  });
});

describe("skills", () => {
  let s: Sandbox;
  let env: Record<string, string>;
  beforeAll(async () => {
    s = await sandbox();
    env = envFor(s);
  });
  afterAll(() => s.close());

  it("lists official and custom skills as a table and as JSON, with a keyword filter", async () => {
    const out = await ok(["skills", "list"], env);
    expect(out.split("\n")[0]).toMatch(/^ID\s+NAME\s+KIND\s+UPDATED\s+DESCRIPTION$/);
    expect(out).toMatch(/skill_official_camera_language\s+\S.*official/);
    // A list is wrapped in an object (the brief), never a bare array.
    const { skills: all, ...rest } = JSON.parse(await ok(["skills", "list", "--json"], env));
    expect(rest).toEqual({});
    expect(all.length).toBeGreaterThanOrEqual(3);
    for (const k of all) Skill.parse(k);
    const some = JSON.parse(await ok(["skills", "list", "--keyword", "camera", "--json"], env)).skills;
    expect(some.map((k: Skill) => k.id)).toEqual(["skill_official_camera_language"]);
  });

  it("creates from a Markdown file, shows, updates and deletes by name or id", async () => {
    const file = await dir.file(
      "dusk.md",
      "---\nname: dusk-rules\ndescription: golden hour\n---\n# Dusk\nWarm light, long shadows.\n",
    );
    const created = JSON.parse(await ok(["skills", "create", file, "--json"], env)) as Skill;
    expect(created).toMatchObject({
      name: "dusk-rules",
      description: "golden hour",
      content: "# Dusk\nWarm light, long shadows.\n",
      official: false,
    });

    const shown = await ok(["skills", "show", "dusk-rules"], env);
    expect(shown).toContain(`id: ${created.id}`);
    expect(shown).toContain("kind: custom");
    expect(shown).toContain("description: golden hour");
    expect(shown).toContain("Warm light, long shadows.");
    expect(await ok(["skills", "show", created.id], env)).toContain("name: dusk-rules");

    const edit = await dir.file("dusk-v2.md", "# Dusk\nCooler now.\n");
    const updated = JSON.parse(await ok(["skills", "update", "dusk-rules", edit, "--json"], env)) as Skill;
    expect(updated).toMatchObject({
      id: created.id,
      name: "dusk-rules",
      description: "golden hour",
      content: "# Dusk\nCooler now.\n",
    });

    expect(await ok(["skills", "delete", "dusk-rules"], env)).toBe(`deleted ${created.id}`);
    const gone = await run(["skills", "show", created.id], env);
    expect(gone.code).toBe(1);
    expect(gone.err).toContain(`no skill with id or name "${created.id}"`);
  });

  it("names a plain file's skill after the file, and --name overrides", async () => {
    const file = await dir.file("handheld.md", "Shaky, close, urgent.");
    expect(JSON.parse(await ok(["skills", "create", file, "--json"], env)).name).toBe("handheld");
    const named = JSON.parse(await ok(["skills", "create", file, "--name", "vérité", "--json"], env));
    expect(named.name).toBe("vérité");
  });

  it("refuses to delete an official skill, and bad files, with one-line reasons", async () => {
    const official = await run(["skills", "delete", "skill_official_prompt_polish"], env);
    expect(official.code).toBe(1);
    expect(official.err).toMatch(/^clapper: .*cannot be deleted.*\(request req_\w+\)$/);
    expect(official.err.split("\n")).toHaveLength(1);
    const missing = await run(["skills", "create", join(dir.path, "nope.md")], env);
    expect(missing.code).toBe(2);
    expect(missing.err).toContain("cannot read");
    const empty = await run(["skills", "create", await dir.file("empty.md", "---\nname: x\n---\n  \n")], env);
    expect(empty.code).toBe(2);
    expect(empty.err).toContain("has no content");
  });

  it("push creates missing skills, then leaves them unchanged, updates an edited one, and leaves others alone", async () => {
    const p = await fresh();
    const penv = envFor(p);
    const folder = await tempDir("clapper-skills-");
    onTestFinished(() => folder.remove());
    const c = createClients({ baseUrl: p.url, apiKey: KEY });
    onTestFinished(() => c.close());
    const bystander = await c.video.createSkill({ name: "bystander", content: "not in the folder" });
    await folder.file("alpha.md", "Alpha rules.\n");
    await folder.file("beta.md", "---\ndescription: second\n---\nBeta rules.\n");
    await folder.file("notes.txt", "not a skill");

    const first = await ok(["skills", "push", folder.path], penv);
    expect(first).toMatch(/created\s+alpha\s+skill_/);
    expect(first).toMatch(/created\s+beta\s+skill_/);
    expect(first.split("\n").at(-1)).toBe("2 created, 0 updated, 0 unchanged");

    const writesBefore = (await stats(p)).requests;
    const second = await ok(["skills", "push", folder.path], penv);
    expect(second.split("\n").at(-1)).toBe("0 created, 0 updated, 2 unchanged");
    const writesAfter = (await stats(p)).requests;
    expect(writesAfter["POST /vid/v2/skills"]).toBe(writesBefore["POST /vid/v2/skills"]);
    expect(writesAfter["PUT /vid/v2/skills/{skill_id}"]).toBe(writesBefore["PUT /vid/v2/skills/{skill_id}"]);

    await writeFile(join(folder.path, "beta.md"), "---\ndescription: second\n---\nBeta rules, revised.\n");
    const dry = JSON.parse(await ok(["skills", "push", folder.path, "--dry-run", "--json"], penv));
    expect(dry.updated.map((x: { name: string }) => x.name)).toEqual(["beta"]);
    const third = await ok(["skills", "push", folder.path, "--json"], penv);
    const result = JSON.parse(third);
    expect(result.updated.map((x: { name: string }) => x.name)).toEqual(["beta"]);
    expect(result.unchanged.map((x: { name: string }) => x.name)).toEqual(["alpha"]);
    expect(result.created).toEqual([]);

    const skills = new Map<string, Skill>();
    for await (const k of c.video.listSkills()) skills.set(k.name, k);
    expect(skills.get("beta")?.content).toBe("Beta rules, revised.\n");
    expect(skills.get("beta")?.description).toBe("second");
    expect(skills.get("bystander")).toEqual(bystander);
    expect([...skills.values()].filter((k) => !k.official)).toHaveLength(3);
  });

  it("push refuses a folder that does not exist", async () => {
    const r = await run(["skills", "push", join(dir.path, "absent")], env);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/cannot read the skills folder .*absent: no such file or folder \(ENOENT\)/);
  });
});

describe("voices", () => {
  it("lists presets, creates a custom voice from a WAV (twice: one voice), lists and deletes it", async () => {
    const s = await fresh();
    const env = envFor(s);
    const presets = await ok(["voices", "list"], env);
    expect(presets.split("\n")[0]).toMatch(/^VOICE_ID\s+NAME\s+KIND\s+LANGUAGE\s+TAGS\s+CREATED$/);
    expect(presets.split("\n")).toHaveLength(1 + 7);
    expect(presets).toContain("en_female_bright");
    expect(await ok(["voices", "list", "--custom"], env)).toBe("no voices");

    const wav = await dir.wav("narrator.wav", 2500);
    const created = await ok(["voices", "create", "Narrator", wav], env);
    expect(created).toMatch(/^created voice (voice_\w+) \(Narrator\)$/);
    const id = created.match(/(voice_\w+)/)?.[1] as string;
    // Twice: the voice there is given back, said as such, and nothing more is uploaded or registered.
    const assets = (await stats(s)).requests["POST /audio/v1/assets"];
    expect(await ok(["voices", "create", "Narrator", wav], env)).toMatch(
      new RegExp(`^voice ${id} \\(Narrator\\) exists already, made .+: nothing new was created`),
    );
    expect((await stats(s)).requests["POST /audio/v1/assets"]).toBe(assets);
    const again = JSON.parse(await ok(["voices", "create", "Narrator", wav, "--json"], env));
    expect(again).toMatchObject({ voice_id: id, name: "Narrator", created: false });

    const custom = JSON.parse(await ok(["voices", "list", "--custom", "--json"], env)).voices;
    expect(custom.map((v: { voice_id: string }) => v.voice_id)).toEqual([id]);
    expect(await ok(["voices", "delete", id], env)).toBe(`deleted ${id}`);
    expect(await ok(["voices", "list", "--custom"], env)).toBe("no voices");
  });

  it("refuses a reference file the service would refuse, before uploading it", async () => {
    const s = await fresh();
    const r = await run(["voices", "create", "Blip", await dir.wav("blip.wav", 300)], envFor(s));
    // The user's file is wrong and nothing was uploaded: a usage error.
    expect(r.code).toBe(2);
    expect(r.err).toContain("expected a duration from 0.5 to 15 s, got 0.30 s");
    expect((await stats(s)).requests["POST /audio/v1/upload_urls"]).toBeUndefined();
  });

  it("refuses to delete a preset voice", async () => {
    const s = await fresh();
    const r = await run(["voices", "delete", "zh_male_calm"], envFor(s));
    expect(r.code).toBe(1);
    expect(r.err).toContain("preset voice");
  });
});

describe("tasks", () => {
  let s: Sandbox;
  let env: Record<string, string>;
  const ids = { video: "", speech: "", failed: "" };
  beforeAll(async () => {
    s = await sandbox();
    env = envFor(s);
    const c = createClients({ baseUrl: s.url, apiKey: KEY });
    ids.video = await c.video.createTask({ model: "Vid-H3", content: [{ type: "text", text: "a pier" }] });
    ids.failed = await c.video.createTask({
      model: "Vid-H3",
      content: [{ type: "text", text: "[sandbox:fail] a pier" }],
    });
    ids.speech = await c.speech.createTask({
      text: "Hello there.",
      language: "EN",
      voice: { source: "preset", voice_id: "en_male_deep" },
    });
    await until(
      async () => [
        await c.video.getTask(ids.video),
        await c.video.getTask(ids.failed),
        await c.speech.getTask(ids.speech),
      ],
      (ts) => ts.every((t) => ["succeeded", "failed"].includes(t.status)),
    );
    await c.close();
  });
  afterAll(() => s.close());

  it("lists tasks of both services newest first, as a table and as JSON", async () => {
    const out = await ok(["tasks", "list"], env);
    const lines = out.split("\n");
    expect(lines[0]).toMatch(/^KIND\s+TASK_ID\s+STATUS\s+CREATED\s+DETAIL\s+ERROR$/);
    expect(lines).toHaveLength(4);
    expect(out).toMatch(new RegExp(`video\\s+${ids.failed}\\s+failed.*generation`));
    expect(out).toMatch(new RegExp(`speech\\s+${ids.speech}\\s+succeeded\\s+.*attempt 1/3`));
    const { tasks: rows, ...rest } = JSON.parse(await ok(["tasks", "list", "--json"], env));
    expect(rest).toEqual({});
    expect(rows.map((r: { kind: string }) => r.kind).sort()).toEqual(["speech", "video", "video"]);
    const created = rows.map((r: { created_at: number }) => r.created_at);
    expect(created).toEqual([...created].sort((a, b) => b - a));
  });

  it("filters by kind, status and limit", async () => {
    const video = JSON.parse(await ok(["tasks", "list", "--kind", "video", "--json"], env)).tasks;
    expect(video.map((r: { id: string }) => r.id).sort()).toEqual([ids.video, ids.failed].sort());
    const failed = JSON.parse(await ok(["tasks", "list", "--status", "failed", "--json"], env)).tasks;
    expect(failed.map((r: { id: string }) => r.id)).toEqual([ids.failed]);
    const succeeded = JSON.parse(
      await ok(["tasks", "list", "--status", "succeeded", "--kind", "speech", "--json"], env),
    ).tasks;
    expect(succeeded.map((r: { id: string }) => r.id)).toEqual([ids.speech]);
    expect(JSON.parse(await ok(["tasks", "list", "--limit", "1", "--json"], env)).tasks).toHaveLength(1);
    expect(await ok(["tasks", "list", "--status", "generating", "--kind", "video"], env)).toBe("no tasks");
    const bad = await run(["tasks", "list", "--status", "bogus"], env);
    expect(bad.code).toBe(2);
    expect(bad.err).toContain(
      '--status: expected one of queued, running, succeeded, failed, cancelled, generating, got "bogus"',
    );
  });

  it("gets a task of either kind, with or without --kind", async () => {
    const video = await ok(["tasks", "get", ids.video], env);
    expect(video).toContain("kind: video");
    expect(video).toContain("status: succeeded");
    expect(video).toMatch(/result: http:\/\/\S+\.mp4/);
    const speech = await ok(["tasks", "get", ids.speech], env);
    expect(speech).toContain("kind: speech");
    expect(speech).toMatch(/points: \d+/);
    expect(speech).toMatch(/result: http:\/\/\S+\.wav/);
    expect(await ok(["tasks", "get", ids.speech, "--kind", "speech"], env)).toBe(speech);
    const failed = JSON.parse(await ok(["tasks", "get", ids.failed, "--json"], env));
    expect(failed).toMatchObject({ kind: "video", status: "failed" });
    expect(failed.error).toMatch(/\S/);
    const unknown = await run(["tasks", "get", "task_nope"], env);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toBe("clapper: no video or speech task task_nope");
    const wrongKind = await run(["tasks", "get", ids.video, "--kind", "speech"], env);
    expect(wrongKind.code).toBe(1);
  });

  it("cancels queued tasks of both kinds", async () => {
    const slow = await fresh({ timeScale: 1 });
    const c = createClients({ baseUrl: slow.url, apiKey: KEY });
    onTestFinished(() => c.close());
    const v = await c.video.createTask({ model: "Vid-H3", content: [{ type: "text", text: "x" }] });
    const sp = await c.speech.createTask({
      text: "Hi there.",
      language: "EN",
      voice: { source: "preset", voice_id: "en_male_deep" },
    });
    expect(await ok(["tasks", "cancel", v], envFor(slow))).toBe(`video task ${v}: cancelled`);
    expect(await ok(["tasks", "cancel", sp], envFor(slow))).toBe(`speech task ${sp}: cancelled`);
    expect((await c.speech.getTask(sp)).status).toBe("cancelled");
    const again = await run(["tasks", "cancel", sp, "--kind", "speech"], envFor(slow));
    expect(again).toMatchObject({ code: 0, out: `speech task ${sp}: cancelled` });
    // A task that had ended: nothing to cancel, which is no failure.
    const ended = await run(["tasks", "cancel", ids.video], env);
    expect(ended).toMatchObject({
      code: 0,
      out: `video task ${ids.video}: had already ended (succeeded); nothing to cancel`,
    });
  });
});

describe("configuration and exit codes", () => {
  let s: Sandbox;
  beforeAll(async () => {
    s = await sandbox();
  });
  afterAll(() => s.close());

  it("a missing key is exit 2 with a clear message, before any request", async () => {
    const before = await stats(s);
    const r = await run(["balance"], { CLAPPER_BASE_URL: s.url });
    expect(r.code).toBe(2);
    expect(r.err).toBe(
      "clapper: no API key: set CLAPPER_API_KEY or pass --api-key-file FILE (or use --sandbox)",
    );
    expect(await stats(s)).toEqual(before);
  });

  it("a missing or malformed service address is exit 2", async () => {
    expect((await run(["balance"], { CLAPPER_API_KEY: KEY })).err).toContain("no service address");
    const bad = await run(["balance"], { CLAPPER_API_KEY: KEY, CLAPPER_BASE_URL: "localhost:8787" });
    expect(bad.code).toBe(2);
    const ftp = await run(["balance", "--base-url", "ftp://example.com"], { CLAPPER_API_KEY: KEY });
    expect(ftp).toMatchObject({ code: 2 });
    expect(ftp.err).toContain("--base-url must be an http or https URL");
  });

  it("a refused key is exit 2: the API key was refused, check the key", async () => {
    const r = await run(["balance"], { CLAPPER_BASE_URL: s.url, CLAPPER_API_KEY: "sk-ml-not-a-real-key" });
    expect(r.code).toBe(2);
    expect(r.err).toContain("the API key was refused");
    expect(r.err).toContain("check the key (CLAPPER_API_KEY or --api-key-file)");
    expect(r.err.split("\n")).toHaveLength(1);
    expect(r.out).toBe("");
  });

  it("a key that is not a model API key is exit 2", async () => {
    const r = await run(["balance"], { CLAPPER_BASE_URL: s.url, CLAPPER_API_KEY: "hunter2" });
    expect(r.code).toBe(2);
    expect(r.err).toContain("expected the prefix sk-ml-");
  });

  it("unknown commands and missing subcommands are exit 2", async () => {
    const env = envFor(s);
    const unknown = await run(["frobnicate"], env);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toMatch(/^clapper: unknown argument: frobnicate/);
    expect((await run(["skills"], env)).code).toBe(2);
    expect((await run(["tasks", "explode"], env)).code).toBe(2);
    expect((await run(["balance", "--no-such-flag"], env)).code).toBe(2);
    expect((await run([], env)).code).toBe(2);
  });

  it("--help and --version print to stdout and return 0 instead of exiting the process", async () => {
    const help = await run(["--help"], {});
    expect(help).toMatchObject({ code: 0, err: "" });
    for (const command of ["balance", "skills", "voices", "tasks"])
      expect(help.out).toContain(`clapper ${command}`);
    const skills = await run(["skills", "--help"], {});
    expect(skills.out).toContain("clapper skills push <dir>");
    const { version } = JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8"));
    expect(await run(["--version"], {})).toMatchObject({ code: 0, out: version });
  });

  it("reads the key from --api-key-file, ignoring surrounding whitespace", async () => {
    const file = await dir.file("key.txt", `\n  ${KEY}\n`);
    const out = await ok(["balance", "--api-key-file", file], {
      CLAPPER_BASE_URL: s.url,
      CLAPPER_API_KEY: "sk-ml-wrong",
    });
    expect(out).toContain("points:");
    const missing = await run(["balance", "--api-key-file", join(dir.path, "absent.txt")], {
      CLAPPER_BASE_URL: s.url,
    });
    expect(missing.code).toBe(2);
    expect(missing.err).toContain("cannot read --api-key-file");
    const empty = await run(["balance", "--api-key-file", await dir.file("blank.txt", " \n")], {
      CLAPPER_BASE_URL: s.url,
    });
    expect(empty.code).toBe(2);
    expect(empty.err).toContain("is empty");
    const twoLines = await run(["balance", "--api-key-file", await dir.file("two.txt", `${KEY}\n${KEY}\n`)], {
      CLAPPER_BASE_URL: s.url,
    });
    expect(twoLines.code).toBe(2);
    expect(twoLines.err).toContain("whitespace or control characters");
  });

  it("--base-url wins over CLAPPER_BASE_URL", async () => {
    const out = await ok(["voices", "list", "--base-url", s.url], {
      CLAPPER_BASE_URL: "http://127.0.0.1:9",
      CLAPPER_API_KEY: KEY,
    });
    expect(out).toContain("en_female_bright");
  });

  it("--sandbox starts an in-process sandbox for a read command, no key needed", async () => {
    const balance = JSON.parse(await ok(["balance", "--sandbox", "--json"], {}));
    expect(balance.summary.total_points).toBe(100_000);
    expect(await ok(["voices", "list", "--sandbox"], {})).toContain("zh_female_warm");
    expect(await ok(["tasks", "list", "--sandbox"], {})).toBe("no tasks");
  });

  it("rejects a bad --timeout and a bad CLAPPER_RETRY_BASE_MS", async () => {
    expect((await run(["balance", "--timeout", "0"], envFor(s))).code).toBe(2);
    const r = await run(["balance"], { ...envFor(s), CLAPPER_RETRY_BASE_MS: "fast" });
    expect(r.code).toBe(2);
    expect(r.err).toContain("CLAPPER_RETRY_BASE_MS");
  });

  it("a service that is down is exit 6 with the reason, after the retries", async () => {
    const down = await sandbox();
    const url = down.url;
    await down.close();
    const started = Date.now();
    const r = await run(["balance"], {
      CLAPPER_BASE_URL: url,
      CLAPPER_API_KEY: KEY,
      CLAPPER_RETRY_BASE_MS: "1",
    });
    expect(r.code).toBe(6);
    expect(r.err).toMatch(
      /^clapper: the (video|speech) service at http:\S+ is unreachable \(ECONNREFUSED\): .*connection to http:\S+ failed \(ECONNREFUSED\); check the address and the network, then run again$/,
    );
    expect(Date.now() - started).toBeLessThan(3000);
  });
});

it("keeps stdout for results only: a failure prints nothing there", async () => {
  const r = await run(["skills", "show", "x"], {
    CLAPPER_BASE_URL: "http://127.0.0.1:9",
    CLAPPER_API_KEY: "nope",
  });
  expect(r.out).toBe("");
  expect(r.code).toBe(2);
  expect(r.err).toMatch(/^clapper: /);
});
