// A whole run with in-memory fakes of every seam (lock, state store, ledger, request gate, sink)
// and the real sandbox over HTTP for the services: the stages depend on the seams' contracts only,
// so a coordinator (Redis) or a state in S3 can plug in without touching them. Nothing touches the
// disk but the manifest.
import { createHash } from "node:crypto";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import type { Readable } from "node:stream";
import pLimit from "p-limit";
import { describe, expect, it } from "vitest";
import { createClients } from "../../src/api/index.js";
import type { PointsLedger } from "../../src/budget/ledger.js";
import { retryPoliciesFromEnv } from "../../src/cli/config.js";
import { exitCodeOf } from "../../src/cli/exit-code.js";
import { type Lock, LockHeldError } from "../../src/locks/file-lock.js";
import { type RunGate, run, type Seams, type StateStore } from "../../src/run/run.js";
import { InlineStager } from "../../src/services/staging.js";
import type { Sink, WriteOptions } from "../../src/sinks/sink.js";
import { applyRecord, initialState, type RunRecord, type RunState } from "../../src/state/run-state.js";
import { capture, created, FAST_TRACK, KEY, RETRY_ENV, setup } from "./helpers.js";

/** Everything the fakes saw, to check the stages used the seams as their contracts say. */
function fakes() {
  const locks = new Set<string>();
  const taken: string[] = [];
  const records: RunRecord[] = [];
  const objects = new Map<string, { data: Buffer; metadata: Record<string, string> }>();
  const ledgerCalls: string[] = [];
  /** How many of `records` are on disk: those up to the last durable one. */
  const flushed = { count: 0 };
  /**
   * A disk that fills up: the first record `at` names is refused, and so is every record after it,
   * as the file journal refuses everything after a failed write. `error` is what it was refused with.
   */
  const disk: { full?: (r: RunRecord) => boolean; error?: Error } = {};
  let lives = 0;

  const lock: Seams["lock"] = async (path) => {
    if (locks.has(path)) throw new LockHeldError(path, undefined, 0, 30_000);
    locks.add(path);
    taken.push(path);
    const held: Lock = {
      path,
      owner: { pid: 0, host: "memory", started_at: new Date().toISOString() },
      replaced: undefined,
      lost: false,
      release: async () => {
        locks.delete(path);
      },
    };
    return held;
  };

  // One state for the path, kept across runs as a store would.
  const openState: Seams["openState"] = async () => {
    const state: RunState = initialState();
    for (const r of records) applyRecord(state, r);
    let frozen = false;
    const store: StateStore = {
      get state() {
        return state;
      },
      async append(record, options) {
        if (frozen) return;
        if (!disk.error && disk.full?.(record))
          disk.error = Object.assign(new Error("no space left"), { code: "ENOSPC" });
        // As the file journal: the state in memory takes the record; the disk refuses it.
        applyRecord(state, record);
        if (disk.error) throw disk.error;
        records.push(structuredClone(record));
        // A durable record is flushed with every record before it, as a journal's flush is.
        if (options?.durable) flushed.count = records.length;
      },
      freeze() {
        frozen = true;
      },
      async close() {},
    };
    return store;
  };

  const ledger: Seams["ledger"] = ({ cap, openReserved }) => {
    let reserved = openReserved;
    let spent = 0;
    const l: PointsLedger = {
      async tryReserve(points) {
        ledgerCalls.push(`reserve ${points}`);
        if (reserved + spent + points > cap) return false;
        reserved += points;
        return true;
      },
      async settle(from, to) {
        ledgerCalls.push(`settle ${from} ${to}`);
        reserved -= from;
        spent += to;
      },
      async adjust(from, to) {
        reserved += to - from;
        return reserved + spent <= cap;
      },
      snapshot: () => ({ cap, reserved, spent }),
    };
    return l;
  };

  const sink: Sink = {
    uri: (key) => `memory://out/${key}`,
    async write(key: string, body: Readable, options: WriteOptions = {}) {
      const chunks: Buffer[] = [];
      for await (const chunk of body) {
        options.observe?.(chunk as Buffer);
        chunks.push(Buffer.from(chunk as Buffer));
      }
      const data = Buffer.concat(chunks);
      if (options.expectedBytes !== undefined && options.expectedBytes !== data.length)
        throw new Error(`expected ${options.expectedBytes} bytes, got ${data.length}`);
      await options.check?.(undefined);
      objects.set(key, { data, metadata: options.metadata ?? {} });
      return { uri: `memory://out/${key}`, bytes: data.length, sha256: sha256(data) };
    },
    async writeText(key, text) {
      objects.set(key, { data: Buffer.from(text), metadata: {} });
      return `memory://out/${key}`;
    },
    async readHead(key, bytes) {
      return objects.get(key)?.data.subarray(0, bytes);
    },
    async stat(key) {
      const o = objects.get(key);
      return o ? { bytes: o.data.length, metadata: o.metadata } : undefined;
    },
    async readText(key) {
      return objects.get(key)?.data.toString("utf8");
    },
    async folders(prefix) {
      const names = [...objects.keys()].flatMap((k) =>
        k.startsWith(`${prefix}/`) ? [k.slice(prefix.length + 1).split("/")[0] ?? ""] : [],
      );
      return [...new Set(names)];
    },
    async probe() {},
  };
  const outputs: Seams["outputs"] = () => ({ sink, stager: new InlineStager() });

  const gate: RunGate = {
    video: { tasks: counted(pLimit(3)) },
    speech: { tasks: counted(pLimit(3)) },
    async stop() {},
  };
  function counted(limit: ReturnType<typeof pLimit>) {
    const f = (<T>(fn: () => Promise<T>) => {
      lives += 1;
      return limit(fn);
    }) as ReturnType<typeof pLimit>;
    return Object.assign(f, { concurrency: limit.concurrency });
  }

  return {
    seams: { lock, openState, ledger, outputs } satisfies Seams,
    gate,
    locks,
    taken,
    records,
    flushed,
    disk,
    objects,
    ledgerCalls,
    lives: () => lives,
  };
}

