// report.md, for people: what did not succeed first, then the totals, the warnings and every job.
// Its pieces are the step summary's too (summary.ts).
import { type Report, type ReportJob, unsuccessful } from "./model.js";
import { code, md } from "./safe-text.js";
import { countsText, statusText } from "./words.js";

export function stopLine(report: Report): string[] {
  if (!report.run.stopped_by && !report.run.stop_message) return [];
  const by = report.run.stopped_by ? `Stopped by **${md(report.run.stopped_by)}**` : "Stopped";
  return [`${by}${report.run.stop_message ? `: ${md(report.run.stop_message)}` : "."}`, ""];
}

export function totals(report: Report): string[] {
  const p = report.points;
  return [
    `${countsText(report.counts)}.`,
    `Points: ${p.spent} spent of ${p.estimated} estimated${p.balance_before !== null ? `; balance ${p.balance_before} before` : ""}${p.balance_after !== null ? `, ${p.balance_after} after` : ""}.`,
  ];
}

function errorText(j: ReportJob): string {
  return j.error ? md(`${j.error.code}: ${j.error.message}`) : "";
}

export function problemTable(jobs: readonly ReportJob[], limit: number): string[] {
  if (jobs.length === 0) return [];
  const shown = jobs.slice(0, limit);
  return [
    "| job | status | attempts | task | error |",
    "| --- | --- | ---: | --- | --- |",
    ...shown.map(
      (j) => `| ${md(j.id)} | ${statusText(j)} | ${j.attempts} | ${md(j.task_id ?? "")} | ${errorText(j)} |`,
    ),
    ...(jobs.length > shown.length ? ["", `… and ${jobs.length - shown.length} more: see report.md.`] : []),
    "",
  ];
}

export function warningItems(report: Report): string[] {
  return report.jobs.flatMap((j) => (j.warnings ?? []).map((w) => `- ${md(j.id)}: ${md(w)}`));
}

export function warningList(all: readonly string[], limit: number): string[] {
  if (all.length === 0) return [];
  return [
    ...all.slice(0, limit),
    ...(all.length > limit ? [`- … and ${all.length - limit} more: see report.md.`] : []),
    "",
  ];
}

function resolutionCell(j: ReportJob): string {
  if (!j.requested_resolution) return "";
  const delivered = j.output?.resolution;
  if (delivered === undefined || delivered === j.requested_resolution) return md(j.requested_resolution);
  return md(`${j.requested_resolution} asked, ${delivered} delivered`);
}

/** The output, and how many earlier versions of it are kept beside it. */
function outputCell(j: ReportJob): string {
  const kept = j.versions?.length ?? 0;
  return `${j.output ? md(j.output.uri) : ""}${kept > 0 ? ` (${kept} earlier ${kept === 1 ? "version" : "versions"} kept)` : ""}`;
}

export function reportMarkdown(report: Report): string {
  const bad = unsuccessful(report);
  const items = warningItems(report);
  const rows = report.jobs.map(
    (j) =>
      `| ${md(j.id)} | ${j.kind} | ${j.status}${j.edited ? " (edited)" : ""} | ${j.points} | ${j.spent_total ?? j.points} | ${j.estimated_points ?? "?"} | ${j.attempts} | ${j.elapsed_seconds.toFixed(1)} | ${resolutionCell(j)} | ${outputCell(j)} | ${errorText(j)} |`,
  );
  return [
    `# clapper report: ${md(report.run.name)}`,
    "",
    `Manifest ${code(report.run.manifest)}, started ${md(report.run.started_at)}, ${report.run.finished_at ? `finished ${md(report.run.finished_at)}` : "not finished"}; status **${report.run.status}**.`,
    "",
    ...stopLine(report),
    ...(report.note ? [`Note: ${md(report.note)}`, ""] : []),
    ...(bad.length > 0 ? [`## Did not succeed (${bad.length})`, "", ...problemTable(bad, bad.length)] : []),
    "## Totals",
    "",
    ...totals(report),
    "",
    ...(items.length > 0 ? [`## Warnings (${items.length})`, "", ...warningList(items, items.length)] : []),
    ...shardLines(report),
    "## Jobs",
    "",
    "| job | kind | status | points | in all | estimated | attempts | seconds | resolution | output | error |",
    "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
    ...rows,
    "",
  ].join("\n");
}

/** The merged report's shards, one row each. */
function shardLines(report: Report): string[] {
  const shards = report.shards;
  if (!shards || shards.length === 0) return [];
  return [
    `## Shards (${shards.length})`,
    "",
    "| shard | status | jobs | succeeded | failed | pending | points | started | finished |",
    "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ...shards.map(
      (s) =>
        `| ${s.index}/${s.total} | ${s.status} | ${s.counts?.total ?? ""} | ${s.counts ? s.counts.succeeded + s.counts.skipped : ""} | ${s.counts?.failed ?? ""} | ${s.counts?.pending ?? ""} | ${s.points?.spent ?? ""} | ${md(s.started_at ?? "")} | ${md(s.finished_at ?? "")} |`,
    ),
    "",
  ];
}
