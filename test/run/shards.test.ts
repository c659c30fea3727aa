// One manifest split in shards that run at once on "machines" of their own (a temporary folder
// each, holding only the manifest), against one sandbox process, sharing one account through a
// real redis-server and one output in a real S3 protocol server (s3rver). Every check compares
// what the reports say with what the sandbox saw: tasks created, and the balance drop.
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/model.js";
import { type RedisServer, redisAvailable, redisSkipReason, startRedis } from "../coord/redis-server.js";
import { BUCKET, S3_ENV, type Store, startStore } from "../s3/helpers.js";
import {
  type CliResult,
  cli,
  cliEnv,
  type SandboxProcess,
  settledBalance,
  staleBuild,
  startSandbox,
} from "./harness.js";

const HAVE_REDIS = redisAvailable();
const FLAGS = ["--log-format", "json", "--poll-interval", "0.05", "--max-attempts", "1"];

/** Shots with a narration line each, and a few lines of no shot; prompts marked by `tag`. */
function storyboard(name: string, tag: string, shots: number, extra: string[] = []): string {
  const out = [
    `name: ${name}`,
    "output: ./output",
    ...extra,
    "defaults:",
    '  shot: { model: Vid-H3, resolution: 480P, duration: 4, ratio: "16:9" }',
    '  line: { language: EN, voice: "preset:en_female_bright" }',
    "shots:",
  ];
  for (let i = 1; i <= shots; i++) out.push(`  - { id: s${i}, prompt: "${tag}: shot ${i}" }`);
  out.push("lines:");
  for (let i = 1; i <= shots; i++)
    out.push(`  - { id: n${i}, shot: s${i}, text: "${tag}: the line of shot ${i}." }`);
  for (let i = 1; i <= 3; i++) out.push(`  - { id: free${i}, text: "${tag}: a line of no shot, ${i}." }`);
  return `${out.join("\n")}\n`;
}

interface Machine {
  dir: string;
  manifest: string;
}

