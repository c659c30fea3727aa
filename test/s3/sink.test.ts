// S3Sink against s3rver: what is kept and what is not when a result fails its checks, is shorter
// than promised, is aborted, or when the store goes away under an upload.
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createS3Client, S3Sink } from "../../src/sinks/s3.js";
import { SizeMismatchError } from "../../src/sinks/sink.js";
import { BUCKET, type Store, sha256Of, startStore } from "./helpers.js";

let store: Store;
let sink: S3Sink;
beforeAll(async () => {
  store = await startStore();
  sink = new S3Sink(createS3Client({ endpoint: store.endpoint }), { bucket: BUCKET, prefix: "sink" });
});
afterAll(async () => {
  await store?.close();
});

const MiB = 1024 * 1024;

/** A body of `total` bytes in 64 KiB chunks, each chunk `delayMs` apart; `pattern` fills it. */
function body(total: number, delayMs = 0, pattern = 7): Readable & { sent: () => number } {
  let sent = 0;
  const stream = new Readable({
    read() {
      if (sent >= total) {
        this.push(null);
        return;
      }
      const n = Math.min(64 * 1024, total - sent);
      sent += n;
      const chunk = Buffer.alloc(n, pattern);
      if (delayMs > 0) setTimeout(() => this.push(chunk), delayMs);
      else this.push(chunk);
    },
  });
  return Object.assign(stream, { sent: () => sent });
}

describe("S3Sink", () => {
  it("stores a multipart object with its size, hash and metadata", async () => {
    const total = 17 * MiB + 5;
    const written = await sink.write("big.bin", body(total), {
      expectedBytes: total,
      contentType: "application/octet-stream",
      metadata: { job: "shot/s01", task: "t1", fingerprint: "f1", note: "café" },
    });
    const expected = sha256Of(Buffer.alloc(total, 7));
    expect(written).toEqual({ uri: `s3://${BUCKET}/sink/big.bin`, bytes: total, sha256: expected });
    const object = await store.object("sink/big.bin");
    expect(object).toMatchObject({ bytes: total, sha256: expected, contentType: "application/octet-stream" });
    // Non-ASCII metadata is percent-encoded (S3 metadata is ASCII).
    expect(object?.metadata).toEqual({
      job: "shot/s01",
      task: "t1",
      fingerprint: "f1",
      note: "caf%C3%A9",
      sha256: expected,
    });
    expect(await sink.stat("big.bin")).toEqual({ bytes: total, metadata: object?.metadata });
    expect(await sink.stat("absent.bin")).toBeUndefined();
  });

  it("deletes an object whose check fails, and one shorter than its Content-Length", async () => {
    await expect(
      sink.write("checked.bin", body(1000), {
        check: async () => {
          throw new Error("not a video");
        },
      }),
    ).rejects.toThrow("not a video");
    expect(await store.head("sink/checked.bin")).toBeUndefined();
    await expect(sink.write("short.bin", body(1000), { expectedBytes: 2000 })).rejects.toBeInstanceOf(
      SizeMismatchError,
    );
    expect(await store.head("sink/short.bin")).toBeUndefined();
  });

  it("stops reading and keeps nothing when aborted mid-upload", async () => {
    const controller = new AbortController();
    const source = body(40 * MiB, 1);
    const writing = sink.write("aborted.bin", source, { signal: controller.signal });
    while (source.sent() < 10 * MiB) await new Promise((r) => setTimeout(r, 10));
    controller.abort();
    await expect(writing).rejects.toMatchObject({ name: "AbortError" });
    const at = source.sent();
    await new Promise((r) => setTimeout(r, 200));
    expect(source.sent()).toBeLessThan(40 * MiB);
    expect(source.sent() - at).toBeLessThan(MiB);
    expect(source.destroyed).toBe(true);
    expect(await store.head("sink/aborted.bin")).toBeUndefined();
  });

  it("fails, and lets go of the body, when the store goes away under an upload", async () => {
    const source = body(60 * MiB, 1);
    const writing = sink.write("lost.bin", source);
    while (source.sent() < 10 * MiB) await new Promise((r) => setTimeout(r, 10));
    await store.kill();
    try {
      // The message says what failed where; the SDK's error is its cause.
      await expect(writing).rejects.toThrow(/^S3: writing s3:\/\/clapper-out\/sink\/lost\.bin failed: \S/);
      // The body (a download from the service) is closed, not left hanging on its connection.
      expect(source.destroyed).toBe(true);
    } finally {
      await store.restart();
    }
    expect(await store.head("sink/lost.bin")).toBeUndefined();
  });
});
