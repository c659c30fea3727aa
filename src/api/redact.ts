// Secrets are redacted by value wherever text from outside (a service's answer, a file) is stored or
// printed: a service that echoes the Authorization header in an error message must not plant the
// key in logs, the journal or the reports. Field-name redaction (pino's paths) cannot see that.

const secrets = new Set<string>();

/** Anything shaped like a model API key, whoever's it is: `sk-ml-` and at least six key characters. */
const KEY_SHAPE = /sk-ml-[A-Za-z0-9._~+/=-]{6,}/g;

export const REDACTED = "[redacted]";

/**
 * Registers a secret (the API key) for redaction by value. Very short values are not registered:
 * replacing every "abc" in every message would garble them and protect nothing.
 */
export function addSecret(secret: string): void {
  const value = secret.trim();
  if (value.length >= 8) secrets.add(value);
}

/** For tests: forget the registered secrets. */
export function clearSecrets(): void {
  secrets.clear();
}

/** `text` with every registered secret, and every key-shaped token, replaced. */
export function redact(text: string): string {
  let out = text;
  for (const secret of secrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  // The shape test comes second: a registered key is already gone; this catches another key.
  return out.includes("sk-ml-")
    ? out.replace(KEY_SHAPE, (key) => (isPublicKey(key) ? key : `sk-ml-${REDACTED}`))
    : out;
}

/**
 * Keys that are no secret: the built-in emulator's documented default, which `sandbox --help` and
 * the guides must be able to show (as `KEY=ORG` too). A key registered as a secret is redacted all
 * the same.
 */
const PUBLIC_KEYS = new Set(["sk-ml-sandbox"]);

/** A public key as it is, or followed by `=ORG` (an organization name, never anything key-shaped). */
function isPublicKey(token: string): boolean {
  const at = token.indexOf("=");
  if (at < 0) return PUBLIC_KEYS.has(token);
  return (
    PUBLIC_KEYS.has(token.slice(0, at)) &&
    /^[A-Za-z0-9_.-]+$/.test(token.slice(at + 1)) &&
    !token.slice(at + 1).includes("sk-ml-")
  );
}

/** Whether `redact` could change this text. */
function mayHoldSecret(text: string): boolean {
  if (text.includes("sk-ml-")) return true;
  for (const secret of secrets) if (text.includes(secret)) return true;
  return false;
}

/** Whether any string inside a JSON-like value could hold a secret (nothing is copied to find out). */
function anySecret(value: unknown): boolean {
  if (typeof value === "string") return mayHoldSecret(value);
  if (Array.isArray(value)) return value.some(anySecret);
  if (value !== null && typeof value === "object") {
    for (const key in value) {
      if (Object.hasOwn(value, key) && anySecret((value as Record<string, unknown>)[key])) return true;
    }
  }
  return false;
}

/**
 * Redacts every string inside a JSON-like value; the input is never changed. A value with nothing
 * to redact (nearly every journal record) is returned as it is: copying each one cost more than
 * looking.
 */
export function redactDeep<T>(value: T): T {
  return anySecret(value) ? redactCopy(value) : value;
}

function redactCopy<T>(value: T): T {
  if (typeof value === "string") return redact(value) as T;
  if (Array.isArray(value)) return value.map((v) => redactCopy(v)) as T;
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = redactCopy(v);
    return out as T;
  }
  return value;
}
