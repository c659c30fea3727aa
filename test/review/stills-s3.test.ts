// Stills of a run whose output is S3 (s3rver on loopback): ffmpeg reads each video through a
// presigned link, the stills are stored beside the outputs in the bucket, and report.html
// carries them inline; the next report reuses them without reading the videos again.
import { afterAll, beforeAll, expect, it } from "vitest";
import { runIn, setup } from "../run/helpers.js";
import { type Store, startStore } from "../s3/helpers.js";

let store: Store;
beforeAll(async () => {
  store = await startStore();
});
afterAll(async () => {
  await store?.close();
});

it("makes stills from S3 through presigned links, keeps them in the bucket, and reuses them", async () => {
  const { s, w } = await setup();
  const manifest = await w.manifest({
    name: "ep01",
    shots: [{ id: "s01", prompt: "A lighthouse at dusk", takes: 2 }],
    lines: [{ id: "n01", shot: "s01", text: "Every night, the light came on at seven." }],
  });
  const opts = { output: "s3://clapper-out/runs/", s3: { endpoint: store.endpoint } };
  const first = await runIn(s, manifest, opts);
  expect(first.outcome.exitCode, first.logs.text()).toBe(0);
  const keys = (await store.list("runs/ep01/stills/")).map((o) => o.key).sort();
  expect(keys).toEqual([
    "runs/ep01/stills/index.json",
    "runs/ep01/stills/s01-take-1.jpg",
    "runs/ep01/stills/s01-take-2.jpg",
  ]);
  const html = (await store.object("runs/ep01/reports/report.html"))?.text ?? "";
  expect(html.match(/<img class="still" alt="take \d" src="data:image\/jpeg;base64,\/9j\//g)).toHaveLength(2);
  const videoGets = () =>
    store.requests.filter((r) => r.method === "GET" && r.presigned && r.path.endsWith(".mp4")).length;
  const read = videoGets();
  expect(read).toBeGreaterThanOrEqual(2);

  // Nothing changed: the next run reuses both stills and reads no video for them.
  const stillPuts = store.puts("runs/ep01/stills/").length;
  const second = await runIn(s, manifest, opts);
  expect(second.outcome.exitCode, second.logs.text()).toBe(0);
  expect(store.puts("runs/ep01/stills/").length).toBe(stillPuts);
  expect(videoGets()).toBe(read);
  const again = (await store.object("runs/ep01/reports/report.html"))?.text ?? "";
  expect(again.match(/<img class="still"/g)).toHaveLength(2);
});
