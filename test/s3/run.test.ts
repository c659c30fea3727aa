// A run whose output is S3 (s3rver on loopback, a real S3 protocol server): every result and report
// is an object beside the others, sized and hashed as report.json says, with the metadata a later
// run trusts; and re-runs trust the store, with or without the local state.
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report } from "../../src/report/model.js";
import { cli, staleBuild } from "../run/harness.js";
import { created, KEY, type Line, RETRY_ENV, runIn, type Shot, setup } from "../run/helpers.js";
import { S3_ENV, type Store, startStore } from "./helpers.js";

let store: Store;
beforeAll(async () => {
  store = await startStore();
});
afterAll(async () => {
  await store?.close();
});

const SHOTS: Shot[] = [
  { id: "s01", prompt: "A lighthouse at dusk" },
  { id: "s02", prompt: "The lamp room, the lens turning", duration: 5 },
];
const LINES: Line[] = [
  { id: "n01", text: "Every night, the light came on at seven." },
  { id: "n02", text: "And every night, someone was watching." },
];
const JOB_IDS = ["shot/s01", "shot/s02", "line/n01", "line/n02"];
const keyOf = (prefix: string, id: string) =>
  `${prefix}/${id.startsWith("shot/") ? `shots/${id.slice(5)}.mp4` : `lines/${id.slice(5)}.wav`}`;

/** report.json as stored in S3 beside the outputs. */
async function storedReport(prefix: string): Promise<Report> {
  const found = await store.object(`${prefix}/reports/report.json`);
  if (!found) throw new Error(`no ${prefix}/reports/report.json in the store`);
  return JSON.parse(found.text) as Report;
}

describe("a run to S3", () => {
  it("stores every result and report as objects, sized, hashed and labelled as report.json says", async () => {
    const { s, w } = await setup();
    const manifest = await w.manifest({ name: "ep01", shots: SHOTS, lines: LINES });
    const { outcome, logs } = await runIn(s, manifest, {
      output: "s3://clapper-out/runs/",
      s3: { endpoint: store.endpoint },
    });
    expect(outcome.exitCode, `${outcome.message}\n${logs.text()}`).toBe(0);
    const prefix = "runs/ep01";
    expect((await store.list(prefix)).map((o) => o.key)).toEqual(
      [
        ...JOB_IDS.map((id) => keyOf(prefix, id)),
        `${prefix}/reports/junit.xml`,
        `${prefix}/reports/report.html`,
        `${prefix}/reports/report.json`,
        `${prefix}/reports/report.md`,
        // The review page's stills, one per video, and the index of what each was made from.
        `${prefix}/stills/index.json`,
        `${prefix}/stills/s01.jpg`,
        `${prefix}/stills/s02.jpg`,
      ].sort(),
    );
    expect(outcome.reportUris).toEqual([
      `s3://clapper-out/${prefix}/reports/report.json`,
      `s3://clapper-out/${prefix}/reports/report.md`,
      `s3://clapper-out/${prefix}/reports/junit.xml`,
      `s3://clapper-out/${prefix}/reports/report.html`,
    ]);

    const report = await storedReport(prefix);
    expect(report.run.status).toBe("succeeded");
    expect(report.jobs.map((j) => j.id).sort()).toEqual([...JOB_IDS].sort());
    for (const job of report.jobs) {
      const key = keyOf(prefix, job.id);
      expect(job.output?.uri).toBe(`s3://clapper-out/${key}`);
      const object = await store.object(key);
      expect(object, key).toBeDefined();
      // Downloaded whole and hashed here: the bytes are what the report says they are.
      expect({ bytes: object?.bytes, sha256: object?.sha256 }).toEqual({
        bytes: job.output?.bytes,
        sha256: job.output?.sha256,
      });
      expect(object?.bytes).toBeGreaterThan(44);
      expect(object?.metadata).toEqual({
        job: job.id,
        task: job.task_id,
        fingerprint: job.fingerprint,
        sha256: job.output?.sha256,
      });
      expect(object?.contentType).toBe(job.kind === "video" ? "video/mp4" : "audio/wav");
    }
    const md = await store.object(`${prefix}/reports/report.md`);
    const junit = await store.object(`${prefix}/reports/junit.xml`);
    expect(md?.text).toContain("shot/s01");
    expect(junit?.text).toMatch(/^<\?xml/);
    expect((junit?.text.match(/<testcase /g) ?? []).length).toBe(4);
    // Nothing was written locally: the output is S3 alone (beside the manifest: itself and the state).
    expect((await readdir(w.dir)).sort()).toEqual([".clapper", "manifest.yaml"]);
    // One multipart-or-single upload and one metadata copy per result (the stills and the reports
    // are not results); no staging (no materials).
    const results = (path: string) =>
      path.startsWith(`/clapper-out/${prefix}/`) && !path.includes("/stills/") && !path.includes("/reports/");
    expect(store.requests.filter((r) => r.copy && results(r.path))).toHaveLength(4);
    expect(store.puts(`${prefix}/_staging`)).toHaveLength(0);
    const st = await s.stats();
    expect(created(st)).toBe(4);
  });
});

