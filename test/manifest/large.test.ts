// Issue 9, item 20: large inputs are read, or refused by a limit, never left to exhaust the stack or
// memory; and however many problems a file has, a bounded number is kept and printed, with a count
// of the rest.
import { truncate, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { formatProblems, KEPT_PROBLEMS, type Problem, Problems } from "../../src/manifest/problems.js";
import { MAX_COLUMNS } from "../../src/manifest/source.js";
import { type Workspace, workspace, yaml } from "./workspace.js";

let ws: Workspace;
beforeAll(async () => {
  ws = await workspace("clapper-large-");
});
afterAll(() => ws.remove());

async function plan(argv: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(["plan", ...argv, "--speech-price", "2"], {
    env: {},
    stdout: (t) => out.push(t),
    stderr: (t) => err.push(t),
  });
  return { code, out: out.join("\n"), err: err.join("\n") };
}

describe("large inputs", () => {
  it("plans a 200,000-row CSV of shots named by a YAML manifest", async () => {
    const rows = ["id,prompt"];
    for (let i = 0; i < 200_000; i++) rows.push(`s${i},a lighthouse at dusk number ${i}`);
    const dir = await ws.folder({
      "m.yaml": yaml(
        "name: big",
        "defaults:",
        "  shot: { resolution: 480P, duration: 4 }",
        "shots: rows.csv",
      ),
      "rows.csv": `${rows.join("\n")}\n`,
    });
    const started = Date.now();
    const r = await ws.loadFrom(dir, "m.yaml");
    expect(r.formatted).toEqual([]);
    expect(r.jobs).toHaveLength(200_000);
    expect(r.jobs[199_999]).toMatchObject({ id: "shot/s199999", file: "rows.csv", line: 200_001 });
    // The bench plans 10,000 richer rows in about a second; this is 20 times as many, and simpler.
    expect(Date.now() - started).toBeLessThan(45_000);
  }, 90_000);

  it("refuses a 100 MB single-line YAML manifest by its size, without reading it", async () => {
    const dir = await ws.folder();
    await writeFile(join(dir, "huge.yaml"), "name: huge\nvars: { a: ");
    await truncate(join(dir, "huge.yaml"), 100 * 1024 * 1024);
    const started = Date.now();
    const r = await ws.loadFrom(dir, "huge.yaml");
    expect(r.formatted).toEqual(["huge.yaml: over the 8 MiB limit for a manifest (got 104857600 bytes)"]);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it("reads a CSV of up to 1,000 columns, and reports one with a million as one error", async () => {
    const head = ["id", "prompt"];
    for (let i = head.length; i < MAX_COLUMNS; i++) head.push(`vars.v${i}`);
    const ok = await ws.load({
      "m.yaml": yaml("name: wide", "shots: wide.csv"),
      "wide.csv": `${head.join(",")}\ns1,x\n`,
    });
    expect(ok.formatted).toEqual([]);
    const columns = Array.from({ length: 1_000_000 }, (_, i) => `c${i}`);
    const r = await ws.load({
      "m.yaml": yaml("name: wide", "shots: wide.csv"),
      "wide.csv": `${columns.join(",")}\n${columns.join(",")}\n`,
    });
    expect(r.formatted).toEqual([
      "wide.csv:1: expected at most 1000 columns, got 1000000 (is this a CSV file of shots?)",
    ]);
  }, 30_000);
});

describe("a bounded number of problems", () => {
  it("keeps the first 1,000 errors and warnings and counts the rest, repeats aside", () => {
    const problems = new Problems();
    for (let i = 1; i <= 5000; i++) problems.error("x.csv", i, "duration", "expected an integer, got 5.5");
    for (let i = 1; i <= 3; i++) problems.warn("x.csv", i, "ratio", "adaptive with no image");
    // A repeat (a default inherited by every row) is one problem, even past the limit.
    for (let i = 0; i < 100; i++) problems.error("x.yaml", 4, "resolution", "wrong default");
    expect(problems.errors).toHaveLength(KEPT_PROBLEMS);
    expect(problems.warnings).toHaveLength(3);
    expect(problems.omitted).toEqual({ errors: 4001, warnings: 0 });
    expect(problems.errorCount).toBe(5100);
  });

  it("formats the first 50 and a line for the rest", () => {
    const list: Problem[] = Array.from({ length: 120 }, (_, i) => ({
      severity: "error",
      file: "x.csv",
      line: i + 2,
      field: "duration",
      message: "expected an integer, got 5.5",
    }));
    const lines = formatProblems(list, { omitted: 880 });
    expect(lines).toHaveLength(51);
    expect(lines[0]).toBe("x.csv:2: duration: expected an integer, got 5.5");
    expect(lines[50]).toBe("… and 950 more errors");
    expect(formatProblems(list.slice(0, 3))).toHaveLength(3);
    expect(formatProblems(list.slice(0, 51))[50]).toBe("… and 1 more error");
  });

  it("plan prints the first 50 errors and the count of the rest; --json lists the kept ones and the total", async () => {
    const rows = ["id,prompt,duration"];
    for (let i = 0; i < 3000; i++) rows.push(`s${i},x,${40 + (i % 50)}`);
    const dir = await ws.folder({
      "m.yaml": yaml("name: broken", "shots: rows.csv"),
      "rows.csv": `${rows.join("\n")}\n`,
    });
    const human = await plan([join(dir, "m.yaml")]);
    expect(human.code).toBe(2);
    const lines = human.err.split("\n");
    expect(lines[0]).toBe("3000 errors:");
    expect(lines.filter((l) => l.includes("duration: expected an integer from 4 to 30"))).toHaveLength(50);
    expect(lines).toContain("  … and 2950 more errors");
    const json = await plan([join(dir, "m.yaml"), "--json"]);
    const printed = JSON.parse(json.out) as { errors: string[]; error_count: number; warning_count: number };
    expect(printed.errors).toHaveLength(KEPT_PROBLEMS);
    expect(printed.error_count).toBe(3000);
    expect(printed.warning_count).toBe(0);
  }, 30_000);
});
