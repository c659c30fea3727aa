// The run's start is traced through node:diagnostics_channel (src/trace.ts): the run publishes the
// end of its stages, undici the requests it creates and the answers' headers. Listened to here as
// src/trace.ts listens, in-process against the sandbox.
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { describe, expect, it, onTestFinished } from "vitest";
import { RUN_STAGE } from "../../src/trace.js";
import { runIn, setup } from "./helpers.js";

function listen(name: string, seen: unknown[]): void {
  const onMessage = (message: unknown) => seen.push(message);
  subscribe(name, onMessage);
  onTestFinished(() => {
    unsubscribe(name, onMessage);
  });
}

const headerList = (request: { headers?: unknown }) =>
  Array.isArray(request.headers) ? request.headers.filter((_, i) => i % 2 === 0).map(String) : [];

describe("the start's events", () => {
  it("publishes each stage's end in order, and undici marks the creates by their idempotency key", async () => {
    const { s, w } = await setup({ timeScale: 0.01 });
    const manifest = await w.manifest({ shots: [{ id: "s01", prompt: "Shot 1: the sea at night" }] });
    const stages: unknown[] = [];
    const created: unknown[] = [];
    listen(RUN_STAGE, stages);
    listen("undici:request:create", created);
    const { outcome } = await runIn(s, manifest);
    expect(outcome.exitCode).toBe(0);
    expect(stages).toEqual([{ stage: "open" }, { stage: "admission" }, { stage: "prepare" }]);
    const requests = created.map((m) => (m as { request: { method: string; headers?: unknown } }).request);
    const creates = requests.filter((r) => headerList(r).includes("idempotency-key"));
    expect(creates.length).toBeGreaterThan(0);
    expect(creates.every((r) => r.method === "POST" && headerList(r).includes("authorization"))).toBe(true);
    // Reads carry the key but no idempotency key: only a create is taken for one.
    expect(requests.some((r) => r.method === "GET" && !headerList(r).includes("idempotency-key"))).toBe(true);
  });
});
