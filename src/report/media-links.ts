// The links report.html gives to the stored outputs: relative to the page's folder, or presigned.
import { relative, sep } from "node:path";
import type { Sink } from "../sinks/sink.js";
import type { Report } from "./model.js";

/** SigV4's longest validity: presigned links on the page live as long as S3 allows. */
const LINK_SECONDS = 7 * 24 * 60 * 60;

/**
 * The address of each stored output as the page at `folder` (a key of the sink, `reports`) links
 * it: a path relative to that folder in a local output (so the run's folder can be moved or
 * zipped), a presigned GET in S3, valid for `seconds` (SigV4 allows 7 days at most) or until the
 * credentials that signed it expire, whichever comes first.
 */
export async function mediaLinks(
  sink: Sink,
  report: Report,
  folder: string,
  seconds = LINK_SECONDS,
): Promise<{ links: Map<string, string>; expiresAt?: string }> {
  const links = new Map<string, string>();
  const stored = report.jobs.filter((j) => j.output !== null);
  if (sink.presignMany) {
    const root = sink.uri("");
    const mine = stored.filter((j) => j.output?.uri.startsWith(root));
    if (mine.length === 0) return { links };
    const keys = mine.map((j) => (j.output?.uri ?? "").slice(root.length));
    const signed = await sink.presignMany(keys, seconds);
    mine.forEach((j, i) => {
      const url = signed.urls[i];
      if (url) links.set(j.id, url);
    });
    return { links, expiresAt: signed.expiresAt.toISOString() };
  }
  if (sink.localPath) {
    const from = sink.localPath(folder);
    for (const j of stored) {
      const uri = j.output?.uri ?? "";
      if (!uri.startsWith("/")) continue;
      links.set(j.id, relative(from, uri).split(sep).map(encodeURIComponent).join("/"));
    }
  }
  return { links };
}
