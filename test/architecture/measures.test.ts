// The architecture's limits (docs/architecture.md, "Rules the code keeps") hold on src/: Biome
// checks the functions' length and complexity on every lint; these are the rest, read by
// scripts/arch.mjs with a real parser.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

interface Measures {
  functionsOver: { where: string; name: string; lines: number }[];
  filesOver: { file: string; lines: number }[];
  kindBranches: string[];
  deadExports: string[];
}

const measures = JSON.parse(
  execFileSync(process.execPath, ["scripts/arch.mjs", "--json"], { cwd: ROOT, encoding: "utf8" }),
) as Measures;

describe("the architecture's measures on src/", () => {
  it("finds no function over 120 lines", () => {
    expect(measures.functionsOver).toEqual([]);
  });
  it("finds at most 4 files over 600 lines", () => {
    expect(measures.filesOver.length, JSON.stringify(measures.filesOver)).toBeLessThanOrEqual(4);
  });
  it("finds at most 10 places outside the services' homes that tell video from speech by a branch", () => {
    expect(measures.kindBranches.length, measures.kindBranches.join("\n")).toBeLessThanOrEqual(10);
  });
  it("finds no export that no other file imports", () => {
    expect(measures.deadExports).toEqual([]);
  });
  it("sees a long function, a long file, a kind branch and a dead export where there are some", () => {
    const dir = mkdtempSync(join(tmpdir(), "clapper-arch-"));
    try {
      mkdirSync(join(dir, "src", "run"), { recursive: true });
      const body = Array.from({ length: 130 }, (_, i) => `  const v${i} = ${i};`).join("\n");
      const filler = Array.from({ length: 600 }, () => "// filler").join("\n");
      const long = `export function long(kind: string): number {\n${body}\n  return kind === "video" ? 1 : 0;\n}\n`;
      writeFileSync(join(dir, "src", "run", "long.ts"), `${long}${filler}\n`);
      writeFileSync(
        join(dir, "src", "run", "user.ts"),
        'import { long } from "./long.js";\nlong("speech");\n',
      );
      writeFileSync(join(dir, "src", "run", "unused.ts"), "export const nobody = 1;\n");
      const m = JSON.parse(
        execFileSync(process.execPath, [join(ROOT, "scripts/arch.mjs"), "--json", "--root", dir], {
          encoding: "utf8",
        }),
      ) as Measures;
      expect(m.functionsOver.map((f) => f.name)).toEqual(["long"]);
      expect(m.filesOver.map((f) => f.file)).toEqual(["src/run/long.ts"]);
      expect(m.kindBranches).toEqual(["src/run/long.ts:132"]);
      expect(m.deadExports).toEqual(["src/run/unused.ts: nobody"]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
