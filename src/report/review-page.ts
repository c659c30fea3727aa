// report.html: the storyboard as people review it, one row per shot in the manifest's order with
// every take's video, the shot's narration lines with their audio, and what each job cost and
// became. One self-contained file (inline CSS and JS, nothing fetched but the media it links), so
// the run's folder can be zipped and opened anywhere, or the page opened from S3 with presigned links.
//
// The report holds what happened; the manifest's jobs hold what was asked (prompt, text, voice,
// emotion, shot, take), so the page is built from both. Every string from the manifest or the
// services is escaped here, and the page is rendered server-side: no data is handed to a script.
import { createHash } from "node:crypto";
import { posix } from "node:path";
import { redact } from "../api/redact.js";
import type { Job, SpeechJob, VideoJob } from "../manifest/index.js";
import { byKind, KINDS } from "./kinds.js";
import type { Report, ReportJob } from "./model.js";

interface ReviewPageInput {
  report: Report;
  /** The manifest's jobs, in its order; those without a row in the report are left out. */
  jobs: readonly Job[];
  /** Job id -> the address of its output as the page links it (relative to the page, or presigned). */
  links: ReadonlyMap<string, string>;
  /** When the links stop working (presigned links), ISO 8601: shown on the page. */
  linksExpireAt?: string | undefined;
}

/**
 * The filters of the page, as they mark rows (`data-filters`) and jobs (`data-status`): rows with a
 * failed job, with a job generated in this run, with a reused job.
 */
type ReviewFilter = "failed" | "generated" | "reused";

// ---------------------------------------------------------------------------------------------
// escaping
// ---------------------------------------------------------------------------------------------

