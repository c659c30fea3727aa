// `--coordinator redis://[user:pass@]HOST[:PORT][/DB]` (or `rediss://` for TLS). The address is
// checked before anything connects, and only ever shown with its password hidden: it appears in
// logs, reports and error messages that end up in CI output.

export interface CoordinatorUrl {
  /** The address as given, to connect with (it may hold a password: never log it). */
  url: string;
  /** The address to show: the password replaced by `***`, the port and database made explicit. */
  display: string;
  tls: boolean;
  host: string;
  port: number;
  db: number;
}

class CoordinatorUrlError extends Error {
  override name = "CoordinatorUrlError";
}

const DEFAULT_PORT = 6379;
/** Redis's default `databases 16`: a higher index is refused by a default server at connect time. */
const MAX_DB = 15;

/** `name` is what the user typed it as, for messages: `--coordinator` or `CLAPPER_REDIS_URL`. */
export function parseCoordinatorUrl(raw: string, name = "--coordinator"): CoordinatorUrl {
  const shown = JSON.stringify(redact(raw));
  let parsed: URL;
  try {
    parsed = new URL(raw.trim());
  } catch {
    throw new CoordinatorUrlError(
      `Expected ${name} to be redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB], got ${shown}`,
    );
  }
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") {
    throw new CoordinatorUrlError(
      `Expected ${name} to be redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB], got ${shown}`,
    );
  }
  if (parsed.hostname === "") {
    throw new CoordinatorUrlError(`Expected a host in ${name}, got ${shown}`);
  }
  if (parsed.search !== "" || parsed.hash !== "") {
    throw new CoordinatorUrlError(
      `Expected no query or fragment in ${name} (redis://HOST:PORT[/DB]), got ${shown}`,
    );
  }
  const path = decodeURIComponent(parsed.pathname.replace(/^\//, ""));
  const db = path === "" ? 0 : Number(path);
  if (!/^\d{1,2}$/.test(path === "" ? "0" : path) || !Number.isInteger(db) || db < 0 || db > MAX_DB) {
    throw new CoordinatorUrlError(
      `Expected the database in ${name} to be an integer from 0 to ${MAX_DB}, got ${JSON.stringify(path)}`,
    );
  }
  const tls = parsed.protocol === "rediss:";
  // WHATWG URL drops a scheme's default port, but redis: has none it knows: an empty port is ours.
  const port = parsed.port === "" ? DEFAULT_PORT : Number(parsed.port);
  const host = parsed.hostname.replace(/^\[(.*)\]$/, "$1");
  const auth =
    parsed.username !== "" || parsed.password !== ""
      ? `${parsed.username}${parsed.password !== "" ? ":***" : ""}@`
      : "";
  const display = `${parsed.protocol}//${auth}${parsed.hostname}:${port}${db !== 0 ? `/${db}` : ""}`;
  return { url: raw.trim(), display, tls, host, port, db };
}

/** A raw address for an error message: whatever sits between `user:` and the last `@` is hidden. */
function redact(raw: string): string {
  const at = raw.lastIndexOf("@");
  if (at < 0) return raw;
  const scheme = raw.indexOf("://");
  const start = scheme >= 0 && scheme < at ? scheme + 3 : 0;
  const colon = raw.indexOf(":", start);
  if (colon < 0 || colon > at) return raw;
  return `${raw.slice(0, colon + 1)}***${raw.slice(at)}`;
}
