// Issue 26: `run --pushgateway URL` against Debian's prometheus-pushgateway on loopback: the run's
// series arrive under job="clapper" and run="<name>", two manifests do not replace each other, and
// a gateway that accepts and never answers costs the run at most the push's timeout, exit code kept.
import { createServer, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect } from "vitest";
import { clapper, type Folder, folder, smallManifest } from "../cli/cli-process.js";
import { staleBuild } from "../run/harness.js";
import { samples, sampleValue } from "./exposition.js";
import { PUSHGATEWAY, startPushgateway, toolTest } from "./prometheus-tools.js";

let dir: Folder;
beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  dir = await folder("clapper-push-");
});
afterAll(() => dir?.remove());

const jsonLines = (stderr: string) =>
  stderr
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

describe("run --pushgateway", () => {
  toolTest(
    "the run's series reach the gateway under job=clapper and run=NAME, one group per manifest",
    [PUSHGATEWAY],
    async () => {
      const gateway = await startPushgateway();
      try {
        const one = await dir.file("one.yaml", smallManifest("push-one"));
        const two = await dir.file("two.yaml", smallManifest("push-two", { lines: false }));
        const [a, b] = await Promise.all([
          clapper(["run", one, "--sandbox", "--state", ".one/state.jsonl", "--pushgateway", gateway.url], {
            cwd: dir.path,
          }),
          clapper(["run", two, "--sandbox", "--state", ".two/state.jsonl"], {
            cwd: dir.path,
            env: { CLAPPER_PUSHGATEWAY: gateway.url },
          }),
        ]);
        expect(a.code, a.stderr).toBe(0);
        expect(b.code, b.stderr).toBe(0);
        const text = await (
          await fetch(`${gateway.url}/metrics`, { signal: AbortSignal.timeout(5000) })
        ).text();
        const all = samples(text).filter((s) => s.name.startsWith("clapper_"));
        for (const s of all) expect(s.labels.job, s.name).toBe("clapper");
        const oneJobs = sampleValue(all, "clapper_jobs", { run: "push-one", status: "succeeded" });
        const twoJobs = sampleValue(all, "clapper_jobs", { run: "push-two", status: "succeeded" });
        expect({ oneJobs, twoJobs }).toEqual({ oneJobs: 2, twoJobs: 1 });
        expect(sampleValue(all, "clapper_points_spent", { run: "push-one" })).toBeGreaterThan(0);
        expect(
          sampleValue(all, "clapper_last_success_timestamp_seconds", { run: "push-two" }),
        ).toBeGreaterThan(0);
        expect(
          sampleValue(all, "clapper_requests_total", { run: "push-one", service: "speech", code: "200" }),
        ).toBeGreaterThan(0);
      } finally {
        await gateway.stop();
      }
    },
  );

  toolTest(
    "two shards of one manifest push to groups of their own: neither replaces the other's series",
    [PUSHGATEWAY],
    async () => {
      const gateway = await startPushgateway();
      try {
        const manifest = await dir.file("sharded.yaml", smallManifest("push-sharded"));
        const shards = await Promise.all(
          [1, 2].map((i) =>
            clapper(["run", manifest, "--sandbox", "--shard", `${i}/2`, "--pushgateway", gateway.url], {
              cwd: dir.path,
            }),
          ),
        );
        for (const r of shards) expect(r.code, r.stderr).toBe(0);
        const text = await (
          await fetch(`${gateway.url}/metrics`, { signal: AbortSignal.timeout(5000) })
        ).text();
        const all = samples(text).filter(
          (s) => s.name === "clapper_run_duration_seconds" && s.labels.run === "push-sharded",
        );
        expect(all.map((s) => s.labels.shard).sort()).toEqual(["1", "2"]);
      } finally {
        await gateway.stop();
      }
    },
  );

  toolTest(
    "a gateway that never answers costs at most the timeout; the exit code stays the run's",
    [],
    async () => {
      const sockets = new Set<Socket>();
      let accepted = 0;
      // Accepts, reads, and never writes a byte back.
      const silent = createServer((socket) => {
        accepted += 1;
        sockets.add(socket);
        socket.on("error", () => {});
        socket.resume();
      });
      await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
      const address = silent.address();
      const port = typeof address === "object" && address ? address.port : 0;
      try {
        const manifest = await dir.file("hang.yaml", smallManifest("hang", { lines: false }));
        const started = performance.now();
        const r = await clapper(
          ["run", manifest, "--sandbox", "--pushgateway", `http://127.0.0.1:${port}`, "--log-format", "json"],
          { cwd: dir.path, env: { CLAPPER_PUSHGATEWAY_TIMEOUT_MS: "1500" }, timeoutMs: 25_000 },
        );
        const elapsed = performance.now() - started;
        expect(r.signal, "the run hung on the gateway and was killed").toBeNull();
        expect(r.code, r.stderr).toBe(0);
        expect(accepted).toBeGreaterThan(0);
        const warning = jsonLines(r.stderr).find((l) => l.event === "metrics-push-failed");
        expect(warning).toMatchObject({ severity: "WARNING", error: "no answer within 1.5 s" });
        // The push waited its 1.5 s and no longer: the rest is the run itself (about 1-2 s here).
        expect(elapsed).toBeGreaterThan(1500);
        expect(elapsed).toBeLessThan(1500 + 12_000);
      } finally {
        for (const s of sockets) s.destroy();
        await new Promise((resolve) => silent.close(resolve));
      }
    },
  );

  toolTest(
    "a gateway address that is not an http(s) URL is refused before anything runs (exit 2)",
    [],
    async () => {
      const manifest = await dir.file("refused.yaml", smallManifest("refused", { lines: false }));
      const [flag, variable] = await Promise.all([
        clapper(["run", manifest, "--sandbox", "--pushgateway", "ftp://gateway:9091"], { cwd: dir.path }),
        clapper(["run", manifest, "--sandbox"], { cwd: dir.path, env: { CLAPPER_PUSHGATEWAY: "gateway" } }),
      ]);
      expect(flag.code).toBe(2);
      expect(flag.stderr).toContain('--pushgateway: expected an http or https URL, got "ftp://gateway:9091"');
      expect(variable.code).toBe(2);
      expect(variable.stderr).toContain("CLAPPER_PUSHGATEWAY: expected the gateway's http(s) URL");
    },
  );
});
