// The Idempotency-Key header as both emulated services read it.
import { charLength, type Issue, show } from "../../api/common.js";
import { MAX_IDEMPOTENCY_KEY_CHARS } from "../../api/speech.js";

/**
 * Idempotency-Key header: trimmed, 1..128 characters. Speech task and custom voice creation pass
 * `required = true`; with `required = false` (video create) a missing or blank key is simply absent.
 */
export function parseIdempotencyKey(
  value: string | undefined,
  required: boolean,
): { ok: true; key: string | undefined } | { ok: false; issue: Issue } {
  const path = ["Idempotency-Key"];
  const key = value?.trim() ?? "";
  if (key === "") {
    if (!required) return { ok: true, key: undefined };
    return {
      ok: false,
      issue: {
        path,
        message: `is required for this endpoint (1 to ${MAX_IDEMPOTENCY_KEY_CHARS} characters after trimming), got ${value === undefined ? "nothing" : show(value)}`,
      },
    };
  }
  const n = charLength(key);
  if (n > MAX_IDEMPOTENCY_KEY_CHARS) {
    return {
      ok: false,
      issue: {
        path,
        message: `expected 1 to ${MAX_IDEMPOTENCY_KEY_CHARS} characters after trimming, got ${n}`,
      },
    };
  }
  return { ok: true, key };
}
