// The summary for GitHub's step summary: the markdown report's head, its lists cut short.
import { createHash } from "node:crypto";
import { appendFile, readFile } from "node:fs/promises";
import { problemTable, stopLine, totals, warningItems, warningList } from "./markdown.js";
import { type Report, unsuccessful } from "./model.js";
import { md } from "./safe-text.js";
import { plural } from "./words.js";

/** Rows of the step summary's list of jobs that did not succeed; report.md lists them all. */
const SUMMARY_ROWS = 50;

export function summaryMarkdown(report: Report): string {
  const bad = unsuccessful(report);
  const warnings = warningList(warningItems(report), SUMMARY_ROWS);
  return [
    `### clapper run ${md(report.run.name)}: ${report.run.status}`,
    "",
    ...stopLine(report),
    ...(bad.length > 0
      ? [`**${plural(bad.length, "job")} did not succeed:**`, "", ...problemTable(bad, SUMMARY_ROWS)]
      : []),
    ...totals(report),
    "",
    ...(warnings.length > 0 ? ["**Warnings:**", "", ...warnings] : []),
  ].join("\n");
}

/** The marker that makes one run's summary, with these results, appear once in a summary file. */
function summaryMarker(report: Report): string {
  const key = JSON.stringify([report.run.id, report.run.finished_at, report.counts, report.points.spent]);
  return `<!-- clapper-summary ${createHash("sha256").update(key).digest("hex").slice(0, 24)} -->`;
}

/**
 * Appends the summary to the step summary file at `path`, unless this file holds it already (the
 * same run with the same results: `clapper report` after the run in one step, or twice).
 * Returns whether it appended.
 */
export async function appendStepSummary(path: string, report: Report): Promise<boolean> {
  const marker = summaryMarker(report);
  const existing = await readFile(path, "utf8").catch(() => "");
  if (existing.includes(marker)) return false;
  await appendFile(path, `${marker}\n${summaryMarkdown(report)}`);
  return true;
}

/** Writes the four reports beside the outputs, and the summary for GitHub Actions when asked. */
