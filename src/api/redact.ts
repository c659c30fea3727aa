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
  return out.includes("sk-ml-") ? out.replace(KEY_SHAPE, `sk-ml-${REDACTED}`) : out;
}

/** Redacts every string inside a JSON-like value (a copy; the input is not changed). */
export function redactDeep<T>(value: T): T {
  if (typeof value === "string") return redact(value) as T;
  if (Array.isArray(value)) return value.map((v) => redactDeep(v)) as T;
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = redactDeep(v);
    return out as T;
  }
  return value;
}
