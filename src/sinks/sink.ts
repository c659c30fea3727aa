// Where results and reports go. The run streams each result through `write` and never holds a
// whole file in memory; S3 implements the same interface.
import type { Readable } from "node:stream";

export interface Written {
  uri: string;
  bytes: number;
  sha256: string;
}

export interface WriteOptions {
  /** Content-Length the sender promised; a different count is an error and nothing is kept. */
  expectedBytes?: number;
  contentType?: string;
  /** Stored beside the object where the sink can (S3 object metadata). */
  metadata?: Record<string, string>;
  /**
   * Runs once every byte is in, before the object takes its name (local: before the rename; S3:
   * after the upload, deleting the object when it throws). Receives a local path to the complete
   * bytes when the sink has one.
   */
  check?: (localPath: string | undefined) => Promise<void>;
  /**
   * Sees every chunk of the body, in order, as the sink reads it: one pass over the bytes for the
   * caller's own checks, with no stream of its own. A throw ends the write with that error, and
   * nothing is kept.
   */
  observe?: (chunk: Buffer) => void;
  /**
   * Runs once the complete object has passed `check`, just before it takes its name over whatever
   * is stored there (local: before the rename; S3: the upload goes to a temporary key first). What
   * is stored under the name is still there when it runs: the place to keep it (`keep`).
   */
  beforeReplace?: () => Promise<void>;
  signal?: AbortSignal;
}

export interface Sink {
  /** The URI a key will have, e.g. `shots/s01.mp4` -> `/abs/output/demo/shots/s01.mp4`. */
  uri(key: string): string;
  /** Streams `body` to `key`, visible only once complete (a crash leaves no half file under the name). */
  write(key: string, body: Readable, options?: WriteOptions): Promise<Written>;
  writeText(key: string, text: string, contentType?: string): Promise<string>;
  /**
   * Sets the object at `from` aside under `to` (a sink without it keeps no versions), durably (local: a rename, flushed; S3: a
   * server-side copy, `from` staying in place until a complete object replaces it). Never over an
   * object already at `to`: that throws.
   */
  keep?(from: string, to: string): Promise<void>;
  /** Size of a stored object (and what its metadata says, where the store keeps some), or undefined. */
  stat(key: string): Promise<{ bytes: number; metadata?: Record<string, string> } | undefined>;
  /**
   * What `stat` says for each key (same order), where the sink can answer many at once for less
   * than one `stat` each (a folder: one listing per folder instead of a failed stat per key).
   */
  statMany?(
    keys: readonly string[],
  ): Promise<Array<{ bytes: number; metadata?: Record<string, string> } | undefined>>;
  /**
   * A small text object (a report), or undefined when there is none; refused above `maxBytes`
   * (what another machine wrote is read as untrusted input).
   */
  readText(key: string, maxBytes: number): Promise<string | undefined>;
  /** The first `bytes` bytes of a stored object (fewer when it is shorter), or undefined when there is none. */
  readHead(key: string, bytes: number): Promise<Buffer | undefined>;
  /** The names of the folders directly under `prefix` (`reports/shards` -> `1-of-4`, ...), at most `max`. */
  folders(prefix: string, max: number): Promise<string[]>;
  /** A local path to read a stored object from, when the sink has one (used to verify media). */
  localPath?(key: string): string;
  /**
   * GET links to stored objects for people to open (the review page), where the store signs them
   * (S3): valid for `seconds`, or until the credentials that signed them expire if sooner
   * (`expiresAt` says which).
   */
  presignMany?(keys: readonly string[], seconds: number): Promise<{ urls: string[]; expiresAt: Date }>;
  /**
   * Proves the sink can take writes (creates and removes a small object), so a run stops before
   * its first create, not after paying, when the output is not writable. Throws OutputError.
   */
  probe(): Promise<void>;
  /**
   * Cleans up what writers that are gone left behind (S3: multipart uploads started before
   * `before` that will never be completed, and which the store bills for; a folder: the temporary
   * files of killed writers, `removed`). Best effort.
   */
  cleanup?(before: Date): Promise<{ aborted: number; removed?: number }>;
}

/** The output cannot be written: the message says where and what to do. */
export class OutputError extends Error {
  override name = "OutputError";
  constructor(
    message: string,
    /** The store could not be reached or refused service (exit 6), rather than a setting to fix. */
    readonly unreachable = false,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export class SizeMismatchError extends Error {
  override name = "SizeMismatchError";
}
