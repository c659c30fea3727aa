// Debian's Chromium, headless, driven by playwright-core: for the suites that open report.html as a
// person would. Without /usr/bin/chromium a suite skips on a developer's machine and says why; in
// CI (CI set) it never skips: `browserTest` fails instead.
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { it, onTestFinished } from "vitest";

export const CHROMIUM = "/usr/bin/chromium";
const missing = !existsSync(CHROMIUM);
const SKIP = missing && !process.env.CI;

/**
 * `it`, skipped (saying why in its name) when Chromium is missing outside CI; in CI a missing
 * Chromium fails the test.
 */
export function browserTest(name: string, fn: () => Promise<void>, timeout = 120_000): void {
  const title = SKIP ? `${name} (skipped: no ${CHROMIUM}; apt-get install chromium)` : name;
  it.skipIf(SKIP)(
    title,
    async () => {
      if (missing) throw new Error(`CI is set and ${CHROMIUM} is missing: apt-get install -y chromium`);
      await fn();
    },
    timeout,
  );
}

/** A fresh headless Chromium with its own profile, closed and removed when the test ends. */
export async function launch(): Promise<BrowserContext> {
  const profile = await mkdtemp(join(tmpdir(), "clapper-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
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
  onTestFinished(async () => {
    await context.close().catch(() => undefined);
    await rm(profile, { recursive: true, force: true });
  });
  return context;
}

/** What a page did that a person would not see: console errors, uncaught errors, every request. */
export function watch(page: Page) {
  const problems: string[] = [];
  const requests: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("request", (r) => requests.push(r.url()));
  page.on("requestfailed", (r) =>
    problems.push(`request failed: ${r.url()} ${r.failure()?.errorText ?? ""}`),
  );
  return { problems, requests };
}

export interface MediaState {
  job: string;
  /** A kept version's player: the version's uri (its job is then ""). */
  version: string;
  tag: string;
  src: string;
  readyState: number;
  duration: number;
  error: number | null;
}

// The functions below are sent to the page and run there, where `document` is (so they refer to
// nothing of this module); this project compiles without the DOM library, hence globalThis.
/**
 * Every `<video>` and `<audio>` of the page once each has its metadata (HAVE_METADATA) or an
 * error, or once `timeoutMs` has passed (then as they stand: the caller's checks say what failed).
 */
export async function mediaStates(page: Page, timeoutMs = 30_000): Promise<MediaState[]> {
  await page
    .waitForFunction(
      () =>
        [...(globalThis as any).document.querySelectorAll("video, audio")].every(
          (m: any) => m.readyState >= 1 || m.error,
        ),
      undefined,
      { timeout: timeoutMs },
    )
    .catch(() => undefined);
  return page.evaluate(() =>
    [...(globalThis as any).document.querySelectorAll("video, audio")].map((m: any) => ({
      job: String(m.dataset.job ?? ""),
      version: String(m.dataset.version ?? ""),
      tag: String(m.tagName).toLowerCase(),
      src: String(m.currentSrc || m.getAttribute("src") || ""),
      readyState: Number(m.readyState),
      duration: Number(m.duration),
      error: m.error ? Number(m.error.code) : null,
    })),
  );
}

/** The rows the grid shows now (its tiles): the shot's id, or the job's for a row of its own. */
export function visibleRows(page: Page): Promise<string[]> {
  return page.evaluate(() =>
    [...(globalThis as any).document.querySelectorAll("#grid .tile")]
      .filter((a: any) => a.checkVisibility())
      .map((a: any): string => a.dataset.key ?? "?"),
  );
}

/** Each still of the grid: the take's job and whether the image decoded (its natural width). */
export function stills(page: Page): Promise<Array<{ job: string; width: number }>> {
  return page.evaluate(() =>
    [...(globalThis as any).document.querySelectorAll("#grid .thumb")].map((f: any) => ({
      job: String(f.dataset.for ?? ""),
      width: Number(f.querySelector("img.still")?.naturalWidth ?? 0),
    })),
  );
}
