// The promises at their edges (issue 9), run in process against the sandbox over real HTTP: the cap
// against a price that moves, replayed tasks in reports, refused creates, a refused --fresh, two
// manifests with one name, an unwritable output, the records that decide a job's fate, and the
// one way every command finds a run's state.
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { describe, expect, it, onTestFinished } from "vitest";
import { acquireLock } from "../../src/locks/file-lock.js";
import type { Progress } from "../../src/run/run.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { applyRecord, initialState, type RunRecord } from "../../src/state/run-state.js";
import { proxy } from "../fixtures/servers.js";
import { call } from "../helpers/sandbox.js";
import { cli, created, job, KEY, runIn, setup, sha256 } from "./helpers.js";

const shots = [
  { id: "s01", prompt: "A lighthouse at dusk" },
  { id: "s02", prompt: "The lamp turns" },
];
const lines = [
  { id: "n01", shot: "s01", text: "Every night, the light came on at seven." },
  { id: "n02", shot: "s02", text: "And every night, someone was watching." },
];

/** Run options that interrupt the run (as Ctrl-C would) once `when` holds for its progress. */
function interruptWhen(when: (p: Progress) => boolean): {
  signal: AbortSignal;
  onProgress: (p: Progress) => void;
} {
  const stop = new AbortController();
  return {
    signal: stop.signal,
    onProgress: (p) => {
      if (when(p)) stop.abort(new Error("test: interrupt"));
    },
  };
}

const price = (s: Sandbox, perTen: number) =>
  call(s.url, "POST", "/_sandbox/pricing", { key: null, body: { text_to_speech: perTen } });