// Control characters (tab, line feed and carriage return kept), lone surrogates and non-characters:
// nothing a person should see, and a browser would show them as boxes or drop them silently.
const CONTROLS =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const HTML: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text or an attribute value (always double-quoted here): markup and quotes escaped. */
export function esc(text: string | number): string {
  const s = typeof text === "number" ? String(text) : text;
  // Redacted again after stripping: a control character inside a key must not hide it.
  const clean = CONTROLS.test(s) ? redact(s.replace(CONTROLS, "")) : s;
  CONTROLS.lastIndex = 0;
  return /[&<>"']/.test(clean) ? clean.replace(/[&<>"']/g, (c) => HTML[c] ?? c) : clean;
}

/**
 * A link the page may carry: relative (no scheme, not protocol-relative) or http(s). Anything else
 * (`javascript:`, `data:`) is dropped, whatever a state file or a store said.
 */
function safeHref(href: string | undefined): string | undefined {
  if (href === undefined || href === "") return undefined;
  if (/^https?:\/\//i.test(href)) return href;
  if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith("//") || /[\s\\]/.test(href)) return undefined;
  return href;
}

// ---------------------------------------------------------------------------------------------
// rows: shots in manifest order, their takes and lines
// ---------------------------------------------------------------------------------------------

interface Entry<J extends Job = Job> {
  job: J | undefined;
  row: ReportJob;
}

interface ShotRow {
  id: string;
  takes: Entry<VideoJob>[];
  lines: Entry<SpeechJob>[];
}

interface Grouped {
  shots: ShotRow[];
  /** Lines that name no shot. */
  loose: Entry<SpeechJob>[];
  /** Report rows with no job of the manifest (rows removed from it). */
  others: Entry[];
}

/** The manifest's jobs of each kind, each in the manifest's order. */
function byKinds(jobs: readonly Job[]): { takes: VideoJob[]; lines: SpeechJob[] } {
  const takes: VideoJob[] = [];
  const lines: SpeechJob[] = [];
  for (const job of jobs) byKind(job, { video: (v) => takes.push(v), speech: (s) => lines.push(s) });
  return { takes, lines };
}

function group(report: Report, jobs: readonly Job[]): Grouped {
  const rows = new Map(report.jobs.map((j) => [j.id, j]));
  const used = new Set<string>();
  const shots = new Map<string, ShotRow>();
  const shotRow = (id: string) => {
    let found = shots.get(id);
    if (!found) {
      found = { id, takes: [], lines: [] };
      shots.set(id, found);
    }
    return found;
  };
  const loose: Entry<SpeechJob>[] = [];
  const { takes, lines } = byKinds(jobs);
  // Takes first, so that rows follow the manifest's order of shots whatever the order of lines.
  for (const job of takes) {
    const row = rows.get(job.id);
    if (!row || used.has(job.id)) continue;
    used.add(job.id);
    shotRow(job.rowId).takes.push({ job, row });
  }
  for (const job of lines) {
    const row = rows.get(job.id);
    if (!row || used.has(job.id)) continue;
    used.add(job.id);
    // A line whose shot has no take here (another shard's) still gets its shot's row.
    if (job.shot !== undefined) shotRow(job.shot).lines.push({ job, row });
    else loose.push({ job, row });
  }
  const others = report.jobs.filter((r) => !used.has(r.id)).map((row) => ({ job: undefined, row }));
  return { shots: [...shots.values()], loose, others };
}

function filtersOf(row: ReportJob): ReviewFilter | undefined {
  if (row.status === "failed") return "failed";
  // Generated in this run: a result this run produced, not one it found and reused.
  if (row.status === "succeeded") return "generated";
  if (row.status === "skipped") return "reused";
  return undefined;
}

function rowFilters(entries: readonly Entry[]): string {
  const set = new Set<ReviewFilter>();
  for (const e of entries) {
    const f = filtersOf(e.row);
    if (f) set.add(f);
  }
  return (["failed", "generated", "reused"] as const).filter((f) => set.has(f)).join(" ");
}

// ---------------------------------------------------------------------------------------------
// pieces of the page
// ---------------------------------------------------------------------------------------------

/** What each status word means in the words of the page's summary (generated, reused, ...). */
const STATUS_MEANS: Record<ReportJob["status"], string> = {
  succeeded: "generated in this run",
  skipped: "reused from an earlier run",
  failed: "",
  cancelled: "",
  pending: "",
};

/** The job's status word (report.json's), and what it means here: the same word in every report. */
function statusBadge(row: ReportJob): string {
  const means =
    row.status === "pending" && row.stage && row.stage !== "pending"
      ? row.stage
      : (STATUS_MEANS[row.status] ?? "");
  return `<span class="badge ${esc(row.status)}">${esc(row.status)}</span>${means ? `<span class="means">${esc(means)}</span>` : ""}${row.edited ? '<span class="fact edited"><b>edited</b> in the manifest since its last result</span>' : ""}`;
}

function promptOf(job: VideoJob): string {
  return job.request.content
    .map((c) => (c.type === "text" ? c.text : ""))
    .filter((t) => t !== "")
    .join("\n");
}

const MATERIAL_WORDS: Record<string, string> = {
  first_frame: "first frame",
  last_frame: "last frame",
  reference_image: "reference image",
  reference_video: "reference video",
  reference_audio: "reference audio",
};

function materialsOf(job: VideoJob): string[] {
  return job.materials.map(({ ref }) => {
    const where =
      ref.source === "local" ? posix.basename(ref.path) : ref.source === "url" ? ref.url : ref.uri;
    return `${MATERIAL_WORDS[ref.kind] ?? ref.kind}: ${where}`;
  });
}

function voiceOf(job: SpeechJob): string {
  const v = job.voice;
  if (v.source === "file")
    return `file ${posix.basename(v.path)}${v.saveAs ? ` (saved as ${v.saveAs})` : ""}`;
  return `${v.source}:${v.voiceId}`;
}

function emotionOf(job: SpeechJob): string {
  const r = job.request;
  const parts: string[] = [];
  if (r.emotion_description !== undefined) parts.push(r.emotion_description);
  if (r.auto_emotion) parts.push("auto");
  if (r.emotion_vector !== undefined) parts.push(`vector [${r.emotion_vector.join(", ")}]`);
  if (r.emotion_strength !== undefined) parts.push(`strength ${r.emotion_strength}`);
  return parts.join(", ");
}

function fact(label: string, value: string | number | undefined): string {
  if (value === undefined || value === "") return "";
  return `<span class="fact"><b>${esc(label)}</b> ${esc(value)}</span>`;
}

function resolutionFact(row: ReportJob): string {
  const asked = row.requested_resolution;
  const got = row.output?.resolution;
  if (asked === undefined || got === undefined || got === asked) return "";
  return `<span class="fact delivered"><b>delivered</b> ${esc(got)} (asked ${esc(asked)})</span>`;
}

function player(row: ReportJob, href: string | undefined): string {
  const tag = KINDS[row.kind].media;
  const link = safeHref(href);
  if (!row.output || !link) {
    const why = row.output ? "stored, but not linkable from here" : `no ${tag}`;
    return `<div class="nomedia ${tag}">${esc(why)}</div>`;
  }
  return `<${tag} controls preload="metadata" data-job="${esc(row.id)}" src="${esc(link)}"></${tag}>`;
}

function outcome(row: ReportJob, href: string | undefined): string {
  const link = safeHref(href);
  // What the job's outputs cost over every run, and what this run spent on it of its estimate.
  const total = row.spent_total ?? row.points;
  const points = `${total} in all, ${row.points} this run${row.estimated_points !== null ? ` (${row.estimated_points} est.)` : ""}`;
  const facts = [
    statusBadge(row),
    fact("points", points),
    fact("attempts", row.attempts),
    row.elapsed_seconds > 0 ? fact("seconds", row.elapsed_seconds.toFixed(1)) : "",
    resolutionFact(row),
    row.replayed ? fact("replayed", "paid in an earlier run") : "",
    fact("task", row.task_id ?? undefined),
    link ? `<a class="fact file" href="${esc(link)}">file</a>` : "",
  ];
  const error = row.error
    ? `<p class="error"><b>${esc(row.error.code)}</b> ${esc(row.error.message)}</p>`
    : "";
  const warnings = (row.warnings ?? []).map((w) => `<p class="warning">${esc(w)}</p>`).join("");
  return `<div class="facts">${facts.join("")}</div>${error}${warnings}`;
}

function takeCard(entry: Entry<VideoJob>, href: string | undefined, takes: number): string {
  const { row, job } = entry;
  const take = job?.take !== undefined ? `take ${job.take} of ${takes}` : "";
  return `<div class="job take" data-job="${esc(row.id)}" data-status="${esc(row.status)}">${player(row, href)}<div class="label"><span class="id">${esc(row.id)}</span>${take ? ` <span class="take-no">${esc(take)}</span>` : ""}</div>${outcome(row, href)}</div>`;
}

function lineCard(entry: Entry<SpeechJob>, href: string | undefined): string {
  const { row, job: speech } = entry;
  const details = speech
    ? `<p class="text">${esc(speech.request.text)}</p><div class="facts">${fact("voice", voiceOf(speech))}${fact("emotion", emotionOf(speech))}${fact("language", speech.request.language)}${fact("speed", speech.request.speed)}</div>`
    : "";
  return `<div class="job line" data-job="${esc(row.id)}" data-status="${esc(row.status)}"><div class="label"><span class="id">${esc(row.id)}</span></div>${player(row, href)}${details}${outcome(row, href)}</div>`;
}

interface Row {
  html: string;
  filters: string;
}

function shotSection(shot: ShotRow, links: ReadonlyMap<string, string>): Row {
  const first = shot.takes.find((t) => t.job !== undefined)?.job;
  const prompt = first ? promptOf(first) : "";
  const settings = first
    ? [
        fact("model", first.request.model),
        fact("resolution", first.request.resolution ?? first.tier),
        // An auto shot says what it was timed to, or that its length is still an estimate.
        fact(
          "seconds",
          first.auto === undefined
            ? first.duration
            : first.auto.fitted !== undefined
              ? `${first.duration} (auto: ${first.auto.narration ?? "?"} s of narration)`
              : `~${first.duration} (auto, estimated)`,
        ),
        fact("ratio", first.request.ratio),
        fact("source", `${first.file}:${first.line}`),
        ...materialsOf(first).map((m) => fact("material", m)),
      ].join("")
    : "";
  const takes =
    shot.takes.length > 0
      ? shot.takes.map((t) => takeCard(t, links.get(t.row.id), shot.takes.length)).join("")
      : `<div class="nomedia video">${esc("no take of this shot in this report")}</div>`;
  const lines = shot.lines.map((l) => lineCard(l, links.get(l.row.id))).join("");
  const filters = rowFilters([...shot.takes, ...shot.lines]);
  const html = `<article class="row shot" data-shot="${esc(shot.id)}" data-filters="${filters}"><header><h3>${esc(shot.id)}</h3>${prompt ? `<p class="prompt">${esc(prompt)}</p>` : ""}<div class="facts">${settings}</div></header><div class="cols${lines ? "" : " solo"}"><div class="takes">${takes}</div>${lines ? `<div class="lines">${lines}</div>` : ""}</div></article>`;
  return { html, filters };
}

/** The card of a row with no job of the manifest: its kind's card, without what the manifest asked. */
const BARE_CARD: Readonly<Record<ReportJob["kind"], (row: ReportJob, href: string | undefined) => string>> = {
  video: (row, href) => takeCard({ job: undefined, row }, href, 1),
  speech: (row, href) => lineCard({ job: undefined, row }, href),
};

function singleRow(card: string, entry: Entry): Row {
  const filters = rowFilters([entry]);
  return { html: `<article class="row single" data-filters="${filters}">${card}</article>`, filters };
}

function looseRow(entry: Entry<SpeechJob>, href: string | undefined): Row {
  return singleRow(lineCard(entry, href), entry);
}

function otherRow(entry: Entry, href: string | undefined): Row {
  return singleRow(BARE_CARD[entry.row.kind](entry.row, href), entry);
}

// ---------------------------------------------------------------------------------------------
// the summary bar
// ---------------------------------------------------------------------------------------------

function durationText(start: string, end: string | null): string {
  if (end === null) return "not finished";
  const ms = Date.parse(end) - Date.parse(start);
  if (!Number.isFinite(ms) || ms < 0) return "unknown";
  const s = Math.round(ms / 1000);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h}h ${m}m ${s % 60}s` : m > 0 ? `${m}m ${s % 60}s` : `${(ms / 1000).toFixed(1)}s`;
}

function summary(report: Report, linksExpireAt: string | undefined): string {
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
    `<p class="meta">Manifest <code>${esc(run.manifest)}</code>, started ${esc(run.started_at)}${run.finished_at ? `, finished ${esc(run.finished_at)}` : ""}${run.id ? `, run ${esc(run.id)}` : ""}.</p>`,
    run.stopped_by || run.stop_message
      ? `<p class="stop">Stopped${run.stopped_by ? ` by <b>${esc(run.stopped_by)}</b>` : ""}${run.stop_message ? `: ${esc(run.stop_message)}` : ""}</p>`
      : "",
    report.note ? `<p class="note">${esc(report.note)}</p>` : "",
    linksExpireAt
      ? `<p class="expiry" id="links-expire">Media links are presigned and work until <time datetime="${esc(linksExpireAt)}">${esc(linksExpireAt)}</time>; run <code>clapper report</code> again for new ones.</p>`
      : "",
    "</header>",
  ].join("");
}

function filterBar(rows: readonly Row[]): string {
  const count = (f: ReviewFilter) => rows.filter((r) => r.filters.split(" ").includes(f)).length;
  const button = (f: ReviewFilter | "all", label: string, n: number) =>
    `<button type="button" data-filter="${f}" aria-pressed="${f === "all"}">${esc(label)} <span class="n">${n}</span></button>`;
  // The buttons count rows (a shot with its takes and lines), the summary above counts jobs: said
  // so, or "reused 2" under "4 reused" reads as a contradiction.
  return `<nav class="filters" aria-label="filters"><span class="label">rows with:</span>${button("all", "any job", rows.length)}${button("failed", "a failed job", count("failed"))}${button("generated", "a generated job", count("generated"))}${button("reused", "a reused job", count("reused"))}<span id="shown" aria-live="polite"></span></nav>`;
}

// ---------------------------------------------------------------------------------------------
// the page
// ---------------------------------------------------------------------------------------------

const STYLE = `
:root{color-scheme:light dark;--bg:#fafafa;--fg:#1c1c1c;--card:#fff;--line:#ddd;--mute:#666;--ok:#1a7f37;--re:#0969da;--bad:#cf222e;--warn:#9a6700}
@media (prefers-color-scheme:dark){:root{--bg:#111;--fg:#eee;--card:#1b1b1b;--line:#333;--mute:#999}}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,sans-serif;background:var(--bg);color:var(--fg)}
.summary,.filters{padding:10px 20px;background:var(--card);border-bottom:1px solid var(--line)}
.top{position:sticky;top:0;z-index:2}
h1{font-size:20px;margin:0 0 6px}h2{font-size:16px;margin:24px 20px 8px}h3{margin:0 0 4px;font-size:15px}
.stats{display:flex;flex-wrap:wrap;gap:6px 18px}.stat b{font-size:16px}
.meta,.stop,.note,.expiry{margin:6px 0 0;color:var(--mute)}.stop{color:var(--warn)}
.filters{display:flex;gap:8px;align-items:center}
.filters button{font:inherit;padding:3px 10px;border:1px solid var(--line);border-radius:14px;background:transparent;color:inherit;cursor:pointer}
.filters button[aria-pressed=true]{background:var(--fg);color:var(--bg)}
#shown{color:var(--mute);margin-left:8px}
main{padding:0 20px 40px}
.row{background:var(--card);border:1px solid var(--line);border-radius:8px;margin:12px 0;padding:12px}
.row[hidden]{display:none}
.prompt,.text{white-space:pre-wrap;margin:4px 0}.text{font-style:italic}
.cols{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:16px;margin-top:10px}.cols.solo{grid-template-columns:1fr}
@media (max-width:800px){.cols{grid-template-columns:1fr}}
.takes,.lines{display:flex;flex-wrap:wrap;gap:12px;align-content:flex-start}.lines{flex-direction:column}
.job{flex:1 1 300px;max-width:520px;border-top:3px solid var(--line);padding-top:6px}.lines .job{flex:0 0 auto;max-width:none}
.single .job{max-width:520px}
.job[data-status=failed],.job[data-status=cancelled]{border-color:var(--bad)}.job[data-status=succeeded]{border-color:var(--re)}
.job[data-status=skipped]{border-color:var(--ok)}.job[data-status=pending]{border-color:var(--warn)}
video{width:100%;aspect-ratio:16/9;background:#000;border-radius:4px}audio{width:100%}
.nomedia{display:flex;align-items:center;justify-content:center;color:var(--mute);border:1px dashed var(--line);border-radius:4px;padding:8px}
.nomedia.video{aspect-ratio:16/9}
.label{margin:4px 0}.id{font-family:ui-monospace,monospace}.take-no{color:var(--mute)}
.facts{display:flex;flex-wrap:wrap;gap:2px 12px;color:var(--mute);font-size:13px}.facts b{font-weight:600}
.delivered,.edited{color:var(--warn)}.means{margin:0 4px;color:var(--mute)}.filters .label{color:var(--mute)}
.badge{display:inline-block;padding:0 7px;border-radius:9px;font-size:12px;font-weight:600;color:#fff;background:var(--mute)}
.badge.succeeded{background:var(--re)}.badge.skipped{background:var(--ok)}.badge.failed,.badge.cancelled{background:var(--bad)}.badge.pending{background:var(--warn)}
.badge.run.succeeded{background:var(--ok)}.badge.run.partial,.badge.run.interrupted{background:var(--warn)}.badge.run.failed{background:var(--bad)}
.error{color:var(--bad);white-space:pre-wrap;overflow-wrap:anywhere;margin:4px 0}.warning{color:var(--warn);margin:4px 0}
.empty{color:var(--mute);padding:20px}
`;

// The filters only show and hide rows that are already on the page: nothing is fetched or parsed.
const SCRIPT = `
(function(){
  var buttons=document.querySelectorAll('nav.filters button');
  var rows=document.querySelectorAll('main .row');
  var sections=document.querySelectorAll('main section');
  var shown=document.getElementById('shown');
  var empty=document.getElementById('empty');
  function apply(f){
    var n=0;
    for(var i=0;i<rows.length;i++){
      var on=f==='all'||(' '+rows[i].getAttribute('data-filters')+' ').indexOf(' '+f+' ')>=0;
      rows[i].hidden=!on; if(on)n++;
    }
    for(var j=0;j<sections.length;j++){
      sections[j].hidden=!sections[j].querySelector('.row:not([hidden])');
    }
    for(var k=0;k<buttons.length;k++){
      buttons[k].setAttribute('aria-pressed',String(buttons[k].getAttribute('data-filter')===f));
    }
    document.body.setAttribute('data-filter',f);
    shown.textContent=n+' of '+rows.length+' rows';
    empty.hidden=n>0;
  }
  for(var b=0;b<buttons.length;b++){
    buttons[b].addEventListener('click',function(e){apply(e.currentTarget.getAttribute('data-filter'));});
  }
  var start=location.hash.slice(1);
  if(start==='changed')start='generated';
  apply(['failed','generated','reused'].indexOf(start)>=0?start:'all');
})();
`;

const cspHash = (text: string) => `sha256-${createHash("sha256").update(text).digest("base64")}`;
const STYLE_HASH = cspHash(STYLE);
const SCRIPT_HASH = cspHash(SCRIPT);

/** The review page of a report: pure, synchronous, one string. */
export function renderReviewPage(input: ReviewPageInput): string {
  const { report, links } = input;
  const { shots, loose, others } = group(report, input.jobs);
  const shotRows = shots.map((s) => shotSection(s, links));
  const looseRows = loose.map((e) => looseRow(e, links.get(e.row.id)));
  const otherRows = others.map((e) => otherRow(e, links.get(e.row.id)));
  const section = (id: string, title: string, rows: Row[]) =>
    rows.length > 0
      ? `<section id="${id}"><h2>${esc(title)} (${rows.length})</h2>${rows.map((r) => r.html).join("")}</section>`
      : "";
  const all = [...shotRows, ...looseRows, ...otherRows];
  return [
    "<!doctype html>",
    '<html lang="en"><head><meta charset="utf-8">',
    // No request may leave the page's folder but the media it links: no script, style or frame from elsewhere.
    // Only this page's own script and style run (by hash): markup that slipped through could not script.
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; media-src 'self' file: http: https:; style-src '${STYLE_HASH}'; script-src '${SCRIPT_HASH}'">`,
    '<meta name="viewport" content="width=device-width,initial-scale=1">',
    '<meta name="referrer" content="no-referrer">',
    `<title>${esc(report.run.name)}: ${esc(report.run.status)} · clapper review</title>`,
    `<style>${STYLE}</style></head>`,
    '<body data-filter="all">',
    `<div class="top">${summary(report, input.linksExpireAt)}${filterBar(all)}</div>`,
    "<main>",
    section("shots", "Shots", shotRows),
    section("narration", "Narration without a shot", looseRows),
    section("others", "Not in the manifest", otherRows),
    '<p class="empty" id="empty" hidden>No row matches this filter.</p>',
    "</main>",
    `<script>${SCRIPT}</script>`,
    "</body></html>",
    "",
  ].join("\n");
}
