// report.html: the storyboard as people review it. It opens on a compact grid (a tile per shot,
// each take a still with its status word and cost, the shot's lines as chips); a tile opens the
// row's detail (players for each take and kept version, the prompt, the lines, what each job cost
// and became). The episode, once assembled, plays at the top with its captions. One self-contained
// file (inline CSS and JS, stills as data: URIs, nothing fetched but the media it links), so the
// run's folder can be zipped and opened anywhere, or the page opened from S3 with presigned links;
// `clapper review` serves the same page with picks saved as they are chosen.
//
// The report holds what happened; the manifest's jobs hold what was asked (prompt, text, voice,
// emotion, shot, take), so the page is built from both. Every string from the manifest or the
// services is escaped, and the page is rendered server-side: no data is handed to a script.
import { createHash } from "node:crypto";
import { esc } from "./escape.js";
import { detailRows, type Row } from "./page-detail.js";
import { gridTiles } from "./page-grid.js";
import { episodePlayer, filterBar, picksBar, summary } from "./page-head.js";
import { group, type ReviewPageInput } from "./page-model.js";
import { SCRIPT } from "./page-script.js";
import { STYLE } from "./page-style.js";

const cspHash = (text: string) => `sha256-${createHash("sha256").update(text).digest("base64")}`;
const STYLE_HASH = cspHash(STYLE);
const SCRIPT_HASH = cspHash(SCRIPT);

/**
 * No request may leave the page's folder but the media it links: no script, style or frame from
 * elsewhere, and only this page's own script and style run (by hash), so markup that slipped
 * through could not script. Served, the page may post picks to its own server.
 */
function csp(served: boolean): string {
  const connect = served ? "; connect-src 'self'" : "";
  return `default-src 'none'; img-src data:; media-src 'self' file: http: https: data:; style-src '${STYLE_HASH}'; script-src '${SCRIPT_HASH}'${connect}`;
}

/** The review page of a report: pure, synchronous, one string. */
export function renderReviewPage(input: ReviewPageInput): string {
  return reviewPageParts(input).join("");
}

/**
 * The review page as the pieces it is made of, in order (their concatenation is the page): a run's
 * page with a thousand stills is tens of MB, written piece by piece rather than joined first.
 */
export function reviewPageParts(input: ReviewPageInput): string[] {
  const { report } = input;
  const grouped = group(report, input.jobs);
  const detail = detailRows(grouped, input);
  const filters = (rows: Row[]) => rows.map((r) => r.filters);
  const tiles = gridTiles(
    grouped,
    { shots: filters(detail.shots), loose: filters(detail.loose), others: filters(detail.others) },
    input,
  );
  const section = (id: string, title: string, rows: Row[]) =>
    rows.length > 0
      ? [
          `<section id="${id}"><h2>${esc(title)} (${rows.length})</h2>`,
          ...rows.map((r) => r.html),
          "</section>",
        ]
      : [];
  const all = [...detail.shots, ...detail.loose, ...detail.others];
  // A shot of several takes, or one whose take kept earlier versions: there is a choice to make.
  const pickable = grouped.shots.filter(
    (s) => s.takes.length > 1 || s.takes.some((t) => (t.row.versions ?? []).length > 0),
  ).length;
  const lines: Array<string | string[]> = [
    "<!doctype html>",
    '<html lang="en"><head><meta charset="utf-8">',
    `<meta http-equiv="Content-Security-Policy" content="${csp(input.serve !== undefined)}">`,
    '<meta name="viewport" content="width=device-width,initial-scale=1">',
    '<meta name="referrer" content="no-referrer">',
    input.serve ? `<meta name="clapper-review-token" content="${esc(input.serve.token)}">` : "",
    `<title>${esc(report.run.name)}: ${esc(report.run.status)} · clapper review</title>`,
    `<style>${STYLE}</style></head>`,
    '<body data-filter="all" data-view="grid">',
    `<div class="top">${summary(report, input.linksExpireAt)}${filterBar(all)}</div>`,
    picksBar(input, pickable),
    episodePlayer(input.episode),
    ['<div id="grid">', ...tiles, "</div>"],
    '<p class="empty" id="empty" hidden>No row matches this filter.</p>',
    "<main>",
    section("shots", "Shots", detail.shots),
    section("narration", "Narration without a shot", detail.loose),
    section("others", "Not in the manifest", detail.others),
    "</main>",
    `<script>${SCRIPT}</script>`,
    "</body></html>",
    "",
  ];
  // One line each, as the page always read: a line's pieces follow each other with nothing between.
  return lines.flatMap((line, i) => (i === 0 ? [] : ["\n"]).concat(line));
}
