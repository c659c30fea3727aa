// URL checks shared by the video schemas, the emulator and the manifest checker: is a URL absolute,
// http(s), free of user information, and does its host literal point at a public address?
// DNS resolution is checked elsewhere; here a host name is accepted as "name".
import { BlockList, isIP } from "node:net";
import { show } from "./show.js";

type HostClass =
  | "loopback"
  | "private"
  | "link-local"
  | "unspecified"
  | "multicast"
  | "reserved"
  | "public"
  | "name";

type NonPublic = Exclude<HostClass, "public" | "name">;

/** Address ranges that are not public unicast, by class. Checked in this order. */
const RANGES: ReadonlyArray<readonly [NonPublic, ReadonlyArray<readonly [string, number, "ipv4" | "ipv6"]>]> =
  [
    [
      "unspecified",
      [
        ["0.0.0.0", 8, "ipv4"], // "this network"; connecting to 0.0.0.0 reaches the local host
        ["::", 128, "ipv6"],
      ],
    ],
    [
      "loopback",
      [
        ["127.0.0.0", 8, "ipv4"],
        ["::1", 128, "ipv6"],
      ],
    ],
    [
      "link-local",
      [
        ["169.254.0.0", 16, "ipv4"],
        ["fe80::", 10, "ipv6"],
      ],
    ],
    [
      "private",
      [
        ["10.0.0.0", 8, "ipv4"],
        ["172.16.0.0", 12, "ipv4"],
        ["192.168.0.0", 16, "ipv4"],
        ["100.64.0.0", 10, "ipv4"], // carrier-grade NAT (shared address space)
        ["fc00::", 7, "ipv6"], // unique local
        ["fec0::", 10, "ipv6"], // deprecated site-local
        ["64:ff9b:1::", 48, "ipv6"], // local-use NAT64
      ],
    ],
    [
      "multicast",
      [
        ["224.0.0.0", 4, "ipv4"],
        ["ff00::", 8, "ipv6"],
      ],
    ],
    [
      "reserved",
      [
        ["240.0.0.0", 4, "ipv4"], // includes the broadcast address 255.255.255.255
        ["192.0.0.0", 24, "ipv4"], // IETF protocol assignments
        ["192.0.2.0", 24, "ipv4"], // documentation (TEST-NET-1)
        ["198.51.100.0", 24, "ipv4"], // documentation (TEST-NET-2)
        ["203.0.113.0", 24, "ipv4"], // documentation (TEST-NET-3)
        ["198.18.0.0", 15, "ipv4"], // benchmarking
        ["::", 96, "ipv6"], // deprecated IPv4-compatible addresses
        ["100::", 64, "ipv6"], // discard-only
        ["2001::", 23, "ipv6"], // IETF protocol assignments, Teredo
        ["2001:db8::", 32, "ipv6"], // documentation
        ["3fff::", 20, "ipv6"], // documentation
        ["5f00::", 16, "ipv6"], // SRv6 SIDs
      ],
    ],
  ];

const LISTS: ReadonlyArray<readonly [NonPublic, BlockList]> = RANGES.map(([cls, subnets]) => {
  const list = new BlockList();
  for (const [net, prefix, family] of subnets) list.addSubnet(net, prefix, family);
  return [cls, list] as const;
});

/**
 * Classifies a host as it appears in a URL: IPv4 and IPv6 literals (brackets and zone index allowed,
 * IPv4 shorthand like `127.1` or `0x7f.0.0.1` normalized the way URL parsers do), `localhost` and
 * `*.localhost`. Any other host is a `"name"` whose addresses must be checked after DNS resolution.
 */
export function classifyHostLiteral(host: string): HostClass {
  let h = host.trim();
  if (h.startsWith("[") && h.endsWith("]")) h = h.slice(1, -1);
  if (h.includes(":")) {
    const zone = h.indexOf("%");
    const addr = zone >= 0 ? h.slice(0, zone) : h;
    return isIP(addr) === 6 ? classifyIPv6(addr) : "name";
  }
  const lower = h.toLowerCase().replace(/\.$/, "");
  if (lower === "localhost" || lower.endsWith(".localhost")) return "loopback";
  if (isIP(h) === 4) return classifyIPv4(h);
  // `127.1`, `2130706433`, `0x7f.0.0.1`, `127%2e0%2e0%2e1`, full-width digits: URL parsers and
  // resolvers turn these into IPv4 addresses, so classify what they become.
  try {
    const normalized = new URL(`http://${h}/`).hostname;
    if (isIP(normalized) === 4) return classifyIPv4(normalized);
    const again = normalized.replace(/\.$/, "");
    if (again === "localhost" || again.endsWith(".localhost")) return "loopback";
  } catch {
    // not a valid host at all; DNS will reject it
  }
  return "name";
}