/** Clients of the sandbox at `url`, logging into a capture. */
function connect(url: string) {
  const logs = capture();
  const clients = createClients({
    baseUrl: url,
    apiKey: KEY,
    logger: logs.logger,
    policies: retryPoliciesFromEnv(RETRY_ENV),
  });
  return { logs, clients };
}

/** One run of `manifest` on the fakes' seams (or on `seams`), through `c`'s clients. */
function runOn(
  manifest: Parameters<typeof run>[0]["manifest"],
  f: ReturnType<typeof fakes>,
  c: ReturnType<typeof connect>,
  seams: Seams = f.seams,
) {
  return run({
    manifest,
    clients: c.clients,
    logger: c.logs.logger,
    env: {},
    gate: f.gate,
    seams,
    track: FAST_TRACK,
    exitCodeOf,
  });
}

/** The Idempotency-Key a request carries: undici gives headers as [name, value, ...] or as raw lines. */
function idempotencyKey(headers: unknown): string | undefined {
  if (Array.isArray(headers)) {
    const at = headers.findIndex((h, i) => i % 2 === 0 && String(h).toLowerCase() === "idempotency-key");
    return at < 0 ? undefined : String(headers[at + 1]);
  }
  const line = String(headers ?? "")
    .split("\r\n")
    .find((l) => l.toLowerCase().startsWith("idempotency-key:"));
  return line?.slice(line.indexOf(":") + 1).trim();
}

/**
 * Watches every create as undici hands it to HTTP: each must find its intent and its `sending`
 * record among the records the state store has flushed. `stop()` ends the watch.
 */
