// S3 at the edges (issue 9, item 12): a kill after an object was finished but before the run
// recorded it, a store shared by two states, and multipart uploads that will never be completed.
// s3rver on loopback is the store (with the multipart listing and abort it lacks added in helpers).
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { CreateMultipartUploadCommand, UploadPartCommand } from "@aws-sdk/client-s3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/sandbox/index.js";
import { hostileService } from "../fixtures/hostile.js";
import { created, job, runIn, setup, workspace } from "../run/helpers.js";
import { BUCKET, type Store, startStore } from "./helpers.js";

let store: Store;
beforeAll(async () => {
  store = await startStore();
});
afterAll(async () => {
  await store?.close();
});

const SHOTS = [
  { id: "s01", prompt: "A lighthouse at dusk" },
  { id: "s02", prompt: "The lamp room, the lens turning" },
];
const LINES = [{ id: "n01", text: "Every night, the light came on at seven." }];

describe("S3: what the store holds and what the state knows", () => {
  it("a kill after the object was finished, before the run recorded it: the resumed run records it as produced, with its points", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ name: "ep01", shots: SHOTS, lines: LINES });
    const output = { output: `s3://${BUCKET}/kill-after-copy/`, s3: { endpoint: store.endpoint } };
    const before = await s.settledTotal();
    const first = (await runIn(s, manifest, output)).outcome;
    expect(first.exitCode).toBe(0);
    // As if killed between the copy that labels shot/s01 and the journal line that records it:
    // its `stored` record and the run's end are not in the journal.
    const lines = (await readFile(w.statePath(), "utf8")).split("\n").filter((l) => l.trim() !== "");
    const kept = lines.filter((l) => {
      const r = JSON.parse(l) as { t: string; id?: string };
      return !(r.t === "stored" && r.id === "shot/s01") && r.t !== "finish";
    });
    expect(kept.length).toBe(lines.length - 2);
    await writeFile(w.statePath(), `${kept.join("\n")}\n`);

    const resumed = (await runIn(s, manifest, output)).outcome;
    expect(resumed.exitCode).toBe(0);
    expect(created(await s.stats())).toBe(3);
    expect(job(resumed, "shot/s01")).toMatchObject({ status: "succeeded", points: 40 });
    // The campaign's report counts every point it paid: the balance drop.
    expect(resumed.report!.points.spent).toBe(before - (await s.settledTotal()));
    expect(resumed.report!.points.spent).toBe(first.report!.points.spent);
  });

  it("a store shared by two states: the first state's open attempts are followed and settled, not left reserved forever", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ name: "ep01", shots: SHOTS });
    const output = { output: `s3://${BUCKET}/shared/`, s3: { endpoint: store.endpoint } };
    const before = await s.settledTotal();
    // State A: interrupted once both tasks exist (their attempts open, their points reserved).
    const stop = new AbortController();
    const a1 = (
      await runIn(s, manifest, {
        ...output,
        signal: stop.signal,
        onProgress: (p) => {
          if (p.counts.running >= 2) stop.abort(new Error("test: interrupt"));
        },
      })
    ).outcome;
    expect(a1.exitCode).toBe(4);
    // Old enough that B's creates, which replay A's tasks (same name, same keys), are told apart.
    await new Promise((r) => setTimeout(r, 4200));
    // State B, another machine's state, fills the same store.
    const b = (await runIn(s, manifest, { ...output, statePath: join(w.dir, "other-state.jsonl") })).outcome;
    expect(b.exitCode).toBe(0);
    expect(b.report!.points.spent).toBe(0);
    expect(b.report!.jobs.every((j) => j.replayed)).toBe(true);
    // A again: the store holds both results, but A's tasks were A's: followed, settled, counted.
    const a2 = (await runIn(s, manifest, output)).outcome;
    expect(a2.exitCode, a2.message).toBe(0);
    expect(a2.budget).toBeUndefined();
    expect(created(await s.stats())).toBe(2);
    const state = (await w.journal()).filter((r) => r.t === "settled");
    expect(state).toHaveLength(2);
    expect(a2.report!.points.spent).toBe(before - (await s.settledTotal()));
    expect(a2.report!.points.spent).toBe(80);
  }, 20_000);

  it("aborts the multipart uploads a killed run left under its prefix", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ name: "ep01", shots: SHOTS.slice(0, 1) });
    const prefix = "abandoned/ep01";
    // An upload begun by a process that was killed: begun, a part sent, never completed.
    const begun = await store.client.send(
      new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: `${prefix}/shots/s01.mp4` }),
    );
    await store.client.send(
      new UploadPartCommand({
        Bucket: BUCKET,
        Key: `${prefix}/shots/s01.mp4`,
        UploadId: begun.UploadId,
        PartNumber: 1,
        Body: Buffer.alloc(1024, 1),
      }),
    );
    // Another run's upload elsewhere in the bucket is not this run's to abort.
    await store.client.send(new CreateMultipartUploadCommand({ Bucket: BUCKET, Key: "elsewhere/x.mp4" }));
    expect(await store.uploads(prefix)).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 1100));
    const { outcome, logs } = await runIn(s, manifest, {
      output: `s3://${BUCKET}/abandoned/`,
      s3: { endpoint: store.endpoint },
    });
    expect(outcome.exitCode).toBe(0);
    expect(await store.uploads(prefix)).toEqual([]);
    expect(await store.uploads("elsewhere/")).toHaveLength(1);
    expect(logs.lines().some((l) => l.event === "uploads-aborted" && l.count === 1)).toBe(true);
  });
});