describe("money", () => {
  it("holds the cap when the speech price doubles after the first create (item 3)", async () => {
    const { s, w } = await setup();
    // Three lines of 75 counted characters: 15 points each at 2 per 10, 30 at 4.
    const three = [1, 2, 3].map((i) => ({ id: `n0${i}`, text: `${"abcde".repeat(14)}line${i}` }));
    const manifest = await w.manifest({ lines: three, budget: 48 });
    const before = await s.settledTotal();
    // The price doubles as soon as the first create has been handled, before its answer is read.
    let creates = 0;
    const forwarder = await proxy(
      s.url,
      () => undefined,
      async (hit) => {
        if (hit.method === "POST" && hit.url === "/audio/v1/speech/jobs" && ++creates === 1)
          await price(s, 4);
      },
    );
    onTestFinished(() => forwarder.close());
    // The proxy is not the sandbox's origin, which serves the results: allowed explicitly.
    const { outcome } = await runIn({ ...s, url: forwarder.url } as Sandbox, manifest, {
      allowPrivateUrls: true,
    });
    const report = outcome.report!;
    const drop = before - (await s.settledTotal());
    expect(report.points.spent).toBe(drop);
    // 15 at the old price, 30 at the new one; a third create would cross the cap of 48.
    expect(drop, JSON.stringify(report, null, 2)).toBe(45);
    expect(report.counts, JSON.stringify(report.jobs, null, 1)).toMatchObject({ succeeded: 2, pending: 1 });
    expect(report.jobs.map((j) => j.points).sort()).toEqual([0, 15, 30]);
    expect(outcome.exitCode).toBe(1);
    expect(report.note).toMatch(/cap/);
    expect(created(await s.stats())).toBe(2);
  });

  it("refuses a negative or absurd speech price instead of using it (item 3)", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ lines: lines.map(({ shot: _, ...l }) => l) });
    await price(s, 50_000);
    const { outcome } = await runIn(s, manifest);
    // The service's fault (exit 6), not the manifest's (exit 2): nothing in the manifest is wrong.
    expect(outcome.exitCode).toBe(6);
    expect(outcome.errors ?? []).toEqual([]);
    expect(outcome.message).toMatch(/speech price of 50000.*refused/);
    expect(created(await s.stats())).toBe(0);
  });

  it("a task that the Idempotency-Key replays from an earlier state is reported as replayed, 0 points (item 4)", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots, lines });
    const first = (await runIn(s, manifest)).outcome;
    expect(first.exitCode).toBe(0);
    // The state is lost (a new CI runner): the same keys are sent again and return the old tasks.
    await rm(join(w.dir, ".clapper"), { recursive: true });
    await rm(w.out(), { recursive: true });
    // Old enough that both clocks, read in whole seconds, tell it apart.
    await new Promise((r) => setTimeout(r, 4200));
    const before = await s.settledTotal();
    const again = (await runIn(s, manifest)).outcome;
    expect(again.exitCode).toBe(0);
    expect((await s.stats()).idempotent_replays).toBe(4);
    expect(created(await s.stats())).toBe(4);
    expect(before - (await s.settledTotal())).toBe(0);
    expect(again.report!.points.spent).toBe(0);
    for (const j of again.report!.jobs) {
      expect(j).toMatchObject({ status: "succeeded", points: 0, replayed: true });
      expect(await sha256(j.output!.uri)).toBe(j.output!.sha256);
    }
  }, 20_000);

  it("a create not yet sent when the service refuses for points is never sent (item 5)", async () => {
    const { s, w } = await setup({ points: 200 });
    const many = Array.from({ length: 12 }, (_, i) => ({
      id: `n${i + 10}`,
      text: `Line number ${i + 10} of the night.`,
    }));
    const manifest = await w.manifest({ lines: many });
    const org = s.world.org("acme");
    let drained = false;
    const { outcome } = await runIn(s, manifest, {
      // Slow enough that most creates wait in the queue when the refusal comes.
      limits: { video: { rps: 50, inFlight: 12 }, speech: { rps: 4, inFlight: 12 } },
      onProgress: (p) => {
        if (drained || p.counts.running < 1) return;
        drained = true;
        org.ledger.reserve(org.ledger.summary().available_points);
      },
    });
    expect(drained).toBe(true);
    const st = await s.stats();
    const sent = st.requests["POST /audio/v1/speech/jobs"] ?? 0;
    const made = created(st);
    // One refusal at most per create already on the wire when the first refusal came back.
    expect(sent - made).toBeGreaterThanOrEqual(1);
    expect(sent - made).toBeLessThanOrEqual(2);
    expect(outcome.report!.note).toMatch(/insufficient points/);
    const records = (await w.journal()) as RunRecord[];
    const withdrawn = records.filter((r) => r.t === "withdrawn").length;
    const intents = records.filter((r) => r.t === "intent").length;
    expect(intents - withdrawn).toBe(sent);
    expect(withdrawn).toBeGreaterThan(0);
    // Every task the service made is in the journal.
    expect(records.filter((r) => r.t === "created")).toHaveLength(made);
  });

  it("--fresh refused for its budget leaves the state as it was; each applied --fresh keeps a timestamped copy (item 2)", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: shots.slice(0, 1), lines: lines.slice(0, 1) });
    expect((await runIn(s, manifest)).outcome.exitCode).toBe(0);
    const state = await readFile(w.statePath());
    const refused = (await runIn(s, manifest, { fresh: true, maxPoints: 10 })).outcome;
    expect(refused.exitCode).toBe(3);
    expect(await readFile(w.statePath())).toEqual(state);
    expect(
      (await readdir(join(w.dir, ".clapper", "ep01"))).filter((f) => f.includes("before-fresh")),
    ).toEqual([]);
    expect(created(await s.stats())).toBe(2);
    // Two fresh runs that apply: two copies, none overwritten.
    expect((await runIn(s, manifest, { fresh: true })).outcome.exitCode).toBe(0);
    await new Promise((r) => setTimeout(r, 5));
    expect((await runIn(s, manifest, { fresh: true })).outcome.exitCode).toBe(0);
    const copies = (await readdir(join(w.dir, ".clapper", "ep01"))).filter((f) => f.includes("before-fresh"));
    expect(copies).toHaveLength(2);
    expect(await readFile(join(w.dir, ".clapper", "ep01", copies.sort()[0] as string))).toEqual(state);
  });
});

