// The detail of each row of the review page, opened from the grid: a shot's prompt and settings, a
// player for each take and each kept version, its lines with their audio, and what each job cost
// and became (the error of a failed one). Rendered server-side, every string escaped.

import { posix } from "node:path";
import { versionNumber } from "../episode/takes.js";
import type { SpeechJob, VideoJob } from "../manifest/index.js";
import { KINDS } from "../report/kinds.js";
import type { ReportJob, ReportVersion } from "../report/model.js";
import { esc, humanTime, safeHref } from "./escape.js";
import { type Entry, pickOf, type ReviewPageInput, rowFilters, type ShotRow, takeNo } from "./page-model.js";

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

/** What a card links to and shows beside its job: the page's links, picks and time words. */
interface Ctx {
  links: ReadonlyMap<string, string>;
  versionLinks: ReadonlyMap<string, string>;
}

/** A kept version's pick control: in the shot's radio group, so picking it unpicks the take's. */
interface VersionPick {
  shot: string;
  take: number;
  /** The version picked in picks.yaml for this take, if any. */
  picked: number | undefined;
}

function versionPickControl(v: ReportVersion, pick: VersionPick): string {
  const n = versionNumber(v.uri);
  if (n === undefined) return "";
  const checked = pick.picked === n ? " checked" : "";
  return `<label class="pick"><input type="radio" name="pick-${esc(pick.shot)}" data-shot="${esc(pick.shot)}" value="${pick.take}" data-version="${n}"${checked}> pick this version</label>`;
}

function versionsOf(row: ReportJob, ctx: Ctx, pick?: VersionPick): string {
  const versions = row.versions ?? [];
  if (versions.length === 0) return "";
  const tag = KINDS[row.kind].media;
  const one = (v: ReportVersion) => {
    const link = safeHref(ctx.versionLinks.get(v.uri));
    const play = link
      ? `<${tag} controls preload="metadata" data-version="${esc(v.uri)}" src="${esc(link)}"></${tag}>`
      : `<div class="nomedia ${tag}">${esc("stored, but not linkable from here")}</div>`;
    const facts = [
      `<span class="fact"><b>${esc(posix.basename(v.uri))}</b></span>`,
      `<span class="fact"><b>sha256</b> <code title="${esc(v.sha256)}">${esc(v.sha256.slice(0, 12))}</code></span>`,
      `<span class="fact"><b>replaced</b> ${humanTime(v.at)}</span>`,
      v.bytes !== undefined ? fact("bytes", v.bytes) : "",
    ];
    const control = pick ? versionPickControl(v, pick) : "";
    return `<div class="version">${play}<div class="facts">${facts.join("")}</div>${control}</div>`;
  };
  return `<details class="versions" open><summary>earlier versions (${versions.length})</summary>${versions.map(one).join("")}</details>`;
}

function takeCard(
  entry: Entry<VideoJob>,
  ctx: Ctx,
  takes: number,
  picked: boolean,
  versionPick?: VersionPick,
): string {
  const { row, job } = entry;
  const href = ctx.links.get(row.id);
  const take = job?.take !== undefined ? `take ${job.take} of ${takes}` : "";
  const pick = picked ? ' <span class="picked">picked</span>' : "";
  return `<div class="job take" data-job="${esc(row.id)}" data-status="${esc(row.status)}">${player(row, href)}<div class="label"><span class="id">${esc(row.id)}</span>${take ? ` <span class="take-no">${esc(take)}</span>` : ""}${pick}</div>${outcome(row, href)}${versionsOf(row, ctx, versionPick)}</div>`;
}

function lineCard(entry: Entry<SpeechJob>, ctx: Ctx): string {
  const { row, job: speech } = entry;
  const href = ctx.links.get(row.id);
  const details = speech
    ? `<p class="text">${esc(speech.request.text)}</p><div class="facts">${fact("voice", voiceOf(speech))}${fact("emotion", emotionOf(speech))}${fact("language", speech.request.language)}${fact("speed", speech.request.speed)}</div>`
    : "";
  return `<div class="job line" data-job="${esc(row.id)}" data-status="${esc(row.status)}"><div class="label"><span class="id">${esc(row.id)}</span></div>${player(row, href)}${details}${outcome(row, href)}${versionsOf(row, ctx)}</div>`;
}

export interface Row {
  /** What the grid's tile and the detail's article share: the shot's id, or the job's. */
  key: string;
  html: string;
  filters: string;
}

const BACK = '<a class="back" href="#">&larr; all rows</a>';

function shotSettings(first: VideoJob): string {
  return [
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
  ].join("");
}

function shotSection(shot: ShotRow, ctx: Ctx, picks: ReviewPageInput["picks"]): Row {
  const first = shot.takes.find((t) => t.job !== undefined)?.job;
  const prompt = first ? promptOf(first) : "";
  const settings = first ? shotSettings(first) : "";
  const pick = shot.takes.length > 1 ? pickOf(shot, picks) : undefined;
  const chosen = picks?.[shot.id];
  const versionPick = (take: number): VersionPick => ({
    shot: shot.id,
    take,
    picked: chosen?.take === take ? chosen.version : undefined,
  });
  const takes =
    shot.takes.length > 0
      ? shot.takes
          .map((t, i) =>
            takeCard(t, ctx, shot.takes.length, takeNo(t, i) === pick, versionPick(takeNo(t, i))),
          )
          .join("")
      : `<div class="nomedia video">${esc("no take of this shot in this report")}</div>`;
  const lines = shot.lines.map((l) => lineCard(l, ctx)).join("");
  const filters = rowFilters([...shot.takes, ...shot.lines]);
  const html = `<article class="row shot" data-shot="${esc(shot.id)}" data-key="${esc(shot.id)}" data-filters="${filters}"><header>${BACK}<h3>${esc(shot.id)}</h3>${prompt ? `<p class="prompt">${esc(prompt)}</p>` : ""}<div class="facts">${settings}</div></header><div class="cols${lines ? "" : " solo"}"><div class="takes">${takes}</div>${lines ? `<div class="lines">${lines}</div>` : ""}</div></article>`;
  return { key: shot.id, html, filters };
}

/** The card of a row with no job of the manifest: its kind's card, without what the manifest asked. */
const BARE_CARD: Readonly<Record<ReportJob["kind"], (row: ReportJob, ctx: Ctx) => string>> = {
  video: (row, ctx) => takeCard({ job: undefined, row }, ctx, 1, false),
  speech: (row, ctx) => lineCard({ job: undefined, row }, ctx),
};

function singleRow(card: string, entry: Entry): Row {
  const filters = rowFilters([entry]);
  const key = entry.row.id;
  return {
    key,
    html: `<article class="row single" data-key="${esc(key)}" data-filters="${filters}"><header>${BACK}</header>${card}</article>`,
    filters,
  };
}

/** The detail of every row, in the grid's order: shots, lines of no shot, rows not in the manifest. */
export function detailRows(
  grouped: { shots: readonly ShotRow[]; loose: readonly Entry<SpeechJob>[]; others: readonly Entry[] },
  input: ReviewPageInput,
): { shots: Row[]; loose: Row[]; others: Row[] } {
  const ctx: Ctx = { links: input.links, versionLinks: input.versionLinks ?? new Map() };
  return {
    shots: grouped.shots.map((s) => shotSection(s, ctx, input.picks)),
    loose: grouped.loose.map((e) => singleRow(lineCard(e, ctx), e)),
    others: grouped.others.map((e) => singleRow(BARE_CARD[e.row.kind](e.row, ctx), e)),
  };
}
