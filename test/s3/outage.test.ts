// The store goes away in the middle of a run: results already paid for cannot be stored. The run
// (the CLI, as its own process) must stop with its state saved and exit 6 (a dependency that cannot
// be reached), and the next run, once the store is back on the same port and folder, must store
// everything without creating any task twice.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/model.js";
import { type CliResult, cli, journalRecords, replay, staleBuild } from "../run/harness.js";
import { created, KEY, RETRY_ENV, type Sb, setup, type Workspace } from "../run/helpers.js";
import { BUCKET, S3_ENV, type Store, startStore } from "./helpers.js";

let store: Store;
beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  store = await startStore();
});
afterAll(async () => {
  await store?.close();
});

const JOBS = ["shot/s01", "shot/s02", "shot/s03", "line/n01", "line/n02"];
/** Ten times slower than the others: still rendering when the store goes away. */
const SLOW = ["shot/s02", "shot/s03", "line/n02"];
const keyOf = (prefix: string, id: string) =>
  `${prefix}/${id.startsWith("shot/") ? `shots/${id.slice(5)}.mp4` : `lines/${id.slice(5)}.wav`}`;

interface Outage {
  /** Where the run's objects go: `<root>/outage`. */
  prefix: string;
  output: string;
  s: Sb;
  w: Workspace;
  manifest: string;
  args: string[];
  env: Record<string, string>;
  first: CliResult;
  stored: string[];
  pending: string[];
}

/**
 * A run into `s3://BUCKET/<root>` whose store is killed as soon as the first result is stored;
 * returns once it has ended. Each test has its own root: a run trusts what the store holds.
 */
async function runThroughOutage(root: string): Promise<Outage> {
  const output = `s3://${BUCKET}/${root}`;
  // Slow enough that "slow" is hundreds of milliseconds, not tens: the test is not a race.
  const { s, w } = await setup({ timeScale: 0.01 });
  const manifest = await w.manifest({
    name: "outage",
    shots: [
      { id: "s01", prompt: "Stored before the store goes away" },
      { id: "s02", prompt: "Still rendering when it goes [sandbox:slow]" },
      { id: "s03", prompt: "Also still rendering [sandbox:slow]", duration: 5 },
    ],
    lines: [
      { id: "n01", text: "Quick to say." },
      { id: "n02", text: "Slow to say. [sandbox:slow]" },
    ],
  });
  const args = [
    "run",
    manifest,
    "--output",
    output,
    "--s3-endpoint",
    store.endpoint,
    "--log-format",
    "json",
    "--poll-interval",
    "0.02",
    // Looks at the pace of a settled run: this test is about the store, not about finding a rate.
    "--rps",
    "fixed:100",
  ];
  const env = { CLAPPER_BASE_URL: s.url, CLAPPER_API_KEY: KEY, ...RETRY_ENV, ...S3_ENV };
  const run = cli(args, { cwd: w.dir, env });
  await run.when((e) => e.event === "stored");
  await store.kill();
  const first = await run.done;
  const stored = first.events.filter((e) => e.event === "stored").map((e) => e.job as string);
  const pending = JOBS.filter((id) => !stored.includes(id));
  return { prefix: `${root}/outage`, output, s, w, manifest, args, env, first, stored, pending };
}