describe("creates already sent when submission stops", () => {
  it("are carried to their answer and followed: every task made is recorded, paid once, reported (item 5)", async () => {
    const { s, w } = await setup();
    const many = Array.from({ length: 8 }, (_, i) => ({ id: `n${i + 10}`, text: `Line number ${i + 10}.` }));
    const manifest = await w.manifest({ lines: many });
    const org = s.world.org("acme");
    const before = await s.settledTotal();
    // The first three creates are handled at once but answered late; once the third is made, the
    // balance is gone, so the fourth is refused while the first three are still on the wire.
    let creates = 0;
    let colleague: ReturnType<typeof org.ledger.reserve>;
    const held = await proxy(
      s.url,
      () => undefined,
      async (hit) => {
        if (hit.method !== "POST" || hit.url !== "/audio/v1/speech/jobs") return;
        const n = ++creates;
        if (n === 3) colleague = org.ledger.reserve(org.ledger.summary().available_points);
        if (n <= 3) await new Promise((r) => setTimeout(r, 300));
      },
    );
    onTestFinished(() => held.close());
    const { outcome } = await runIn({ ...s, url: held.url } as Sandbox, manifest, {
      allowPrivateUrls: true,
      limits: { video: { rps: 50, inFlight: 8 }, speech: { rps: 50, inFlight: 8 } },
    });
    expect(outcome.report!.note).toMatch(/insufficient points/);
    const made = created(await s.stats());
    expect(made).toBe(3);
    const records = (await w.journal()) as RunRecord[];
    expect(records.filter((r) => r.t === "created")).toHaveLength(3);
    expect(outcome.report!.counts.succeeded).toBe(3);
    // The colleague's reservation ends unspent; the drop is then exactly what was reported.
    if (colleague) org.ledger.settle(colleague, 0);
    expect(outcome.report!.points.spent).toBe(before - (await s.settledTotal()));
  });
});

describe("a task whose create was unanswered when its run ended", () => {
  it("is learnt and paid for by the next run, and counted in that run's report (points in some report)", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ lines: [{ id: "n01", text: "Every night, the light came on." }] });
    const before = await s.settledTotal();
    // Every answer to the create is lost (after the work): the run ends not knowing its task.
    const lossy = await proxy(s.url, (_n, hit) =>
      hit.method === "POST" && hit.url === "/audio/v1/speech/jobs" ? "after" : undefined,
    );
    onTestFinished(() => lossy.close());
    const first = (await runIn({ ...s, url: lossy.url } as Sandbox, manifest, { allowPrivateUrls: true }))
      .outcome;
    // Every create left unanswered after its retries: the service counts as unreachable (exit 6).
    expect(first.exitCode).toBe(6);
    expect(first.report!.points.spent).toBe(0);
    expect(created(await s.stats())).toBe(1);
    const second = (await runIn(s, manifest)).outcome;
    expect(second.exitCode).toBe(0);
    expect(created(await s.stats())).toBe(1);
    const drop = before - (await s.settledTotal());
    expect(drop).toBeGreaterThan(0);
    expect(first.report!.points.spent + second.report!.points.spent).toBe(drop);
  });
});

describe("edited and removed rows with tasks in flight", () => {
  it("an edited row's running task is followed to its end and paid; the new version is made too", async () => {
    const { s, w } = await setup();
    const slow = [{ id: "s01", prompt: "A slow take [sandbox:slow]" }];
    const manifest = await w.manifest({ shots: slow });
    const before = await s.settledTotal();
    const first = (
      await runIn(s, manifest, {
        ...interruptWhen((p) => p.counts.running >= 1),
      })
    ).outcome;
    expect(first.exitCode).toBe(4);
    await w.manifest({ shots: [{ id: "s01", prompt: "The take, edited" }] });
    const { outcome, logs } = await runIn(s, manifest);
    expect(outcome.exitCode).toBe(0);
    expect(created(await s.stats())).toBe(2);
    expect(logs.lines().some((l) => l.event === "orphan-settled" && l.status === "succeeded")).toBe(true);
    // Both tasks cost 40: the old version's is counted with the job.
    expect(job(outcome, "shot/s01").points).toBe(80);
    expect(outcome.report!.points.spent).toBe(before - (await s.settledTotal()));
    const state = (await w.journal()) as RunRecord[];
    expect(state.filter((r) => r.t === "settled")).toHaveLength(2);
  });

  it("a removed row's running task is followed, paid and listed; the run still succeeds", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: [
        { id: "s01", prompt: "A lighthouse at dusk [sandbox:slow]" },
        { id: "s02", prompt: "The lamp turns [sandbox:slow]" },
      ],
    });
    const before = await s.settledTotal();
    const first = (
      await runIn(s, manifest, {
        ...interruptWhen((p) => p.counts.running >= 2),
      })
    ).outcome;
    expect(first.exitCode).toBe(4);
    await w.manifest({ shots: [{ id: "s01", prompt: "A lighthouse at dusk [sandbox:slow]" }] });
    const second = (await runIn(s, manifest)).outcome;
    expect(second.exitCode).toBe(0);
    expect(created(await s.stats())).toBe(2);
    expect(job(second, "shot/s02")).toMatchObject({ status: "cancelled", points: 40 });
    expect(job(second, "shot/s02").error?.code).toBe("removed_from_manifest");
    expect(second.report!.points.spent).toBe(before - (await s.settledTotal()));
    // Nothing is left reserved: a later run is not held back by it.
    const third = (await runIn(s, manifest, { maxPoints: 0 })).outcome;
    expect(third.exitCode).toBe(0);
  });
});

