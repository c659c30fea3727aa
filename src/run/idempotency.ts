// What lets a create be sent again without paying twice: its Idempotency-Key, and the body its
// `sending` record keeps so that the same request can be repeated to learn its task.
import { createHash } from "node:crypto";

/** Deterministic per (run, epoch, job, fingerprint, attempt): a repeated create returns the first task. */
export function idempotencyKey(
  name: string,
  epoch: number | string,
  jobId: string,
  fingerprint: string,
  attempt: number,
): string {
  const digest = createHash("sha256")
    .update(`${name}\n${epoch}\n${jobId}\n${fingerprint}\n${attempt}`)
    .digest("hex");
  return `clapper-${digest.slice(0, 48)}`;
}

/** A create body kept in the journal up to this size (serialized); a larger one is not kept. */
const MAX_KEPT_BODY = 256 * 1024;

/**
 * The body a `sending` record keeps: without the callback (a secret; an orphan is polled) and
 * only when small (materials inline as Data URLs can make it megabytes).
 */
export function keptBody(body: unknown): { body?: unknown } {
  if (body === null || typeof body !== "object") return {};
  const { callback_url: _url, callback_token: _token, ...rest } = body as Record<string, unknown>;
  return JSON.stringify(rest).length <= MAX_KEPT_BODY ? { body: rest } : {};
}
