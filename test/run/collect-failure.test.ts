// A result that cannot be downloaded (its URL answers HTTP 500 for ever) after its task succeeded
// and was paid: the job fails with a reason a person can act on, after bounded tries, its points
// counted as spent; the other jobs go on; every later run downloads it again without a new task
// (it stays failed while the host refuses); and a run killed during the tries resumes the download,
// never re-creating the task.
// The runner and the sandbox are separate processes (dist/): every check is made from outside.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  cli,
  cliEnv,
  journalRecords,
  LINE_IDS,
  readReport,
  replay,
  type SandboxProcess,
  SHOT_IDS,
  settledBalance,
  staleBuild,
  startSandbox,
  statsDelta,
  verifyOutputs,
  type Workspace,
  workspace,
} from "./harness.js";

const RUN_FLAGS = ["--log-format", "json", "--poll-interval", "0.02"];
const MEDIA = "GET /_media/videos/{file}";
const FAILED =
  /^the result of task (\S+) could not be downloaded after (\d+) tries \(HTTP 500 from 127\.0\.0\.1:\d+\); its points were spent: the next run downloads it again, at no cost$/;

let sb: SandboxProcess;
let counter = 0;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  sb = await startSandbox(0.001);
});

afterAll(async () => {
  await sb?.close();
});

/** Video result URLs answer `status` (0: they serve the file again). */
async function failResults(status: number): Promise<void> {
  const res = await fetch(`${sb.url}/_sandbox/media`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ video_error_status: status, video_error_count: null }),
  });
  expect(res.status).toBe(200);
}

const run = (ws: Workspace, extra: string[] = [], opts: Partial<Parameters<typeof cli>[1]> = {}) =>
  cli(["run", ws.manifest, ...RUN_FLAGS, ...extra], { cwd: ws.dir, env: cliEnv(sb), ...opts });

const mediaRequests = async () => (await sb.stats()).requests[MEDIA] ?? 0;

describe("a paid result that cannot be downloaded", () => {
  let ws: Workspace;
  beforeAll(async () => {
    ws = await workspace(`collect-failure-${++counter}`);
  });
  afterAll(async () => {
    await failResults(0);
    await ws?.remove();
  });

  it("fails its job after bounded tries, naming task, host and status; the rest goes on", async () => {
    await failResults(500);
    const stats = await sb.stats();
    const balance = await settledBalance(sb);
    const media = await mediaRequests();
    const done = await run(ws).done;
    expect(done.code, done.messages.join("\n")).toBe(1);
    // CLAPPER_RETRY_BASE_MS=5: the HTTP layer's backoff is milliseconds, the tries are not fewer.
    expect(done.ms).toBeLessThan(15_000);

    const report = await readReport(ws);
    expect(report.run.status).not.toBe("succeeded");
    const shots = report.jobs.filter((j) => SHOT_IDS.includes(j.id));
    const lines = report.jobs.filter((j) => LINE_IDS.includes(j.id));
    expect(lines.map((j) => j.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
    let tries = 0;
    for (const shot of shots) {
      expect(shot.status).toBe("failed");
      expect(shot.error?.code).toBe("download_failed");
      const match = FAILED.exec(shot.error?.message ?? "");
      expect(match, shot.error?.message).not.toBeNull();
      expect(match?.[1]).toBe(shot.task_id);
      tries += Number(match?.[2]);
      expect(shot.points).toBeGreaterThan(0);
    }
    // Every try reached the result URL; the message counts them all, and no more were made.
    expect((await mediaRequests()) - media).toBe(tries);
    expect(tries).toBeGreaterThanOrEqual(3 * 3);

    // Paid for at the service and counted as spent in the report: the same points.
    const after = await settledBalance(sb);
    expect(balance.available_points - after.available_points).toBe(report.points.spent);
    expect(report.jobs.reduce((sum, j) => sum + j.points, 0)).toBe(report.points.spent);
    expect(statsDelta(stats, await sb.stats()).tasks).toBe(6);

    const state = replay(await journalRecords(ws.statePath));
    for (const id of SHOT_IDS) {
      const job = state.jobs[id];
      expect(job?.status).toBe("failed");
      expect(job?.attempts).toHaveLength(1);
      expect(job?.attempts[0]?.spent).toBe(shots.find((s) => s.id === id)?.points);
    }
  }, 60_000);

  it("a plain run downloads it again (still refused: still failed), and --retry-failed downloads it without a new task or new points", async () => {
    const stats = await sb.stats();
    const balance = await settledBalance(sb);
    let media = await mediaRequests();

    // The host still refuses: each paid result is tried again, no task is created, it stays failed.
    const plain = await run(ws).done;
    expect(plain.code, plain.messages.join("\n")).toBe(1);
    expect((await mediaRequests()) - media).toBeGreaterThanOrEqual(3 * 3);
    expect(statsDelta(stats, await sb.stats()).createRequests).toBe(0);
    expect(
      (await readReport(ws)).jobs.filter((j) => j.status === "failed").map((j) => j.error?.code),
    ).toEqual(["download_failed", "download_failed", "download_failed"]);
    await failResults(0);
    media = await mediaRequests();

    // A cap of exactly what the run has spent: fetching paid results again costs nothing more, so
    // the run is admitted (it was refused with exit 3 when a re-download was costed as new work).
    const spent = (await readReport(ws)).points.spent;
    const retried = await run(ws, ["--retry-failed", "--max-points", String(spent)]).done;
    expect(retried.code, retried.messages.join("\n")).toBe(0);
    const report = await readReport(ws);
    expect(report.run.status).toBe("succeeded");
    // The lines were stored by the first run: reused here.
    expect(report.jobs.map((j) => `${j.id} ${j.status}`).sort()).toEqual(
      [...SHOT_IDS.map((id) => `${id} succeeded`), ...LINE_IDS.map((id) => `${id} skipped`)].sort(),
    );
    expect(await verifyOutputs(report)).toEqual([]);
    const d = statsDelta(stats, await sb.stats());
    expect({ tasks: d.tasks, creates: d.createRequests }).toEqual({ tasks: 0, creates: 0 });
    expect((await settledBalance(sb)).available_points).toBe(balance.available_points);
    expect((await mediaRequests()) - media).toBe(3);
  }, 60_000);
});

describe("a run killed while it retries a result download", () => {
  it("resumes the download in the next run, creating no new task", async () => {
    const ws = await workspace(`collect-killed-${++counter}`, { shotsOnly: true });
    try {
      await failResults(500);
      const stats = await sb.stats();
      const killed = await run(ws, [], {
        on: (e) =>
          e.event === "retry" && String(e.path).startsWith("/_media/videos/") ? "SIGKILL" : undefined,
      }).done;
      expect(killed.signal).toBe("SIGKILL");
      const state = replay(await journalRecords(ws.statePath));
      expect(SHOT_IDS.some((id) => state.jobs[id]?.status === "collecting")).toBe(true);

      await failResults(0);
      const resumed = await run(ws).done;
      expect(resumed.code, resumed.messages.join("\n")).toBe(0);
      const report = await readReport(ws);
      expect(report.jobs.map((j) => j.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
      expect(await verifyOutputs(report)).toEqual([]);
      expect(statsDelta(stats, await sb.stats()).tasks).toBe(3);
    } finally {
      await failResults(0);
      await ws.remove();
    }
  }, 60_000);
});
