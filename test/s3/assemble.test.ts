// `clapper assemble` of a run whose output is S3 (s3rver on loopback): the inputs are fetched from
// the store, the episode is checked and uploaded beside the shots, its record beside the reports;
// a second assemble with nothing changed finds it up to date and uploads nothing.
import { parseBuffer } from "music-metadata";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli, runIn, setup } from "../run/helpers.js";
import { type Store, sha256Of, startStore } from "./helpers.js";

let store: Store;
beforeAll(async () => {
  store = await startStore();
});
afterAll(async () => {
  await store?.close();
});

describe("clapper assemble with an S3 output", () => {
  it("fetches the stored shots and lines, uploads a checked episode beside them, and does nothing the second time", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      name: "ep01",
      shots: [
        { id: "s01", prompt: "A lighthouse at dusk" },
        { id: "s02", prompt: "The lamp room" },
      ],
      lines: [{ id: "n01", shot: "s01", text: "Every night, the light came on at seven." }],
    });
    const { outcome, logs } = await runIn(s, manifest, {
      output: "s3://clapper-out/runs/",
      s3: { endpoint: store.endpoint },
    });
    expect(outcome.exitCode, logs.text()).toBe(0);
    const args = ["assemble", manifest, "--json", "--s3-endpoint", store.endpoint];
    const first = await cli(undefined, args, {}, "silent");
    expect(first.code, first.err).toBe(0);
    const answer = JSON.parse(first.out);
    expect(answer.status).toBe("assembled");
    expect(answer.episode.uri).toBe("s3://clapper-out/runs/ep01/episode.mp4");
    const episode = await store.object("runs/ep01/episode.mp4");
    expect(episode?.bytes).toBe(answer.episode.bytes);
    expect(episode?.sha256).toBe(answer.episode.sha256);
    // Two 4 s shots (the suite's default duration): 8 s, one video and one audio stream.
    const body = await store.client.send(
      new (await import("@aws-sdk/client-s3")).GetObjectCommand({
        Bucket: "clapper-out",
        Key: "runs/ep01/episode.mp4",
      }),
    );
    const bytes = Buffer.from(
      await (body.Body as { transformToByteArray(): Promise<Uint8Array> }).transformToByteArray(),
    );
    expect(sha256Of(bytes)).toBe(answer.episode.sha256);
    const meta = await parseBuffer(bytes, { mimeType: "video/mp4" }, { duration: true });
    expect(Math.abs((meta.format.duration ?? 0) - 8)).toBeLessThanOrEqual(1 / 24);
    expect(meta.format.trackInfo.length).toBe(2);
    expect(meta.format.trackInfo.filter((t) => t.audio).length).toBe(1);
    const record = JSON.parse((await store.object("runs/ep01/reports/assemble.json"))?.text ?? "{}");
    expect(record.episode.sha256).toBe(answer.episode.sha256);

    const puts = store.puts("runs/ep01/episode").length;
    const again = await cli(undefined, args, {}, "silent");
    expect(again.code, again.err).toBe(0);
    expect(JSON.parse(again.out).status).toBe("up-to-date");
    expect(store.puts("runs/ep01/episode").length).toBe(puts);
  }, 120_000);
});