describe("S3: --fresh and broken results", () => {
  it("--fresh regenerates what the store already holds (the store is not trusted for jobs it regenerates)", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ name: "ep01", shots: SHOTS, lines: LINES });
    const output = { output: `s3://${BUCKET}/fresh/`, s3: { endpoint: store.endpoint } };
    expect((await runIn(s, manifest, output)).outcome.exitCode).toBe(0);
    const fresh = (await runIn(s, manifest, { ...output, fresh: true })).outcome;
    expect(fresh.exitCode).toBe(0);
    expect(fresh.report!.counts).toMatchObject({ succeeded: 3, skipped: 0 });
    expect(created(await s.stats())).toBe(6);
    // Each object now holds the new task's result.
    for (const j of fresh.report!.jobs) {
      const head = await store.head(j.output!.uri.replace(`s3://${BUCKET}/`, ""));
      expect(head?.metadata.task).toBe(j.task_id);
    }
  });

  it("a result that fails its check on the way into S3 fails the job, not the store", async () => {
    const key = "sk-ml-s3-broken-result-1";
    const svc = await hostileService(key, {
      mutator: { media: (ctx) => (ctx.task?.text.includes("broken") ? { truncate: 2000 } : undefined) },
    });
    const w = await workspace();
    try {
      const manifest = await w.manifest({
        name: "ep01",
        shots: [
          { id: "s01", prompt: "This one arrives broken" },
          { id: "s02", prompt: "This one is fine" },
        ],
      });
      const { outcome } = await runIn({ ...svc.sandbox, url: svc.url } as Sandbox, manifest, {
        key,
        allowPrivateUrls: true,
        output: `s3://${BUCKET}/broken/`,
        s3: { endpoint: store.endpoint },
      });
      expect(outcome.exitCode).toBe(1);
      expect(job(outcome, "shot/s01")).toMatchObject({ status: "failed" });
      expect(job(outcome, "shot/s01").error?.code).toBe("result_invalid");
      expect(job(outcome, "shot/s02").status).toBe("succeeded");
      expect(await store.head("broken/ep01/shots/s01.mp4")).toBeUndefined();
    } finally {
      await svc.close();
      await w.remove();
    }
  });
});
