// Text that is safe in XML and markdown. Text from the services (error messages, resolutions)
// reaches every report: junit.xml and the markdown carry no control character, and what is
// stripped is redacted again.
import { redact } from "../api/redact.js";

/**
 * `text` without control characters: C0 (tab, line feed and carriage return kept when
 * `keepSpace`), DEL and C1, lone surrogates and U+FFFE/U+FFFF, none of which XML 1.0 allows
 * or recommends, and which a terminal showing report.md would obey. The result is redacted again:
 * a control character inside a secret must not hide it from the redaction.
 */
function stripControls(text: string, keepSpace = true): string {
  let out = "";
  let changed = false;
  for (const ch of text) {
    const c = ch.codePointAt(0) as number;
    const bad =
      c < 0x20
        ? !(keepSpace && (c === 0x09 || c === 0x0a || c === 0x0d))
        : (c >= 0x7f && c <= 0x9f) || (c >= 0xd800 && c <= 0xdfff) || c === 0xfffe || c === 0xffff;
    if (bad) changed = true;
    else out += ch;
  }
  return changed ? redact(out) : text;
}

const XML_TEXT: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;" };
const XML_ATTR: Record<string, string> = {
  ...XML_TEXT,
  '"': "&quot;",
  "'": "&apos;",
  "\n": "&#10;",
  "\t": "&#9;",
};

/** Character data: control characters stripped, markup escaped. */
export function xmlText(text: string): string {
  return stripControls(text).replace(/[&<>\r]/g, (c) => XML_TEXT[c] ?? c);
}

/** An attribute value: as text, and quotes and whitespace as references (kept through normalization). */
export function xmlAttr(text: string): string {
  return stripControls(text).replace(/[&<>"'\r\n\t]/g, (c) => XML_ATTR[c] ?? c);
}

/** A markdown table cell or inline text: one line, no control character, no table or tag break. */
export function md(text: string): string {
  return stripControls(text)
    .replace(/\r\n|[\r\n\t]/g, " ")
    .replace(/[\\|<`]/g, (c) => `\\${c}`);
}

/** Inline code: one line, no control character; fenced with two backticks when it holds one. */
export function code(text: string): string {
  const line = stripControls(text).replace(/\r\n|[\r\n\t]/g, " ");
  return line.includes("`") ? `\`\` ${line} \`\`` : `\`${line}\``;
}