function classifyIPv4(addr: string): HostClass {
  for (const [cls, list] of LISTS) if (list.check(addr, "ipv4")) return cls;
  return "public";
}

function classifyIPv6(addr: string): HostClass {
  const bytes = ipv6Bytes(addr);
  if (bytes === null) return "name";
  const v4 = (offset: number) => bytes.slice(offset, offset + 4).join(".");
  const startsWith = (prefix: number[]) => prefix.every((b, i) => bytes[i] === b);
  // Addresses that carry an IPv4 address reach that address: classify the embedded one.
  if (startsWith([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff])) return classifyIPv4(v4(12)); // IPv4-mapped
  if (startsWith([0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0])) return classifyIPv4(v4(12)); // NAT64
  if (startsWith([0x20, 0x02])) {
    const inner = classifyIPv4(v4(2)); // 6to4
    if (inner !== "public") return inner;
  }
  for (const [cls, list] of LISTS) if (list.check(addr, "ipv6")) return cls;
  // Only 2000::/3 is allocated as global unicast.
  return ((bytes[0] ?? 0) & 0xe0) === 0x20 ? "public" : "reserved";
}

/** 16 bytes of an IPv6 address already accepted by `isIP` (may end in a dotted IPv4 part). */
function ipv6Bytes(addr: string): number[] | null {
  let text = addr;
  const tail: number[] = [];
  const lastColon = text.lastIndexOf(":");
  const last = text.slice(lastColon + 1);
  if (last.includes(".")) {
    const parts = last.split(".").map(Number);
    if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) return null;
    tail.push(...parts);
    text = `${text.slice(0, lastColon + 1)}0:0`;
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const groups = (s: string) => (s === "" ? [] : s.split(":").map((g) => Number.parseInt(g, 16)));
  const head = groups(halves[0] ?? "");
  const rest = halves.length === 2 ? groups(halves[1] ?? "") : [];
  const fill = 8 - head.length - rest.length;
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return null;
  const all = [...head, ...new Array<number>(halves.length === 2 ? fill : 0).fill(0), ...rest];
  if (all.some((g) => Number.isNaN(g) || g < 0 || g > 0xffff)) return null;
  const bytes = all.flatMap((g) => [g >> 8, g & 0xff]);
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

const CLASS_WORDS: Record<NonPublic, string> = {
  loopback: "a loopback address",
  private: "a private-network address",
  "link-local": "a link-local address",
  unspecified: "an unspecified address",
  multicast: "a multicast address",
  reserved: "a reserved, non-public address",
};

export interface UrlCheckOptions {
  /** Accept loopback, private and other non-public host literals (a local emulator, tests). */
  allowPrivate?: boolean;
  /** Accepted schemes, with or without the trailing colon; default http and https. */
  schemes?: string[];
}

/**
 * Checks that `raw` is an absolute URL with one of the accepted schemes and a host.
 * Returns null when it is, otherwise a reason that says what was expected and what was received.
 */
export function checkAbsoluteUrl(raw: string, schemes: readonly string[] = ["http", "https"]): string | null {
  const accepted = schemes.map((s) => s.toLowerCase().replace(/:$/, ""));
  const expected = `expected an absolute ${accepted.join(" or ")} URL`;
  if (raw.trim() !== raw) return `must not start or end with whitespace, got ${show(raw)}`;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
  if (/[\u0000-\u001f\u007f]/.test(raw)) return `must not contain control characters, got ${show(raw)}`;
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(raw)?.[1]?.toLowerCase();
  if (scheme === undefined) return `${expected} like "https://example.com/path", got ${show(raw)}`;
  if (!accepted.includes(scheme)) return `${expected}, got scheme ${show(scheme)}`;
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\\]/.test(raw)) {
    return `${expected} with "//" and a host after the scheme, got ${show(raw)}`;
  }
  if (authorityOf(raw).includes("\\"))
    return `must not contain a backslash before the path, got ${show(raw)}`;
  try {
    new URL(raw);
  } catch {
    return `${expected}, got ${show(raw)}, which does not parse as a URL`;
  }
  return null;
}

