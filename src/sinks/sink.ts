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
  signal?: AbortSignal;
}

export interface Sink {
  /** The URI a key will have, e.g. `shots/s01.mp4` -> `/abs/output/demo/shots/s01.mp4`. */
  uri(key: string): string;
  /** Streams `body` to `key`, visible only once complete (a crash leaves no half file under the name). */
  write(key: string, body: Readable, options?: WriteOptions): Promise<Written>;
  writeText(key: string, text: string, contentType?: string): Promise<string>;
  /** Size of a stored object (and what its metadata says, where the store keeps some), or undefined. */
  stat(key: string): Promise<{ bytes: number; metadata?: Record<string, string> } | undefined>;
  /** A local path to read a stored object from, when the sink has one (used to verify media). */
  localPath?(key: string): string;
}

export class SizeMismatchError extends Error {
  override name = "SizeMismatchError";
}
