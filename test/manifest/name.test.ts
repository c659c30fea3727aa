// Issue 9, item 17: `name` names folders and idempotency keys, so it is a safe slug checked before
// anything uses it. A NUL, a 300-character name, "../../x" and a bare CSV whose file name is no
// valid name each give one clean problem at file:line:field, and loading builds no path from it.
import { readdir } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { nameProblem } from "../../src/manifest/index.js";
import { type Workspace, workspace } from "./workspace.js";

let ws: Workspace;
beforeAll(async () => {
  ws = await workspace("clapper-name-");
});
afterAll(() => ws.remove());

const manifest = (name: string) => `name: ${name}\nshots:\n  - { id: s1, prompt: x }\n`;
const slug = "(it names folders and idempotency keys)";

describe("the run name", () => {
  it("accepts letters, digits, dots, dashes and underscores, up to 100 characters", async () => {
    for (const name of ["lighthouse-ep01", "a", "A.b_c-9", "x".repeat(100), "12"]) {
      const r = await ws.load({ "m.yaml": manifest(name) });
      expect(r.formatted, name).toEqual([]);
      expect(r.manifest?.name).toBe(name);
    }
  });

  it("refuses a NUL, a 300-character name, and path-like names, at the name's line", async () => {
    const cases: Array<[string, string]> = [
      ['"a\\0b"', `m.yaml:1: name: must not contain control characters, got "a\\u0000b" ${slug}`],
      ["x".repeat(300), `m.yaml:1: name: expected at most 100 characters, got 300 ${slug}`],
      [
        "../../x",
        `m.yaml:1: name: expected letters, digits, ".", "_" or "-", starting with a letter or digit, got "../../x" ${slug}`,
      ],
      [
        '"../../.."',
        'm.yaml:1: name: expected letters, digits, ".", "_" or "-", starting with a letter or digit, got "../../.."',
      ],
      ["a/b", 'got "a/b"'],
      ['"a\\\\b"', 'got "a\\\\b"'],
      ['".hidden"', 'got ".hidden"'],
      ['""', 'got ""'],
      ["[a]", 'm.yaml:1: name: expected a name (letters, digits, ".", "_" or "-"), got ["a"]'],
    ];
    for (const [written, expected] of cases) {
      const r = await ws.load({ "m.yaml": manifest(written) });
      expect(r.formatted, written).toEqual([expect.stringContaining(expected)]);
      // The rest of the manifest is still checked and expanded.
      expect(r.jobs.map((j) => j.id)).toEqual(["shot/s1"]);
    }
  });

  it("says to rename a bare CSV manifest whose file name is no valid name", async () => {
    const r = await ws.load({ "my shots!.csv": "kind,id,prompt\nshot,s1,x\n" });
    expect(r.formatted).toEqual([
      `my shots!.csv: name: the run is named after the file, and its name "my shots!" will not do: expected letters, digits, ".", "_" or "-", starting with a letter or digit, got "my shots!"; rename the file (a CSV manifest has no name: field)`,
    ]);
    const unnamed = await ws.load({ "-draft.yaml": "shots:\n  - { id: s1, prompt: x }\n" });
    expect(unnamed.formatted).toEqual([
      expect.stringMatching(/^-draft\.yaml: name: .*add a name: field, or rename the file$/),
    ]);
  });

  it("builds no folder from the name while loading", async () => {
    const dir = await ws.folder({ "sub/m.yaml": manifest("../../escaped") });
    const before = await readdir(ws.root, { recursive: true });
    const r = await ws.loadFrom(`${dir}/sub`, "m.yaml");
    expect(r.formatted).toHaveLength(1);
    expect(await readdir(ws.root, { recursive: true })).toEqual(before);
  });

  it("has one check, for every caller that builds paths from a name", () => {
    expect(nameProblem("ok-name")).toBeUndefined();
    expect(nameProblem("..")).toContain('got ".."');
    expect(nameProblem("a\nb")).toContain("control characters");
    expect(nameProblem("é".repeat(101))).toBe("expected at most 100 characters, got 101");
  });
});
