// A create that reached the service but whose answer never reached the journal (the process was
// killed, or interrupted, while the request was on the wire), and then the row was edited or
// removed from the manifest. The task exists and is paid for; the next run no longer has the
// row's request to send again as it would for an unchanged row. Found by the kill loop
// (kill-edited-9-s3, seed 873357779: 144 points reported, 147 gone, n03's 3 points missing;
// caught again as kill-edited-4-r3, seed 1962287986: 104 reported, 144 gone, s02's first 40).
import { describe, expect, it, onTestFinished } from "vitest";
import type { Sandbox } from "../../src/sandbox/index.js";
import type { RunRecord } from "../../src/state/run-state.js";
import { proxy } from "../fixtures/servers.js";
import { created, job, posts, runIn, setup } from "./helpers.js";

const lines = [
  { id: "n01", text: "Every night, the light came on at seven." },
  { id: "n03", text: "The sea was calm." },
];

/**
 * Runs `manifest` through a proxy that lets n03's create reach the sandbox and then holds its
 * answer until the run is interrupted: the task exists, the journal has only its intent.
 */
async function interruptedOnTheWire(s: Sandbox, manifest: string) {
  const stop = new AbortController();
  let held = 0;
  const forwarder = await proxy(
    s.url,
    () => undefined,
    async (hit) => {
      if (hit.method === "POST" && hit.url === "/audio/v1/speech/jobs" && hit.body.includes("sea was calm")) {
        held += 1;
        stop.abort(new Error("test: interrupt with a create on the wire"));
        // The answer is never read: the run has stopped waiting for it.
        await new Promise((r) => setTimeout(r, 3000));
      }
    },
  );
  onTestFinished(() => forwarder.close());
  const { outcome } = await runIn({ ...s, url: forwarder.url } as Sandbox, manifest, {
    signal: stop.signal,
    allowPrivateUrls: true,
  });
  expect(held).toBe(1);
  return outcome;
}

describe("a create on the wire when the run stopped, then its row changed", () => {
  for (const change of ["removed", "edited"] as const) {
    it(`the ${change} row's task is found, followed and paid in the report`, async () => {
      const { s, w } = await setup();
      const manifest = await w.manifest({ lines });
      const before = await s.settledTotal();
      const first = await interruptedOnTheWire(s, manifest);
      expect(first.exitCode).toBe(4);
      const journal = (await w.journal()) as RunRecord[];
      // The intent is there, its task id is not: the journal cannot tell whether the create arrived.
      expect(journal.some((r) => r.t === "intent" && r.id === "line/n03")).toBe(true);
      expect(journal.some((r) => r.t === "created" && r.id === "line/n03")).toBe(false);
      expect(created(await s.stats())).toBeGreaterThanOrEqual(1);

      await w.manifest({
        lines:
          change === "removed"
            ? lines.filter((l) => l.id !== "n03")
            : lines.map((l) => (l.id === "n03" ? { ...l, text: "The sea was calm, edited." } : l)),
      });
      const replaysBefore = (await s.stats()).idempotent_replays;
      const { outcome: second, logs } = await runIn(s, manifest);
      expect(second.exitCode).toBe(0);
      // Learned by sending the recorded create again with its key: the service returned its task
      // (n01's create, if its answer was lost to the interrupt too, is sent again and replayed).
      expect((await s.stats()).idempotent_replays - replaysBefore).toBeGreaterThanOrEqual(1);
      expect(logs.lines().some((l) => l.event === "orphan-learned")).toBe(true);
      const drop = before - (await s.settledTotal());
      // Every point that left the balance is in the report of the campaign.
      expect(second.report?.points.spent, JSON.stringify(second.report?.jobs, null, 1)).toBe(drop);
      // The old create's task is the one it made: not created again, and not forgotten.
      const records = (await w.journal()) as RunRecord[];
      const tasks = new Set(records.flatMap((r) => (r.t === "created" ? [r.task_id] : [])));
      expect(created(await s.stats())).toBe(tasks.size);
      // The old line cost 3 points (13 counted characters at 2 per 10), the edited one 4 (19).
      expect(job(second, "line/n03").points).toBe(change === "removed" ? 3 : 3 + 4);
    });
  }

  it("an intent whose create never left is settled at 0 without a create, once its row is removed", async () => {
    const { s, w } = await setup();
    const n03 = lines.filter((l) => l.id === "n03");
    const manifest = await w.manifest({ lines: n03 });
    const before = await s.settledTotal();
    const stop = new AbortController();
    // n03's create is stopped before it reaches the sandbox, and the run interrupted.
    const forwarder = await proxy(s.url, (_n, hit) => {
      if (hit.method !== "POST" || !hit.body.includes("sea was calm")) return undefined;
      stop.abort(new Error("test: interrupt"));
      return "before";
    });
    onTestFinished(() => forwarder.close());
    const first = (
      await runIn({ ...s, url: forwarder.url } as Sandbox, manifest, {
        signal: stop.signal,
        allowPrivateUrls: true,
      })
    ).outcome;
    expect(first.exitCode).toBe(4);
    // As if the process had been killed between the intent and its `sending` record.
    const kept = ((await w.journal()) as RunRecord[]).filter(
      (r) => !(r.t === "sending" && r.id === "line/n03"),
    );
    expect(kept.some((r) => r.t === "intent" && r.id === "line/n03" && r.announces)).toBe(true);
    await w.write(
      w.statePath().slice(w.dir.length + 1),
      `${kept.map((r) => JSON.stringify(r)).join("\n")}\n`,
    );
    await w.manifest({ lines: lines.filter((l) => l.id !== "n03") });
    const postsBefore = posts(await s.stats());
    expect(created(await s.stats())).toBe(0);
    const { outcome: second, logs } = await runIn(s, manifest);
    expect(second.exitCode).toBe(0);
    expect(logs.lines().some((l) => l.event === "never_sent")).toBe(true);
    // Nothing sent for the removed row (n01's create only); every point that left is reported.
    expect(posts(await s.stats()) - postsBefore).toBe(1);
    expect(created(await s.stats())).toBe(1);
    expect(second.report?.jobs.map((j) => j.id)).toEqual(["line/n01"]);
    expect(second.report?.points.spent).toBe(before - (await s.settledTotal()));
  });
});
