// `clapper plan MANIFEST`: validate, expand, estimate. No task is ever created.

import { RESOLUTIONS } from "../../../api/video.js";
import { formatProblem, formatProblems, MAX_SHOT_S } from "../../../manifest/index.js";
import type { PlanResult } from "../../../pipeline/plan.js";
import { shardOf } from "../../../pipeline/shard.js";

/** Auto shots whose estimated duration the text plan names; `--json` has every one. */
const AUTO_SHOWN = 12;

/** Jobs and points per shard, when the manifest is split in `total`. */
export function shardTally(r: PlanResult, total: number) {
  const rows = Array.from({ length: total }, (_, i) => ({
    index: i + 1,
    jobs: 0,
    points: 0 as number | null,
  }));
  for (const job of r.jobs) {
    const row = rows[shardOf(job, total) - 1];
    if (!row) continue;
    row.jobs += 1;
    row.points = row.points === null || job.points === null ? null : row.points + job.points;
  }
  return rows;
}

/**
 * The contract shape of `plan --json` (BRIEF.md), plus a few fields more. `shards`: the number of
 * shards the manifest is split in, when given (each job then says its shard).
 */
export function planJson(r: PlanResult, shards?: number) {
  const total = r.shard?.total ?? shards;
  return {
    manifest: r.manifest ? { name: r.manifest.name, path: r.manifest.display } : null,
    ...(r.shard ? { shard: r.shard } : {}),
    ...(total !== undefined && !r.shard ? { shards: shardTally(r, total) } : {}),
    jobs: r.jobs.map((j) => ({
      id: j.id,
      kind: j.kind,
      points: j.points,
      fingerprint: j.fingerprint,
      ...(total !== undefined ? { shard: shardOf(j, total) } : {}),
      source: `${j.file}:${j.line}`,
      ...(j.kind === "video"
        ? {
            resolution: j.tier,
            duration: j.duration,
            // Timed to its narration: the duration and points are estimates until its lines exist.
            ...(j.auto
              ? {
                  auto: {
                    lines: j.auto.lines,
                    estimated: j.auto.fitted === undefined,
                    max_points: j.auto.maxPoints,
                  },
                }
              : {}),
          }
        : { counted_characters: j.countedChars }),
    })),
    points: r.points,
    counts: r.counts,
    speech_price: {
      value: r.speechPrice.value,
      source: r.speechPrice.source,
      counted_characters: r.speechPrice.countedChars,
    },
    ...(r.balance ? { balance: r.balance } : {}),
    ...(r.budget !== undefined ? { budget: { max_points: r.budget } } : {}),
    ...(r.auto
      ? { auto: { shots: r.auto.shots, estimated_points: r.auto.estimated, at_most: r.auto.atMost } }
      : {}),
    ...(r.fits !== undefined ? { fits: r.fits } : {}),
    // The problems kept (a bounded number), and how many were found in all.
    errors: r.errors.map(formatProblem),
    warnings: r.warnings.map(formatProblem),
    // The same problems, each with its parts apart: for editors, CI annotations and scripts.
    problems: [...r.errors, ...r.warnings].map((p) => ({
      severity: p.severity,
      file: p.file,
      line: p.line,
      field: p.field,
      message: p.message,
    })),
    error_count: r.errors.length + (r.omitted?.errors ?? 0),
    warning_count: r.warnings.length + (r.omitted?.warnings ?? 0),
  };
}

export function renderPlan(r: PlanResult, shards?: number): string {
  const out: string[] = [];
  const name = r.manifest ? `${r.manifest.name} (${r.manifest.display})` : "";
  out.push(`plan for ${name}${r.shard ? `, shard ${r.shard.index} of ${r.shard.total}` : ""}`);
  const resolutions = RESOLUTIONS.flatMap((tier) => {
    const e = r.byResolution[tier];
    return e ? [`${tier}: ${e.jobs} job${e.jobs === 1 ? "" : "s"}, ${e.points} points`] : [];
  }).join("; ");
  out.push(
    `  video   ${String(r.counts.video).padStart(5)} jobs  ${String(r.points.video).padStart(9)} points${resolutions ? `   (${resolutions})` : ""}`,
  );
  const price =
    r.counts.speech === 0
      ? ""
      : r.speechPrice.value === null
        ? "speech cost unknown: no service to ask; give --speech-price N, --sandbox or an API key"
        : `${r.speechPrice.countedChars} counted characters at ${r.speechPrice.value} points per 10 (${r.speechPrice.source === "service" ? "service price" : "--speech-price"})`;
  out.push(
    `  speech  ${String(r.counts.speech).padStart(5)} jobs  ${String(r.points.speech ?? "?").padStart(9)} points${price ? `   (${price})` : ""}`,
  );
  out.push(
    `  total   ${String(r.counts.total).padStart(5)} jobs  ${String(r.points.total ?? "?").padStart(9)} points`,
  );
  if (r.auto) {
    out.push(
      `  auto    ${String(r.auto.shots).padStart(5)} shots timed to their narration: ${r.auto.estimated} points estimated from the lines' text; at their longest (${MAX_SHOT_S} s) the run costs at most ${r.auto.atMost ?? "?"} points, which is what must fit`,
    );
    // The estimates themselves, a shot (not a take) each: enough to see what the narration asks for.
    const seen = new Set<string>();
    const estimates: string[] = [];
    for (const job of r.jobs) {
      if (job.kind !== "video" || !job.auto || job.auto.fitted !== undefined || seen.has(job.rowId)) continue;
      seen.add(job.rowId);
      estimates.push(`${job.rowId} ~${job.duration} s`);
    }
    const shown = estimates.slice(0, AUTO_SHOWN);
    const more = estimates.length - shown.length;
    out.push(
      `          estimated: ${shown.join(", ")}${more > 0 ? `, and ${more} more (plan --json lists all)` : ""}`,
    );
  }
  // Admission holds auto shots at their longest, so that is what must fit.
  const total = r.auto ? r.auto.atMost : r.points.total;
  if (r.balance) {
    const verdict =
      total === null ? "unknown" : total <= r.balance.available_points ? "fits" : "DOES NOT FIT";
    out.push(`balance: ${r.balance.available_points} points available: ${verdict}`);
  }
  if (r.budget !== undefined) {
    const fitsBudget = total !== null && total <= r.budget;
    out.push(
      `budget:  max_points ${r.budget}: ${total === null ? "unknown" : fitsBudget ? "fits" : "DOES NOT FIT"}`,
    );
  }
  if (shards !== undefined && !r.shard) {
    out.push(`shards: ${shards}`);
    for (const s of shardTally(r, shards))
      out.push(
        `  ${`${s.index}/${shards}`.padEnd(9)} ${String(s.jobs).padStart(5)} jobs  ${String(s.points ?? "?").padStart(9)} points`,
      );
  }
  return out.join("\n");
}

/** Errors, then warnings: the first `limit` of each, and a count of the rest (a broken file can have thousands). */
export function renderProblems(r: PlanResult, limit = 50): string {
  const out: string[] = [];
  const section = (list: PlanResult["errors"], omitted: number, noun: string) => {
    const total = list.length + omitted;
    if (total === 0) return;
    out.push(`${total} ${noun}${total === 1 ? "" : "s"}:`);
    for (const line of formatProblems(list, { limit, omitted })) out.push(`  ${line}`);
  };
  section(r.errors, r.omitted?.errors ?? 0, "error");
  section(r.warnings, r.omitted?.warnings ?? 0, "warning");
  return out.join("\n");
}