describe("--fresh within one campaign", () => {
  it("a second, wider --fresh regenerates what the first did not, and nothing twice", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots });
    expect((await runIn(s, manifest)).outcome.exitCode).toBe(0);
    const partial = (
      await runIn(s, manifest, {
        fresh: true,
        only: ["shot/s01"],
        ...interruptWhen((p) => p.counts.running >= 1),
      })
    ).outcome;
    expect(partial.exitCode).toBe(4);
    const wide = (await runIn(s, manifest, { fresh: true })).outcome;
    expect(wide.exitCode).toBe(0);
    // Two tasks of the first run, one for s01's fresh start, one for s02: s01 not made twice.
    expect(created(await s.stats())).toBe(4);
    expect(wide.report!.counts).toMatchObject({ succeeded: 2, skipped: 0 });
  });

  it("--fresh over a campaign whose job used up its attempts tries it again", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: [
        { id: "s01", prompt: "Fails [sandbox:fail]" },
        { id: "s02", prompt: "Slow [sandbox:slow]" },
      ],
    });
    const first = (
      await runIn(s, manifest, {
        maxAttempts: 1,
        ...interruptWhen((p) => p.counts.failed >= 1),
      })
    ).outcome;
    expect(first.exitCode).toBe(4);
    const fresh = (await runIn(s, manifest, { fresh: true, maxAttempts: 1 })).outcome;
    expect(job(fresh, "shot/s01")).toMatchObject({ status: "failed" });
    // s01 was tried again after --fresh (its second task), s02 followed (its first).
    expect((await w.journal()).filter((r) => r.t === "intent" && r.id === "shot/s01")).toHaveLength(2);
  });
});

describe("--fresh with --only", () => {
  it("regenerates only the jobs named; the others keep their results, and a later run pays for nothing", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots, lines: lines.slice(0, 1) });
    expect((await runIn(s, manifest)).outcome.exitCode).toBe(0);
    const fresh = (await runIn(s, manifest, { fresh: true, only: ["shot/s01"] })).outcome;
    expect(fresh.exitCode).toBe(0);
    expect(created(await s.stats())).toBe(4);
    expect(job(fresh, "shot/s01")).toMatchObject({ status: "succeeded", attempts: 1 });
    const after = (await runIn(s, manifest)).outcome;
    expect(after.exitCode).toBe(0);
    expect(created(await s.stats())).toBe(4);
    expect(after.report!.counts).toMatchObject({ skipped: 3, succeeded: 0 });
  });
});

