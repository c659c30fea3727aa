// A service that asks for a wait no run can make: `Retry-After` in years (a quota, a misconfigured
// gateway, a hostile service). Every wait is bounded: the run ends on its own, says why, pays for
// nothing it did not make, and the next run does the rest.
import { describe, expect, it, onTestFinished } from "vitest";
import type { Sandbox } from "../../src/sandbox/index.js";
import { proxy } from "../fixtures/servers.js";
import { created, runIn, setup } from "./helpers.js";

const SHOTS = Array.from({ length: 4 }, (_, i) => ({ id: `s0${i + 1}`, prompt: `Shot ${i + 1}: the sea` }));

/** Forwards to the sandbox, but answers video creates after the first `pass` with a 429 and `retryAfter`. */
async function refusing(target: string, pass: number, retryAfter: string) {
  let creates = 0;
  let refused = 0;
  const server = await proxy(target, (_n, hit) => {
    if (hit.method !== "POST" || hit.url !== "/vid/v2/video_generation" || ++creates <= pass)
      return undefined;
    refused += 1;
    return {
      status: 429,
      json: { code: 429, message: "quota exceeded", request_id: `req_q${refused}` },
      headers: { "retry-after": retryAfter },
    };
  });
  onTestFinished(() => server.close());
  return { ...server, refused: () => refused };
}

describe("a Retry-After longer than any wait", () => {
  // (An HTTP date in 2999 parses to the same kind of wait: test/api/http.test.ts; the cap on the
  // pause is also checked alone, test/engine/rate.test.ts and test/coord/coordinator.test.ts.)
  it("about 3 years: the run ends by itself within the 30 s pause, the refused shots pending with the reason, and the next run makes them", async () => {
    const header = "99999999";
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: SHOTS });
    const before = await s.settledTotal();
    const quota = await refusing(s.url, 1, header);
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on("warning", onWarning);
    onTestFinished(() => void process.off("warning", onWarning));
    const started = Date.now();
    const cpu = process.cpuUsage();
    const { outcome } = await runIn({ ...s, url: quota.url } as Sandbox, manifest, {
      allowPrivateUrls: true,
      limits: { video: { rps: 50, inFlight: 4 }, speech: { rps: 50, inFlight: 4 } },
    });
    const took = Date.now() - started;
    const spent = process.cpuUsage(cpu);
    // Bounded: no request waits for the years asked, and nothing spins meanwhile (a timer of more
    // than 2^31 ms fires at once in Node, with a TimeoutOverflowWarning each time).
    expect(took).toBeLessThan(45_000);
    expect(warnings).not.toContain("TimeoutOverflowWarning");
    expect((spent.user + spent.system) / 1000).toBeLessThan(took * 0.5);
    expect(quota.refused()).toBeGreaterThanOrEqual(3);
    const report = outcome.report!;
    expect(outcome.exitCode).not.toBe(0);
    expect(report.counts).toMatchObject({ total: 4, succeeded: 1 });
    const refused = report.jobs.filter((j) => j.status !== "succeeded");
    expect(refused).toHaveLength(3);
    for (const j of refused) expect(j).toMatchObject({ status: "pending", points: 0 });
    // Why, in the report: the answer, the wait asked in words, and that the next run sends them again.
    expect(report.note).toMatch(/rate limited \(HTTP 429\)/);
    expect(report.note).toMatch(
      /asks to wait \d+ days \(Retry-After\), longer than the 30 s a request waits/,
    );
    expect(report.note).toMatch(/the next run sends them again with the same keys/);
    // Paid: the one task made, and the report says so.
    expect(created(await s.stats())).toBe(1);
    expect(report.points.spent).toBe(before - (await s.settledTotal()));

    // The quota lifted, the next run makes the other three, and only them.
    const rest = (await runIn(s, manifest)).outcome;
    expect(rest.exitCode).toBe(0);
    expect(rest.report!.counts).toMatchObject({ succeeded: 3, skipped: 1 });
    expect(created(await s.stats())).toBe(4);
    expect(report.points.spent + rest.report!.points.spent).toBe(before - (await s.settledTotal()));
  }, 90_000);
});
