#!/usr/bin/env node
// Takes the screenshot of the review page shown in the README (docs/review-page.png): the demo's
// report.html (`npm run demo` writes output/demo/reports/report.html) opened over file:// in
// headless Chromium, once every player has loaded its metadata.
//
//   node scripts/screenshot-review.mjs [REPORT_HTML] [PNG]
//
// Chromium: /usr/bin/chromium (Debian: apt-get install chromium), or CHROMIUM=/path/to/chrome.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { chromium } from "playwright-core";

const page = resolve(process.argv[2] ?? "output/demo/reports/report.html");
const png = resolve(process.argv[3] ?? "docs/review-page.png");
const profile = await mkdtemp(join(tmpdir(), "clapper-shot-"));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  headless: true,
  viewport: { width: 1280, height: 900 },
  args: [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
  ],
});
try {
  const tab = await context.newPage();
  await tab.goto(pathToFileURL(page).href);
  // The players show their first frame and length only once their metadata is in.
  await tab.waitForFunction(
    () => [...document.querySelectorAll("video, audio")].every((m) => m.readyState >= 1),
    undefined,
    { timeout: 30_000 },
  );
  // A frame in each player rather than a loading spinner: a short seek makes the browser decode one.
  await tab.evaluate(() =>
    Promise.all(
      [...document.querySelectorAll("video")].map(
        (v) =>
          new Promise((done) => {
            v.addEventListener("seeked", done, { once: true });
            setTimeout(done, 3_000);
            v.currentTime = 0.5;
          }),
      ),
    ),
  );
  await tab.screenshot({ path: png, fullPage: true });
  console.log(`wrote ${png}`);
} finally {
  await context.close();
  await rm(profile, { recursive: true, force: true });
}