describe("data", () => {
  it("a second manifest with the same name is refused, never mixed into the first one's state (item 7)", async () => {
    const { s, w } = await setup();
    const a = await w.manifest({ shots: shots.slice(0, 1) }, "a.yaml");
    const b = await w.manifest({ shots: [{ id: "s01", prompt: "Something else entirely" }] }, "b.yaml");
    expect((await runIn(s, a)).outcome.exitCode).toBe(0);
    const state = await readFile(w.statePath());
    const output = await sha256(join(w.out(), "shots/s01.mp4"));
    const other = (await runIn(s, b)).outcome;
    expect(other.exitCode).toBe(2);
    expect(other.message).toMatch(/belongs to .*a\.yaml.*another manifest named "ep01"/);
    expect(await readFile(w.statePath())).toEqual(state);
    expect(await sha256(join(w.out(), "shots/s01.mp4"))).toBe(output);
    expect(created(await s.stats())).toBe(1);
    // status and report refuse the same way.
    const st = await cli(s, ["status", b]);
    expect(st.code).toBe(2);
    expect(st.err).toMatch(/another manifest named/);
    // Once the first manifest is gone (renamed), the state is taken over, with a warning.
    await rename(a, join(w.dir, "a.old"));
    const adopted = await runIn(s, b);
    expect(adopted.outcome.exitCode).toBe(0);
    expect(adopted.logs.text()).toMatch(/no longer exists/);
  });

  it("an output folder that cannot be written stops the run before its first create (item 8)", async () => {
    const { s, w } = await setup();
    const blocker = await w.write("not-a-folder", "a file where the output folder should be\n");
    const manifest = await w.manifest({ shots: shots.slice(0, 1) });
    const before = await s.settledTotal();
    const { outcome } = await runIn(s, manifest, { output: join(blocker, "out") });
    expect(outcome.exitCode).toBe(2);
    expect(outcome.message).toMatch(/not writable.*nothing was submitted/);
    expect(created(await s.stats())).toBe(0);
    expect(await s.settledTotal()).toBe(before);
    expect(existsSync(`${w.statePath()}.lock`)).toBe(false);
  });

  it("a write failure mid-run leaves the job paid and waiting; the next run collects it without a new task (item 8)", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots });
    // The shots folder becomes a file once the first task exists: every result write then fails.
    let blocked = false;
    const first = await runIn(s, manifest, {
      onProgress: (p) => {
        if (blocked || p.counts.running < 1) return;
        blocked = true;
        void mkdir(w.out(), { recursive: true }).then(() => writeFile(join(w.out(), "shots"), "in the way"));
      },
    });
    expect(blocked).toBe(true);
    expect(first.outcome.exitCode).toBe(1);
    expect(first.outcome.message).toMatch(/run again to collect/);
    for (const id of ["shot/s01", "shot/s02"]) {
      expect(job(first.outcome, id).status).toBe("pending");
      expect(job(first.outcome, id).points).toBe(40);
    }
    expect(created(await s.stats())).toBe(2);
    await rm(join(w.out(), "shots"));
    const second = (await runIn(s, manifest)).outcome;
    expect(second.exitCode).toBe(0);
    expect(created(await s.stats())).toBe(2);
    for (const j of second.report!.jobs) expect(await sha256(j.output!.uri)).toBe(j.output!.sha256);
    // Paid for by the first run, which reported it; this run pays nothing.
    expect(first.outcome.report!.points.spent).toBe(80);
    expect(second.report!.points.spent).toBe(0);
  });

  it("the fate of a job is one record: no prefix of the journal leaves a job pending without a reason (item 13)", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({
      shots: [{ id: "s01", prompt: "This one fails [sandbox:fail]" }],
      lines: [{ id: "n01", text: "Refused for certain [sandbox:fail]" }],
    });
    const { outcome } = await runIn(s, manifest, { maxAttempts: 1 });
    expect(outcome.report!.counts.failed).toBe(2);
    const records = (await w.journal()) as RunRecord[];
    expect(records.some((r) => r.t === "failed")).toBe(false);
    // A kill can land between any two records: replay every prefix.
    for (let cut = 0; cut <= records.length; cut++) {
      const state = initialState();
      for (const r of records.slice(0, cut)) applyRecord(state, r);
      for (const st of Object.values(state.jobs)) {
        const last = st.attempts.at(-1);
        const ended = last?.spent !== undefined;
        // A settled attempt of a failed task with no fate would be retried by a plain run.
        if (ended && st.status === "pending")
          throw new Error(`prefix ${cut}: ${st.id} pending after its attempt ended`);
      }
    }
  });
});

describe("the lock", () => {
  it("a run whose lock is taken over (--break-lock elsewhere) stops at once and exits 5, writing nothing more (item 14)", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ shots: [{ id: "s01", prompt: "A slow take [sandbox:slow]" }] });
    let broken: Promise<unknown> | undefined;
    const started = Date.now();
    const { outcome } = await runIn(s, manifest, {
      lease: { leaseMs: 2000, heartbeatMs: 50 },
      onProgress: (p) => {
        if (broken || p.counts.running < 1) return;
        broken = acquireLock(`${w.statePath()}.lock`, { breakLock: true }).then((l) => l.release());
      },
    });
    await broken;
    expect(outcome.exitCode).toBe(5);
    expect(outcome.message).toMatch(/lock .* (taken over|removed).*this run stopped/);
    expect(Date.now() - started).toBeLessThan(5000);
    // No report, no end written by the run that lost its state.
    expect(existsSync(join(w.out(), "reports", "report.json"))).toBe(false);
    expect((await w.journal()).some((r) => r.t === "finish")).toBe(false);
  });
});

