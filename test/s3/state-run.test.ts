// `--state s3://BUCKET/PREFIX` through the built CLI, each part its own process: the runner, the
// sandbox, a real redis-server (the lock) and s3rver (the state and the outputs). A pod with no
// disk is a fresh temp folder holding only the manifest: a run SIGKILLed among its creates is
// resumed from such a folder and finishes with every job created once, the points the report
// states equal to the balance drop, and every output whole in the store.
import { copyFile, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/model.js";
import { type RedisServer, redisAvailable, redisSkipReason, startRedis } from "../coord/redis-server.js";
import {
  cli,
  cliEnv,
  KEY,
  type SandboxProcess,
  settledBalance,
  staleBuild,
  startSandbox,
  type Workspace,
  workspace,
} from "../run/harness.js";
import { BUCKET, S3_ENV, type Store, startStore } from "./helpers.js";

const HAVE_REDIS = redisAvailable();
const FLAGS = ["--log-format", "json", "--poll-interval", "0.05"];

/** `n` 768P 4 s shots, 40 points each, their prompts marked by `name` so no two runs share a task. */
function shotsManifest(name: string, n: number): string {
  const lines = [
    `name: ${name}`,
    "output: ./output",
    "defaults:",
    '  shot: { model: Vid-H3, resolution: 768P, duration: 4, ratio: "16:9" }',
    "shots:",
  ];
  for (let i = 1; i <= n; i++)
    lines.push(`  - { id: s${String(i).padStart(2, "0")}, prompt: "${name}: take ${i}" }`);
  return `${lines.join("\n")}\n`;
}

describe.skipIf(!HAVE_REDIS)(`a state in S3 (${HAVE_REDIS ? "redis-server" : redisSkipReason})`, () => {
  let redis: RedisServer;
  let store: Store;
  const spaces: Workspace[] = [];
  const sandboxes: SandboxProcess[] = [];
  const folders: string[] = [];
  beforeAll(async () => {
    expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
    [redis, store] = await Promise.all([startRedis(), startStore()]);
  });
  afterAll(async () => {
    await redis?.stop();
    await store?.close();
    for (const sb of sandboxes) await sb.close();
    for (const w of spaces) await w.remove();
    for (const f of folders) await rm(f, { recursive: true, force: true });
  });
  const sandbox = async (timeScale: number) => {
    const sb = await startSandbox(timeScale);
    sandboxes.push(sb);
    return sb;
  };
  const space = async (name: string, n: number) => {
    const w = await workspace(name, { text: shotsManifest(name, n) });
    spaces.push(w);
    return w;
  };
  /** A pod's empty disk: a new folder with only the manifest in it. */
  const podWith = async (w: Workspace) => {
    const dir = await mkdtemp(join(tmpdir(), "clapper-pod-"));
    folders.push(dir);
    const manifest = join(dir, `${w.name}.yaml`);
    await copyFile(w.manifest, manifest);
    return { dir, manifest };
  };
  const env = (sb: SandboxProcess, extra: Record<string, string> = {}) => ({
    ...cliEnv(sb),
    ...S3_ENV,
    AWS_ENDPOINT_URL_S3: store.endpoint,
    ...extra,
  });
  const storedReport = async (key: string): Promise<Report> => {
    const found = await store.object(key);
    if (!found) throw new Error(`no ${key} in the store`);
    return JSON.parse(found.text) as Report;
  };

  it("refuses --state s3:// without --coordinator (exit 2, both flags named), a bad address, a missing bucket and an unreachable store, having created nothing", {
    timeout: 90_000,
  }, async () => {
    const sb = await sandbox(0.02);
    const w = await space("no-coord", 2);
    const state = `s3://${BUCKET}/states/no-coord`;
    const r = await cli(["run", w.manifest, ...FLAGS, "--state", state], { cwd: w.dir, env: env(sb) }).done;
    expect(r.code, r.messages.join("\n")).toBe(2);
    expect(r.messages.join("\n")).toMatch(/--state s3:\/\/clapper-out\/states\/no-coord.*--coordinator/);
    for (const bad of ["s3://Not_A_Bucket/x", `s3://${BUCKET}`, `s3://${BUCKET}/a//b`, "gs://bucket/x"]) {
      const b = await cli(["run", w.manifest, ...FLAGS, "--state", bad, "--coordinator", redis.url], {
        cwd: w.dir,
        env: env(sb),
      }).done;
      expect(b.code, `${bad}: ${b.messages.join("\n")}`).toBe(2);
      expect(b.messages.join("\n"), bad).toContain("--state");
    }
    // A bucket that does not exist (a setting: exit 2), a store that does not answer (exit 6): both
    // found before anything is submitted, and named.
    const noBucket = await cli(
      ["run", w.manifest, ...FLAGS, "--state", "s3://no-such-bucket/x", "--coordinator", redis.url],
      { cwd: w.dir, env: env(sb) },
    ).done;
    expect(noBucket.code, noBucket.messages.join("\n")).toBe(2);
    expect(noBucket.messages.join("\n")).toMatch(
      /s3:\/\/no-such-bucket\/x\/journal\/.*nothing was submitted/,
    );
    const down = await cli(["run", w.manifest, ...FLAGS, "--state", state, "--coordinator", redis.url], {
      cwd: w.dir,
      env: env(sb, { AWS_ENDPOINT_URL_S3: "http://127.0.0.1:1" }),
    }).done;
    expect(down.code, down.messages.join("\n")).toBe(6);
    expect(down.messages.join("\n")).toMatch(
      /s3:\/\/clapper-out\/states\/no-coord\/journal\/.*nothing was submitted/,
    );
    expect((await sb.stats()).tasks_created).toEqual({ video: 0, speech: 0 });
    expect(await store.list("states/no-coord")).toEqual([]);
    // No state folder beside the manifest either (the output's folder was proved writable).
    expect(await readdir(w.dir)).not.toContain(".clapper");
  });

  it("runs with its state in S3 and nothing on disk; status, report and cancel read it from another folder", {
    timeout: 60_000,
  }, async () => {
    const sb = await sandbox(0.02);
    const w = await space("s3-state", 4);
    const state = `s3://${BUCKET}/states/s3-state`;
    const output = `s3://${BUCKET}/out`;
    const args = [
      "run",
      w.manifest,
      ...FLAGS,
      "--state",
      state,
      "--output",
      output,
      "--coordinator",
      redis.url,
    ];
    const r = await cli(args, { cwd: w.dir, env: env(sb) }).done;
    expect(r.code, r.messages.join("\n")).toBe(0);
    // The folder holds the manifest and nothing else: no state, no lock, no rates.
    expect(await readdir(w.dir)).toEqual(["s3-state.yaml"]);
    const objects = (await store.list("states/s3-state/")).map((o) => o.key);
    expect(objects.some((k) => /\/journal\/seg-\d{12}-\d{10}-\d{10}\.jsonl$/.test(k))).toBe(true);
    expect(objects).toContain("states/s3-state/rates.json");

    const pod = await podWith(w);
    const status = await cli(["status", pod.manifest, "--json", "--state", state], {
      cwd: pod.dir,
      env: env(sb),
    }).done;
    expect(status.code, status.messages.join("\n")).toBe(0);
    const seen = JSON.parse(status.stdout) as Report;
    expect(seen.run.status).toBe("succeeded");
    expect(seen.counts).toMatchObject({ total: 4, succeeded: 4 });
    // --s3-endpoint instead of the variable.
    const { AWS_ENDPOINT_URL_S3: _, ...noEndpoint } = env(sb);
    const report = await cli(
      [
        "report",
        pod.manifest,
        "--json",
        "--state",
        state,
        "--output",
        output,
        "--s3-endpoint",
        store.endpoint,
      ],
      { cwd: pod.dir, env: noEndpoint },
    ).done;
    expect(report.code, report.messages.join("\n")).toBe(0);
    expect((JSON.parse(report.stdout) as Report).points.spent).toBe(4 * 40);
    const cancel = await cli(["cancel", pod.manifest, "--json", "--state", state], {
      cwd: pod.dir,
      env: env(sb),
    }).done;
    expect(cancel.code, cancel.messages.join("\n")).toBe(0);
    expect(JSON.parse(cancel.stdout)).toEqual({ cancelled: [] });
    // Read-only: the commands left the pod's folder as they found it.
    expect(await readdir(pod.dir)).toEqual(["s3-state.yaml"]);
  });

  it("resumes a SIGKILLed run from an empty folder: every job created once, the points reported equal the balance drop, outputs whole", {
    timeout: 120_000,
  }, async () => {
    const sb = await sandbox(0.05);
    const N = 12;
    const w = await space("pod-kill", N);
    const state = `s3://${BUCKET}/states/pod-kill`;
    const output = `s3://${BUCKET}/pods`;
    const runEnv = env(sb, { CLAPPER_LOCK_LEASE_MS: "1500" });
    const before = await settledBalance(sb);
    const args = (manifest: string) => [
      "run",
      manifest,
      ...FLAGS,
      "--state",
      state,
      "--output",
      output,
      "--coordinator",
      redis.url,
    ];
    let created = 0;
    const first = await cli(args(w.manifest), {
      cwd: w.dir,
      env: runEnv,
      on: (e) => (e.event === "created" && ++created === 5 ? "SIGKILL" : undefined),
    }).done;
    expect(first.signal, first.messages.join("\n")).toBe("SIGKILL");
    const createdThen = (await sb.stats()).tasks_created.video;
    expect(createdThen).toBeGreaterThanOrEqual(5);
    expect(createdThen).toBeLessThan(N);
    // The killed pod's disk is gone with it.
    const pod = await podWith(w);
    await rm(w.dir, { recursive: true, force: true });
    const t0 = Date.now();
    const second = await cli(args(pod.manifest), { cwd: pod.dir, env: runEnv }).done;
    const ms = Date.now() - t0;
    expect(second.code, second.messages.join("\n")).toBe(0);
    expect(await readdir(pod.dir)).toEqual(["pod-kill.yaml"]);

    // Each job created exactly once: the resumed run followed the killed run's tasks.
    const stats = await sb.stats();
    expect(stats.tasks_created.video).toBe(N);
    const after = await settledBalance(sb);
    const report = await storedReport("pods/pod-kill/reports/report.json");
    expect(report.counts).toMatchObject({ total: N, succeeded: N });
    expect(report.points.spent).toBe(before.total_points - after.total_points);
    expect(report.points.spent).toBe(N * 40);
    expect(new Set(report.jobs.map((j) => j.task_id)).size).toBe(N);
    // Every output whole: downloaded and hashed, as the report says.
    for (const job of report.jobs) {
      const key = job.output?.uri.replace(`s3://${BUCKET}/`, "") ?? "";
      const object = await store.object(key);
      expect({ bytes: object?.bytes, sha256: object?.sha256 }, job.id).toEqual({
        bytes: job.output?.bytes,
        sha256: job.output?.sha256,
      });
    }
    // Neither the API key nor anything shaped like one reached the store.
    for (const { key } of await store.list("states/pod-kill/")) {
      const text = (await store.object(key))?.text ?? "";
      expect(text, key).not.toContain(KEY);
      expect(text, key).not.toMatch(/sk-ml-/);
    }
    // The cost: PutObjects of the state per job, over both runs.
    const puts = store.puts("states/pod-kill/journal/seg-").length;
    console.log(
      `pod-kill: ${createdThen} of ${N} created before the kill; resumed in ${ms} ms; ${puts} segment PUTs (${(puts / N).toFixed(1)} per job), ${store.puts("states/pod-kill/").length} PUTs in all`,
    );
  });
});
