// examples/prometheus/alerts.yaml: promtool accepts the rules, and its unit tests (`promtool test
// rules`, on series made for them) show the stale-success alert firing for a run whose last success
// is two days old and staying quiet for one that succeeds on time.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect } from "vitest";
import { PROMTOOL, tool, toolTest } from "./prometheus-tools.js";

const RULES = fileURLToPath(new URL("../../examples/prometheus/alerts.yaml", import.meta.url));

/** A scrape every 5 minutes (inside the 5-minute lookback, as real scrapes are) for 4 days: `stale` last succeeded at 0, `fresh` at every scrape, `never` runs but has never succeeded. */
const UNIT_TESTS = `
rule_files: [${JSON.stringify(RULES)}]
evaluation_interval: 5m
tests:
  - interval: 5m
    input_series:
      - series: 'clapper_last_success_timestamp_seconds{run="stale"}'
        values: '0x1200'
      - series: 'clapper_last_success_timestamp_seconds{run="fresh"}'
        values: '0+300x1200'
      - series: 'clapper_last_run_timestamp_seconds{run="stale"}'
        values: '0+300x1200'
      - series: 'clapper_last_run_timestamp_seconds{run="fresh"}'
        values: '0+300x1200'
      - series: 'clapper_last_run_timestamp_seconds{run="never"}'
        values: '0+300x1200'
    alert_rule_test:
      - eval_time: 1d
        alertname: ClapperNoRecentSuccess
        exp_alerts: []
      - eval_time: 3d
        alertname: ClapperNoRecentSuccess
        exp_alerts:
          - exp_labels: { severity: warning, run: stale }
            exp_annotations:
              summary: "clapper run stale: no successful run for 3d 0h 0m 0s"
              description: "Read the last report.json of stale; \`clapper run MANIFEST --retry-failed\` tries the failed jobs again."
      - eval_time: 3d
        alertname: ClapperNotRunning
        exp_alerts: []
      - eval_time: 1d
        alertname: ClapperNeverSucceeded
        exp_alerts: []
      - eval_time: 3d
        alertname: ClapperNeverSucceeded
        exp_alerts:
          - exp_labels: { severity: warning, run: never }
            exp_annotations:
              summary: "clapper run never has never succeeded"
`;

describe("examples/prometheus/alerts.yaml", () => {
  toolTest("promtool checks the rules, and their unit tests pass", [PROMTOOL], async () => {
    const check = await tool(PROMTOOL, ["check", "rules", RULES]);
    expect(check.code, `${check.stdout}${check.stderr}`).toBe(0);
    expect(check.stdout).toContain("SUCCESS: 3 rules found");
    const dir = await mkdtemp(join(tmpdir(), "clapper-rules-"));
    try {
      const tests = join(dir, "alerts.test.yaml");
      await writeFile(tests, UNIT_TESTS);
      const run = await tool(PROMTOOL, ["test", "rules", tests]);
      expect(run.code, `${run.stdout}${run.stderr}`).toBe(0);
      // Not vacuous: the same tests fail against a rule that never fires.
      const broken = join(dir, "broken.yaml");
      await writeFile(
        broken,
        (await import("node:fs/promises").then((fs) => fs.readFile(RULES, "utf8"))).replace(
          "> 2 * 86400",
          "> 20 * 86400",
        ),
      );
      await writeFile(tests, UNIT_TESTS.replace(JSON.stringify(RULES), JSON.stringify(broken)));
      expect((await tool(PROMTOOL, ["test", "rules", tests])).code).toBe(1);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
