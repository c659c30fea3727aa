// Text the review page shows: escaped, links checked, times in words. Every string from the
// manifest, a state file or the services passes through here before it reaches the page.
import { redact } from "../api/redact.js";

// Control characters (tab, line feed and carriage return kept), lone surrogates and non-characters:
// nothing a person should see, and a browser would show them as boxes or drop them silently.
const CONTROLS =
  // biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
const HTML: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text or an attribute value (always double-quoted here): markup and quotes escaped. */
export function esc(text: string | number): string {
  const s = typeof text === "number" ? String(text) : text;
  // Redacted again after stripping: a control character inside a key must not hide it.
  const clean = CONTROLS.test(s) ? redact(s.replace(CONTROLS, "")) : s;
  CONTROLS.lastIndex = 0;
  return /[&<>"']/.test(clean) ? clean.replace(/[&<>"']/g, (c) => HTML[c] ?? c) : clean;
}

/**
 * A link the page may carry: relative (no scheme, not protocol-relative) or http(s). Anything else
 * (`javascript:`, `data:`) is dropped, whatever a state file or a store said.
 */
export function safeHref(href: string | undefined): string | undefined {
  if (href === undefined || href === "") return undefined;
  if (/^https?:\/\//i.test(href)) return href;
  if (/^[a-z][a-z0-9+.-]*:/i.test(href) || href.startsWith("//") || /[\s\\]/.test(href)) return undefined;
  return href;
}

/** A still made by this program: a base64 JPEG, nothing else (an image of any other kind is dropped). */
export function safeStill(uri: string | undefined): string | undefined {
  return uri !== undefined && /^data:image\/jpeg;base64,[A-Za-z0-9+/]+=*$/.test(uri) ? uri : undefined;
}

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/**
 * A time as people read it, `28 Nov 2026, 14:03 UTC`, in a `<time>` whose title holds the ISO
 * form. UTC, because the page is made once and read anywhere: a local time would be the writer's.
 */
export function humanTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return esc(iso);
  const two = (n: number) => String(n).padStart(2, "0");
  const words = `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]} ${d.getUTCFullYear()}, ${two(d.getUTCHours())}:${two(d.getUTCMinutes())} UTC`;
  return `<time datetime="${esc(iso)}" title="${esc(iso)}">${words}</time>`;
}
