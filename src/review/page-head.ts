// The top of the review page: the run's summary, the filters, the picks' bar (saved by the server,
// or offered as picks.yaml to download), and the assembled episode with its captions.
import type { Report } from "../report/model.js";
import { esc, humanTime, safeHref } from "./escape.js";
import type { ReviewFilter, ReviewPageInput } from "./page-model.js";

function durationText(start: string, end: string | null): string {
  if (end === null) return "not finished";
  const ms = Date.parse(end) - Date.parse(start);
  if (!Number.isFinite(ms) || ms < 0) return "unknown";
  const s = Math.round(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h}h ${m}m ${s % 60}s` : m > 0 ? `${m}m ${s % 60}s` : `${(ms / 1000).toFixed(1)}s`;
}

export function summary(report: Report, linksExpireAt: string | undefined): string {
  const { run, counts: c, points: p } = report;
  const all = report.jobs.reduce((sum, j) => sum + (j.spent_total ?? j.points), 0);
  const shard = run.shard ? ` (shard ${run.shard.index} of ${run.shard.total})` : "";
  const stat = (label: string, value: string | number, cls = "") =>
    `<span class="stat${cls ? ` ${cls}` : ""}"><b>${esc(value)}</b> ${esc(label)}</span>`;
  const balance =
    p.balance_before !== null || p.balance_after !== null
      ? stat("balance", `${p.balance_before ?? "?"} → ${p.balance_after ?? "?"}`)
      : "";
  return [
    `<header class="summary"><h1>${esc(run.name)}${esc(shard)} <span class="badge run ${esc(run.status)}" id="run-status">${esc(run.status)}</span></h1>`,
    `<div class="stats">${stat(c.total === 1 ? "job:" : "jobs:", c.total)}${stat("generated", c.succeeded, "succeeded")}${stat("reused", c.skipped, "skipped")}${stat("failed", c.failed, "failed")}${c.cancelled > 0 ? stat("cancelled", c.cancelled, "cancelled") : ""}${c.pending > 0 ? stat("pending", c.pending, "pending") : ""}${stat("points spent", `${p.spent} / ${p.estimated} est.`)}${stat("points in all runs", all)}${balance}${stat("run time", durationText(run.started_at, run.finished_at))}</div>`,
    `<p class="meta">Manifest <code>${esc(run.manifest)}</code>, started ${humanTime(run.started_at)}${run.finished_at ? `, finished ${humanTime(run.finished_at)}` : ""}${run.id ? `, run ${esc(run.id)}` : ""}.</p>`,
    run.stopped_by || run.stop_message
      ? `<p class="stop">Stopped${run.stopped_by ? ` by <b>${esc(run.stopped_by)}</b>` : ""}${run.stop_message ? `: ${esc(run.stop_message)}` : ""}</p>`
      : "",
    report.note ? `<p class="note">${esc(report.note)}</p>` : "",
    linksExpireAt
      ? `<p class="expiry" id="links-expire">Media links are presigned and work until ${humanTime(linksExpireAt)}; run <code>clapper report</code> again for new ones.</p>`
      : "",
    "</header>",
  ].join("");
}

export function filterBar(rows: readonly { filters: string }[]): string {
  const count = (f: ReviewFilter) => rows.filter((r) => r.filters.split(" ").includes(f)).length;
  const button = (f: ReviewFilter | "all", label: string, n: number) =>
    `<button type="button" data-filter="${f}" aria-pressed="${f === "all"}">${esc(label)} <span class="n">${n}</span></button>`;
  // The buttons count rows (a shot with its takes and lines), the summary above counts jobs: said
  // so, or "reused 2" under "4 reused" reads as a contradiction.
  return `<nav class="filters" aria-label="filters"><span class="label">rows with:</span>${button("all", "any job", rows.length)}${button("failed", "a failed job", count("failed"))}${button("generated", "a generated job", count("generated"))}${button("reused", "a reused job", count("reused"))}<span id="shown" aria-live="polite"></span></nav>`;
}

/**
 * Where picks go. Served: each choice is saved to picks.yaml at once (the status says so). From a
 * file or S3: the choices made here become a picks.yaml to download and put beside the manifest.
 */
export function picksBar(input: ReviewPageInput, pickable: number): string {
  if (pickable === 0) return "";
  const saved = Object.keys(input.picks ?? {}).length;
  const status = `<span id="picks-status" aria-live="polite">${saved} ${saved === 1 ? "shot" : "shots"} picked</span>`;
  if (input.serve) {
    return `<p class="picks served">Picks are saved to <code>picks.yaml</code> beside the manifest as you choose. ${status}</p>`;
  }
  return `<p class="picks offline">Choose takes below, then <a id="picks-download" download="picks.yaml" href="#" aria-disabled="true">download picks.yaml</a> and put it beside the manifest (or run <code>clapper review</code> to save picks directly). ${status}</p>`;
}

/** The assembled episode, with its captions loaded from the page itself (a data: URI, so file:// plays them). */
export function episodePlayer(episode: ReviewPageInput["episode"]): string {
  const href = safeHref(episode?.href);
  if (!episode || !href) return "";
  const track =
    episode.captions !== undefined
      ? `<track kind="captions" src="data:text/vtt;base64,${Buffer.from(episode.captions, "utf8").toString("base64")}" srclang="en" label="Captions" default>`
      : "";
  return `<section id="episode"><h2>Episode</h2><video controls preload="metadata" data-episode="episode" src="${esc(href)}">${track}</video></section>`;
}