describe("names and state", () => {
  it("`name` is checked before any path is built from it, in every command (item 17)", async () => {
    const { s, w } = await setup();
    // A name that, used as a path, would leave the workspace (unique, so no other run's leftover counts).
    const outside = `escape-${process.pid}-${Date.now()}`;
    for (const name of [`../../../${outside}`, "a\u0000b", "x".repeat(300)]) {
      const manifest = await w.write(
        "bad.yaml",
        `name: ${JSON.stringify(name)}\nshots:\n  - { id: s01, prompt: "p" }\n`,
      );
      for (const argv of [
        ["run", manifest],
        ["status", manifest],
        ["report", manifest],
        ["cancel", manifest],
      ]) {
        const r = await cli(s, argv);
        expect(r.code, `${argv[0]} ${JSON.stringify(name)}`).toBe(2);
        expect(r.err).toMatch(/name/);
      }
    }
    // Nothing was made outside the workspace, nor inside it.
    expect(existsSync(join(w.dir, "..", "..", "..", outside))).toBe(false);
    expect(existsSync(join(w.dir, "out", "..", "..", "..", outside))).toBe(false);
    expect(existsSync(join(w.dir, ".clapper"))).toBe(false);
    expect(created(await s.stats())).toBe(0);
  });

  it("run, status and report find the same state for a manifest a quick parse reads differently (item 18)", async () => {
    const { s, w } = await setup();
    // 150 aliases: over the yaml library's default alias limit, which a quick parse tripped on.
    const aliases = Array.from({ length: 150 }, (_, i) => `  - { <<: *d, id: s${i + 1} }`).join("\n");
    const text = `name: aliased\noutput: ./out\nx-shot: &d { prompt: "A wave", model: Vid-H3, resolution: 480P, duration: 4 }\nshots:\n${aliases}\n`;
    const manifest = await w.write("many.yaml", text);
    // The full loader reads the aliases (the quick parse gave up at 100 and guessed a name).
    expect((await cli(s, ["plan", manifest, "--json"])).code).toBe(0);
    const ran = await cli(s, ["run", manifest, "--only", "shot/s1"]);
    expect(ran.code).toBe(0);
    expect(existsSync(join(w.dir, ".clapper", "aliased", "state.jsonl"))).toBe(true);
    expect(existsSync(join(w.dir, ".clapper", "many"))).toBe(false);
    const st = await cli(s, ["status", manifest, "--json"]);
    expect(JSON.parse(st.out).jobs.find((j: { id: string }) => j.id === "shot/s1").status).toBe("succeeded");
  }, 20_000);
});

describe("secrets", () => {
  it("the key is redacted by value from whatever the service echoes (item 15)", async () => {
    const { w } = await setup();
    const manifest = await w.manifest({ shots: shots.slice(0, 1) });
    // A service that quotes the Authorization header in its refusal.
    const echo = createServer((req, res) => {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          type: "error",
          error: {
            type: "bad_request_error",
            message: `bad header: ${req.headers.authorization}`,
            http_code: "400",
          },
          request_id: "req_echo",
        }),
      );
    });
    await new Promise<void>((r) => echo.listen(0, "127.0.0.1", r));
    onTestFinished(() => new Promise<void>((r) => echo.close(() => r())));
    const url = `http://127.0.0.1:${(echo.address() as AddressInfo).port}`;
    const r = await cli(undefined, ["run", manifest, "--log-format", "json"], {
      CLAPPER_BASE_URL: url,
      CLAPPER_API_KEY: KEY,
    });
    expect(r.code).not.toBe(0);
    expect(`${r.out}\n${r.err}`).toMatch(/bad header: (Bearer )?\[redacted\]/);
    const everything = `${r.out}\n${r.err}\n${r.logs.text()}`;
    expect(everything).not.toContain(KEY);
    for (const file of await readdir(w.dir, { recursive: true })) {
      const path = join(w.dir, file);
      if ((await stat(path)).isFile()) expect((await readFile(path)).includes(KEY), path).toBe(false);
    }
  });
});
