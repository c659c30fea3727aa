// Everything the review page shows besides the report: the links to the media, the stills (made
// where missing), picks.yaml's picks and the assembled episode with its captions. Gathered the
// same way for report.html beside the outputs and for the page `clapper review` serves.
import type { Job } from "../manifest/index.js";
import { type MediaLinks, mediaLinks } from "../report/media-links.js";
import type { Report } from "../report/model.js";
import type { Sink } from "../sinks/sink.js";
import type { ReviewPageInput } from "./page-model.js";
import { type Pick, readPicks } from "./picks.js";
import { keyIn, makeStills, type StillsOptions } from "./stills.js";

const EPISODE = "episode.mp4";
const CAPTIONS = "episode.vtt";
/** An episode's captions are a few kB per minute. */
const MAX_CAPTIONS_BYTES = 2 * 1024 * 1024;

interface PageInputOptions {
  jobs: readonly Job[];
  /** Where the page sits in the sink (`reports`): local links are relative to it. */
  folder: string;
  /** The manifest's path: its picks.yaml is beside it. */
  picksFile?: string | undefined;
  signal?: AbortSignal | undefined;
  /** Stills are made unless false. */
  stills?: false | Omit<StillsOptions, "signal"> | undefined;
  /** Served by `clapper review`: every stored file is linked through the server's `/media/KEY`. */
  serve?: { token: string } | undefined;
}

/** A link through the review server to the sink's key. */
const servedHref = (key: string) => `/media/${key.split("/").map(encodeURIComponent).join("/")}`;

async function links(sink: Sink, report: Report, o: PageInputOptions, extra: string[]): Promise<MediaLinks> {
  if (!o.serve) return mediaLinks(sink, report, o.folder, { extra });
  const served = (uri: string) => {
    const key = keyIn(sink, uri);
    return key === undefined ? undefined : servedHref(key);
  };
  const out: MediaLinks = { links: new Map(), versionLinks: new Map(), extra: new Map() };
  for (const j of report.jobs) {
    const href = j.output ? served(j.output.uri) : undefined;
    if (href) out.links.set(j.id, href);
    for (const v of j.versions ?? []) {
      const h = served(v.uri);
      if (h) out.versionLinks.set(v.uri, h);
    }
  }
  for (const key of extra) out.extra.set(key, servedHref(key));
  return out;
}

/** The page's input, and what a person should know about what could not be shown. */
export async function pageInput(
  sink: Sink,
  report: Report,
  o: PageInputOptions,
): Promise<{ input: ReviewPageInput; warnings: string[] }> {
  const warnings: string[] = [];
  // The page is written whatever the store says of the episode: without it, when unsure.
  const episode = await Promise.resolve()
    .then(() => sink.stat(EPISODE))
    .catch(() => undefined);
  const captions = episode
    ? await Promise.resolve()
        .then(() => sink.readText(CAPTIONS, MAX_CAPTIONS_BYTES))
        .catch((e: unknown) => {
          warnings.push(`the episode's captions could not be read: ${(e as Error).message}`);
          return undefined;
        })
    : undefined;
  const linked = await links(sink, report, o, episode ? [EPISODE] : []);
  let picks: Record<string, Pick> = {};
  if (o.picksFile) {
    picks = await readPicks(o.picksFile).catch((e: unknown) => {
      warnings.push(`picks not shown: ${(e as Error).message}`);
      return {};
    });
  }
  let stills: Map<string, string> | undefined;
  if (o.stills !== false) {
    const made = await makeStills(sink, report, { ...(o.stills ?? {}), signal: o.signal });
    stills = made.images;
    warnings.push(...made.warnings);
  }
  const episodeHref = linked.extra.get(EPISODE);
  const input: ReviewPageInput = {
    report,
    jobs: o.jobs,
    links: linked.links,
    versionLinks: linked.versionLinks,
    linksExpireAt: linked.expiresAt,
    stills,
    picks,
    episode: episodeHref ? { href: episodeHref, captions } : undefined,
    serve: o.serve,
  };
  return { input, warnings };
}
