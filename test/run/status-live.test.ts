// `clapper status` beside a run: a run whose lock a live process holds is `running` (with who runs
// it); the same run once killed is `interrupted`. Both from outside, as separate processes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cli, cliEnv, type SandboxProcess, staleBuild, startSandbox, workspace } from "./harness.js";

let sb: SandboxProcess;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  sb = await startSandbox(0.01);
});

afterAll(async () => {
  await sb?.close();
});

describe("status of a run", () => {
  it("is running while a live process holds its lock, and interrupted once that process is killed", {
    timeout: 30_000,
  }, async () => {
    const ws = await workspace("live", { slow: true });
    try {
      const run = cli(["run", ws.manifest, "--log-format", "json", "--poll-interval", "0.05"], {
        cwd: ws.dir,
        env: cliEnv(sb),
      });
      await run.when((e) => e.event === "created");
      const live = await cli(["status", ws.manifest, "--json"], { cwd: ws.dir, env: cliEnv(sb) }).done;
      expect(live.code, live.messages.join("\n")).toBe(0);
      const report = JSON.parse(live.stdout);
      expect(report.run.status).toBe("running");
      expect(report.run.holder.pid).toBe(run.child.pid);
      const text = await cli(["status", ws.manifest], { cwd: ws.dir, env: cliEnv(sb) }).done;
      expect(text.stdout).toMatch(new RegExp(`^run live: running \\(pid ${run.child.pid} on `));

      run.child.kill("SIGKILL");
      await run.done;
      const after = await cli(["status", ws.manifest, "--json"], { cwd: ws.dir, env: cliEnv(sb) }).done;
      expect(JSON.parse(after.stdout).run.status).toBe("interrupted");
      expect(JSON.parse(after.stdout).run.holder).toBeUndefined();
    } finally {
      await ws.remove();
    }
  });

  it("cancel of tasks that had already ended exits 0 and says so; --json is one object", {
    timeout: 30_000,
  }, async () => {
    const ws = await workspace("ended");
    try {
      const killed = await cli(["run", ws.manifest, "--log-format", "json"], {
        cwd: ws.dir,
        env: cliEnv(sb),
        on: (e, events) =>
          e.event === "created" && events.filter((x) => x.event === "created").length === 2
            ? "SIGKILL"
            : undefined,
      }).done;
      expect(killed.signal).toBe("SIGKILL");
      // Long enough for the two tasks to end at the sandbox (a second or so at this time scale).
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const cancel = await cli(["cancel", ws.manifest, "--json"], { cwd: ws.dir, env: cliEnv(sb) }).done;
      expect(cancel.code, cancel.messages.join("\n")).toBe(0);
      const answer = JSON.parse(cancel.stdout) as { cancelled: Array<{ outcome: string; status: string }> };
      expect(answer.cancelled.length).toBeGreaterThanOrEqual(2);
      for (const row of answer.cancelled)
        expect(row).toMatchObject({ outcome: "ended", status: "succeeded" });
      const text = await cli(["cancel", ws.manifest], { cwd: ws.dir, env: cliEnv(sb) }).done;
      expect(text.code).toBe(0);
      for (const line of text.stdout.trim().split("\n"))
        expect(line).toMatch(/: had already ended \(succeeded\); nothing to cancel$/);
    } finally {
      await ws.remove();
    }
  });
});
