// Issue 26: `run --metrics-file PATH` on a real sandbox run (the built CLI as its own process):
// promtool accepts the file, its numbers are report.json's, it is there while a slow run still
// runs, and a failed run keeps the time of the last success.
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { clapper, type Folder, folder, smallManifest } from "../cli/cli-process.js";
import { staleBuild } from "../run/harness.js";
import { samples, sampleValue } from "./exposition.js";
import { PROMTOOL, tool, toolTest } from "./prometheus-tools.js";

let dir: Folder;
beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  dir = await folder("clapper-metrics-");
});
afterAll(() => dir?.remove());

const report = async (name: string) =>
  JSON.parse(await readFile(join(dir.path, "output", name, "reports", "report.json"), "utf8")) as {
    run: { name: string; status: string };
    counts: Record<string, number>;
    points: { spent: number };
  };

describe("run --metrics-file", () => {
  toolTest(
    "promtool accepts the file, and its numbers are report.json's, each labelled with the run",
    [PROMTOOL],
    async () => {
      const manifest = await dir.file("prom.yaml", smallManifest("prom", { shots: 2 }));
      const r = await clapper(["run", manifest, "--sandbox", "--metrics-file", "prom.prom"], {
        cwd: dir.path,
      });
      expect(r.code, r.stderr).toBe(0);
      const text = await readFile(join(dir.path, "prom.prom"), "utf8");
      const check = await tool(PROMTOOL, ["check", "metrics"], text);
      expect({ code: check.code, said: `${check.stdout}${check.stderr}`.trim() }).toEqual({
        code: 0,
        said: "",
      });

      const rep = await report("prom");
      const all = samples(text);
      for (const s of all) expect(s.labels.run, s.name).toBe(rep.run.name);
      for (const status of ["succeeded", "failed", "cancelled", "skipped", "pending"])
        expect(sampleValue(all, "clapper_jobs", { status }), status).toBe(rep.counts[status]);
      expect(rep.counts.succeeded).toBe(3);
      expect(sampleValue(all, "clapper_points_spent")).toBe(rep.points.spent);
      expect(rep.points.spent).toBeGreaterThan(0);
      expect(sampleValue(all, "clapper_run_status", { status: "succeeded" })).toBe(1);
      const now = Date.now() / 1000;
      const lastRun = sampleValue(all, "clapper_last_run_timestamp_seconds") ?? 0;
      expect(Math.abs(now - lastRun)).toBeLessThan(60);
      expect(sampleValue(all, "clapper_last_success_timestamp_seconds")).toBe(lastRun);
      expect(sampleValue(all, "clapper_run_duration_seconds")).toBeGreaterThan(0);
      // Two creates of video and one of speech at least, each answered 200 (the sandbox injects no fault here).
      expect(
        sampleValue(all, "clapper_requests_total", { service: "video", code: "200" }),
      ).toBeGreaterThanOrEqual(2);
      expect(
        sampleValue(all, "clapper_requests_total", { service: "speech", code: "200" }),
      ).toBeGreaterThanOrEqual(1);
      expect(sampleValue(all, "clapper_rate_limited_total", { service: "video" })).toBe(0);
      expect(sampleValue(all, "clapper_request_rate", { service: "video" })).toBeGreaterThan(0);
      expect(sampleValue(all, "clapper_tasks_in_flight", { service: "speech" })).toBe(0);
      // Written whole, then renamed: no temporary file is left beside it.
      expect(
        (await import("node:fs/promises").then((fs) => fs.readdir(dir.path))).filter((f) =>
          f.endsWith(".tmp"),
        ),
      ).toEqual([]);
    },
  );

  toolTest("the file is written while a slow run still runs, and says so", [PROMTOOL], async () => {
    const manifest = await dir.file("slow.yaml", smallManifest("slow", { slow: true }));
    const file = join(dir.path, "slow.prom");
    let done = false;
    // The file named by its variable, as a scheduler's environment would.
    const running = clapper(["run", manifest, "--sandbox"], {
      cwd: dir.path,
      env: { CLAPPER_METRICS_FILE: file, CLAPPER_METRICS_INTERVAL_MS: "200" },
    }).finally(() => {
      done = true;
    });
    let seen: string | undefined;
    while (!done && seen === undefined) {
      await new Promise((r) => setTimeout(r, 50));
      const text = existsSync(file) ? await readFile(file, "utf8") : "";
      if (!done && text.includes("clapper_run_status")) seen = text;
    }
    const r = await running;
    expect(r.code, r.stderr).toBe(0);
    expect(seen, "no metrics file while the run ran").toBeDefined();
    const mid = samples(seen as string);
    expect(sampleValue(mid, "clapper_run_status", { status: "running" })).toBe(1);
    expect((await tool(PROMTOOL, ["check", "metrics"], seen)).code).toBe(0);
    const end = samples(await readFile(file, "utf8"));
    expect(sampleValue(end, "clapper_run_status", { status: "running" })).toBe(0);
    expect(sampleValue(end, "clapper_jobs", { status: "succeeded" })).toBe(2);
  });

  toolTest("a failed run keeps the last success's time, in the file and beside the state", [], async () => {
    const good = smallManifest("keeps", { lines: false });
    const manifest = await dir.file("keeps.yaml", good);
    const first = await clapper(["run", manifest, "--sandbox", "--metrics-file", "keeps.prom"], {
      cwd: dir.path,
    });
    expect(first.code, first.stderr).toBe(0);
    const succeededAt = sampleValue(
      samples(await readFile(join(dir.path, "keeps.prom"), "utf8")),
      "clapper_last_success_timestamp_seconds",
    );
    expect(succeededAt).toBeGreaterThan(0);

    await dir.file("keeps.yaml", good.replace("take 1", "take 1 [sandbox:fail]"));
    const failed = await clapper(["run", manifest, "--sandbox", "--metrics-file", "keeps.prom"], {
      cwd: dir.path,
    });
    expect(failed.code, failed.stderr).toBe(1);
    expect((await report("keeps")).run.status).toBe("failed");
    const after = samples(await readFile(join(dir.path, "keeps.prom"), "utf8"));
    expect(sampleValue(after, "clapper_run_status", { status: "failed" })).toBe(1);
    expect(sampleValue(after, "clapper_jobs", { status: "failed" })).toBe(1);
    expect(sampleValue(after, "clapper_last_success_timestamp_seconds")).toBe(succeededAt);
    expect(sampleValue(after, "clapper_last_run_timestamp_seconds")).toBeGreaterThan(succeededAt as number);

    // A new file (the old one lost): the state folder still knows when the run last succeeded.
    const again = await clapper(["run", manifest, "--sandbox", "--metrics-file", "fresh.prom"], {
      cwd: dir.path,
    });
    expect(again.code, again.stderr).toBe(1);
    const fresh = samples(await readFile(join(dir.path, "fresh.prom"), "utf8"));
    expect(sampleValue(fresh, "clapper_last_success_timestamp_seconds")).toBe(succeededAt);
  });

  toolTest(
    "a file that cannot be written is a warning naming it; the exit code stays the run's",
    [],
    async () => {
      const manifest = await dir.file("nowhere.yaml", smallManifest("nowhere", { lines: false }));
      const path = join(dir.path, "no-such-folder", "m.prom");
      const r = await clapper(
        ["run", manifest, "--sandbox", "--metrics-file", path, "--log-format", "json"],
        {
          cwd: dir.path,
        },
      );
      expect(r.code, r.stderr).toBe(0);
      const warning = r.stderr
        .split("\n")
        .filter((l) => l.startsWith("{"))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((l) => l.event === "metrics-file-failed");
      expect(warning).toMatchObject({ level: 40, severity: "WARNING", path });
      expect(String(warning?.msg)).toContain(path);
    },
  );
});
