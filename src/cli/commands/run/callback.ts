// `--callback-url` and `--callback-listen`, read the same way when the flags are checked (no socket
// is opened) and when the run starts its listener.
import { isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { ExitError } from "../../errors.js";

/**
 * Where the callback listener binds when not told: the URL's own address when it is one of this
 * machine's, else loopback (a tunnel or proxy forwards to it). Never every address by default: the
 * listener would answer the whole network.
 */
function defaultListenHost(hostname: string): string {
  const host = hostname.replace(/^\[|\]$/g, "");
  if (isIP(host)) {
    const mine = Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((i) => i.address));
    if (mine.includes(host)) return host;
  }
  return "127.0.0.1";
}

/** `--callback-url` and `--callback-listen [HOST:]PORT` (default: the URL's address if local, else loopback; the URL's port). */
export function callbackOptions(
  url: string,
  listen: string | undefined,
): { url: string; listen: { host: string; port: number } } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ExitError(
      2,
      `--callback-url must be an absolute http or https URL, got ${JSON.stringify(url)}`,
    );
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new ExitError(2, `--callback-url must be an http or https URL, got ${JSON.stringify(url)}`);
  }
  const m = (listen ?? "").match(/^(?:(.+):)?(\d+)$/);
  if (listen !== undefined && !m)
    throw new ExitError(2, `--callback-listen must be [HOST:]PORT, got ${JSON.stringify(listen)}`);
  const port = m ? Number(m[2]) : Number(parsed.port || (parsed.protocol === "https:" ? 443 : 80));
  if (!(port >= 0 && port <= 65535))
    throw new ExitError(2, `--callback-listen port must be 0-65535, got ${port}`);
  return { url, listen: { host: m?.[1] ?? defaultListenHost(parsed.hostname), port } };
}
