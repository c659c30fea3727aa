// `--pushgateway URL`: the run's metrics pushed once at its end, under job="clapper" and grouped by
// run (and by shard, for a shard), so that two manifests, or two shards of one, pushing to one gateway
// do not replace each other's series.
//
// POST, not PUT: only the metric names pushed are replaced in the group, so a run that does not
// know the last success (pushes none) leaves the one an earlier run pushed.
import { request } from "undici";

/** The time a push may take, whatever the gateway does (answers slowly, or never). */
export const PUSH_TIMEOUT_MS = 10_000;
/** Of a refusal's body only the first words matter. */
const MAX_ERROR_BYTES = 4096;

/** The gateway as logs name it: without a user and password it may carry. */
export function shownUrl(gateway: string): string {
  const url = new URL(gateway);
  url.username = "";
  url.password = "";
  return url.toString();
}

/** The group's URL: the run's name in base64url, which the gateway accepts whatever the characters. */
function groupUrl(gateway: string, run: string, shard: number | undefined): string {
  const base = gateway.replace(/\/+$/, "");
  const group = `${base}/metrics/job/clapper/run@base64/${Buffer.from(run, "utf8").toString("base64url")}`;
  return shard === undefined ? group : `${group}/shard/${shard}`;
}

export async function pushMetrics(
  gateway: string,
  run: string,
  shard: number | undefined,
  body: { text: string; contentType: string },
  timeoutMs = PUSH_TIMEOUT_MS,
): Promise<void> {
  const signal = AbortSignal.timeout(timeoutMs);
  // A gateway behind basic auth: the credentials go in the header, never in a logged URL.
  const url = new URL(gateway);
  const auth =
    url.username || url.password
      ? `Basic ${Buffer.from(`${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`).toString("base64")}`
      : undefined;
  const res = await request(groupUrl(shownUrl(gateway), run, shard), {
    method: "POST",
    headers: { "content-type": body.contentType, ...(auth ? { authorization: auth } : {}) },
    body: body.text,
    signal,
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
  });
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    if (size < MAX_ERROR_BYTES) chunks.push(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  if (res.statusCode >= 300) {
    const said = Buffer.concat(chunks).toString("utf8").slice(0, 300).trim();
    throw new Error(`the gateway answered HTTP ${res.statusCode}${said ? `: ${said}` : ""}`);
  }
}
