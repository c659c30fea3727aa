// Issue 10: every command with --sandbox uses the emulator state that `run --sandbox` of the same
// manifest persisted (beside the run's state), or the one --sandbox-state names: what a run did,
// or what a killed run left in flight, is there for tasks, balance, plan and cancel.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { staleBuild } from "../run/harness.js";
import { clapper, type Folder, folder, oneJson, smallManifest } from "./cli-process.js";

let dir: Folder;
beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  dir = await folder("clapper-sbstate-");
});
afterAll(() => dir?.remove());

describe("the sandbox state of a run, shared by every command", () => {
  it("after run --sandbox: tasks list, tasks get, balance and plan see the run's tasks and spending", async () => {
    const manifest = await dir.file("shared.yaml", smallManifest("shared"));
    const summary = join(dir.path, "step-summary.md");
    const ran = await clapper(["run", manifest, "--sandbox", "--json"], {
      cwd: dir.path,
      env: { GITHUB_STEP_SUMMARY: summary },
    });
    expect(ran.code, ran.stderr).toBe(0);
    // `clapper report` writes the reports again, but does not append the run's step summary twice.
    const appended = await readFile(summary, "utf8");
    expect(appended).toContain("shared");
    const again = await clapper(["report", manifest], {
      cwd: dir.path,
      env: { GITHUB_STEP_SUMMARY: summary },
    });
    expect(again.code, again.stderr).toBe(0);
    expect(await readFile(summary, "utf8")).toBe(appended);
    const report = oneJson(ran);
    const taskIds = report.jobs.map((j: { task_id: string }) => j.task_id).sort();
    expect(taskIds).toHaveLength(2);
    const state = join(dir.path, ".clapper", "shared", "sandbox.json");
    const [tasks, one, balance, plan, empty] = await Promise.all([
      clapper(["tasks", "list", "--sandbox", "--sandbox-state", state, "--json"], { cwd: dir.path }),
      clapper(["tasks", "get", taskIds[0], "--sandbox", "--json"], {
        cwd: dir.path,
        env: { CLAPPER_SANDBOX_STATE: state },
      }),
      clapper(["balance", "--sandbox", "--sandbox-state", state, "--json"], { cwd: dir.path }),
      clapper(["plan", manifest, "--sandbox", "--json"], { cwd: dir.path }),
      clapper(["tasks", "list", "--sandbox", "--json"], { cwd: dir.path }),
    ]);
    expect(
      oneJson(tasks)
        .tasks.map((t: { id: string }) => t.id)
        .sort(),
    ).toEqual(taskIds);
    expect(oneJson(one)).toMatchObject({ id: taskIds[0], status: "succeeded" });
    expect(oneJson(balance).summary.available_points).toBe(100_000 - report.points.spent);
    // plan finds the run's emulator by itself (beside the run's state), as run and cancel do.
    expect(oneJson(plan).balance.available_points).toBe(100_000 - report.points.spent);
    // Without --sandbox-state a manifest-less command gets an empty emulator, and is told so.
    expect(oneJson(empty)).toEqual({ tasks: [] });
    expect(empty.stderr).toContain("--sandbox without --sandbox-state: the emulator starts empty");
  });

  it("cancel MANIFEST --sandbox cancels what a killed sandbox run left in flight", async () => {
    // [sandbox:slow]: a video takes seconds, so the tasks are still running when the run is killed.
    const manifest = await dir.file(
      "killed.yaml",
      smallManifest("killed", { slow: true, shots: 3, lines: false }),
    );
    let created = 0;
    const killed = await clapper(["run", manifest, "--sandbox", "--log-format", "json"], {
      cwd: dir.path,
      onLine: (line) => (line.includes('"event":"created"') && ++created === 2 ? "SIGKILL" : undefined),
    });
    expect(killed.signal).toBe("SIGKILL");
    const cancel = await clapper(["cancel", manifest, "--sandbox", "--json"], { cwd: dir.path });
    expect(cancel.code, cancel.stderr).toBe(0);
    const rows = oneJson(cancel).cancelled as Array<{ job: string; task_id: string; status: string }>;
    expect(rows.length).toBeGreaterThanOrEqual(2);
    for (const r of rows) expect(r.job).toMatch(/^shot\/s0[123]$/);
    // Cancelled at once, or (a video an execution node holds) accepted and stopping a moment later.
    for (const r of rows) expect(["cancelled", "running"], r.job).toContain(r.status);
    // The emulator's state says so too, for any command that reads it.
    const state = join(dir.path, ".clapper", "killed", "sandbox.json");
    let ids: string[] = [];
    for (let i = 0; i < 10 && ids.length < rows.length; i++) {
      const listed = await clapper(
        ["tasks", "list", "--status", "cancelled", "--sandbox", "--sandbox-state", state, "--json"],
        { cwd: dir.path },
      );
      ids = oneJson(listed).tasks.map((t: { id: string }) => t.id);
    }
    expect(ids.sort()).toEqual(rows.map((r) => r.task_id).sort());
  });
});