function watchCreates(f: ReturnType<typeof fakes>) {
  const keys: string[] = [];
  const problems: string[] = [];
  const onRequest = (message: unknown) => {
    const key = idempotencyKey((message as { request: { headers?: unknown } }).request.headers);
    if (!key) return;
    keys.push(key);
    const done = f.records.slice(0, f.flushed.count);
    const intent = done.find((r) => r.t === "intent" && r.key === key);
    if (intent?.t !== "intent") problems.push(`create ${key} left before its intent was flushed`);
    else if (!done.some((r) => r.t === "sending" && r.id === intent.id && r.n === intent.n))
      problems.push(`create ${key} left before its body was flushed`);
  };
  subscribe("undici:request:create", onRequest);
  return { keys, problems, stop: () => unsubscribe("undici:request:create", onRequest) };
}

/** Two shots and a line, within a budget. */
const THREE_JOBS = {
  shots: [
    { id: "s01", prompt: "A lighthouse at dusk" },
    { id: "s02", prompt: "The lamp turns" },
  ],
  lines: [{ id: "n01", text: "Every night, the light came on." }],
  budget: 1000,
};

const sha256 = (data: Buffer) => createHash("sha256").update(data).digest("hex");

describe("a whole run on in-memory seams", () => {
  it("runs, resumes nothing twice, and writes nothing to disk but what the services hold", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest(THREE_JOBS);
    const f = fakes();
    const c = connect(s.url);
    const before = await s.total();
    try {
      const once = () =>
        runOn(manifest, f, c).then((outcome) => ({ ...outcome, exitCode: exitCodeOf(outcome.end) }));
      const first = await once();
      expect(first.exitCode, first.message).toBe(0);
      expect(first.report?.counts).toMatchObject({ total: 3, succeeded: 3 });

      // The lock: taken once for the state's path, and given back.
      expect(f.taken).toEqual([`${w.statePath()}.lock`]);
      expect(f.locks.size).toBe(0);
      // The state store: write-ahead (every create's intent before its task), every attempt settled.
      const kinds = f.records.map((r) => r.t);
      for (const id of ["shot/s01", "shot/s02", "line/n01"]) {
        const mine = f.records.filter((r) => "id" in r && r.id === id).map((r) => r.t);
        expect(mine.indexOf("intent"), id).toBeLessThan(mine.indexOf("created"));
        expect(mine, id).toContain("settled");
        expect(mine, id).toContain("stored");
      }
      expect(kinds.at(-1)).toBe("finish");
      // The ledger: one reservation per job, each settled.
      expect(f.ledgerCalls.filter((c) => c.startsWith("reserve"))).toHaveLength(3);
      expect(f.ledgerCalls.filter((c) => c.startsWith("settle"))).toHaveLength(3);
      // The gate: one life per job, under its limits.
      expect(f.lives()).toBe(3);
      // The sink holds every result and the reports, as the report says.
      for (const job of first.report!.jobs) {
        const key = job.output!.uri.replace("memory://out/", "");
        expect(sha256(f.objects.get(key)!.data)).toBe(job.output!.sha256);
      }
      expect([...f.objects.keys()].filter((k) => k.startsWith("reports/")).sort()).toEqual([
        "reports/junit.xml",
        "reports/report.html",
        "reports/report.json",
        "reports/report.md",
      ]);
      // Points: the report's spending is the balance drop.
      expect(first.report!.points.spent).toBe(before - (await s.settledTotal()));

      // Run again on the same seams: everything is reused, nothing is created.
      const second = await once();
      expect(second.exitCode).toBe(0);
      expect(second.report?.counts).toMatchObject({ skipped: 3 });
      expect(created(await s.stats())).toBe(3);

      // Nothing on disk beside the manifest: no state folder, no output folder, no lock.
      expect(existsSync(w.statePath())).toBe(false);
      expect(existsSync(w.out())).toBe(false);
      expect((await readdir(w.dir)).sort()).toEqual(["manifest.yaml"]);

      // A lock the fake says is held stops a run at once (exit 5), as the file lock does.
      f.locks.add(`${w.statePath()}.lock`);
      expect((await once()).exitCode).toBe(5);
    } finally {
      await c.clients.close();
    }
  });

  // Write-ahead, seen from outside: at the moment each create is handed to HTTP, the state store
  // holds its intent and its `sending` record flushed; with a shared ledger, the intent is flushed
  // before the ledger hears that the create may leave (markSent).
  for (const shared of [false, true]) {
    it(`flushes every create's intent and body before the create leaves (${shared ? "shared" : "own"} ledger)`, async () => {
      const { s, w } = await setup();
      const manifest = await w.manifest({
        shots: [
          { id: "s01", prompt: "A lighthouse at dusk" },
          { id: "s02", prompt: "The lamp turns" },
        ],
        lines: [
          { id: "n01", text: "Every night, the light came on." },
          { id: "n02", text: "And every morning it went out." },
        ],
        budget: 1000,
      });
      const f = fakes();
      const watch = watchCreates(f);
      const sent: string[] = [];
      const seams: Seams = shared
        ? {
            ...f.seams,
            ledger: (input) => {
              const own = f.seams.ledger(input) as PointsLedger;
              return {
                ...own,
                async markSent(key: string) {
                  sent.push(key);
                  const flushed = f.records.slice(0, f.flushed.count);
                  if (!flushed.some((r) => r.t === "intent" && r.key === key))
                    watch.problems.push(`markSent(${key}) before its intent was flushed`);
                },
              };
            },
          }
        : f.seams;
      const c = connect(s.url);
      try {
        const outcome = await runOn(manifest, f, c, seams);
        expect(exitCodeOf(outcome.end), outcome.message).toBe(0);
      } finally {
        watch.stop();
        await c.clients.close();
      }
      expect(watch.problems).toEqual([]);
      expect(watch.keys).toHaveLength(4);
      if (shared) expect(sent).toHaveLength(4);
      expect(created(await s.stats())).toBe(4);
    });
  }

  // The state cannot be written any more (a full disk) at a moment of a job's life: the run stops
  // without a create whose intent is not on disk; what was not flushed is lost, as in a crash; once
  // there is room again, the next run finishes the work and pays for no job twice.
  for (const [moment, full] of [
    ["a create's intent", (r: RunRecord) => r.t === "intent"],
    ["a task's id", (r: RunRecord) => r.t === "created"],
    ["a stored result", (r: RunRecord) => r.t === "stored"],
  ] as const) {
    it(`a state that cannot be written at ${moment}: nothing created unrecorded, nothing paid twice`, async () => {
      const { s, w } = await setup();
      const manifest = await w.manifest(THREE_JOBS);
      const f = fakes();
      const before = await s.total();
      const c = connect(s.url);
      const once = () => runOn(manifest, f, c);
      const watch = watchCreates(f);
      try {
        f.disk.full = full;
        // The run ends on the error (the CLI says "no space left on the device"), or with it as its outcome.
        const first = await once().then(
          (outcome) => ({ outcome }),
          (error: unknown) => ({ error }),
        );
        if ("error" in first) expect(first.error).toBe(f.disk.error);
        else expect(exitCodeOf(first.outcome.end), first.outcome.message).not.toBe(0);
        expect(f.disk.error).toBeDefined();
        expect(f.locks.size).toBe(0);
        // The machine goes down: what was not flushed is gone. Then there is room again.
        f.records.splice(f.flushed.count);
        f.disk.full = undefined;
        f.disk.error = undefined;
        const second = await once();
        expect(exitCodeOf(second.end), second.message).toBe(0);
        expect(second.report?.counts).toMatchObject({ total: 3, succeeded: 3 });
        // One task per job over both runs, each create sent with an intent on disk; a create sent
        // again (the same key, to learn its task) is not a second task.
        expect(watch.problems).toEqual([]);
        expect(created(await s.stats())).toBe(3);
        expect(new Set(watch.keys).size).toBe(3);
        // The report's spending is the balance drop, and every result is what the report says.
        expect(second.report!.points.spent).toBe(before - (await s.settledTotal()));
        for (const job of second.report!.jobs) {
          const key = job.output!.uri.replace("memory://out/", "");
          expect(sha256(f.objects.get(key)!.data)).toBe(job.output!.sha256);
        }
      } finally {
        watch.stop();
        await c.clients.close();
      }
    });
  }
});
