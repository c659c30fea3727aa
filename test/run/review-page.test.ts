// report.html of a finished sandbox run, opened in headless Chromium over file:// from a copy of the
// run's folder (as if zipped and sent): every video and audio loads from its relative link with the
// length the job asked for, the filters show the right rows, nothing errs and nothing is fetched
// from anywhere but the folder. A screenshot is left in test-artifacts/ for people to look at.
import { cp, mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { expect } from "vitest";
import type { Report } from "../../src/report/model.js";
import { speechDurationMs } from "../../src/sandbox/media.js";
import { browserTest, launch, mediaStates, stills, visibleRows, watch } from "../helpers/browser.js";
import { cli, type Line, runIn, type Shot, setup } from "./helpers.js";

const SHOTS: Shot[] = [
  { id: "s01", prompt: "Wide shot: a lighthouse on a cliff at dusk", duration: 5 },
  { id: "s02", prompt: "Close-up: the lamp room, the lens turning", resolution: "480P", takes: 2 },
  { id: "s03", prompt: "The storm breaks the lamp [sandbox:fail] <img src=x onerror=alert(1)>" },
  { id: "s04", prompt: "The keeper climbs the stairs [sandbox:upscale-fail]", resolution: "1080P" },
];
const LINES: Line[] = [
  {
    id: "n01",
    shot: "s01",
    text: "Every night, the light came on at seven.",
    emotion_description: "wistful",
  },
  {
    id: "n02",
    shot: "s02",
    text: "And every night, someone was watching.",
    voice: "preset:en_male_deep",
    speed: 0.9,
  },
  { id: "n03", text: "Nobody knew who." },
];
/** Seconds each job's result lasts: the manifest's duration for videos (4 by default). */
const VIDEO_SECONDS: Record<string, number> = {
  "shot/s01": 5,
  "shot/s02/take-1": 4,
  "shot/s02/take-2": 4,
  "shot/s04": 4,
};

browserTest(
  "report.html plays every take and line from a moved copy of the run's folder, filters rows, stays offline",
  async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: SHOTS, lines: LINES });
    const first = await runIn(s, manifest);
    expect(first.outcome.report?.counts).toMatchObject({ total: 8, failed: 1 });
    // An edited line: regenerated in the second run, everything else reused (the failed shot stays failed).
    const edited = LINES.map((l) =>
      l.id === "n02" ? { ...l, text: "And every night, somebody was watching." } : l,
    );
    await w.manifest({ shots: SHOTS, lines: edited });
    const second = await runIn(s, manifest);
    const report = JSON.parse(await readFile(join(w.out(), "reports/report.json"), "utf8")) as Report;
    const status = Object.fromEntries(report.jobs.map((j) => [j.id, j.status]));
    expect(status).toEqual({
      "shot/s01": "skipped",
      "shot/s02/take-1": "skipped",
      "shot/s02/take-2": "skipped",
      "shot/s03": "failed",
      "shot/s04": "skipped",
      "line/n01": "skipped",
      "line/n02": "succeeded",
      "line/n03": "skipped",
    });
    expect(second.outcome.exitCode).toBe(1);

    // The folder, moved elsewhere: the page must not depend on where the run wrote it.
    const copy = join(w.dir, "elsewhere", "ep01");
    await mkdir(join(w.dir, "elsewhere"));
    await cp(w.out(), copy, { recursive: true });
    const context = await launch();
    const page = await context.newPage();
    const seen = watch(page);
    await page.goto(pathToFileURL(join(copy, "reports/report.html")).href);

    const media = await mediaStates(page);
    const current = media.filter((m) => m.version === "");
    const speechSeconds = (id: string) => {
      const line = edited.find((l) => `line/${l.id}` === id) as Line;
      return speechDurationMs(line.text, (line.speed as number | undefined) ?? 1) / 1000;
    };
    expect(current.map((m) => m.job).sort()).toEqual(
      report.jobs
        .filter((j) => j.output !== null)
        .map((j) => j.id)
        .sort(),
    );
    for (const m of current) {
      expect(m.src.startsWith(pathToFileURL(copy).href), `${m.job}: ${m.src}`).toBe(true);
      expect(m.readyState, `${m.job} did not load (error ${m.error}): ${m.src}`).toBeGreaterThanOrEqual(1);
      if (m.tag === "video") {
        expect(
          Math.abs(m.duration - (VIDEO_SECONDS[m.job] as number)),
          `${m.job}: ${m.duration} s`,
        ).toBeLessThanOrEqual(0.2);
      } else {
        // The WAV holds whole samples of the sandbox's length for the text and speed.
        expect(Math.abs(m.duration - speechSeconds(m.job)), `${m.job}: ${m.duration} s`).toBeLessThanOrEqual(
          0.05,
        );
      }
    }
    expect(current.filter((m) => m.tag === "video")).toHaveLength(4);
    // Kept versions (an edited row's earlier output) play too.
    for (const m of media) expect(m.readyState, `${m.version}: ${m.src}`).toBeGreaterThanOrEqual(1);

    // The grid: a still per stored take, decoded, and a placeholder for the failed one.
    expect(await stills(page)).toEqual([
      { job: "shot/s01", width: 320 },
      { job: "shot/s02/take-1", width: 320 },
      { job: "shot/s02/take-2", width: 320 },
      { job: "shot/s03", width: 0 },
      { job: "shot/s04", width: 320 },
    ]);
    expect(await page.locator('#grid .thumb[data-for="shot/s03"] .nostill').textContent()).toBe("no video");

    // Rows in the manifest's order; the line of no shot last.
    const all = ["s01", "s02", "s03", "s04", "line/n03"];
    expect(await visibleRows(page)).toEqual(all);
    const filter = async (name: string) => {
      await page.click(`nav.filters button[data-filter="${name}"]`);
      return visibleRows(page);
    };
    expect(await filter("failed")).toEqual(["s03"]);
    expect(await filter("generated")).toEqual(["s02"]);
    expect(await filter("reused")).toEqual(["s01", "s02", "s04", "line/n03"]);
    expect(await page.textContent("#shown")).toBe("4 of 5 rows");
    expect(await filter("all")).toEqual(all);

    // A tile opens its row's detail, alone; the back link returns to the grid.
    // The views change on the hash's change, an event after the click: waited for, not raced.
    await page.click('#grid .tile[data-key="s02"] a.open');
    await expect.poll(() => page.locator('article[data-shot="s02"]').isVisible()).toBe(true);
    expect(await page.locator('article[data-shot="s01"]').isVisible()).toBe(false);
    expect(await page.locator("#grid").isVisible()).toBe(false);
    expect(await page.locator('article[data-shot="s02"] video').count()).toBe(2);
    expect(await page.locator('article[data-shot="s02"] video').first().isVisible()).toBe(true);
    await page.click('article[data-shot="s02"] a.back');
    await expect.poll(() => page.locator("#grid").isVisible()).toBe(true);
    expect(await page.locator('article[data-shot="s02"]').isVisible()).toBe(false);

    // What a reviewer reads: the failure and its message as text, the resolution that was delivered.
    const s03 = page.locator('article[data-shot="s03"]');
    await expect.poll(() => s03.locator(".error").textContent()).toMatch(/\S/);
    expect(await s03.locator(".prompt").textContent()).toContain("<img src=x onerror=alert(1)>");
    expect(await page.locator('article[data-shot="s04"] .delivered').textContent()).toBe(
      "delivered 768P (asked 1080P)",
    );
    expect(await page.locator('article[data-shot="s02"] .take-no').allTextContents()).toEqual([
      "take 1 of 2",
      "take 2 of 2",
    ]);
    expect(await page.locator('article[data-shot="s02"] .line .text').textContent()).toBe(
      "And every night, somebody was watching.",
    );
    expect(await page.locator('article[data-shot="s01"] .line').textContent()).toContain("wistful");
    expect(await page.textContent("#run-status")).toBe("partial");

    // Each job's card shows the very status word report.json has for it, whatever the page says
    // beside it; a reused job shows what it cost in the run that made it. The grid shows every
    // job's word at a glance, the detail the same word beside the rest.
    const shown = await page.evaluate(() =>
      [...(globalThis as any).document.querySelectorAll("main .job[data-job]")].map((el: any) => ({
        job: String(el.dataset.job),
        word: String(el.querySelector(".badge")?.textContent ?? ""),
        points: String(
          [...el.querySelectorAll(".fact")].find((f: any) => f.textContent.startsWith("points"))
            ?.textContent ?? "",
        ),
      })),
    );
    expect(Object.fromEntries(shown.map((x) => [x.job, x.word]))).toEqual(status);
    const glance = await page.evaluate(() =>
      [...(globalThis as any).document.querySelectorAll("#grid [data-for]")].map((el: any) => ({
        job: String(el.dataset.for),
        word: String(el.querySelector(".badge")?.textContent ?? ""),
        visible: Boolean(el.querySelector(".badge")?.checkVisibility()),
      })),
    );
    expect(Object.fromEntries(glance.map((x) => [x.job, x.word]))).toEqual(status);
    expect(glance.every((x) => x.visible)).toBe(true);
    for (const j of report.jobs) {
      const card = shown.find((x) => x.job === j.id);
      expect(card?.points, j.id).toContain(`${j.spent_total} in all, ${j.points} this run`);
    }
    expect(report.jobs.find((j) => j.id === "shot/s01")).toMatchObject({ points: 0, spent_total: 50 });
    // The summary counts jobs in the same words; the filters say that they count rows.
    const stats = (await page.textContent(".stats")) ?? "";
    expect(stats).toContain("1 generated");
    expect(stats).toContain("6 reused");
    expect(stats).not.toContain("regenerated");
    expect(await page.textContent("nav.filters .label")).toBe("rows with:");

    await mkdir("test-artifacts", { recursive: true });
    await page.screenshot({ path: "test-artifacts/review-page.png", fullPage: true });

    expect(seen.problems).toEqual([]);
    const outside = seen.requests.filter((url) => !url.startsWith(pathToFileURL(copy).href));
    expect(outside, "requests that left the run's folder").toEqual([]);
    expect(seen.requests.length).toBeGreaterThan(media.length);
  },
);

