// Kept versions in an S3 output (s3rver on loopback): an edited line's stored object is copied to
// NAME.v1.EXT on the server before the new one takes its key (which it takes only complete, through
// an object uploaded aside), listed in report.json with the first object's sha256; the aside object
// is gone afterwards, and a reuse keeps and copies nothing more.
import { readdir, utimes } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ReportJob } from "../../src/report/model.js";
import { type Store, startStore } from "../s3/helpers.js";
import { created, type Line, runIn, setup } from "./helpers.js";

let store: Store;
beforeAll(async () => {
  store = await startStore();
});
afterAll(async () => {
  await store?.close();
});

const lines = (n02: string): Line[] => [
  { id: "n01", text: "Every night, the light came on at seven." },
  { id: "n02", text: n02 },
];

describe("kept versions in S3", () => {
  it("copies the stored object to its version's key before the new one replaces it", async () => {
    const { s, w } = await setup();
    const options = { output: "s3://clapper-out/runs/", s3: { endpoint: store.endpoint } };
    const job = (outcome: { report?: { jobs: ReportJob[] } }) =>
      outcome.report?.jobs.find((j) => j.id === "line/n02") as ReportJob;
    const first = await runIn(
      s,
      await w.manifest({ name: "ep", lines: lines("The sea was calm.") }),
      options,
    );
    expect(first.outcome.exitCode, first.logs.text()).toBe(0);
    const old = job(first.outcome).output as NonNullable<ReportJob["output"]>;

    const before = created(await s.stats());
    const manifest = await w.manifest({ name: "ep", lines: lines("The sea was calm and grey that night.") });
    const second = await runIn(s, manifest, options);
    expect(second.outcome.exitCode, second.logs.text()).toBe(0);
    expect(created(await s.stats()) - before).toBe(1);
    const n02 = job(second.outcome);
    const key = "runs/ep/lines/n02.v1.wav";
    expect(n02.versions).toEqual([
      { uri: `s3://clapper-out/${key}`, sha256: old.sha256, bytes: old.bytes, at: expect.any(String) },
    ]);
    const kept = await store.object(key);
    expect({ bytes: kept?.bytes, sha256: kept?.sha256 }).toEqual({ bytes: old.bytes, sha256: old.sha256 });
    const current = await store.object("runs/ep/lines/n02.wav");
    expect(current?.sha256).toBe(n02.output?.sha256);
    expect(current?.sha256).not.toBe(old.sha256);
    expect(current?.metadata.sha256).toBe(n02.output?.sha256);
    // Nothing left aside, no upload left open.
    expect((await store.list("runs/ep/lines")).map((o) => o.key).sort()).toEqual([
      "runs/ep/lines/n01.wav",
      "runs/ep/lines/n02.v1.wav",
      "runs/ep/lines/n02.wav",
    ]);
    expect(await store.uploads("runs/ep")).toEqual([]);

    // What a writer killed before its copy left aside, long ago: removed by the next run's start.
    const aside = "runs/ep/.partial/lines/n02.wav.0123456789ab";
    await store.put(aside, "left by a killed writer");
    const files = await readdir(store.directory, { recursive: true });
    const file = files.find((f) => f.includes("0123456789ab") && !f.includes("metadata"));
    expect(file, files.join("\n")).toBeDefined();
    const hourAgo = new Date(Date.now() - 3_600_000);
    for (const f of files.filter((f) => f.includes("0123456789ab")))
      await utimes(join(store.directory, f), hourAgo, hourAgo);
    expect((await store.head(aside))?.bytes).toBeGreaterThan(0);

    const third = await runIn(s, manifest, options);
    expect(third.outcome.exitCode, third.logs.text()).toBe(0);
    expect(job(third.outcome).versions).toEqual(n02.versions);
    expect((await store.list("runs/ep/lines")).length).toBe(3);
    expect(await store.head(aside)).toBeUndefined();
  });
});
