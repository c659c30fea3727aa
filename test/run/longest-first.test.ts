// The order jobs take their turns: by their nominal time across both services, so a long shot is
// not created after a queue of short lines, and a very long line goes before a short shot.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { nominalMs } from "../../src/run/jobs.js";
import { plan } from "../../src/run/plan.js";
import { longestFirst } from "../../src/run/stages/execute.js";
import { expectedSpeechMs, expectedVideoMs } from "../../src/tracking/durations.js";

const dirs: string[] = [];
afterAll(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

describe("longestFirst", () => {
  it("orders shots and lines together by nominal time, ties in manifest order", async () => {
    const dir = await mkdtemp(join(tmpdir(), "clapper-longest-"));
    dirs.push(dir);
    const manifest = join(dir, "m.yaml");
    const long = "word ".repeat(400).trim(); // 1,600 counted characters: about 27 s nominal
    await writeFile(
      manifest,
      [
        "name: m",
        "defaults:",
        '  line: { language: EN, voice: "preset:p1" }',
        "lines:",
        "  - { id: n1, text: Hello there. }",
        `  - { id: n2, text: "${long}" }`,
        "  - { id: n3, text: Hi. }",
        "shots:",
        "  - { id: short, prompt: x, model: vid-h3-lite, resolution: 480P, duration: 4 }",
        "  - { id: big, prompt: x, model: Vid-H3, resolution: 1080P, duration: 10 }",
        "  - { id: mid, prompt: x, model: Vid-H3, resolution: 768P, duration: 6 }",
        "",
      ].join("\n"),
    );
    const planned = await plan({ manifest, speechPrice: 1 });
    expect(planned.errors).toEqual([]);
    const ids = longestFirst(planned.jobs).map((j) => j.id);
    expect(ids).toEqual(["shot/big", "shot/mid", "shot/short", "line/n2", "line/n1", "line/n3"]);
    // The figures behind it: the services' stage times at a nominal pace.
    const byId = new Map(planned.jobs.map((j) => [j.id, nominalMs(j)]));
    expect(byId.get("shot/big")).toBe(
      expectedVideoMs({ model: "Vid-H3", resolution: "1080P", duration: 10 }),
    );
    expect(byId.get("line/n2")).toBe(expectedSpeechMs(long));
    expect(byId.get("shot/short") as number).toBeGreaterThan(byId.get("line/n2") as number);
  });
});
