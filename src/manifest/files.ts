// The one way the manifest side (and --api-key-file) reads a file. A manifest can name any path:
// a FIFO would hang the plan, /dev/zero would never end, /proc files claim to be regular files of
// size 0 and hold the environment (the key among it). So: regular files only, never under /proc,
// /dev or /sys, opened without blocking, and read up to a limit.
import { createHash } from "node:crypto";
import { constants, type Stats } from "node:fs";
import { type FileHandle, open, realpath, stat, statfs } from "node:fs/promises";
import type { Problems } from "./problems.js";

const KiB = 1024;
const MiB = 1024 * KiB;

/** What each kind of file may weigh: far above real use, far below what would exhaust memory. */
export const FILE_LIMITS = {
  manifest: 8 * MiB,
  csv: 128 * MiB,
  template: 1 * MiB,
  // The service takes 64 KiB of skill anyway; a bigger file is refused before it is read whole.
  skill: 1 * MiB,
  apiKey: 4 * KiB,
} as const;

type FileProblem = "missing" | "folder" | "special" | "system" | "too-big" | "unreadable";

/**
 * A file that is not read. The message is a short reason without the path, which the caller names
 * as the manifest wrote it (or not at all: a path given to --api-key-file may be the key itself).
 */
export class FileError extends Error {
  override name = "FileError";
  constructor(
    readonly problem: FileProblem,
    message: string,
    /** The size found, for "too-big". */
    readonly size?: number,
  ) {
    super(message);
  }
}

interface ReadOptions {
  maxBytes: number;
  /** What the file is, for the limit's message: "a manifest", "a CSV file". */
  what: string;
}

interface OpenedFile {
  handle: FileHandle;
  size: number;
  /** Permission bits, as stat gives them. */
  mode: number;
}

/** Kernel file systems whose files are not data: `/proc` mounted elsewhere (containers) is still procfs. */
const PSEUDO_FILE_SYSTEMS: ReadonlyMap<number, string> = new Map([
  [0x9fa0, "proc"],
  [0x62656572, "sysfs"],
  [0x64626720, "debugfs"],
  [0x74726163, "tracefs"],
  [0x73636673, "securityfs"],
  [0x62656570, "configfs"],
  [0x27e0eb, "cgroup"],
  [0x63677270, "cgroup2"],
  [0xde5e81e4, "efivarfs"],
  [0xcafe4a11, "bpf"],
]);

const SYSTEM_ROOTS = ["/proc", "/dev", "/sys"];

export function formatBytes(bytes: number): string {
  if (bytes >= MiB && bytes % MiB === 0) return `${bytes / MiB} MiB`;
  if (bytes >= KiB && bytes % KiB === 0) return `${bytes / KiB} KiB`;
  return `${bytes} bytes`;
}

function fromErrno(error: unknown): FileError {
  if (error instanceof FileError) return error;
  const code = (error as NodeJS.ErrnoException).code;
  if (code === "ENOENT" || code === "ENOTDIR") return new FileError("missing", "file not found");
  if (code === "EISDIR") return new FileError("folder", "a folder, not a file");
  if (code === "EACCES" || code === "EPERM")
    return new FileError("unreadable", `permission denied (${code})`);
  if (code === "ELOOP") return new FileError("unreadable", "too many symbolic links (ELOOP)");
  return new FileError("unreadable", `cannot be read (${code ?? (error as Error).message})`);
}

/** Refuses anything that is not a regular file, by what stat says it is. */
function refuseKind(info: Stats): void {
  if (info.isFile()) return;
  if (info.isDirectory()) throw new FileError("folder", "a folder, not a file");
  if (info.isFIFO()) throw new FileError("special", "a named pipe (FIFO), not a regular file");
  if (info.isSocket()) throw new FileError("special", "a socket, not a regular file");
  if (info.isCharacterDevice() || info.isBlockDevice())
    throw new FileError("special", "a device, not a regular file");
  throw new FileError("special", "not a regular file");
}

/**
 * Where the file really is, after every link, checked to be a regular file on an ordinary file
 * system. Nothing is opened: for files that another library opens itself (audio metadata).
 */
export async function checkRegularFile(path: string): Promise<{ real: string; info: Stats }> {
  if (path.includes("\0")) throw new FileError("unreadable", "the path contains a NUL character");
  let real: string;
  let info: Stats;
  try {
    info = await stat(path);
    refuseKind(info);
    real = await realpath(path);
  } catch (error) {
    throw fromErrno(error);
  }
  const root = SYSTEM_ROOTS.find((r) => real === r || real.startsWith(`${r}/`));
  if (root) throw new FileError("system", `under ${root} (a special file system): not read`);
  if (process.platform === "linux") {
    const type = await statfs(real).then(
      (s) => s.type,
      () => undefined,
    );
    const fs = type === undefined ? undefined : PSEUDO_FILE_SYSTEMS.get(type);
    if (fs) throw new FileError("system", `on a ${fs} file system (not a regular file): not read`);
  }
  return { real, info };
}

