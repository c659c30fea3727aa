// The run report, built from the journal's state: report.json (the contract of BRIEF.md, plus a
// few fields), report.md for people, junit.xml for CI, and a summary for GitHub's step summary.
import { appendFile } from "node:fs/promises";
import { redactDeep } from "../api/redact.js";
import { type JobState, openAttempt, type RunState, spentPoints } from "../engine/state.js";
import type { Job } from "../manifest/index.js";
import type { Sink } from "../sinks/sink.js";

export type ReportJobStatus = "succeeded" | "failed" | "cancelled" | "skipped" | "pending";

export interface ReportJob {
  id: string;
  kind: "video" | "speech";
  status: ReportJobStatus;
  task_id: string | null;
  attempts: number;
  points: number;
  estimated_points: number | null;
  fingerprint: string;
  output: { uri: string; bytes: number; sha256: string } | null;
  error: { code: string; message: string } | null;
  source: string;
  /**
   * The task was one created before this run (its Idempotency-Key returned it): its points were
   * paid where it was first created, so they are not counted here.
   */
  replayed?: true;
}

export interface Report {
  run: {
    name: string;
    manifest: string;
    status: "succeeded" | "partial" | "failed" | "interrupted";
    started_at: string;
    finished_at: string | null;
    id: string;
    /** The jobs the run was limited to with `--only`. */
    only?: string[];
  };
  points: { estimated: number; spent: number; balance_before: number | null; balance_after: number | null };
  counts: {
    total: number;
    succeeded: number;
    failed: number;
    cancelled: number;
    skipped: number;
    pending: number;
  };
  jobs: ReportJob[];
  note?: string;
}

export interface ReportInput {
  state: RunState;
  jobs: readonly Job[];
  manifest: string;
  name: string;
  interrupted: boolean;
  balanceAfter?: number | undefined;
  note?: string;
  /** Ids the run was limited to (`--only`): its status is about them; the others are listed as they stand. */
  selected?: readonly string[];
}

function statusOf(job: JobState | undefined): ReportJobStatus {
  if (!job) return "pending";
  if (job.status === "stored") return job.skipped ? "skipped" : "succeeded";
  if (job.status === "failed") return "failed";
  if (job.status === "cancelled") return "cancelled";
  return "pending";
}

export function buildReport(input: ReportInput): Report {
  const { state } = input;
  // After a run finished, its campaign is the one before the current (empty) one.
  const campaign = state.run?.finished_at !== undefined ? state.campaign - 1 : state.campaign;
  const jobs: ReportJob[] = input.jobs.map((planned) => {
    const st = state.jobs[planned.id];
    const status = statusOf(st);
    const attempts = st?.attempts.filter((a) => a.campaign === campaign) ?? [];
    const last = st?.attempts.at(-1);
    // A job in flight can carry a problem (a task that could not be read) without having ended.
    const lastError = st?.error ?? (st && !openAttempt(st) ? attempts.at(-1)?.error : undefined);
    const replayed = attempts.some((a) => a.replayed);
    return {
      id: planned.id,
      kind: planned.kind,
      status,
      task_id: last?.taskId ?? null,
      attempts: attempts.length,
      // Failed and cancelled attempts are released, so they add 0; a reused result costs nothing now,
      // but a job this campaign paid for counts even when the store turned out to hold its result.
      points: st ? spentPoints(st, campaign) : 0,
      // Read from state when the manifest was loaded offline (status, report: no speech price).
      estimated_points: planned.points ?? (st?.fingerprint === planned.fingerprint ? st.estimate : null),
      fingerprint: planned.fingerprint,
      output:
        (status === "succeeded" || status === "skipped") && st?.output
          ? { uri: st.output.uri, bytes: st.output.bytes, sha256: st.output.sha256 }
          : null,
      error:
        status === "failed" || status === "cancelled" || (status === "pending" && lastError)
          ? (lastError ?? null)
          : null,
      source: `${planned.file}:${planned.line}`,
      ...(replayed ? { replayed: true as const } : {}),
    };
  });
  // Rows removed from the manifest whose tasks this campaign paid for (or still follows): listed,
  // as cancelled, so that points.spent stays the sum of the jobs and equal to the balance drop.
  const planned = new Set(input.jobs.map((j) => j.id));
  for (const st of Object.values(state.jobs)) {
    if (planned.has(st.id)) continue;
    const points = spentPoints(st, campaign);
    const inFlight = st.attempts.some((a) => a.spent === undefined);
    if (points === 0 && !inFlight) continue;
    jobs.push({
      id: st.id,
      kind: st.kind,
      status: "cancelled",
      task_id: st.attempts.at(-1)?.taskId ?? null,
      attempts: st.attempts.filter((a) => a.campaign === campaign).length,
      points,
      estimated_points: null,
      fingerprint: st.fingerprint,
      output: null,
      error: {
        code: "removed_from_manifest",
        message: inFlight
          ? "no longer in the manifest; its task is still followed to its end"
          : "no longer in the manifest; its task was followed to its end and paid for",
      },
      source: "(removed from the manifest)",
    });
  }
  const count = (s: ReportJobStatus) => jobs.filter((j) => j.status === s).length;
  const counts = {
    total: jobs.length,
    succeeded: count("succeeded"),
    failed: count("failed"),
    cancelled: count("cancelled"),
    skipped: count("skipped"),
    pending: count("pending"),
  };
  const selected = input.selected ? new Set(input.selected) : undefined;
  // The run's status is about the manifest's jobs (or those of --only), not rows removed from it.
  const considered = jobs.filter((j) => (selected ? selected.has(j.id) : planned.has(j.id)));
  const done = considered.filter((j) => j.status === "succeeded" || j.status === "skipped").length;
  const status: Report["run"]["status"] = input.interrupted
    ? "interrupted"
    : done === considered.length
      ? "succeeded"
      : done === 0
        ? "failed"
        : "partial";
  // Messages come from the services: whatever they echo, the reports never carry a secret.
  return redactDeep<Report>({
    run: {
      name: input.name,
      manifest: input.manifest,
      status,
      started_at: state.run?.started_at ?? new Date().toISOString(),
      // A report written again from state keeps the time the run really finished.
      finished_at: input.interrupted ? null : (state.run?.finished_at ?? new Date().toISOString()),
      id: state.run?.id ?? "",
      ...(input.selected ? { only: [...input.selected] } : {}),
    },
    points: {
      estimated: jobs.reduce((sum, j) => sum + (j.status === "skipped" ? 0 : (j.estimated_points ?? 0)), 0),
      spent: jobs.reduce((sum, j) => sum + j.points, 0),
      balance_before: state.balance_before ?? null,
      balance_after: input.balanceAfter ?? state.run?.balance_after ?? null,
    },
    counts,
    jobs,
    ...(input.note ? { note: input.note } : {}),
  });
}

