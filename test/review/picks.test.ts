import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PicksError, parsePicks, picksPath, readPicks, writePicks } from "../../src/review/picks.js";

describe("picks.yaml", () => {
  it("lives beside the manifest", () => {
    expect(picksPath("/p/jobs/ep1.yaml")).toBe("/p/jobs/picks.yaml");
  });

  it("round-trips through write and read, and a missing file is no picks", async () => {
    const dir = await mkdtemp(join(tmpdir(), "picks-"));
    const file = join(dir, "picks.yaml");
    expect(await readPicks(file)).toEqual({});
    await writePicks(file, { s02: 2, s10: 1 });
    expect(await readPicks(file)).toEqual({ s02: 2, s10: 1 });
    expect(await readFile(file, "utf8")).toContain("shots:\n  s02: 2\n  s10: 1\n");
  });

  it.each([
    ["shots:\n  s02: 0\n", 2, "shots.s02", "expected a take number"],
    ["shots:\n  s01: 1\n  s02: two\n", 3, "shots.s02", 'got "two"'],
    ["shots:\n  s02: 1.5\n", 2, "shots.s02", "got 1.5"],
    ["shot:\n  s02: 1\n", 1, "shot", "unknown field"],
    ["shots: [1, 2]\n", 1, "shots", "expected a mapping"],
    ["- 1\n", 1, "", "expected a mapping"],
    ["shots:\n  s02: 1\n  s02: 2\n", 3, "", "Map keys must be unique"],
  ])("refuses %j at its line and field", (text, line, field, message) => {
    let caught: unknown;
    try {
      parsePicks(text, "picks.yaml");
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(PicksError);
    const e = caught as PicksError;
    expect([e.file, e.line, e.field]).toEqual(["picks.yaml", line, field]);
    expect(e.message).toContain(message);
  });

  it("an empty file or empty shots is no picks", () => {
    expect(parsePicks("", "p")).toEqual({});
    expect(parsePicks("shots:\n", "p")).toEqual({});
  });

  it("refuses a file too large to be picks", async () => {
    const dir = await mkdtemp(join(tmpdir(), "picks-"));
    const file = join(dir, "picks.yaml");
    await writeFile(file, `# ${"x".repeat(1024 * 1024)}\n`);
    await expect(readPicks(file)).rejects.toThrow(/larger than/);
  });
});
