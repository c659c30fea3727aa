// `clapper review` as its own process (the dist/ build) over a real sandbox run's outputs: the
// page it serves in headless Chromium, a pick clicked there written to picks.yaml and shown
// picked after a reload, media served with byte ranges, and the guards: a pick without the
// page's token, or addressed to another host name, is refused and writes nothing. SIGTERM ends it
// cleanly (exit 0).
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { expect } from "vitest";
import { parsePicks } from "../../src/review/picks.js";
import { browserTest, launch, mediaStates, watch } from "../helpers/browser.js";
import { cli, runIn, setup } from "../run/helpers.js";
import { raw, serve } from "./serve.js";

browserTest(
  "clapper review serves the page, saves a clicked pick to picks.yaml, and refuses forged picks",
  async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: [
        { id: "s01", prompt: "Wide shot: a lighthouse at dusk" },
        { id: "s02", prompt: "Close-up: the lamp room", takes: 2 },
      ],
      lines: [{ id: "n01", shot: "s01", text: "Every night, the light came on." }],
    });
    const ran = await runIn(s, manifest);
    expect(ran.outcome.report?.counts.succeeded).toBe(4);
    const picksFile = join(w.dir, "picks.yaml");

    const { url, child, stderr } = await serve(manifest, w.dir);
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
      const port = new URL(url).port;

      const context = await launch();
      const page = await context.newPage();
      const seen = watch(page);
      await page.goto(url);
      // The players load through the server (with ranges), the stills are in the page.
      const media = await mediaStates(page);
      expect(media.map((m) => m.job).sort()).toEqual([
        "line/n01",
        "shot/s01",
        "shot/s02/take-1",
        "shot/s02/take-2",
      ]);
      for (const m of media) expect(m.readyState, `${m.job}: ${m.src}`).toBeGreaterThanOrEqual(1);
      const widths = await page.$$eval("#grid img.still", (imgs) =>
        imgs.map((i: any) => Number(i.naturalWidth)),
      );
      expect(widths).toEqual([320, 320, 320]);

      await page.check('#grid input[data-shot="s02"][value="2"]');
      await expect.poll(() => page.textContent("#picks-status")).toContain("saved to picks.yaml");
      expect(parsePicks(await readFile(picksFile, "utf8"), picksFile)).toEqual({ s02: { take: 2 } });
      expect(await readFile(picksFile, "utf8")).toContain("shots:\n  s02: 2\n");

      await page.reload();
      expect(await page.isChecked('#grid input[data-shot="s02"][value="2"]')).toBe(true);
      expect(await page.isChecked('#grid input[data-shot="s02"][value="1"]')).toBe(false);
      expect(await page.locator('#grid .thumb[data-take="2"][data-picked]').count()).toBe(1);
      expect(await page.textContent("#picks-status")).toBe("1 shot picked");
      expect(seen.problems).toEqual([]);
      expect(seen.requests.filter((r) => !r.startsWith(url))).toEqual([]);

      // Forged picks: no token, a wrong token, or a foreign Host (DNS rebinding) are refused.
      const token =
        /<meta name="clapper-review-token" content="([^"]+)">/.exec((await raw(url, {})).body)?.[1] ?? "";
      expect(token.length).toBeGreaterThanOrEqual(32);
      const before = await stat(picksFile);
      const post = (headers: Record<string, string>) =>
        raw(`${url}picks`, {
          method: "POST",
          headers: { "content-type": "application/json", ...headers },
          body: JSON.stringify({ shot: "s02", take: 1 }),
        });
      expect((await post({})).status).toBe(403);
      // One character changed (never to the one it was: a token ends in "x" once in 64).
      const forged = `${token.slice(0, -1)}${token.endsWith("x") ? "y" : "x"}`;
      expect(forged).not.toBe(token);
      expect((await post({ "x-clapper-token": forged })).status).toBe(403);
      expect((await post({ "x-clapper-token": token, host: `evil.example:${port}` })).status).toBe(403);
      expect((await post({ "x-clapper-token": token, host: "127.0.0.1" })).status).toBe(403);
      // The page itself is not handed to a foreign Host either (it holds the token).
      expect((await raw(url, { headers: { host: `rebind.example:${port}` } })).status).toBe(403);
      // Unknown shots and takes, and oversized bodies, are refused too.
      const bad = (body: string) =>
        raw(`${url}picks`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-clapper-token": token },
          body,
        });
      expect((await bad(JSON.stringify({ shot: "s02", take: 3 }))).status).toBe(400);
      expect((await bad(JSON.stringify({ shot: "s09", take: 1 }))).status).toBe(400);
      expect((await bad(JSON.stringify({ shot: "s02", take: 1, pad: "x".repeat(10_000) }))).status).toBe(413);
      const after = await stat(picksFile);
      expect(after.mtimeMs).toBe(before.mtimeMs);
      expect(parsePicks(await readFile(picksFile, "utf8"), picksFile)).toEqual({ s02: { take: 2 } });

      // Byte ranges, as players seek; and nothing outside the review's files.
      const range = await raw(`${url}media/shots/s01.mp4`, { headers: { range: "bytes=0-99" } });
      expect(range.status).toBe(206);
      expect(range.headers["content-range"]).toMatch(/^bytes 0-99\/\d+$/);
      expect((await raw(`${url}media/reports/report.json`, {})).status).toBe(404);
      expect((await raw(`${url}media/..%2F..%2Fmanifest.yaml`, {})).status).toBe(404);
    } finally {
      child.kill("SIGTERM");
    }
    expect(await exited, stderr()).toBe(0);

    // The pick made in the page is the take the episode is cut from.
    const assembled = await cli(undefined, ["assemble", manifest, "--json"], {}, "silent");
    expect(assembled.code, assembled.err).toBe(0);
    const episode = JSON.parse(assembled.out) as {
      takes: Array<{ shot: string; take: number; source: string }>;
      shots: Array<{ job: string; sha256: string; uri: string }>;
    };
    expect(episode.takes).toContainEqual({ shot: "s02", take: 2, source: "pick" });
    expect(episode.shots.map((x) => x.job)).toEqual(["shot/s01", "shot/s02/take-2"]);
    const take2 = ran.outcome.report?.jobs.find((j) => j.id === "shot/s02/take-2");
    expect(episode.shots[1]?.sha256).toBe(take2?.output?.sha256);
  },
);