/** The part between `scheme://` and the first `/`, `?`, `#` (or the end). */
function authorityOf(raw: string): string {
  const start = raw.indexOf("//") + 2;
  const rest = raw.slice(start);
  const end = rest.search(/[/?#]/);
  return end < 0 ? rest : rest.slice(0, end);
}

/**
 * Checks a URL the service will call or fetch: absolute, http or https (or `schemes`), without user
 * information, and, unless `allowPrivate`, not a loopback, private or otherwise non-public address
 * literal. Host names are accepted; their resolved addresses are checked elsewhere.
 * Returns null when acceptable, otherwise a precise reason. Credentials are never echoed.
 */
export function checkPublicUrl(raw: string, opts: UrlCheckOptions = {}): string | null {
  const shape = checkAbsoluteUrl(raw, opts.schemes);
  if (shape !== null) return shape;
  if (authorityOf(raw).includes("@")) {
    return 'must not contain user information ("user:password@" before the host)';
  }
  if (opts.allowPrivate) return null;
  const host = new URL(raw).hostname;
  const cls = classifyHostLiteral(host);
  if (cls === "public" || cls === "name") return null;
  return `expected a public host, got ${host}, which is ${CLASS_WORDS[cls]}`;
}

/** True for anything shaped like a data URL: `data:` (any case), optional metadata, a comma. */
export function isDataUrl(raw: string): boolean {
  return /^data:[^,]*,/i.test(raw);
}

/**
 * Decodes `data:[<mime>][;params][;base64],<data>`. The mime is the lowercased `type/subtype`
 * (`text/plain` when omitted). Returns null when the URL is not a data URL, the media type is not
 * `type/subtype`, or a base64 payload is not valid base64.
 */
export function parseDataUrl(raw: string): { mime: string; data: Buffer } | null {
  const match = /^data:([^,]*),(.*)$/is.exec(raw);
  if (!match) return null;
  let meta = (match[1] ?? "").trim();
  const payload = match[2] ?? "";
  const base64 = /;\s*base64$/i.test(meta);
  if (base64) meta = meta.replace(/;\s*base64$/i, "");
  const essence = (meta.split(";")[0] ?? "").trim().toLowerCase();
  let mime = "text/plain";
  if (essence !== "") {
    if (!/^[a-z0-9!#$&^_.+-]+\/[a-z0-9!#$&^_.+-]+$/.test(essence)) return null;
    mime = essence;
  }
  const bytes = percentDecode(payload);
  if (!base64) return { mime, data: bytes };
  const text = bytes.toString("latin1").replace(/[\t\n\f\r ]/g, "");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(text)) return null;
  const unpadded = text.replace(/=+$/, "");
  if (unpadded.length % 4 === 1 || (text.length !== unpadded.length && text.length % 4 !== 0)) return null;
  return { mime, data: Buffer.from(unpadded, "base64") };
}

/** Percent-decodes to bytes; `%` not followed by two hex digits stays as is (as browsers do). */
function percentDecode(text: string): Buffer {
  // Large Data URLs are base64 and rarely escaped: skip the byte loop when there is nothing to decode.
  if (!text.includes("%")) return Buffer.from(text, "utf8");
  const input = Buffer.from(text, "utf8");
  const out: number[] = [];
  const hex = (b: number | undefined) =>
    b !== undefined && ((b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66));
  for (let i = 0; i < input.length; i++) {
    const b = input[i] as number;
    if (b === 0x25 && hex(input[i + 1]) && hex(input[i + 2])) {
      out.push(Number.parseInt(String.fromCharCode(input[i + 1] as number, input[i + 2] as number), 16));
      i += 2;
    } else {
      out.push(b);
    }
  }
  return Buffer.from(out);
}
