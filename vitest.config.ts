import { defineConfig } from "vitest/config";

// Tests that measure time (request rates, polling paces, leases, start-up) or kill processes at
// chosen moments run one file at a time, after the rest, so that no other test's load bends what
// they measure. The others (most of them waiting on child processes and sockets, not on the CPU)
// run three files at a time on the CI machines' two cores: they wait more than they compute.
const TIMED = [
  "test/run/coordinator.test.ts",
  "test/run/crash.test.ts",
  "test/metrics/rate-limited.test.ts",
  "test/metrics/pushgateway.test.ts",
  "test/run/killloop.test.ts",
  "test/run/auto-kill.test.ts",
  "test/run/rates.test.ts",
  "test/run/longest-first.test.ts",
  "test/engine/lock.test.ts",
  "test/engine/limiter.test.ts",
  "test/engine/limiter-rank.test.ts",
  "test/engine/rate.test.ts",
  "test/engine/tracker*.test.ts",
  "test/engine/collect-download.test.ts",
  "test/coord/**/*.test.ts",
  "test/s3/memory.test.ts",
  "test/sandbox/every-size.test.ts",
  "test/sandbox/materials.test.ts",
  "test/cli/startup.test.ts",
  "test/cli/display-pty.test.ts",
  "test/cli/signals.test.ts",
];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    projects: [
      {
        extends: true,
        test: {
          name: "parallel",
          include: ["test/**/*.test.ts"],
          exclude: TIMED,
          maxWorkers: 3,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "timed",
          include: TIMED,
          maxWorkers: 1,
          sequence: { groupOrder: 1 },
        },
      },
    ],
  },
});
