// Where a result URL may be fetched from. The services' own rule for material URLs, applied to the
// result URLs they hand back: http(s), no user information, and a public address, unless the URL
// is on the service's own origin (the sandbox serves results from itself) or private addresses are
// allowed. Host names are checked after resolution, at connect time, so a name that resolves to a
// private address is refused too.
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { Agent, type Dispatcher } from "undici";
import { ResultUrlError } from "./errors.js";
import { checkAbsoluteUrl, classifyHostLiteral } from "./urls.js";

export class ResultRoutes {
  /** Result downloads from other origins go through a pool that connects to public addresses only. */
  private publicPool: Agent | undefined;
  /** The service's origin, parsed once: results it serves itself are fetched through its own pool. */
  private baseOrigin: string | undefined;

  constructor(
    private readonly baseUrl: string,
    private readonly own: Dispatcher,
    private readonly allowPrivateUrls: boolean,
  ) {}

  /** The pool to fetch `url` through, or a ResultUrlError when it must not be fetched. */
  route(url: string, what: string): { dispatcher: Dispatcher; target: URL } {
    const problem = checkAbsoluteUrl(url);
    if (problem) throw new ResultUrlError(`${what}: the result URL is not usable: ${problem}`);
    const parsed = new URL(url);
    if (parsed.username || parsed.password)
      throw new ResultUrlError(`${what}: the result URL carries user information; refused`);
    this.baseOrigin ??= new URL(this.baseUrl).origin;
    if (this.allowPrivateUrls || parsed.origin === this.baseOrigin)
      return { dispatcher: this.own, target: parsed };
    const cls = classifyHostLiteral(parsed.hostname);
    if (cls !== "public" && cls !== "name") {
      throw new ResultUrlError(
        `${what}: the result URL points at ${cls} address ${parsed.hostname}, not a public one; refused (--allow-private-urls allows it)`,
      );
    }
    this.publicPool ??= new Agent({
      keepAliveTimeout: 30_000,
      connections: 16,
      connect: { lookup: publicLookup },
    });
    return { dispatcher: this.publicPool, target: parsed };
  }

  async close(): Promise<void> {
    await this.publicPool?.close();
  }
}

/** DNS lookup for result downloads: only public addresses are returned, so nothing else is dialled. */
function publicLookup(
  hostname: string,
  options: { all?: boolean; family?: number | string },
  callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
): void {
  const family = options.family === 4 || options.family === 6 ? options.family : 0;
  dnsLookup(
    hostname,
    { family, all: true },
    (error: NodeJS.ErrnoException | null, addresses: LookupAddress[]) => {
      if (error) return callback(error, []);
      const usable = addresses.filter((a) => classifyHostLiteral(a.address) === "public");
      if (usable.length === 0) {
        const refused: NodeJS.ErrnoException = new Error(
          `${hostname} resolves to no public address (${addresses.map((a) => a.address).join(", ")}); refused`,
        );
        refused.code = "ENOTPUBLIC";
        return callback(refused, []);
      }
      if (options.all) return callback(null, usable);
      const first = usable[0] as LookupAddress;
      return callback(null, first.address, first.family);
    },
  );
}
