// The store answers the probe's write but not the reads that follow it (what the store holds is
// asked for every job before admission): a store that refuses service is exit 6, a store that
// forbids reads is exit 2, and neither is a bug (70) nor spends anything.
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { listen, readBody, sendAnswer } from "../fixtures/servers.js";
import { created, runIn, setup } from "../run/helpers.js";
import { BUCKET, type Store, startStore } from "./helpers.js";

let store: Store;
beforeAll(async () => {
  store = await startStore();
});
afterAll(async () => {
  await store?.close();
});

/** Forwards to the store, except HEAD requests, answered with `status`. */
async function headsAnswered(status: number) {
  const server = await listen(async (req, res) => {
    const body = await readBody(req);
    if (req.method === "HEAD") return sendAnswer(req, res, { status, text: "" });
    const upstream = await fetch(`${store.endpoint}${req.url}`, {
      method: req.method ?? "GET",
      headers: Object.fromEntries(
        Object.entries(req.headers).filter(([k]) => !["host", "connection", "content-length"].includes(k)),
      ) as Record<string, string>,
      ...(body.length > 0 ? { body } : {}),
    });
    res.writeHead(upstream.status, Object.fromEntries(upstream.headers));
    res.end(Buffer.from(await upstream.arrayBuffer()));
  });
  onTestFinished(() => server.close());
  return server.url;
}

describe("the store's reads failing before admission", () => {
  it.each([
    [503, 6],
    [403, 2],
  ])("HEAD answered %i: exit %i, nothing submitted", async (status, exit) => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: [{ id: "s01", prompt: "A lighthouse at dusk" }] });
    const endpoint = await headsAnswered(status);
    const { outcome } = await runIn(s, manifest, {
      output: `s3://${BUCKET}/heads-${status}/`,
      s3: { endpoint, forcePathStyle: true },
    });
    expect(outcome.exitCode, outcome.message).toBe(exit);
    expect(outcome.message).toMatch(/nothing was submitted/);
    expect(created(await s.stats())).toBe(0);
  });
});
