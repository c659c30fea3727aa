// Materials: a local file is staged in S3 once per content hash and handed to the service as a
// presigned GET URL, which the service (the sandbox) fetches; an s3:// material is presigned as it
// is; without S3, a material too big for the request body as a Data URL says to configure S3.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { call } from "../helpers/sandbox.js";
import { created, KEY, runIn, setup } from "../run/helpers.js";
import { BUCKET, png, type S3Request, type Store, sha256Of, startStore } from "./helpers.js";

let store: Store;
beforeAll(async () => {
  store = await startStore();
});
afterAll(async () => {
  await store?.close();
});

const MiB = 1024 * 1024;

/** What the service says about a video task (its usage counts the images it was given). */
async function videoTask(url: string, id: string | null | undefined) {
  const res = await call(url, "GET", `/vid/v2/query/video_generation/${id}`, { key: KEY });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return (res.body as { task: { status: string; usage: { input_image_count: number } } }).task;
}

const presignedGets = (requests: readonly S3Request[], key: string) =>
  requests.filter((r) => r.method === "GET" && r.presigned && r.path === `/${BUCKET}/${key}`);

describe("materials staged in S3", () => {
  it("uploads a shared local frame once per content hash, across shots and runs; the service fetches presigned URLs", async () => {
    const { s, w } = await setup();
    const frame = png(64, 36, "shared frame");
    await writeFile(join(w.dir, "frame.png"), frame);
    // A copy under another name has the same content: the same staged object.
    await writeFile(join(w.dir, "frame-copy.png"), frame);
    const remote = png(32, 18, "already in the bucket");
    await store.put("library/remote.png", remote, "image/png");
    const stagedKey = `st/_staging/${sha256Of(frame)}.png`;
    const remoteKey = "library/remote.png";
    const spec = {
      name: "staged",
      shots: [
        { id: "s01", prompt: "From the shared frame", first_frame: "frame.png" },
        { id: "s02", prompt: "From the same frame again", first_frame: "frame-copy.png" },
        { id: "s03", prompt: "From a frame already in S3", first_frame: `s3://${BUCKET}/${remoteKey}` },
      ],
    };
    const manifest = await w.manifest(spec);
    const opts = { output: `s3://${BUCKET}/st`, s3: { endpoint: store.endpoint } };
    const mark = store.requests.length;
    const first = await runIn(s, manifest, opts);
    expect(first.outcome.exitCode, `${first.outcome.message}\n${first.logs.text()}`).toBe(0);
    const firstRequests = store.requests.slice(mark);

    // Staged once, under its content hash, with the bytes of the file.
    expect((await store.list("st/_staging/")).map((o) => o.key)).toEqual([stagedKey]);
    const staged = await store.object(stagedKey);
    expect(staged?.sha256).toBe(sha256Of(frame));
    expect(staged?.contentType).toBe("image/png");
    expect(
      firstRequests.filter((r) => r.method === "PUT" && !r.copy && r.path.includes("/_staging/")),
    ).toHaveLength(1);

    // The service was handed presigned URLs and fetched them: once per shot for the staged frame,
    // once for the s3:// material; each URL valid for 24 hours.
    expect(presignedGets(firstRequests, stagedKey)).toHaveLength(2);
    expect(presignedGets(firstRequests, remoteKey)).toHaveLength(1);
    for (const r of [
      ...presignedGets(firstRequests, stagedKey),
      ...presignedGets(firstRequests, remoteKey),
    ]) {
      expect(r.status).toBe(200);
      expect(r.query).toMatch(/(^|&)X-Amz-Expires=86400(&|$)/);
    }
    for (const job of first.outcome.report?.jobs ?? []) {
      const task = await videoTask(s.url, job.task_id);
      expect(task.usage.input_image_count, job.id).toBe(1);
    }
    expect(created(await s.stats())).toBe(3);

    // A second run with a new shot on the same frame finds the staged object and uploads nothing.
    await w.manifest({
      ...spec,
      shots: [
        ...spec.shots,
        { id: "s04", prompt: "Once more from the shared frame", first_frame: "frame.png" },
      ],
    });
    const mark2 = store.requests.length;
    const second = await runIn(s, manifest, opts);
    expect(second.outcome.exitCode, second.logs.text()).toBe(0);
    const secondRequests = store.requests.slice(mark2);
    expect(second.outcome.report?.jobs.filter((j) => j.status === "succeeded").map((j) => j.id)).toEqual([
      "shot/s04",
    ]);
    expect(secondRequests.filter((r) => r.method === "PUT" && r.path.includes("/_staging/"))).toHaveLength(0);
    expect(
      secondRequests.filter((r) => r.method === "HEAD" && r.path === `/${BUCKET}/${stagedKey}`),
    ).toHaveLength(1);
    expect(presignedGets(secondRequests, stagedKey)).toHaveLength(1);
    expect(store.puts("st/_staging/")).toHaveLength(1);
    expect(created(await s.stats())).toBe(4);
  });

  it("stages under --staging when the output is a local folder", async () => {
    const { s, w } = await setup();
    const frame = png(48, 27, "local output, S3 staging");
    await writeFile(join(w.dir, "frame.png"), frame);
    const manifest = await w.manifest({
      name: "local-out",
      shots: [{ id: "s01", prompt: "A frame staged elsewhere", first_frame: "frame.png" }],
    });
    const mark = store.requests.length;
    const { outcome, logs } = await runIn(s, manifest, {
      staging: `s3://${BUCKET}/materials/staging`,
      s3: { endpoint: store.endpoint },
    });
    expect(outcome.exitCode, `${outcome.message}\n${logs.text()}`).toBe(0);
    const key = `materials/staging/${sha256Of(frame)}.png`;
    expect((await store.list("materials/")).map((o) => o.key)).toEqual([key]);
    expect(presignedGets(store.requests.slice(mark), key)).toHaveLength(1);
    // The result went to the local folder, not to S3.
    expect(outcome.report?.jobs[0]?.output?.uri).toBe(join(w.out("local-out"), "shots/s01.mp4"));
    expect((await videoTask(s.url, outcome.report?.jobs[0]?.task_id)).usage.input_image_count).toBe(1);
  });
});

