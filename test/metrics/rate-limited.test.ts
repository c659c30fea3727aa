// Issue 26: requests, 429s and the request rate in the metrics, against a sandbox process that
// answers 429 above 5 requests a second: the run's counts are the sandbox's and the rate
// controller's, told by undici's diagnostics channels.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli, cliEnv, type SandboxProcess, staleBuild, startSandbox, workspace } from "../run/harness.js";
import { type Sample, samples, sampleValue } from "./exposition.js";

let sb: SandboxProcess;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  sb = await startSandbox(0.002);
  const res = await fetch(`${sb.url}/_sandbox/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ rate_limit_rps: 5 }),
  });
  expect(res.ok).toBe(true);
});

afterAll(async () => {
  await sb?.close();
});

/** 6 shots and 6 lines: about 20 requests, some seconds at 5/s, more than 5 in the first second. */
function manifest(name: string): string {
  const rows = Array.from({ length: 6 }, (_, i) => i + 1);
  return [
    `name: ${name}`,
    "output: ./output",
    "defaults:",
    '  shot: { model: Vid-H3, resolution: 480P, duration: 4, ratio: "16:9" }',
    '  line: { language: EN, voice: "preset:en_female_bright" }',
    "shots:",
    ...rows.map((i) => `  - { id: s${i}, prompt: "Shot ${i}: the harbour at dawn" }`),
    "lines:",
    ...rows.map((i) => `  - { id: n${i}, text: "Line ${i}: the boats come in." }`),
    "",
  ].join("\n");
}

const sum = (all: readonly Sample[], name: string, test: (s: Sample) => boolean = () => true) =>
  all.filter((s) => s.name === name && test(s)).reduce((n, s) => n + s.value, 0);

describe("requests and 429s in the metrics", () => {
  it("counts every API request by service and code, the 429s among them, and the rate the run settled at", {
    timeout: 60_000,
  }, async () => {
    const ws = await workspace("limited", { text: manifest("limited") });
    try {
      const before = await sb.stats();
      const file = join(ws.dir, "limited.prom");
      const r = await cli(
        ["run", ws.manifest, "--log-format", "json", "--poll-interval", "0.2", "--metrics-file", file],
        { cwd: ws.dir, env: cliEnv(sb) },
      ).done;
      expect(r.code, r.messages.join("\n")).toBe(0);
      const after = await sb.stats();
      const all = samples(await readFile(file, "utf8"));
      const limited = sum(all, "clapper_rate_limited_total");
      // The rate controller's own count, in the run's last rate line.
      const rate = r.events.find((e) => e.event === "rate") as { limited: number } | undefined;
      expect(limited).toBeGreaterThan(0);
      expect(limited).toBe(rate?.limited);
      expect(sum(all, "clapper_requests_total", (s) => s.labels.code === "429")).toBe(limited);
      // Every request the sandbox answered on its APIs (its routes by template: "POST /vid/v2/...";
      // not the result downloads, "GET /_media/..."), 429s included, is counted once.
      const api = (stats: Record<string, number>) =>
        Object.entries(stats)
          .filter(([route]) => / \/(vid|audio)\//.test(route))
          .reduce((n, [, v]) => n + v, 0);
      const answered = api(after.requests);
      const answeredBefore = api(before.requests);
      expect(sum(all, "clapper_requests_total")).toBe(answered - answeredBefore);
      expect(sum(all, "clapper_requests_total", (s) => s.labels.service === "speech")).toBeGreaterThanOrEqual(
        6,
      );
      expect(sum(all, "clapper_requests_total", (s) => s.labels.service === "video")).toBeGreaterThanOrEqual(
        6,
      );
      // One rate for the key (--rate-scope key): the same for both services, near the sandbox's 5/s.
      const video = sampleValue(all, "clapper_request_rate", { service: "video" }) ?? 0;
      expect(sampleValue(all, "clapper_request_rate", { service: "speech" })).toBe(video);
      expect(video).toBeGreaterThan(1);
      expect(video).toBeLessThan(10);
    } finally {
      await ws.remove();
    }
  });
});
