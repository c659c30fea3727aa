// The grid the review page opens on: a tile per row (a shot, a line of no shot, a row the manifest
// no longer has), each take a still with its status word and cost, the shot's lines as small
// chips, and the pick control on a shot of several takes. A tile's still and id open the detail.
import type { SpeechJob, VideoJob } from "../manifest/index.js";
import { KINDS } from "../report/kinds.js";
import type { ReportJob } from "../report/model.js";
import { esc, safeStill } from "./escape.js";
import {
  type Entry,
  type Grouped,
  pickOf,
  type ReviewPageInput,
  type ShotRow,
  takeNo,
} from "./page-model.js";

/** The cost a tile shows: what the job's outputs cost over every run. */
const cost = (row: ReportJob) => `${row.spent_total ?? row.points} pts`;

const open = (key: string) => `#open=${encodeURIComponent(key)}`;

function still(row: ReportJob, stills: ReadonlyMap<string, string>, label: string, key: string): string {
  const image = row.output ? safeStill(stills.get(row.output.uri)) : undefined;
  const inner = image
    ? `<img class="still" alt="${esc(label)}" src="${image}">`
    : `<span class="nostill">${esc(row.output ? "no still" : `no ${KINDS[row.kind].media}`)}</span>`;
  return `<a class="frame" href="${open(key)}">${inner}</a>`;
}

function pickControl(shot: string, take: number, picked: boolean, stored: boolean): string {
  // A take with no video cannot be put in the episode: shown, not offered.
  const state = picked ? " checked" : stored ? "" : " disabled";
  return `<label class="pick"><input type="radio" name="pick-${esc(shot)}" data-shot="${esc(shot)}" value="${take}"${state}> pick</label>`;
}

interface ThumbOptions {
  key: string;
  label: string;
  stills: ReadonlyMap<string, string>;
  /** The pick control, on a shot of several takes. */
  pick?: { shot: string; take: number; picked: boolean } | undefined;
}

function thumb(row: ReportJob, o: ThumbOptions): string {
  const pick = o.pick ? pickControl(o.pick.shot, o.pick.take, o.pick.picked, row.output !== null) : "";
  const picked = o.pick?.picked ? " data-picked" : "";
  return `<figure class="thumb" data-for="${esc(row.id)}" data-state="${esc(row.status)}"${o.pick ? ` data-take="${o.pick.take}"` : ""}${picked}>${still(row, o.stills, o.label, o.key)}<figcaption>${o.label ? `<span class="tk">${esc(o.label)}</span> ` : ""}<span class="badge ${esc(row.status)}">${esc(row.status)}</span> <span class="cost">${esc(cost(row))}</span></figcaption>${pick}</figure>`;
}

function chip(entry: Entry<SpeechJob>): string {
  const { row } = entry;
  const name = entry.job?.rowId ?? row.id;
  return `<span class="chip" data-for="${esc(row.id)}" data-state="${esc(row.status)}" title="${esc(`${row.id}: ${cost(row)}`)}"><span class="cid">${esc(name)}</span> <span class="badge ${esc(row.status)}">${esc(row.status)}</span></span>`;
}

function tile(key: string, title: string, filters: string, body: string, extra = ""): string {
  return `<div class="tile" data-key="${esc(key)}" data-filters="${filters}"${extra}><a class="open" href="${open(key)}">${esc(title)}</a>${body}</div>`;
}

function shotTile(shot: ShotRow, filters: string, input: ReviewPageInput): string {
  const stills = input.stills ?? new Map<string, string>();
  const several = shot.takes.length > 1;
  const pick = several ? pickOf(shot, input.picks) : undefined;
  const thumbs = shot.takes
    .map((t: Entry<VideoJob>, i) => {
      const take = takeNo(t, i);
      return thumb(t.row, {
        key: shot.id,
        label: several ? `take ${take}` : "",
        stills,
        pick: several ? { shot: shot.id, take, picked: take === pick } : undefined,
      });
    })
    .join("");
  const lines = shot.lines.length > 0 ? `<div class="chips">${shot.lines.map(chip).join("")}</div>` : "";
  const body = `<div class="thumbs">${thumbs || '<span class="nostill">no take here</span>'}</div>${lines}`;
  return tile(
    shot.id,
    shot.id,
    filters,
    body,
    ` data-shot="${esc(shot.id)}"${pick ? ` data-picked="${pick}"` : ""}`,
  );
}

/** One tile per row, in the detail's order; `filters` are each row's, as the detail has them. */
export function gridTiles(
  grouped: Grouped,
  filters: { shots: readonly string[]; loose: readonly string[]; others: readonly string[] },
  input: ReviewPageInput,
): string[] {
  const stills = input.stills ?? new Map<string, string>();
  const single = (e: Entry, f: string) => {
    // A row of its own: a video gets its still, a line its chip.
    const body = KINDS[e.row.kind].still
      ? `<div class="thumbs">${thumb(e.row, { key: e.row.id, label: "", stills })}</div>`
      : `<div class="chips">${chip(e as Entry<SpeechJob>)} <span class="cost">${esc(cost(e.row))}</span></div>`;
    return tile(e.row.id, e.row.id, f, body);
  };
  return [
    ...grouped.shots.map((s, i) => shotTile(s, filters.shots[i] ?? "", input)),
    ...grouped.loose.map((e, i) => single(e, filters.loose[i] ?? "")),
    ...grouped.others.map((e, i) => single(e, filters.others[i] ?? "")),
  ];
}