describe.skipIf(!HAVE_REDIS)(`shards (${HAVE_REDIS ? "redis-server, s3rver" : redisSkipReason})`, () => {
  let redis: RedisServer;
  let store: Store;
  let sb: SandboxProcess;
  const dirs: string[] = [];
  beforeAll(async () => {
    expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
    [redis, store, sb] = await Promise.all([startRedis(), startStore(), startSandbox(0.02)]);
  });
  afterAll(async () => {
    await Promise.all([redis?.stop(), store?.close(), sb?.close()]);
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  /** A machine of its own: an empty folder with the manifest in it. */
  const machine = async (name: string, text: string): Promise<Machine> => {
    const dir = await mkdtemp(join(tmpdir(), "clapper-shard-"));
    dirs.push(dir);
    const manifest = join(dir, `${name}.yaml`);
    await writeFile(manifest, text);
    return { dir, manifest };
  };
  const env = () => ({ ...cliEnv(sb), ...S3_ENV, AWS_ENDPOINT_URL_S3: store.endpoint });
  const s3Report = async (key: string): Promise<Report> => {
    const o = await store.object(key);
    expect(o, `s3://${BUCKET}/${key}`).toBeDefined();
    return JSON.parse(o?.text ?? "") as Report;
  };
  /** `clapper run` of shard `shard` on machine `m`, through the coordinator, to `output`. */
  const runShard = (m: Machine, output: string, shard: string, extra: string[] = []) =>
    cli(
      [
        "run",
        m.manifest,
        ...FLAGS,
        "--output",
        output,
        "--coordinator",
        redis.url,
        "--shard",
        shard,
        ...extra,
      ],
      {
        cwd: m.dir,
        env: env(),
      },
    ).done;
  /**
   * s3rver removes a folder once its last object is deleted, and a PUT into that folder at the same
   * moment fails with an uncaught ENOENT in s3rver itself (its write stream has no error handler):
   * shards starting together each write and delete a probe object in the run's prefix. An object
   * kept there leaves the folder in place (S3 itself has no folders).
   */
  const shared = async (prefix: string, name: string) => {
    await store.put(`${prefix}/${name}/.keep`, "kept so that the folder stays");
    return `s3://${BUCKET}/${prefix}`;
  };
  const created = async () => {
    const t = (await sb.stats()).tasks_created;
    return t.video + t.speech;
  };

  it("three shards at once: every job created once, and the last one merges a report equal to a single run's", {
    timeout: 120_000,
  }, async () => {
    const name = "board";
    const text = storyboard(name, "sharded", 12);
    const machines = await Promise.all([1, 2, 3].map(() => machine(name, text)));
    const before = await settledBalance(sb);
    const tasksBefore = await created();
    const output = await shared("three", name);
    const runs: CliResult[] = await Promise.all(machines.map((m, i) => runShard(m, output, `${i + 1}/3`)));
    for (const r of runs) expect(r.code, r.messages.join("\n")).toBe(0);
    const after = await settledBalance(sb);
    // 12 shots, 12 lines, 3 free lines: each created exactly once across the shards.
    expect((await created()) - tasksBefore).toBe(27);

    const shards = await Promise.all(
      [1, 2, 3].map((i) => s3Report(`three/${name}/reports/shards/${i}-of-3/report.json`)),
    );
    expect(shards.map((r) => r.run.shard)).toEqual([1, 2, 3].map((index) => ({ index, total: 3 })));
    // The shards' jobs are disjoint and together the whole manifest; a shot and its line go together.
    const ids = shards.flatMap((r) => r.jobs.map((j) => j.id));
    expect(new Set(ids).size).toBe(27);
    for (const r of shards)
      for (const j of r.jobs.filter((x) => x.id.startsWith("line/n")))
        expect(r.jobs.map((x) => x.id)).toContain(j.id.replace("line/n", "shot/s"));

    // Exactly one shard found the set complete first; its log says it merged.
    const merges = runs.filter((r) => r.events.some((e) => e.event === "merged"));
    expect(merges.length).toBeGreaterThanOrEqual(1);
    const merged = await s3Report(`three/${name}/reports/report.json`);
    expect(merged.run.status).toBe("succeeded");
    expect(merged.counts).toEqual({
      total: 27,
      succeeded: 27,
      failed: 0,
      cancelled: 0,
      skipped: 0,
      pending: 0,
    });
    expect(merged.points.spent).toBe(before.available_points - after.available_points);
    expect(merged.shards?.map((s) => [s.index, s.status, s.counts?.total])).toEqual(
      shards.map((r, i) => [i + 1, "succeeded", r.counts.total]),
    );
    // In the manifest's order, each job's output in the store with the size and hash reported.
    expect(merged.jobs.map((j) => j.id)).toEqual([
      ...Array.from({ length: 12 }, (_, i) => `shot/s${i + 1}`),
      ...Array.from({ length: 12 }, (_, i) => `line/n${i + 1}`),
      "line/free1",
      "line/free2",
      "line/free3",
    ]);
    for (const j of merged.jobs) {
      const key = (j.output?.uri ?? "").replace(`s3://${BUCKET}/`, "");
      const o = await store.object(key);
      expect(o?.bytes, j.id).toBe(j.output?.bytes);
      expect(o?.sha256, j.id).toBe(j.output?.sha256);
    }
    const md = await store.object(`three/${name}/reports/report.md`);
    expect(md?.text).toContain("## Shards (3)");
    expect((await store.object(`three/${name}/reports/junit.xml`))?.text).toContain('tests="27"');

    // Each machine's status and report are its shard's own.
    const status = await cli(["status", machines[1]?.manifest ?? "", "--shard", "2/3", "--json"], {
      cwd: machines[1]?.dir ?? "",
      env: env(),
    }).done;
    expect(status.code, status.messages.join("\n")).toBe(0);
    const standing = JSON.parse(status.stdout) as Report;
    expect(standing.jobs.map((j) => j.id)).toEqual(shards[1]?.jobs.map((j) => j.id));
    expect(standing.run).toMatchObject({ status: "succeeded", shard: { index: 2, total: 3 } });
    const unsharded = await cli(["status", machines[1]?.manifest ?? "", "--json"], {
      cwd: machines[1]?.dir ?? "",
      env: env(),
    }).done;
    expect((JSON.parse(unsharded.stdout) as { run: { status: string } }).run.status).toBe("not-run");

    // The same manifest run whole, once: the same counts, points and output sizes per job. Its
    // prompts differ by a tag of the same length (the same text would be the same Idempotency-Keys,
    // and the service would return the shards' tasks, paid already).
    const single = await machine(name, storyboard(name, "singled", 12));
    const whole = await cli(["run", single.manifest, ...FLAGS, "--output", `s3://${BUCKET}/single`], {
      cwd: single.dir,
      env: env(),
    }).done;
    expect(whole.code, whole.messages.join("\n")).toBe(0);
    const one = await s3Report(`single/${name}/reports/report.json`);
    expect(merged.counts).toEqual(one.counts);
    expect(merged.points.spent).toBe(one.points.spent);
    expect(merged.points.estimated).toBe(one.points.estimated);
    const shape = (r: Report) =>
      r.jobs.map((j) => [j.id, j.kind, j.status, j.points, j.attempts, j.output?.bytes]);
    expect(shape(merged)).toEqual(shape(one));

    // `report --merge` writes the same merged report again from the store alone, on a new machine.
    const fresh = await machine(name, text);
    const again = await cli(["report", fresh.manifest, "--merge", "--output", output, "--json"], {
      cwd: fresh.dir,
      env: env(),
    }).done;
    expect(again.code, again.messages.join("\n")).toBe(0);
    const rewritten = JSON.parse(again.stdout) as Report;
    expect(rewritten.counts).toEqual(merged.counts);
    expect(rewritten.points).toEqual(merged.points);
    expect(rewritten.run.id).toBe(merged.run.id);
  });

  it.each([
    ["SIGKILL", "podkill"],
    ["SIGTERM", "podterm"],
  ] as const)(
    "a shard stopped by %s among its creates and resumed from an empty folder with --state s3:// pays for nothing twice",
    {
      timeout: 120_000,
    },
    async (signal, name) => {
      // The cap is the whole estimate: each shard holds its part of it, so the killed shard's hold
      // must lapse with its lease (and its reservations be adopted) for the resumed one to fit.
      const probe = await machine(name, storyboard(name, name, 10));
      const planned = await cli(["plan", probe.manifest, "--json"], { cwd: probe.dir, env: env() }).done;
      const total = (JSON.parse(planned.stdout) as { points: { total: number } }).points.total;
      const text = storyboard(name, name, 10, ["budget:", `  max_points: ${total}`]);
      const state = `s3://${BUCKET}/states/${name}`;
      const output = await shared(name, name);
      const [a, b] = await Promise.all([machine(name, text), machine(name, text)]);
      const before = await settledBalance(sb);
      const tasksBefore = await created();
      const lease = { ...env(), CLAPPER_LOCK_LEASE_MS: "1500" };
      const shardArgs = (m: Machine, shard: string) => [
        "run",
        m.manifest,
        ...FLAGS,
        "--output",
        output,
        "--state",
        state,
        "--coordinator",
        redis.url,
        "--shard",
        shard,
      ];
      // Shard 2 runs through; shard 1 is stopped after its 3rd create, its folder (its pod) gone.
      let creates = 0;
      const [killed, other] = await Promise.all([
        cli(shardArgs(a, "1/2"), {
          cwd: a.dir,
          env: lease,
          on: (e) => (e.event === "created" && ++creates === 3 ? signal : undefined),
        }).done,
        cli(shardArgs(b, "2/2"), { cwd: b.dir, env: lease }).done,
      ]);
      // SIGKILL ends it at once; SIGTERM lets it stop submitting, save its state and exit 4.
      if (signal === "SIGKILL") expect(killed.signal, killed.messages.join("\n")).toBe("SIGKILL");
      else expect(killed.code, killed.messages.join("\n")).toBe(4);
      expect(other.code, other.messages.join("\n")).toBe(0);
      await rm(a.dir, { recursive: true, force: true });
      // Each shard's state under its own prefix.
      const prefixes = new Set((await store.list(`states/${name}/`)).map((o) => o.key.split("/")[2]));
      expect([...prefixes].sort()).toEqual(["shard-1-of-2", "shard-2-of-2"]);

      const pod = await machine(name, text);
      const resumed = await cli(shardArgs(pod, "1/2"), { cwd: pod.dir, env: lease }).done;
      expect(resumed.code, resumed.messages.join("\n")).toBe(0);
      const after = await settledBalance(sb);
      // 10 shots, 10 lines, 3 free lines: each created once across both shards and both pods.
      expect((await created()) - tasksBefore).toBe(23);
      const merged = await s3Report(`${name}/${name}/reports/report.json`);
      expect(merged.counts).toMatchObject({ total: 23, succeeded: 23 });
      expect(merged.points.spent).toBe(before.available_points - after.available_points);
      expect(new Set(merged.jobs.map((j) => j.task_id)).size).toBe(23);
      for (const j of merged.jobs) {
        const o = await store.object((j.output?.uri ?? "").replace(`s3://${BUCKET}/`, ""));
        expect({ bytes: o?.bytes, sha256: o?.sha256 }, j.id).toEqual({
          bytes: j.output?.bytes,
          sha256: j.output?.sha256,
        });
      }
      // The resumed pod kept nothing on its disk.
      expect((await readdir(pod.dir)).sort()).toEqual([`${name}.yaml`]);
    },
  );

  it("two shards admitted at the same moment when the cap fits one: one runs, the other exits 3 having created nothing", {
    timeout: 60_000,
  }, async () => {
    const name = "race";
    const plain = storyboard(name, "raced", 8);
    const a = await machine(name, plain);
    const plan = await cli(["plan", a.manifest, "--shards", "2", "--json"], { cwd: a.dir, env: env() }).done;
    const tally = (JSON.parse(plan.stdout) as { shards: Array<{ jobs: number; points: number }> }).shards;
    const cap = Math.max(...tally.map((t) => t.points));
    expect(Math.min(...tally.map((t) => t.points))).toBeGreaterThan(0);
    const text = storyboard(name, "raced", 8, ["budget:", `  max_points: ${cap}`]);
    const [ma, mb] = await Promise.all([machine(name, text), machine(name, text)]);
    const output = await shared("race", name);
    const tasksBefore = await created();
    const runs = await Promise.all([runShard(ma, output, "1/2"), runShard(mb, output, "2/2")]);
    const codes = runs.map((r) => r.code).sort();
    expect(codes, runs.map((r) => r.messages.join("\n")).join("\n---\n")).toEqual([0, 3]);
    const winner = runs.findIndex((r) => r.code === 0);
    // Only the admitted shard's jobs were created; the refused one names the shared cap.
    expect((await created()) - tasksBefore).toBe(tally[winner]?.jobs);
    expect(runs[1 - winner]?.messages.join("\n") + (runs[1 - winner]?.stdout ?? "")).toMatch(
      /shared by the run's 2 shards/,
    );
  });

  it("a shard that does not fit what the run's shared cap has left exits 3 and creates nothing", {
    timeout: 60_000,
  }, async () => {
    const name = "capped";
    // 8 shots of 20 points and 11 lines: about 200 points in all; the cap lets the first shard in,
    // not the second after it.
    const text = storyboard(name, "capped", 8, ["budget:", "  max_points: 150"]);
    const [a, b] = await Promise.all([machine(name, text), machine(name, text)]);
    const plan = await cli(["plan", a.manifest, "--shards", "2", "--json"], { cwd: a.dir, env: env() }).done;
    expect(plan.code, plan.messages.join("\n")).toBe(0);
    const tally = (JSON.parse(plan.stdout) as { shards: Array<{ index: number; points: number }> }).shards;
    const [p1, p2] = tally.map((s) => s.points) as [number, number];
    expect(p1).toBeLessThanOrEqual(150);
    expect(p1 + p2).toBeGreaterThan(150);

    const output = `s3://${BUCKET}/capped`;
    const first = await runShard(a, output, "1/2");
    expect(first.code, first.messages.join("\n")).toBe(0);
    const tasksBefore = await created();
    const second = await runShard(b, output, "2/2", ["--json"]);
    expect(second.code, second.messages.join("\n")).toBe(3);
    expect(await created()).toBe(tasksBefore);
    const refusal = JSON.parse(second.stdout) as { error: { code: number; message: string } };
    expect(refusal.error.code).toBe(3);
    expect(second.stdout + second.messages.join("\n")).toMatch(/shared by the run's 2 shards/);
    // Alone (no coordinator to share the cap through) the same shard fits its own budget.
  });
});
