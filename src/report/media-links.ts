// The links report.html gives to the stored outputs (and kept versions, and the episode): relative
// to the page's folder, or presigned.
import { relative, sep } from "node:path";
import type { Sink } from "../sinks/sink.js";
import type { Report } from "./model.js";

/** SigV4's longest validity: presigned links on the page live as long as S3 allows. */
const LINK_SECONDS = 7 * 24 * 60 * 60;

export interface MediaLinks {
  /** Job id -> its output's address. */
  links: Map<string, string>;
  /** A kept version's uri -> its address. */
  versionLinks: Map<string, string>;
  /** A key of the sink asked for (`episode.mp4`) -> its address. */
  extra: Map<string, string>;
  expiresAt?: string;
}

/**
 * The address of each stored output as the page at `folder` (a key of the sink, `reports`) links
 * it: a path relative to that folder in a local output (so the run's folder can be moved or
 * zipped), a presigned GET in S3, valid for `seconds` (SigV4 allows 7 days at most) or until the
 * credentials that signed them expire, whichever comes first. `extra` keys are linked the same way.
 */
export async function mediaLinks(
  sink: Sink,
  report: Report,
  folder: string,
  o: { seconds?: number; extra?: readonly string[] } = {},
): Promise<MediaLinks> {
  const out: MediaLinks = { links: new Map(), versionLinks: new Map(), extra: new Map() };
  // Every address wanted, as uris, each with where its link goes.
  const wanted: Array<{ uri: string; put: (href: string) => void }> = [];
  for (const j of report.jobs) {
    if (j.output) {
      const id = j.id;
      wanted.push({ uri: j.output.uri, put: (h) => out.links.set(id, h) });
    }
    for (const v of j.versions ?? []) wanted.push({ uri: v.uri, put: (h) => out.versionLinks.set(v.uri, h) });
  }
  for (const key of o.extra ?? []) wanted.push({ uri: sink.uri(key), put: (h) => out.extra.set(key, h) });
  if (sink.presignMany) {
    const root = sink.uri("");
    const mine = wanted.filter((w) => w.uri.startsWith(root));
    if (mine.length === 0) return out;
    const signed = await sink.presignMany(
      mine.map((w) => w.uri.slice(root.length)),
      o.seconds ?? LINK_SECONDS,
    );
    mine.forEach((w, i) => {
      const url = signed.urls[i];
      if (url) w.put(url);
    });
    out.expiresAt = signed.expiresAt.toISOString();
    return out;
  }
  if (sink.localPath) {
    const from = sink.localPath(folder);
    for (const w of wanted) {
      if (!w.uri.startsWith("/")) continue;
      w.put(relative(from, w.uri).split(sep).map(encodeURIComponent).join("/"));
    }
  }
  return out;
}
