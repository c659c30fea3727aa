// Where `--state` points: a local file, or `s3://BUCKET/PREFIX` for a run whose machine keeps no
// disk (a pod). Checked when the flag is parsed, with no SDK and no network: every command that
// takes `--state` (run, status, report, cancel) gets the same answer and the same words.

interface S3StateLocation {
  bucket: string;
  /** Key prefix without leading or trailing slashes; never empty. */
  prefix: string;
  /** `s3://BUCKET/PREFIX`, the one spelling: the coordinator's lock is named by it. */
  uri: string;
}

/** Whether `value` names a state in S3 (`s3://...`, any case of the scheme). */
export function isS3State(value: string | undefined): value is string {
  return value !== undefined && /^s3:\/\//i.test(value);
}

/** `s3://BUCKET/PREFIX`, checked; throws with what was wrong and what was got. */
export function parseS3State(raw: string): S3StateLocation {
  const got = JSON.stringify(raw);
  const m = /^s3:\/\/([^/]*)(?:\/(.*))?$/i.exec(raw);
  if (!m) throw new Error(`expected s3://BUCKET/PREFIX, got ${got}`);
  const bucket = m[1] ?? "";
  // The S3 naming rules: 3-63 lowercase letters, digits, dots and hyphens.
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    throw new Error(
      `expected s3://BUCKET/PREFIX with a bucket name of 3-63 lowercase letters, digits, dots and hyphens, got ${got}`,
    );
  }
  const prefix = (m[2] ?? "").replace(/\/+$/, "");
  // The prefix is the state's own: at a bucket's root, its compaction would share the root with
  // whatever else lives there.
  if (prefix === "") {
    throw new Error(`expected s3://BUCKET/PREFIX: the state needs a prefix of its own, got ${got}`);
  }
  const parts = prefix.split("/");
  if (parts.some((p) => p === "" || p === "." || p === "..")) {
    throw new Error(`expected s3://BUCKET/PREFIX without empty, "." or ".." parts, got ${got}`);
  }
  // S3 keys stop at 1,024 bytes and the state adds its own names (about 60 bytes) under the prefix.
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point
  if (/[\x00-\x1f\x7f]/.test(prefix) || Buffer.byteLength(prefix) > 900) {
    throw new Error(
      `expected s3://BUCKET/PREFIX with a prefix of at most 900 bytes and no control characters, got ${got}`,
    );
  }
  return { bucket, prefix, uri: `s3://${bucket}/${prefix}` };
}

/**
 * The `--state` value as typed, checked: `s3://` is parsed (a typo is a usage error now, not a
 * failed run later); another scheme (`gs://`, `https://`) is refused rather than taken for a
 * local path; anything else is a local file.
 */
export function checkStateFlag(raw: string): string {
  if (isS3State(raw)) return parseS3State(raw).uri;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(raw)) {
    throw new Error(`expected a file or s3://BUCKET/PREFIX, got ${JSON.stringify(raw)}`);
  }
  return raw;
}