describe("configuration through the AWS SDK's own chain", () => {
  it("finds the endpoint in AWS_ENDPOINT_URL_S3 and the credentials in the environment (the CLI)", async () => {
    expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
    const { s, w } = await setup();
    const manifest = await w.manifest({
      name: "chain",
      shots: [SHOTS[0] as Shot],
      lines: [LINES[0] as Line],
    });
    const env = { CLAPPER_BASE_URL: s.url, CLAPPER_API_KEY: KEY, ...RETRY_ENV, ...S3_ENV };
    const args = ["run", manifest, "--output", "s3://clapper-out/chain-runs", "--log-format", "json"];
    const ran = await cli(args, { cwd: w.dir, env: { ...env, AWS_ENDPOINT_URL_S3: store.endpoint } }).done;
    expect(ran.code, ran.messages.join("\n")).toBe(0);
    expect(ran.stdout).toContain("report: s3://clapper-out/chain-runs/chain/reports/report.html");
    expect((await store.list("chain-runs/chain/")).map((o) => o.key)).toEqual([
      "chain-runs/chain/lines/n01.wav",
      "chain-runs/chain/reports/junit.xml",
      "chain-runs/chain/reports/report.html",
      "chain-runs/chain/reports/report.json",
      "chain-runs/chain/reports/report.md",
      "chain-runs/chain/shots/s01.mp4",
      "chain-runs/chain/stills/index.json",
      "chain-runs/chain/stills/s01.jpg",
    ]);
    // Credentials the store does not know are refused (s3rver checks the access key id, not V4
    // signatures): the run cannot store anything and says so.
    const denied = await cli([...args.slice(0, 3), "s3://clapper-out/denied", ...args.slice(4)], {
      cwd: w.dir,
      env: { ...env, AWS_ENDPOINT_URL_S3: store.endpoint, AWS_ACCESS_KEY_ID: "AKIANOBODY" },
    }).done;
    // Found before anything is paid for: the output is proved writable first (exit 2: a setting).
    expect(denied.code).toBe(2);
    expect(denied.messages.join("\n")).toMatch(
      /^(clapper: )?S3: writing a test object to s3:\/\/clapper-out\/denied\/chain\/ failed: .*\(access denied: check the credentials.*nothing was submitted$/m,
    );
    expect(denied.messages.join("\n")).not.toMatch(/Stream of unknown length/);
    expect(await store.list("denied/")).toEqual([]);
  });
});

describe("re-runs trust S3", () => {
  it("produce again a deleted object, skip everything without local state, and redo a changed row", async () => {
    const { s, w } = await setup();
    const spec = { name: "trust", shots: SHOTS, lines: LINES };
    const manifest = await w.manifest(spec);
    const opts = { output: "s3://clapper-out/trust-runs", s3: { endpoint: store.endpoint } };
    const prefix = "trust-runs/trust";
    const first = await runIn(s, manifest, opts);
    expect(first.outcome.exitCode, first.logs.text()).toBe(0);
    const before = await store.list(prefix);
    const firstStats = await s.stats();
    expect(created(firstStats)).toBe(4);

    // 1. One object deleted: exactly that job is produced again, with one new task.
    await store.remove(keyOf(prefix, "shot/s02"));
    const second = await runIn(s, manifest, opts);
    expect(second.outcome.exitCode, second.logs.text()).toBe(0);
    expect(created(await s.stats())).toBe(5);
    const redone = second.outcome.report?.jobs.filter((j) => j.status === "succeeded").map((j) => j.id);
    expect(redone).toEqual(["shot/s02"]);
    expect(
      second.logs
        .lines()
        .filter((l) => l.event === "stored")
        .map((l) => l.job),
    ).toEqual(["shot/s02"]);
    const s02 = await store.object(keyOf(prefix, "shot/s02"));
    const s02Report = second.outcome.report?.jobs.find((j) => j.id === "shot/s02");
    expect(s02?.sha256).toBe(s02Report?.output?.sha256);
    expect(s02?.metadata.task).toBe(s02Report?.task_id);
    expect(s02?.metadata.fingerprint).toBe(s02Report?.fingerprint);

    // 2. The local state is gone (a fresh CI machine): the objects' metadata say every job is done.
    await rm(join(w.dir, ".clapper"), { recursive: true, force: true });
    const balance = await s.available();
    const third = await runIn(s, manifest, opts);
    expect(third.outcome.exitCode, third.logs.text()).toBe(0);
    expect(created(await s.stats())).toBe(5);
    expect(await s.available()).toBe(balance);
    expect(third.outcome.report?.points.spent).toBe(0);
    expect(third.outcome.report?.counts.skipped).toBe(4);
    expect(third.logs.lines().filter((l) => l.event === "skipped")).toHaveLength(4);
    // Its report still names every output with the size and hash the store holds.
    for (const job of third.outcome.report?.jobs ?? []) {
      const head = await store.head(keyOf(prefix, job.id));
      expect(job.output?.bytes).toBe(head?.bytes);
      expect(job.output?.sha256).toBe(head?.metadata.sha256);
    }
    // The outputs were left as they were (only the reports, and the page's stills, were written again).
    const page = (key: string) => key.includes("/reports/") || key.includes("/stills/");
    const after = await store.list(prefix);
    expect(after.filter((o) => !page(o.key))).toEqual(
      before
        .filter((o) => !page(o.key))
        .map((o) => (o.key.endsWith("s02.mp4") ? { ...o, bytes: s02?.bytes } : o)),
    );

    // 3. One row changed: one new task, for that row alone.
    await w.manifest({
      ...spec,
      lines: [LINES[0] as Line, { id: "n02", text: "And someone was watching." }],
    });
    const fourth = await runIn(s, manifest, opts);
    expect(fourth.outcome.exitCode, fourth.logs.text()).toBe(0);
    expect(created(await s.stats())).toBe(6);
    expect(fourth.outcome.report?.jobs.filter((j) => j.status === "succeeded").map((j) => j.id)).toEqual([
      "line/n02",
    ]);
    const n02 = await store.object(keyOf(prefix, "line/n02"));
    const n02Report = fourth.outcome.report?.jobs.find((j) => j.id === "line/n02");
    expect(n02?.metadata.fingerprint).toBe(n02Report?.fingerprint);
    expect(n02?.sha256).toBe(n02Report?.output?.sha256);
  });
});
