// `clapper init [DIR]` and `clapper schema`, as a person or a script runs them: the built CLI as its
// own process, nothing mocked. The starter project plans offline and runs against the sandbox as
// it is; nothing a person wrote is lost (no overwrite without --force, a .gitignore only added to).
import { mkdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv } from "ajv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { staleBuild } from "../run/harness.js";
import { clapper, type Folder, folder, oneJson } from "./cli-process.js";

const SCHEMA_FILE = fileURLToPath(new URL("../../schema/manifest.schema.json", import.meta.url));
let dir: Folder;
let shipped: string;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  dir = await folder("clapper-init-");
  shipped = await readFile(SCHEMA_FILE, "utf8");
});
afterAll(() => dir?.remove());

const read = (...parts: string[]) => readFile(join(dir.path, ...parts), "utf8");
const init = (...args: string[]) => clapper(["init", ...args], { cwd: dir.path });

describe("clapper init into an empty folder", () => {
  let text: string;
  beforeAll(async () => {
    const ran = await init("film");
    expect(ran.code, ran.stderr).toBe(0);
    text = ran.stdout;
  });

  it("writes the storyboard, its schema and a .gitignore, and names the next commands", async () => {
    const manifest = await read("film", "storyboard.yaml");
    expect(manifest.split("\n")[0]).toBe("# yaml-language-server: $schema=./manifest.schema.json");
    expect(manifest).toMatch(/^name: film\b/m);
    expect(await read("film", "manifest.schema.json")).toBe(shipped);
    expect(await read("film", ".gitignore")).toMatch(/^\.clapper\/\noutput\/\n$/m);
    for (const step of [
      "clapper plan film/storyboard.yaml",
      "clapper run film/storyboard.yaml --sandbox",
      "film/output/film/reports/report.html",
      "CLAPPER_BASE_URL and CLAPPER_API_KEY",
      "clapper schema > film/manifest.schema.json",
    ]) {
      expect(text).toContain(step);
    }
  });

  it("writes a manifest with two shots and two lines that the schema it wrote beside it accepts", async () => {
    const manifest = parse(await read("film", "storyboard.yaml"));
    expect(manifest.shots.length).toBeGreaterThanOrEqual(2);
    expect(manifest.lines.length).toBeGreaterThanOrEqual(2);
    const validate = new Ajv({ allErrors: true, allowUnionTypes: true }).compile(
      JSON.parse(await read("film", "manifest.schema.json")),
    );
    expect(validate(manifest), JSON.stringify(validate.errors)).toBe(true);
  });

  it("plans offline, and runs against the sandbox into film/output/film", async () => {
    const planned = await clapper(["plan", "film/storyboard.yaml", "--json"], { cwd: dir.path });
    expect(planned.code, planned.stderr).toBe(0);
    expect(oneJson(planned).jobs.length).toBe(5);
    const ran = await clapper(
      ["run", "film/storyboard.yaml", "--sandbox", "--json", "--log-level", "silent"],
      {
        cwd: dir.path,
        timeoutMs: 60_000,
      },
    );
    expect(ran.code, ran.stderr).toBe(0);
    expect(oneJson(ran).counts).toMatchObject({ total: 5, succeeded: 5, failed: 0 });
    for (const file of ["shots/s01.mp4", "shots/s02-take-2.mp4", "lines/n02.wav", "reports/report.html"]) {
      expect((await stat(join(dir.path, "film", "output", "film", file))).size, file).toBeGreaterThan(0);
    }
  }, 60_000);

  it("refuses to run again over the storyboard (exit 2), touching nothing, and says what to do", async () => {
    const files = ["storyboard.yaml", "manifest.schema.json", ".gitignore"];
    const before = await Promise.all(
      files.map(async (f) => [await read("film", f), (await stat(join(dir.path, "film", f))).mtimeMs]),
    );
    const ran = await init("film");
    expect(ran.code).toBe(2);
    expect(ran.stderr).toContain("film/storyboard.yaml already exists");
    expect(ran.stderr).toContain("clapper init film --force");
    const after = await Promise.all(
      files.map(async (f) => [await read("film", f), (await stat(join(dir.path, "film", f))).mtimeMs]),
    );
    expect(after).toEqual(before);
    const json = await init("film", "--json");
    expect(json.code).toBe(2);
    expect(oneJson(json).error).toMatchObject({ code: 2 });
  });

  it("--force puts the starter back over an edited storyboard", async () => {
    await writeFile(join(dir.path, "film", "storyboard.yaml"), "name: edited\n");
    const ran = await init("film", "--force", "--json");
    expect(ran.code, ran.stderr).toBe(0);
    const answer = oneJson(ran);
    expect(answer.files).toEqual([
      expect.objectContaining({ path: "film/storyboard.yaml", action: "overwritten" }),
      expect.objectContaining({ path: "film/manifest.schema.json", action: "unchanged" }),
      expect.objectContaining({ path: "film/.gitignore", action: "unchanged" }),
    ]);
    expect(answer.next.map((s: { command: string }) => s.command)).toContain(
      "clapper run film/storyboard.yaml --sandbox",
    );
    expect(await read("film", "storyboard.yaml")).toMatch(/^name: film\b/m);
  });
});

describe("clapper init beside what is there", () => {
  it("keeps a .gitignore's lines and adds only the missing ones", async () => {
    await mkdir(join(dir.path, "kept"));
    const mine = "node_modules/\n/output\n*.log";
    await writeFile(join(dir.path, "kept", ".gitignore"), mine);
    const ran = await clapper(["init", "--json"], { cwd: join(dir.path, "kept") });
    expect(ran.code, ran.stderr).toBe(0);
    expect(oneJson(ran).files).toContainEqual(
      expect.objectContaining({ path: ".gitignore", action: "appended" }),
    );
    const after = await read("kept", ".gitignore");
    expect(after.startsWith(`${mine}\n`)).toBe(true);
    expect(after.slice(mine.length).split("\n")).toContain(".clapper/");
    // `/output` keeps output/ out already.
    expect(after.slice(mine.length)).not.toContain("output/");
    expect(parse(await read("kept", "storyboard.yaml")).name).toBe("kept");
  });

  it("refuses a schema file of other text without --force, writing nothing", async () => {
    await mkdir(join(dir.path, "old"));
    await writeFile(join(dir.path, "old", "manifest.schema.json"), "{}\n");
    const ran = await init("old");
    expect(ran.code).toBe(2);
    expect(ran.stderr).toContain("old/manifest.schema.json already exists");
    await expect(stat(join(dir.path, "old", "storyboard.yaml"))).rejects.toThrow();
    await expect(stat(join(dir.path, "old", ".gitignore"))).rejects.toThrow();
    const forced = await init("old", "--force");
    expect(forced.code, forced.stderr).toBe(0);
    expect(await read("old", "manifest.schema.json")).toBe(shipped);
  });

  it("refuses a DIR that is a file", async () => {
    await writeFile(join(dir.path, "plain"), "");
    const ran = await init("plain");
    expect(ran.code).toBe(2);
    expect(ran.stderr).toContain("plain is not a folder");
  });
});

describe("clapper schema", () => {
  it("prints exactly the shipped schema/manifest.schema.json", async () => {
    const ran = await clapper(["schema"]);
    expect(ran.code, ran.stderr).toBe(0);
    expect(ran.stdout).toBe(shipped);
    const json = await clapper(["schema", "--json"]);
    expect(oneJson(json)).toEqual(JSON.parse(shipped));
  });
});
