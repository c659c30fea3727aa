// report.html is written piece by piece (never joined into one string): the file must be the page
// byte for byte, whatever the characters and wherever the pieces fall between the writes.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { loadManifest } from "../../src/manifest/index.js";
import { outputKey } from "../../src/manifest/outputs.js";
import { countJobs, type Report, type ReportJob } from "../../src/report/model.js";
import { writeReports } from "../../src/report/writing.js";
import { renderReviewPage } from "../../src/review/page.js";
import { pageInput } from "../../src/review/page-input.js";
import { LocalSink } from "../../src/sinks/local.js";
import { type TempDir, tempDir } from "../fixtures/audio.js";

let dir: TempDir | undefined;
afterEach(async () => {
  await dir?.remove();
});

// Two bytes, three and four in UTF-8 (a surrogate pair in the string), and HTML to escape.
const WORDS = "é → 日本 😀 <b>&</b>";

it("writes report.html as the page renders, byte for byte, across many writes", async () => {
  dir = await tempDir("clapper-page-write-");
  const shots = Array.from(
    { length: 600 },
    (_, i) =>
      `  - { id: s${String(i).padStart(3, "0")}, prompt: "Shot ${i}: ${WORDS} ${"the keeper climbs ".repeat(8)}" }`,
  );
  const text = [
    "name: pages",
    "output: ./out",
    "defaults:",
    '  shot: { model: Vid-H3, resolution: 768P, duration: 4, ratio: "16:9" }',
    "shots:",
    ...shots,
  ].join("\n");
  const manifest = await dir.file("pages.yaml", `${text}\n`);
  const loaded = await loadManifest(manifest, { cwd: dir.path });
  expect(loaded.errors).toEqual([]);
  const sink = new LocalSink(join(dir.path, "out", "pages"));
  const rows: ReportJob[] = loaded.jobs.map((job, i) => ({
    id: job.id,
    kind: job.kind,
    status: i % 7 === 0 ? "failed" : "succeeded",
    task_id: `t-${job.id}`,
    attempts: 1,
    points: 40,
    estimated_points: 40,
    fingerprint: job.fingerprint,
    output: i % 7 === 0 ? null : { uri: sink.uri(outputKey(job)), bytes: 1000, sha256: "0".repeat(64) },
    error: i % 7 === 0 ? { code: "generation_failed", message: `failed: ${WORDS}` } : null,
    source: `pages.yaml:${job.line}`,
    elapsed_seconds: 12,
  }));
  const report: Report = {
    run: {
      name: "pages",
      manifest: "pages.yaml",
      status: "partial",
      started_at: "2026-11-28T14:03:00.000Z",
      finished_at: "2026-11-28T14:09:30.000Z",
      id: "run-pages",
    },
    points: { estimated: 24000, spent: 20000, balance_before: 50000, balance_after: 30000 },
    counts: countJobs(rows),
    jobs: rows,
  };
  const uris = await writeReports(sink, report, {}, { jobs: loaded.jobs, stills: false });
  const written = await readFile(uris.find((u) => u.endsWith("report.html")) as string);
  const { input } = await pageInput(sink, report, {
    jobs: loaded.jobs,
    folder: "reports",
    picksFile: undefined,
    signal: undefined,
    stills: false,
  });
  const expected = Buffer.from(renderReviewPage(input), "utf8");
  // Several of the 256 KB writes, so that pieces fall on both sides of their boundaries.
  expect(written.length).toBeGreaterThan(3 * 256 * 1024);
  expect(written.toString("utf8")).toContain("日本 😀");
  expect(written.equals(expected)).toBe(true);
});
