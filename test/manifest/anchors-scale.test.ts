// YAML anchors at scale: a manifest whose every row merges an anchor (`<<: *shot`) or names an
// alias (`voice: *narrator`) is read in one pass over its anchors. `yaml` left to itself walks the
// whole document again for each alias it resolves: 2,000 such rows took 10 s, 4,000 took 40 s.
// Positions are kept: a merged field is reported at the anchor's line, a row's own at its own.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type Workspace, workspace, yaml } from "./workspace.js";

let ws: Workspace;
beforeAll(async () => {
  ws = await workspace("clapper-anchors-scale-");
});
afterAll(() => ws.remove());

/** `shots` rows that merge `*shot` and `lines` rows whose voice is `*narrator`, from line 7 on. */
function manifest(shots: number, lines: number, broken: { shot?: number; line?: number } = {}): string {
  const out = [
    "name: anchors-scale",
    "x-narrator: &narrator preset:en_female_bright",
    "x-shot: &shot",
    "  resolution: 480P",
    "  duration: 4",
    "shots:",
  ];
  for (let i = 0; i < shots; i++) {
    out.push(`  - id: s${i}`, `    prompt: "shot number ${i}"`, "    <<: *shot");
    if (i === broken.shot) out.push("    takes: 99");
  }
  out.push("lines:");
  for (let i = 0; i < lines; i++) {
    out.push(`  - id: n${i}`, `    text: "line number ${i}"`, "    voice: *narrator", "    language: EN");
    if (i === broken.line) out.push("    speed: *narrator");
  }
  return yaml(...out);
}

describe("YAML anchors at scale", () => {
  it("reads 2,000 rows that merge an anchor or name an alias in a fraction of the time it took", async () => {
    const started = Date.now();
    const r = await ws.load({ "m.yaml": manifest(1000, 1000) });
    const elapsed = Date.now() - started;
    expect(r.formatted).toEqual([]);
    expect(r.jobs).toHaveLength(2000);
    expect(r.jobs[999]).toMatchObject({ id: "shot/s999", line: 7 + 999 * 3, tier: "480P", duration: 4 });
    expect(r.jobs[1999]).toMatchObject({ id: "line/n999", voice: { source: "preset" } });
    // About 0.3 s here; 10 s before the anchors were listed once.
    expect(elapsed).toBeLessThan(5_000);
  }, 60_000);

  it("keeps every position: a row's own field at its line, a merged one at the anchor's", async () => {
    const r = await ws.load({ "m.yaml": manifest(300, 300, { shot: 250, line: 120 }) });
    // shot s250 starts at line 7 + 250 * 3; its `takes` follows its merge key.
    const takesLine = 7 + 250 * 3 + 3;
    // The lines start after 300 shots, one extra line (takes) and `lines:`; n120 has 4 lines each.
    const speedLine = 7 + 300 * 3 + 1 + 1 + 120 * 4 + 4;
    expect(r.formatted).toEqual([
      `m.yaml:${takesLine}: takes: expected an integer from 1 to 20, got 99`,
      `m.yaml:${speedLine}: speed: expected a number, got "preset:en_female_bright"`,
    ]);
    expect(r.jobs).toHaveLength(598);
  });

  it("reports a merged field at the anchor that wrote it, and a merge of no anchor at its key", async () => {
    const r = await ws.load({
      "m.yaml": yaml(
        "name: merged",
        "x-shot: &shot",
        "  resolution: 480p",
        "shots:",
        "  - id: a",
        "    prompt: x",
        "    <<: *shot",
        "  - id: b",
        "    prompt: y",
        "    <<: *missing",
      ),
    });
    expect(r.formatted).toEqual([
      expect.stringMatching(/^m\.yaml:3: resolution: expected one of .*got "480p"/),
      "m.yaml:10: <<: expected an alias of a mapping (<<: *name)",
    ]);
  });
});
