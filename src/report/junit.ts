// junit.xml: one test case per job, so CI shows each shot and line.
import { inScope, REMOVED, type Report, type ReportJob } from "./model.js";
import { xmlAttr, xmlText } from "./safe-text.js";
import { requestIdOf, statusText } from "./words.js";

type Verdict =
  | { as: "passed" }
  | { as: "failure" | "error" | "skipped"; type?: string; message: string; body?: string };

function details(report: Report, j: ReportJob): string {
  const requestId = requestIdOf(j.error?.message);
  return [
    `job: ${j.id} (${j.source})`,
    `status: ${statusText(j)}`,
    `task: ${j.task_id ?? "none"}`,
    `attempts: ${j.attempts}`,
    ...(j.error ? [`error: ${j.error.code}: ${j.error.message}`] : []),
    ...(requestId ? [`request: ${requestId}`] : []),
    ...(j.status === "pending"
      ? [`run ${report.run.status}${report.run.stopped_by ? ` (stopped by ${report.run.stopped_by})` : ""}`]
      : []),
  ].join("\n");
}

function verdictOf(report: Report, j: ReportJob, only: ReadonlySet<string> | undefined): Verdict {
  if (j.status === "succeeded" || j.status === "skipped") return { as: "passed" };
  if (!inScope(j, only)) {
    // Not what this run was about, so not what its exit code says: listed, not judged.
    return j.error?.code === REMOVED
      ? { as: "skipped", message: j.error.message }
      : { as: "skipped", message: `not selected by --only; ${statusText(j)}` };
  }
  if (j.status === "failed" || j.status === "cancelled") {
    return {
      as: "failure",
      type: j.error?.code ?? j.status,
      message: j.error?.message ?? j.status,
      body: details(report, j),
    };
  }
  // Unfinished: an interrupted run, or one that stopped submitting. Not done is not a pass.
  return {
    as: "error",
    type: "unfinished",
    message: `not finished in this run (${j.stage ?? "pending"})${j.error ? `: ${j.error.code}: ${j.error.message}` : ""}`,
    body: details(report, j),
  };
}

const time = (ms: number) => (ms / 1000).toFixed(3);

/**
 * One test case per job, so CI shows each shot and line, with the seconds it took. A failed or
 * cancelled job is a `<failure>` and an unfinished one an `<error>`, each with the task, attempts,
 * error and request id in its body; a reused job passes, with the property `reused`; a video
 * delivered at another resolution passes, with a `warning` property. The suite's counts and time
 * are those of its cases.
 */
export function junitXml(report: Report): string {
  const only = report.run.only ? new Set(report.run.only) : undefined;
  const tally = { failures: 0, errors: 0, skipped: 0, ms: 0 };
  const cases = report.jobs.map((j) => {
    const ms = Math.round(j.elapsed_seconds * 1000);
    tally.ms += ms;
    const verdict = verdictOf(report, j, only);
    const props: Array<[string, string]> = [];
    if (j.status === "skipped") props.push(["reused", "true"]);
    for (const w of j.warnings ?? []) props.push(["warning", w]);
    const inner: string[] = [];
    if (props.length > 0) {
      inner.push("      <properties>");
      for (const [name, value] of props)
        inner.push(`        <property name="${xmlAttr(name)}" value="${xmlAttr(value)}"/>`);
      inner.push("      </properties>");
    }
    if (verdict.as !== "passed") {
      if (verdict.as === "failure") tally.failures += 1;
      else if (verdict.as === "error") tally.errors += 1;
      else tally.skipped += 1;
      const attrs = `${verdict.type !== undefined ? ` type="${xmlAttr(verdict.type)}"` : ""} message="${xmlAttr(verdict.message)}"`;
      inner.push(
        verdict.body !== undefined
          ? `      <${verdict.as}${attrs}>${xmlText(verdict.body)}</${verdict.as}>`
          : `      <${verdict.as}${attrs}/>`,
      );
    }
    const open = `    <testcase classname="${xmlAttr(`${report.run.name}.${j.kind}`)}" name="${xmlAttr(j.id)}" time="${time(ms)}"`;
    return inner.length > 0 ? `${open}>\n${inner.join("\n")}\n    </testcase>` : `${open}/>`;
  });
  const counts = `tests="${report.jobs.length}" failures="${tally.failures}" skipped="${tally.skipped}" errors="${tally.errors}" time="${time(tally.ms)}"`;
  const suiteProps: Array<[string, string]> = [
    ["run_id", report.run.id],
    ["status", report.run.status],
    ["points_spent", String(report.points.spent)],
    ...(report.run.stopped_by ? [["stopped_by", report.run.stopped_by] as [string, string]] : []),
    ...(report.run.stop_message ? [["stop_message", report.run.stop_message] as [string, string]] : []),
  ];
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="clapper" ${counts}>`,
    `  <testsuite name="${xmlAttr(report.run.name)}" ${counts} timestamp="${xmlAttr(report.run.started_at)}">`,
    "    <properties>",
    ...suiteProps.map(([n, v]) => `      <property name="${xmlAttr(n)}" value="${xmlAttr(v)}"/>`),
    "    </properties>",
    ...cases,
    "  </testsuite>",
    "</testsuites>",
    "",
  ].join("\n");
}