describe("the store going away mid-run", () => {
  it("exits 6 with its state saved, then completes when run again, creating no task twice", async () => {
    const { prefix, s, w, manifest, args, env, first, stored, pending } = await runThroughOutage("outage-a");
    try {
      const why = `${first.messages.join("\n")}\n${first.stdout}`;
      expect(first.code, why).toBe(6);
      // It stopped at the first result it could not store, rather than follow every task to the same end.
      expect(why).toMatch(/run again once it is reachable/);
      // The store's error names what could not be written (today it is all the run says: see the
      expect(why).toMatch(
        /S3: writing s3:\/\/clapper-out\/outage-a\/outage\/reports\/report\.json failed: connect ECONNREFUSED 127\.0\.0\.1:\d+/,
      );
      expect(stored.length).toBeGreaterThanOrEqual(1);
      expect(pending).toEqual(expect.arrayContaining(SLOW));
      // Each result that could not be stored was said so and left to the next run; the tasks still
      // rendering when the run stopped are left to it too.
      const failed = first.events.filter((e) => e.event === "collect-failed").map((e) => e.job as string);
      expect(failed.length).toBeGreaterThanOrEqual(1);
      for (const id of failed) expect(pending).toContain(id);

      // The state on disk: every job has its one task; the pending ones are paid for and waiting to be collected.
      const state = replay(await journalRecords(w.statePath("outage")));
      for (const id of JOBS) {
        const job = state.jobs[id];
        expect(
          job?.attempts.map((a) => Boolean(a.taskId)),
          id,
        ).toEqual([true]);
        if (stored.includes(id)) expect(job?.status, id).toBe("stored");
        else expect(["collecting", "running"], id).toContain(job?.status);
      }
      for (const id of failed) expect(state.jobs[id]?.attempts[0]?.spent, id).toBeGreaterThan(0);
      // `clapper status` reads it and says what is pending.
      const status = await cli(["status", manifest, "--json"], { cwd: w.dir, env }).done;
      expect(status.code, status.messages.join("\n")).toBe(0);
      const seen = JSON.parse(status.stdout) as Report;
      expect(seen.counts).toMatchObject({
        total: 5,
        succeeded: stored.length,
        pending: pending.length,
        failed: 0,
      });
      expect(seen.jobs.filter((j) => j.status === "pending").map((j) => j.id)).toEqual(
        JOBS.filter((id) => pending.includes(id)),
      );
      expect(created(await s.stats())).toBe(5);

      // The store comes back on the same port, with the same files.
      await store.restart();
      for (const id of stored) expect(await store.head(keyOf(prefix, id)), id).toBeDefined();
      const before = await s.stats();
      const second = await cli(args, { cwd: w.dir, env }).done;
      expect(second.code, second.messages.join("\n")).toBe(0);
      expect(second.events.filter((e) => e.event === "submitting" || e.event === "created")).toEqual([]);
      expect(
        second.events
          .filter((e) => e.event === "stored")
          .map((e) => e.job)
          .sort(),
      ).toEqual([...pending].sort());
      const after = await s.stats();
      expect(created(after)).toBe(5);
      expect(after.idempotent_replays).toBe(before.idempotent_replays);
      expect(
        (after.requests["POST /vid/v2/video_generation"] ?? 0) +
          (after.requests["POST /audio/v1/speech/jobs"] ?? 0),
      ).toBe(5);

      // Every object is there, as the report stored beside them says.
      const reportObject = await store.object(`${prefix}/reports/report.json`);
      const report = JSON.parse(reportObject?.text ?? "{}") as Report;
      expect(report.run.status).toBe("succeeded");
      // Stored by this run, or by the first one (reported as skipped when the first run finished).
      expect(report.counts).toMatchObject({ total: 5, failed: 0, cancelled: 0, pending: 0 });
      expect(report.counts.succeeded + report.counts.skipped).toBe(5);
      expect(report.counts.succeeded).toBeGreaterThanOrEqual(pending.length);
      for (const job of report.jobs) {
        const object = await store.object(keyOf(prefix, job.id));
        expect({ bytes: object?.bytes, sha256: object?.sha256 }, job.id).toEqual({
          bytes: job.output?.bytes,
          sha256: job.output?.sha256,
        });
        expect(object?.metadata.fingerprint).toBe(job.fingerprint);
        expect(object?.metadata.task).toBe(job.task_id);
      }
    } finally {
      await store.restart();
    }
  });

  it("says the reports could not be written, with the counts of what is pending", async () => {
    const { first, pending } = await runThroughOutage("outage-b");
    await store.restart();
    expect(first.code).toBe(6);
    const said = `${first.stdout}\n${first.messages.join("\n")}`;
    expect(said).toContain(
      `5 jobs: ${5 - pending.length} generated, 0 reused, 0 failed, 0 cancelled, ${pending.length} pending`,
    );
    expect(said).toMatch(/reports could not be written to s3:\/\/clapper-out\/outage-b\/outage/);
    expect(said).toMatch(/run again/);
  });

  it("`clapper report` writes the reports again into S3", async () => {
    const { prefix, output, s, w, manifest, args, env } = await runThroughOutage("outage-c");
    await store.restart();
    expect((await cli(args, { cwd: w.dir, env }).done).code).toBe(0);
    for (const name of ["report.json", "report.md", "junit.xml", "report.html"])
      await store.remove(`${prefix}/reports/${name}`);
    const rewritten = await cli(["report", manifest, "--output", output, "--s3-endpoint", store.endpoint], {
      cwd: w.dir,
      env,
    }).done;
    expect(rewritten.code, rewritten.messages.join("\n")).toBe(0);
    expect((await store.list(`${prefix}/reports/`)).map((o) => o.key)).toEqual([
      `${prefix}/reports/junit.xml`,
      `${prefix}/reports/report.html`,
      `${prefix}/reports/report.json`,
      `${prefix}/reports/report.md`,
    ]);
    expect(created(await s.stats())).toBe(5);
  });
});
