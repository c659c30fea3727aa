import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PicksError, parsePicks, picksPath, readPicks, writePicks } from "../../src/review/picks.js";
import { tempDir } from "../helpers/temp.js";

describe("picks.yaml", () => {
  it("lives beside the manifest", () => {
    expect(picksPath("/p/jobs/ep1.yaml")).toBe("/p/jobs/picks.yaml");
  });

  it("round-trips through write and read, and a missing file is no picks", async () => {
    const dir = await tempDir("picks-");
    const file = join(dir, "picks.yaml");
    expect(await readPicks(file)).toEqual({});
    await writePicks(file, { s02: { take: 2 }, s10: { take: 1 } });
    expect(await readPicks(file)).toEqual({ s02: { take: 2 }, s10: { take: 1 } });
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
    [
      "shots:\n  s01: 1\n  s02:\n    take: 2\n    version: 0\n",
      5,
      "shots.s02.version",
      "expected a kept version's number",
    ],
    ["shots:\n  s02: { take: x, version: 1 }\n", 2, "shots.s02.take", 'got "x"'],
    ["shots:\n  s02:\n    take: 1\n    versoin: 1\n", 4, "shots.s02.versoin", "unknown field"],
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

  it("reads a kept version's pick beside plain take numbers; take defaults to 1", () => {
    const text = "shots:\n  s01: 2\n  s02: { take: 2, version: 1 }\n  s03:\n    version: 3\n";
    expect(parsePicks(text, "p")).toEqual({
      s01: { take: 2 },
      s02: { take: 2, version: 1 },
      s03: { take: 1, version: 3 },
    });
  });

  it("tells a version the check refuses at its own line and field", () => {
    const check = (_shot: string, pick: { take: number; version?: number }) =>
      pick.version === 4
        ? { message: "version 4 of take 1 of shot s02 does not exist", at: "version" as const }
        : undefined;
    let caught: unknown;
    try {
      parsePicks("shots:\n  s01: 1\n  s02:\n    take: 1\n    version: 4\n", "picks.yaml", check);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(PicksError);
    expect([(caught as PicksError).line, (caught as PicksError).field]).toEqual([5, "shots.s02.version"]);
  });

  it("writes a plain take number when no version is picked, a mapping when one is", async () => {
    const dir = await tempDir("picks-");
    const file = join(dir, "picks.yaml");
    await writePicks(file, { s01: { take: 2 }, s02: { take: 1, version: 2 } });
    const text = await readFile(file, "utf8");
    expect(text).toContain("  s01: 2\n");
    expect(text).not.toContain("s01:\n");
    expect(await readPicks(file)).toEqual({ s01: { take: 2 }, s02: { take: 1, version: 2 } });
  });

  it("an empty file or empty shots is no picks", () => {
    expect(parsePicks("", "p")).toEqual({});
    expect(parsePicks("shots:\n", "p")).toEqual({});
  });

  it("refuses a file too large to be picks", async () => {
    const dir = await tempDir("picks-");
    const file = join(dir, "picks.yaml");
    await writeFile(file, `# ${"x".repeat(1024 * 1024)}\n`);
    await expect(readPicks(file)).rejects.toThrow(/larger than/);
  });
});