/** Checks that a folder (of templates) is one, and not under /proc, /dev or /sys. */
export async function checkFolder(path: string): Promise<void> {
  if (path.includes("\0")) throw new FileError("unreadable", "the path contains a NUL character");
  let real: string;
  try {
    if (!(await stat(path)).isDirectory()) throw new FileError("special", "not a folder");
    real = await realpath(path);
  } catch (error) {
    throw fromErrno(error);
  }
  const root = SYSTEM_ROOTS.find((r) => real === r || real.startsWith(`${r}/`));
  if (root) throw new FileError("system", `under ${root} (a special file system): not read`);
}

/**
 * Opens a regular file for reading. Stat first, so a FIFO or a device is never opened; then open
 * without blocking and check the handle itself, so a file swapped between the two is caught too
 * (a FIFO opened with O_NONBLOCK returns at once instead of waiting for a writer).
 */
export async function openRegularFile(path: string): Promise<OpenedFile> {
  const { real, info: before } = await checkRegularFile(path);
  let handle: FileHandle;
  try {
    handle = await open(real, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
  } catch (error) {
    throw fromErrno(error);
  }
  try {
    const info = await handle.stat();
    refuseKind(info);
    if (info.dev !== before.dev || info.ino !== before.ino)
      throw new FileError("unreadable", "changed while it was being opened");
    return { handle, size: info.size, mode: info.mode };
  } catch (error) {
    await handle.close();
    throw fromErrno(error);
  }
}

function tooBig(options: ReadOptions, size?: number): FileError {
  const got = size === undefined ? "" : ` (got ${size} bytes)`;
  return new FileError(
    "too-big",
    `over the ${formatBytes(options.maxBytes)} limit for ${options.what}${got}`,
    size,
  );
}

/**
 * Reads an opened file to its end, refusing it as soon as it passes the limit: the size stat gave
 * is only a first check, since a file may grow while it is read.
 */
async function readAll(file: OpenedFile, options: ReadOptions): Promise<Buffer> {
  if (file.size > options.maxBytes) throw tooBig(options, file.size);
  const chunks: Buffer[] = [];
  let total = 0;
  // One read for the common case (the size is right), then small reads until the end proves it.
  let want = Math.min(options.maxBytes + 1, Math.max(file.size + 1, 64 * KiB));
  for (;;) {
    const buffer = Buffer.allocUnsafe(want);
    let filled = 0;
    while (filled < buffer.length) {
      const { bytesRead } = await file.handle.read(buffer, filled, buffer.length - filled, null);
      if (bytesRead === 0) break;
      filled += bytesRead;
    }
    total += filled;
    if (total > options.maxBytes) throw tooBig(options);
    chunks.push(filled === buffer.length ? buffer : buffer.subarray(0, filled));
    if (filled < buffer.length) break;
    want = Math.min(options.maxBytes + 1 - total, MiB);
  }
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total);
}

/** A regular file's bytes and permission bits, at most `maxBytes` of them. */
export async function readRegularFile(
  path: string,
  options: ReadOptions,
): Promise<{ data: Buffer; mode: number }> {
  const file = await openRegularFile(path);
  try {
    return { data: await readAll(file, options), mode: file.mode };
  } catch (error) {
    throw fromErrno(error);
  } finally {
    await file.handle.close();
  }
}

/** A regular file as UTF-8 text, at most `maxBytes` of it. */
export async function readTextFile(path: string, options: ReadOptions): Promise<string> {
  return (await readRegularFile(path, options)).data.toString("utf8");
}

/**
 * Reads a text file through the safe reader; a failure is reported at `where` (the file itself, or
 * the manifest line naming it).
 */
export async function readText(
  path: string,
  limit: ReadOptions,
  where: { file: string; line: number; field: string; prefix?: string },
  problems: Problems,
): Promise<string | undefined> {
  try {
    return await readTextFile(path, limit);
  } catch (error) {
    const reason = error instanceof FileError ? error.message : `cannot be read (${error})`;
    problems.error(where.file, where.line, where.field, `${where.prefix ?? ""}${reason}`);
    return undefined;
  }
}

/** Size and sha256 of an opened file's content, read in chunks (materials can be tens of MiB). */
export async function hashOpenedFile(
  file: OpenedFile,
  options: ReadOptions,
): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash("sha256");
  const buffer = Buffer.allocUnsafe(Math.min(MiB, options.maxBytes + 1));
  let total = 0;
  for (;;) {
    const { bytesRead } = await file.handle.read(buffer, 0, buffer.length, null);
    if (bytesRead === 0) break;
    total += bytesRead;
    if (total > options.maxBytes) throw tooBig(options);
    hash.update(buffer.subarray(0, bytesRead));
  }
  return { bytes: total, sha256: hash.digest("hex") };
}

/** Size and sha256 of a regular file, at most `maxBytes` of it. */
export async function hashRegularFile(
  path: string,
  options: ReadOptions,
): Promise<{ bytes: number; sha256: string }> {
  const file = await openRegularFile(path);
  try {
    if (file.size > options.maxBytes) throw tooBig(options, file.size);
    return await hashOpenedFile(file, options);
  } catch (error) {
    throw fromErrno(error);
  } finally {
    await file.handle.close();
  }
}