function xml(text: string): string {
  return text.replace(
    /[<>&"']/g,
    (c) => ({ "<": "&lt;", ">": "&gt;", "&": "&amp;", '"': "&quot;", "'": "&apos;" })[c] ?? c,
  );
}

/** One test case per job, so CI shows each shot and line. */
export function junitXml(report: Report): string {
  const failures = report.counts.failed + report.counts.cancelled;
  const skipped = report.counts.skipped + report.counts.pending;
  const cases = report.jobs.map((j) => {
    const open = `    <testcase classname="${xml(`${report.run.name}.${j.kind}`)}" name="${xml(j.id)}">`;
    let body = "";
    if (j.status === "failed" || j.status === "cancelled") {
      body = `\n      <failure type="${xml(j.error?.code ?? j.status)}" message="${xml(j.error?.message ?? j.status)}"/>\n    `;
    } else if (j.status === "skipped") {
      body = `\n      <skipped message="reused: nothing changed since the earlier run"/>\n    `;
    } else if (j.status === "pending") {
      body = `\n      <skipped message="${xml(`not finished in this run${j.error ? `: ${j.error.message}` : ""}`)}"/>\n    `;
    }
    return `${open}${body}</testcase>`;
  });
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="clapper" tests="${report.counts.total}" failures="${failures}" skipped="${skipped}">`,
    `  <testsuite name="${xml(report.run.name)}" tests="${report.counts.total}" failures="${failures}" skipped="${skipped}" timestamp="${xml(report.run.started_at)}">`,
    ...cases,
    "  </testsuite>",
    "</testsuites>",
    "",
  ].join("\n");
}

function md(text: string): string {
  return text.replace(/\|/g, "\\|").replace(/\n/g, " ");
}

export function summaryMarkdown(report: Report): string {
  const c = report.counts;
  const p = report.points;
  return [
    `### clapper run ${md(report.run.name)}: ${report.run.status}`,
    "",
    `${c.total} jobs: ${c.succeeded} succeeded, ${c.skipped} skipped, ${c.failed} failed, ${c.cancelled} cancelled, ${c.pending} pending.`,
    `Points: ${p.spent} spent of ${p.estimated} estimated${p.balance_before !== null ? `; balance ${p.balance_before} before` : ""}${p.balance_after !== null ? `, ${p.balance_after} after` : ""}.`,
    "",
  ].join("\n");
}

export function reportMarkdown(report: Report): string {
  const rows = report.jobs.map(
    (j) =>
      `| ${md(j.id)} | ${j.kind} | ${j.status} | ${j.points} | ${j.estimated_points ?? "?"} | ${j.attempts} | ${j.output ? md(j.output.uri) : ""} | ${j.error ? md(`${j.error.code}: ${j.error.message}`) : ""} |`,
  );
  return [
    `# clapper report: ${md(report.run.name)}`,
    "",
    `Manifest \`${report.run.manifest}\`, started ${report.run.started_at}, ${report.run.finished_at ? `finished ${report.run.finished_at}` : "not finished"}; status **${report.run.status}**.`,
    ...(report.note ? ["", `Note: ${md(report.note)}`] : []),
    "",
    summaryMarkdown(report).split("\n").slice(2).join("\n"),
    "| job | kind | status | points | estimated | attempts | output | error |",
    "| --- | --- | --- | ---: | ---: | ---: | --- | --- |",
    ...rows,
    "",
  ].join("\n");
}

/** Writes the three reports beside the outputs, and the summary for GitHub Actions when asked. */
export async function writeReports(sink: Sink, report: Report, env: NodeJS.ProcessEnv): Promise<string[]> {
  const uris = [
    await sink.writeText("reports/report.json", `${JSON.stringify(report, null, 2)}\n`, "application/json"),
    await sink.writeText("reports/report.md", reportMarkdown(report), "text/markdown"),
    await sink.writeText("reports/junit.xml", junitXml(report), "application/xml"),
  ];
  if (env.GITHUB_STEP_SUMMARY) await appendFile(env.GITHUB_STEP_SUMMARY, summaryMarkdown(report));
  return uris;
}
