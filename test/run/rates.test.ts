// The request rate a run finds is kept beside its state (rates.json, per account: a hash, never the
// key) and the next run starts there: against the sandbox's limit of 5 requests/s per key, the
// first run finds it from 429s, the next one meets (almost) none.
import { readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cli,
  cliEnv,
  KEY,
  type LogEvent,
  type SandboxProcess,
  staleBuild,
  startSandbox,
  workspace,
} from "./harness.js";

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

/** 12 shots and 12 lines: about 40 requests, eight seconds at 5/s. */
function manifest(name: string): string {
  const rows = Array.from({ length: 12 }, (_, i) => i + 1);
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

const rateEvent = (events: readonly LogEvent[]) => events.find((e) => e.event === "rate");

describe("the request rate, remembered", () => {
  it("is found from 429s once, kept beside the state without the key, and used by the next run", {
    timeout: 90_000,
  }, async () => {
    const ws = await workspace("rates", { text: manifest("rates") });
    try {
      const args = ["run", ws.manifest, "--log-format", "json", "--poll-interval", "0.2"];
      const first = await cli(args, { cwd: ws.dir, env: cliEnv(sb) }).done;
      expect(first.code, first.messages.join("\n")).toBe(0);
      const found = rateEvent(first.events);
      expect(found?.limited as number).toBeGreaterThan(0);

      const path = join(dirname(ws.statePath), "rates.json");
      const text = await readFile(path, "utf8");
      expect(text).not.toContain(KEY);
      const kept = JSON.parse(text) as {
        accounts: Record<string, { key: { rps: number; settled: boolean } }>;
      };
      const [account, rates] = Object.entries(kept.accounts)[0] ?? [];
      expect(account).toMatch(/^[0-9a-f]{16}$/);
      expect(rates?.key.settled).toBe(true);
      expect(rates?.key.rps).toBeGreaterThanOrEqual(4);
      expect(rates?.key.rps).toBeLessThanOrEqual(5.25);

      // The same work again (a new generation): it starts at the kept rate.
      const second = await cli([...args, "--fresh"], { cwd: ws.dir, env: cliEnv(sb) }).done;
      expect(second.code, second.messages.join("\n")).toBe(0);
      const again = rateEvent(second.events);
      // It started at the kept rate, settled, rather than at the safe start of a new account...
      const start = second.events.find((e) => e.event === "rate-start") as
        | { rates?: { key?: { rps: number; settled: boolean } } }
        | undefined;
      expect(start?.rates?.key?.rps).toBe(rates?.key.rps);
      expect(start?.rates?.key?.settled).toBe(true);
      // ...and met a few 429s at most (the run's opening questions go together, into a bucket the
      // first run left part full). Not compared with the first run's: finding the rate cold now
      // takes 1-3 429s here too (a clean-clone run met 1 finding it and 3 after).
      expect(again?.limited as number).toBeLessThanOrEqual(4);
    } finally {
      await ws.remove();
    }
  });
});
