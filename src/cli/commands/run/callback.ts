// `--callback-url` and `--callback-listen`, read the same way when the flags are checked (no socket
// is opened) and when the run starts its listener.
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { networkInterfaces } from "node:os";
import { checkPublicUrl, classifyHostLiteral } from "../../../api/urls.js";
import { ExitError } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";

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

/**
 * `--callback-url` and `--callback-listen [HOST:]PORT` (default: the URL's address if local, else
 * loopback; the URL's port). The video service posts only to a public unicast address, refusing
 * loopback, private addresses and user information: such a URL would have every create refused,
 * so it is refused here, before anything is sent, unless `allowPrivate` (a local emulator).
 */
export function callbackOptions(
  url: string,
  listen: string | undefined,
  allowPrivate = false,
): { url: string; listen: { host: string; port: number } } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new ExitError(
      ExitCode.Usage,
      `--callback-url must be an absolute http or https URL, got ${JSON.stringify(url)}`,
    );
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw new ExitError(
      ExitCode.Usage,
      `--callback-url must be an http or https URL, got ${JSON.stringify(url)}`,
    );
  }
  const refused = checkPublicUrl(url, { allowPrivate });
  if (refused) throw new ExitError(ExitCode.Usage, `--callback-url ${refusal(refused)}`);
  const m = (listen ?? "").match(/^(?:(.+):)?(\d+)$/);
  if (listen !== undefined && !m)
    throw new ExitError(
      ExitCode.Usage,
      `--callback-listen must be [HOST:]PORT, got ${JSON.stringify(listen)}`,
    );
  const port = m ? Number(m[2]) : Number(parsed.port || (parsed.protocol === "https:" ? 443 : 80));
  if (!(port >= 0 && port <= 65535))
    throw new ExitError(ExitCode.Usage, `--callback-listen port must be 0-65535, got ${port}`);
  return { url, listen: { host: m?.[1] ?? defaultListenHost(parsed.hostname), port } };
}

/** The longest the callback host's lookup may take. */
const LOOKUP_MS = 5000;

/** What the service would answer, and the way out for a local emulator. */
function refusal(reason: string): string {
  return `${reason}: the video service posts callbacks only to a public address (it refuses loopback and private addresses and URLs with user information, so every create would be refused); pass --allow-private-urls for a local emulator`;
}

/**
 * A callback host given by name must resolve to a public address too (the service resolves it and
 * refuses a private one). Checked once before the run; a name this machine cannot resolve is left
 * to the service (its resolver may know it), a name that resolves only to private addresses is not.
 */
export async function checkCallbackHost(
  url: string,
  allowPrivate: boolean,
  resolve: (host: string) => Promise<Array<{ address: string }>> = (host) => lookup(host, { all: true }),
): Promise<void> {
  if (allowPrivate) return;
  const host = new URL(url).hostname;
  if (classifyHostLiteral(host) !== "name") return;
  let addresses: Array<{ address: string }>;
  let timer: NodeJS.Timeout | undefined;
  try {
    // A resolver that does not answer leaves the check to the service rather than hold the run.
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("no answer")), LOOKUP_MS);
    });
    addresses = await Promise.race([resolve(host), late]);
  } catch {
    return;
  } finally {
    clearTimeout(timer);
  }
  const kinds = addresses.map((a) => classifyHostLiteral(a.address));
  if (addresses.length > 0 && kinds.every((k) => k !== "public")) {
    const listed = addresses.map((a) => a.address).join(", ");
    throw new ExitError(
      ExitCode.Usage,
      `--callback-url ${refusal(`${host} resolves to ${listed}, no public address`)}`,
    );
  }
}
