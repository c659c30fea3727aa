// A kept version picked through `clapper review` (issue 25): a shot's prompt edited and run again
// keeps its first outputs as `.v1`; the served page offers each kept version a pick control, the
// server writes a version's pick to picks.yaml as `{ take, version }` and refuses a version not kept.
// The server as its own process (dist/) over a real sandbox run; plain HTTP, no browser.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import { parsePicks } from "../../src/review/picks.js";
import { staleBuild } from "../run/harness.js";
import { runIn, setup } from "../run/helpers.js";
import { raw, serve } from "./serve.js";

const shots = (prompt: string) => [
  { id: "s01", prompt: "Wide shot: a lighthouse at dusk" },
  { id: "s02", prompt, takes: 2 },
];

it("clapper review saves a kept version's pick to picks.yaml and refuses one not kept", async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  const { s, w } = await setup();
  const manifest = await w.manifest({ shots: shots("Close-up: the lamp room") });
  expect((await runIn(s, manifest)).outcome.exitCode).toBe(0);
  await w.manifest({ shots: shots("Close-up: the lamp room, lit") });
  const again = await runIn(s, manifest);
  expect(again.outcome.exitCode).toBe(0);
  const take2 = again.outcome.report?.jobs.find((j) => j.id === "shot/s02/take-2");
  expect(take2?.versions?.[0]?.uri).toMatch(/\.v1\.mp4$/);
  const picksFile = join(w.dir, "picks.yaml");

  const { url, child, stderr } = await serve(manifest, w.dir);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  try {
    const html = (await raw(url, {})).body;
    const token = /<meta name="clapper-review-token" content="([^"]+)">/.exec(html)?.[1] ?? "";
    // One control per kept version, in the shot's radio group, beside the takes' own.
    const controls = [
      ...html.matchAll(
        /<input type="radio" name="pick-s02" data-shot="s02" value="(\d)" data-version="(\d+)"/g,
      ),
    ];
    expect(controls.map((m) => [m[1], m[2]])).toEqual([
      ["1", "1"],
      ["2", "1"],
    ]);
    const post = (body: object) =>
      raw(`${url}picks`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-clapper-token": token },
        body: JSON.stringify(body),
      });

    const saved = await post({ shot: "s02", take: 2, version: 1 });
    expect(saved.status, saved.body).toBe(200);
    expect(JSON.parse(saved.body)).toEqual({ shots: { s02: { take: 2, version: 1 } } });
    expect(parsePicks(await readFile(picksFile, "utf8"), picksFile)).toEqual({
      s02: { take: 2, version: 1 },
    });
    // Reloaded, the page shows that version picked.
    expect((await raw(url, {})).body).toMatch(/value="2" data-version="1" checked/);

    const missing = await post({ shot: "s02", take: 2, version: 2 });
    expect(missing.status).toBe(400);
    expect(JSON.parse(missing.body).error).toMatch(
      /version 2 of take 2 of shot s02 does not exist \(kept: 1\)/,
    );
    expect((await post({ shot: "s01", take: 1, version: 1 })).status).toBe(400);
    expect(parsePicks(await readFile(picksFile, "utf8"), picksFile)).toEqual({
      s02: { take: 2, version: 1 },
    });

    // Picking the take itself again: a plain number, as before versions.
    expect((await post({ shot: "s02", take: 1 })).status).toBe(200);
    expect(await readFile(picksFile, "utf8")).toContain("shots:\n  s02: 1\n");
  } finally {
    child.kill("SIGTERM");
  }
  expect(await exited, stderr()).toBe(0);
}, 60_000);