browserTest(
  "each shard writes its own report.html, and the merge one over every job, all playing from their folders",
  async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: SHOTS.filter((x) => x.id !== "s04"), lines: LINES });
    for (const index of [1, 2]) {
      const ran = await runIn(s, manifest, { shard: { index, total: 2 } });
      expect(ran.outcome.reportUris).toContain(join(w.out(), `reports/shards/${index}-of-2/report.html`));
    }
    const merged = await cli(undefined, ["report", manifest, "--merge"]);
    // `report` exits 0 once it has written the reports, whatever the run became.
    expect(merged.code, merged.err).toBe(0);
    const context = await launch();
    const shown: string[][] = [];
    for (const folder of ["reports/shards/1-of-2", "reports/shards/2-of-2", "reports"]) {
      const page = await context.newPage();
      const seen = watch(page);
      await page.goto(pathToFileURL(join(w.out(), folder, "report.html")).href);
      const media = await mediaStates(page);
      for (const m of media) expect(m.readyState, `${folder}: ${m.job} (${m.src})`).toBeGreaterThanOrEqual(1);
      shown.push(media.map((m) => m.job));
      expect(seen.problems, folder).toEqual([]);
      await page.close();
    }
    const [one = [], two = [], all = []] = shown;
    // The shards split the jobs between them; the merged page shows them all.
    expect([...one, ...two].sort()).toEqual([...all].sort());
    expect(all.sort()).toEqual([
      "line/n01",
      "line/n02",
      "line/n03",
      "shot/s01",
      "shot/s02/take-1",
      "shot/s02/take-2",
    ]);
    expect(one.length).toBeGreaterThan(0);
    expect(two.length).toBeGreaterThan(0);
  },
);
