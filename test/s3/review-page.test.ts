// report.html of a run whose output is S3 (s3rver on loopback): stored beside the other reports,
// its media linked by presigned GETs for the right keys, valid 7 days (SigV4's longest), with the
// expiry stated on the page; and in Chromium every player loads from the store through its link.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, expect } from "vitest";
import type { Report } from "../../src/report/model.js";
import { browserTest, launch, mediaStates, watch } from "../helpers/browser.js";
import { runIn, setup } from "../run/helpers.js";
import { type Store, startStore } from "./helpers.js";

let store: Store;
beforeAll(async () => {
  store = await startStore();
});
afterAll(async () => {
  await store?.close();
});

const WEEK = 7 * 24 * 3600;

/** The `src` of every player of the page, unescaped as the browser reads them. */
function sources(html: string): Array<{ job: string; src: string }> {
  return [...html.matchAll(/<(?:video|audio) [^>]*data-job="([^"]*)" src="([^"]*)"/g)].map((m) => ({
    job: m[1] ?? "",
    src: (m[2] ?? "").replaceAll("&amp;", "&"),
  }));
}

browserTest(
  "report.html in S3 links each output by a presigned GET valid 7 days, and plays from the store",
  async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      name: "ep01",
      shots: [
        { id: "s01", prompt: "A lighthouse at dusk", takes: 2 },
        { id: "s02", prompt: "The lamp fails [sandbox:fail]" },
      ],
      lines: [{ id: "n01", shot: "s01", text: "Every night, the light came on at seven." }],
    });
    const before = Date.now();
    const { outcome, logs } = await runIn(s, manifest, {
      output: "s3://clapper-out/runs/",
      s3: { endpoint: store.endpoint },
    });
    const after = Date.now();
    expect(outcome.exitCode, logs.text()).toBe(1);
    const prefix = "runs/ep01";
    expect(outcome.reportUris).toContain(`s3://clapper-out/${prefix}/reports/report.html`);
    const stored = await store.object(`${prefix}/reports/report.html`);
    expect(stored?.contentType).toBe("text/html; charset=utf-8");
    const html = stored?.text ?? "";
    const report = JSON.parse((await store.object(`${prefix}/reports/report.json`))?.text ?? "{}") as Report;

    const links = sources(html);
    const withOutput = report.jobs.filter((j) => j.output !== null);
    expect(links.map((l) => l.job).sort()).toEqual(withOutput.map((j) => j.id).sort());
    expect(withOutput).toHaveLength(3);
    for (const { job, src } of links) {
      const url = new URL(src);
      const uri = report.jobs.find((j) => j.id === job)?.output?.uri ?? "";
      // Path-style against s3rver: /bucket/key, the key of the object report.json names.
      expect(`s3://${url.pathname.slice(1)}`, job).toBe(uri);
      expect(`${url.protocol}//${url.host}`).toBe(store.endpoint);
      expect(url.searchParams.get("X-Amz-Expires")).toBe(String(WEEK));
      expect(url.searchParams.get("X-Amz-Signature")).toMatch(/^[0-9a-f]{64}$/);
      expect(url.searchParams.get("X-Amz-Credential")).toMatch(/^S3RVER\//);
    }
    // The page says until when the links work: 7 days from when they were signed.
    const expiry = /id="links-expire">[^<]*<time datetime="([^"]+)"/.exec(html)?.[1] ?? "";
    expect(Date.parse(expiry)).toBeGreaterThanOrEqual(before + WEEK * 1000);
    expect(Date.parse(expiry)).toBeLessThanOrEqual(after + WEEK * 1000);
    expect(html).toMatch(/id="links-expire">Media links are presigned and work until/);

    // Opened from a local copy (as a person who downloaded it): every player loads through its link.
    const file = join(w.dir, "report.html");
    await writeFile(file, html);
    const context = await launch();
    const page = await context.newPage();
    const seen = watch(page);
    await page.goto(pathToFileURL(file).href);
    const media = await mediaStates(page);
    expect(media).toHaveLength(3);
    for (const m of media) {
      expect(m.readyState, `${m.job} did not load from the store (error ${m.error})`).toBeGreaterThanOrEqual(
        1,
      );
      expect(m.duration).toBeGreaterThan(0);
    }
    expect(seen.problems).toEqual([]);
    // The store answered presigned GETs for the three outputs, and nothing else was fetched.
    expect(seen.requests.filter((u) => !u.startsWith("file://") && !u.startsWith(store.endpoint))).toEqual(
      [],
    );
    const gets = store.requests.filter(
      (r) => r.method === "GET" && r.presigned && r.path.startsWith(`/clapper-out/${prefix}/`),
    );
    expect(new Set(gets.map((r) => r.path)).size).toBe(3);
    expect(gets.every((r) => r.status === 200 || r.status === 206)).toBe(true);
  },
);