describe("materials without S3", () => {
  it("refuses materials over the 72 MiB body limit as Data URLs with a message to configure S3", async () => {
    const { s, w } = await setup();
    // Two 29 MiB "images" (a PNG signature, then zeros: sparse files): 58 MiB, about 77 MiB in base64.
    for (const name of ["first.png", "last.png"]) {
      const path = join(w.dir, name);
      await writeFile(path, png(8, 8, name));
      const { truncate } = await import("node:fs/promises");
      await truncate(path, 29 * MiB);
    }
    const manifest = await w.manifest({
      name: "inline",
      shots: [
        { id: "big", prompt: "Between two big frames", first_frame: "first.png", last_frame: "last.png" },
        { id: "small", prompt: "No materials at all" },
      ],
    });
    const { outcome, logs } = await runIn(s, manifest);
    expect(outcome.exitCode, logs.text()).toBe(1);
    const big = outcome.report?.jobs.find((j) => j.id === "shot/big");
    expect(big?.status).toBe("failed");
    expect(big?.error?.message).toMatch(/over the service's 72 MiB body limit/);
    expect(big?.error?.message).toMatch(/configure S3 \(--output s3:\/\/\.\.\. or --staging s3:\/\/\.\.\.\)/);
    expect(big?.points).toBe(0);
    // Refused before it was sent: only the other shot reached the service.
    expect(outcome.report?.jobs.find((j) => j.id === "shot/small")?.status).toBe("succeeded");
    const st = await s.stats();
    expect(st.tasks_created.video).toBe(1);
    expect(st.requests["POST /vid/v2/video_generation"]).toBe(1);
  });

  it("one 55 MB image is refused by the plan: it is over the service's 30 MiB image limit whatever the transport", async () => {
    const { s, w } = await setup();
    const path = join(w.dir, "huge.png");
    await writeFile(path, png(8, 8, "huge"));
    const { truncate } = await import("node:fs/promises");
    await truncate(path, 55_000_000);
    const manifest = await w.manifest({
      name: "huge",
      shots: [{ id: "s01", prompt: "From a huge frame", first_frame: "huge.png" }],
    });
    const { outcome } = await runIn(s, manifest);
    expect(outcome.exitCode).toBe(2);
    expect(outcome.errors?.map((e) => e.message).join("\n")).toMatch(/over the image limit of 30 MiB/);
    expect((await s.stats()).tasks_created.video).toBe(0);
  });
});
