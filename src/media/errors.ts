// How a result that fails its checks is refused, and the numbers the refusals quote.

/** A result that is not the media it claims to be: refused instead of stored as succeeded. */
export class MediaCheckError extends Error {
  override name = "MediaCheckError";
}

/** More bytes than the result's limit: refused before the rest is read. */
export class ResultTooLargeError extends MediaCheckError {
  override name = "ResultTooLargeError";
  constructor(
    message: string,
    readonly limit: number,
  ) {
    super(message);
  }
}

const MIB = 1024 * 1024;

export const n = (v: number | bigint): string => v.toLocaleString("en-US");
export const mib = (v: number): string => `${(v / MIB).toFixed(1)} MiB`;

export function tooLarge(what: string, limit: number): ResultTooLargeError {
  return new ResultTooLargeError(
    `${what}, more than the limit of ${n(limit)} bytes (${mib(limit)}) for this result (see --max-result-mb)`,
    limit,
  );
}
