// report.html of a 40-shot run (10 shots of two takes, a line per shot) made by writeReports over
// real files: real MP4s and WAVs in a real output folder, stills made by the real ffmpeg. Opened
// over file:// in headless Chromium at 1400x1000: the grid fits in three window heights, every
// take's still decodes, and picks chosen there come back as the picks.yaml the download offers.
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterEach, expect } from "vitest";
import { type Job, loadManifest } from "../../src/manifest/index.js";
import { outputKey } from "../../src/manifest/outputs.js";
import { countJobs, type Report, type ReportJob } from "../../src/report/model.js";
import { writeReports } from "../../src/report/writing.js";
import { parsePicks } from "../../src/review/picks.js";
import { makeMp4, makeWav } from "../../src/sandbox/media.js";
import { LocalSink } from "../../src/sinks/local.js";
import { type TempDir, tempDir } from "../fixtures/audio.js";
import { browserTest, launch, stills, watch } from "../helpers/browser.js";

let dir: TempDir | undefined;
afterEach(async () => {
  await dir?.remove();
});

const SHOTS = 40;

/** A 40-shot manifest's run, stored: its output folder, report.html's path and the manifest's. */
async function fortyShots(): Promise<{ page: string; manifest: string; jobs: Job[] }> {
  dir = await tempDir("clapper-grid-");
  const shots: string[] = [];
  const lines: string[] = [];
  for (let i = 1; i <= SHOTS; i++) {
    const id = `s${String(i).padStart(2, "0")}`;
    shots.push(
      `  - { id: ${id}, prompt: "Shot ${i}: the keeper climbs the stairs"${i % 4 === 0 ? ", takes: 2" : ""} }`,
    );
    lines.push(
      `  - { id: n${String(i).padStart(2, "0")}, shot: ${id}, text: "Line ${i} of the narration." }`,
    );
  }
  const text = [
    "name: grid",
    "output: ./out",
    "defaults:",
    '  shot: { model: Vid-H3, resolution: 768P, duration: 4, ratio: "16:9" }',
    "  line: { language: EN, voice: preset:en_female_bright }",
    "shots:",
    ...shots,
    "lines:",
    ...lines,
  ].join("\n");
  const manifest = await dir.file("grid.yaml", `${text}\n`);
  const loaded = await loadManifest(manifest, { cwd: dir.path });
  expect(loaded.errors).toEqual([]);
  const root = join(dir.path, "out", "grid");
  const sink = new LocalSink(root);
  const video = await makeMp4(4, 640, 360);
  const audio = makeWav(1500);
  const rows: ReportJob[] = [];
  for (const job of loaded.jobs) {
    const key = outputKey(job);
    const bytes = job.kind === "video" ? video : audio;
    await mkdir(join(root, key, ".."), { recursive: true });
    await writeFile(join(root, key), bytes);
    rows.push({
      id: job.id,
      kind: job.kind,
      status: job.id === "shot/s08/take-2" ? "failed" : "succeeded",
      task_id: `t-${job.id}`,
      attempts: 1,
      points: job.kind === "video" ? 40 : 3,
      estimated_points: 40,
      fingerprint: job.fingerprint,
      output:
        job.id.endsWith("take-2") && job.id.includes("s08")
          ? null
          : { uri: sink.uri(key), bytes: bytes.length, sha256: `${job.id.length}`.padStart(64, "0") },
      error: job.id.endsWith("take-2") ? { code: "generation_failed", message: "the service failed" } : null,
      source: `grid.yaml:${job.line}`,
      elapsed_seconds: 12,
    });
  }
  const report: Report = {
    run: {
      name: "grid",
      manifest: "grid.yaml",
      status: "partial",
      started_at: "2026-11-28T14:03:00.000Z",
      finished_at: "2026-11-28T14:09:30.000Z",
      id: "run-grid",
    },
    points: { estimated: 2000, spent: 1700, balance_before: 5000, balance_after: 3300 },
    counts: countJobs(rows),
    jobs: rows,
  };
  await writeFile(join(dir.path, "picks.yaml"), "shots:\n  s04: 2\n");
  const uris = await writeReports(sink, report, {}, { jobs: loaded.jobs, manifestPath: manifest });
  return { page: uris.find((u) => u.endsWith("report.html")) as string, manifest, jobs: loaded.jobs };
}

browserTest(
  "a 40-shot run's grid fits in three window heights with a decoded still per take; picks chosen there download as picks.yaml",
  async () => {
    const { page: html } = await fortyShots();
    const context = await launch();
    const page = await context.newPage();
    await page.setViewportSize({ width: 1400, height: 1000 });
    const seen = watch(page);
    await page.goto(pathToFileURL(html).href);

    const height = await page.evaluate(() =>
      Number((globalThis as any).document.documentElement.scrollHeight),
    );
    expect(height, `${height} px`).toBeLessThanOrEqual(3000);
    console.log(`40-shot grid: ${height} px high at 1400x1000`);
    const shown = await stills(page);
    // Every take of every shot, each with its still but the one take stored without a video.
    expect(shown).toHaveLength(SHOTS + SHOTS / 4);
    const missing = shown.filter((s) => s.width === 0).map((s) => s.job);
    expect(missing).toEqual(["shot/s08/take-2"]);
    for (const s of shown.filter((x) => x.width > 0)) expect(s.width, s.job).toBe(320);
    expect(await page.locator('#grid .tile[data-key="s08"] .nostill').textContent()).toBe("no video");
    // picks.yaml's pick is shown on its shot.
    expect(await page.isChecked('#grid input[data-shot="s04"][value="2"]')).toBe(true);
    await mkdir("test-artifacts", { recursive: true });
    await page.screenshot({ path: "test-artifacts/review-grid-40.png" });

    // From a file, the choices made here become the picks.yaml to download.
    await page.check('#grid input[data-shot="s04"][value="1"]');
    // A take with no video is not offered.
    expect(await page.isDisabled('#grid input[data-shot="s08"][value="2"]')).toBe(true);
    await page.check('#grid input[data-shot="s12"][value="2"]');
    expect(await page.textContent("#picks-status")).toBe("2 shots picked");
    const [download] = await Promise.all([page.waitForEvent("download"), page.click("#picks-download")]);
    expect(download.suggestedFilename()).toBe("picks.yaml");
    const path = await download.path();
    const text = await readFile(path, "utf8");
    expect(parsePicks(text, "picks.yaml")).toEqual({ s04: { take: 1 }, s12: { take: 2 } });
    expect(text).toContain("shots:\n  s04: 1\n  s12: 2\n");

    // The detail of a shot: its prompt, its line, its takes' players; the failed take's error.
    await page.click('#grid .tile[data-key="s08"] a.open');
    const s08 = page.locator('article[data-shot="s08"]');
    // Shown on the hash's change, an event after the click: waited for, not raced.
    await expect.poll(() => s08.isVisible()).toBe(true);
    expect(await s08.locator(".prompt").textContent()).toBe("Shot 8: the keeper climbs the stairs");
    expect(await s08.locator(".line .text").textContent()).toBe("Line 8 of the narration.");
    expect(await s08.locator(".error").textContent()).toBe("generation_failed the service failed");
    expect(await s08.locator("video").count()).toBe(1);
    expect(await s08.locator(".nomedia").textContent()).toBe("no video");
    expect(await page.textContent(".meta")).toContain("started 28 Nov 2026, 14:03 UTC");
    expect(seen.problems).toEqual([]);
    const folder = pathToFileURL(join(html, "..", "..")).href;
    expect(seen.requests.filter((r) => !r.startsWith(folder))).toEqual([]);
  },
);
