// Issue 9, item 6: every job writes its own output file. Two jobs naming one file (a shot with
// takes and a shot whose id spells one of its takes), or two files that differ only by case (one
// file on macOS and Windows), are a manifest error at the later row's id, naming both jobs.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Job } from "../../src/manifest/index.js";
import { outputKey } from "../../src/manifest/outputs.js";
import { type Workspace, workspace, yaml } from "./workspace.js";

let ws: Workspace;
beforeAll(async () => {
  ws = await workspace("clapper-outputs-");
});
afterAll(() => ws.remove());

describe("outputKey", () => {
  it("names shots/ID.mp4, shots/ID-take-N.mp4 and lines/ID.wav", () => {
    const video = { kind: "video", rowId: "s01" } as Job;
    const take = { kind: "video", rowId: "s01", take: 2 } as Job;
    const line = { kind: "speech", rowId: "n01" } as Job;
    expect([outputKey(video), outputKey(take), outputKey(line)]).toEqual([
      "shots/s01.mp4",
      "shots/s01-take-2.mp4",
      "lines/n01.wav",
    ]);
  });
});

describe("output collisions", () => {
  it("refuses a shot whose id spells a take of another shot, at the later row's id, naming both jobs and the file", async () => {
    const r = await ws.load({
      "m.yaml": yaml(
        "name: collide",
        "shots:",
        "  - id: s01",
        "    prompt: two takes",
        "    takes: 2",
        "  - prompt: the same file",
        "    id: s01-take-1",
      ),
    });
    expect(r.formatted).toEqual([
      "m.yaml:7: id: shot/s01-take-1 would write shots/s01-take-1.mp4, as shot/s01/take-1 (m.yaml:3) does: each job needs its own output file",
    ]);
    // The first writer keeps its jobs; the row that collides makes none.
    expect(r.jobs.map((j) => j.id)).toEqual(["shot/s01/take-1", "shot/s01/take-2"]);
  });

  it("refuses the collision in either order, and from CSV rows", async () => {
    const r = await ws.load({
      "m.yaml": yaml("name: collide", "shots: shots.csv"),
      "shots.csv": "id,prompt,takes\ns01-take-2,first,\nother,fine,\ns01,second,3\n",
    });
    expect(r.formatted).toEqual([
      "shots.csv:4: id: shot/s01/take-2 would write shots/s01-take-2.mp4, as shot/s01-take-2 (shots.csv:2) does: each job needs its own output file",
    ]);
    expect(r.jobs.map((j) => j.id)).toEqual(["shot/s01-take-2", "shot/other"]);
  });

  it("refuses ids that differ only by case: one file on case-insensitive file systems", async () => {
    const r = await ws.load({
      "m.yaml": yaml(
        "name: cases",
        "shots:",
        "  - { id: Harbour, prompt: one }",
        "  - { id: harbour, prompt: two }",
        "lines:",
        "  - { id: n01, text: hello, voice: preset:en_male_deep }",
        "  - { id: N01, text: again, voice: preset:en_male_deep }",
      ),
    });
    expect(r.formatted).toEqual([
      "m.yaml:4: id: shot/harbour would write shots/harbour.mp4, which differs only by case from shots/Harbour.mp4 of shot/Harbour (m.yaml:3): they are one file on case-insensitive file systems (macOS, Windows)",
      "m.yaml:7: id: line/N01 would write lines/N01.wav, which differs only by case from lines/n01.wav of line/n01 (m.yaml:6): they are one file on case-insensitive file systems (macOS, Windows)",
    ]);
    expect(r.jobs.map((j) => j.id)).toEqual(["shot/Harbour", "line/n01"]);
  });

  it("lets a shot and a line share an id (their files are in different folders)", async () => {
    const r = await ws.load({
      "m.yaml": yaml(
        "name: apart",
        "shots:",
        "  - { id: s01, prompt: one, takes: 2 }",
        "  - { id: s01-take, prompt: not a take }",
        "lines:",
        "  - { id: s01, text: hello, voice: preset:en_male_deep }",
      ),
    });
    expect(r.formatted).toEqual([]);
    expect(r.jobs.map((j) => outputKey(j))).toEqual([
      "shots/s01-take-1.mp4",
      "shots/s01-take-2.mp4",
      "shots/s01-take.mp4",
      "lines/s01.wav",
    ]);
  });
});
