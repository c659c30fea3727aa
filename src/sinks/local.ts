// A folder on disk. Each object is written to a temporary name beside its target, flushed to disk
// and renamed into place when complete, hashed and counted on the way. Temporary files left by a
// writer that was killed are removed when the next writer first writes into their folder.
import { createHash, randomBytes } from "node:crypto";
import {
  type FileHandle,
  link,
  mkdir,
  open,
  readdir,
  rename,
  rmdir,
  stat,
  unlink,
  writeFile,
} from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { type Readable, Transform } from "node:stream";
import pLimit from "p-limit";
import { HOST_TAG, INSTANCE, MARK_PATTERN, PROCESS_MARK, writerGone } from "../locks/process-alive.js";
import { OutputError, type Sink, SizeMismatchError, type WriteOptions, type Written } from "./sink.js";

/** Passes bytes through while hashing and counting them. */
export function hashing(observe?: (chunk: Buffer) => void): {
  stream: Transform;
  result: () => { bytes: number; sha256: string };
} {
  const hash = createHash("sha256");
  let bytes = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _enc, done) {
      try {
        observe?.(chunk);
      } catch (error) {
        done(error as Error);
        return;
      }
      hash.update(chunk);
      bytes += chunk.length;
      done(null, chunk);
    },
  });
  return { stream, result: () => ({ bytes, sha256: hash.digest("hex") }) };
}

// Temporary files are named `.NAME.PID.HOSTINSTANCE.RANDOM.partial`: the writer's pid, a tag of its
// host name (6 hex) and a random token of the writing process (10 hex) (src/locks/process-alive.ts).
/** A live writer writes at least this often (downloads give up after a shorter silence). */
const PARTIAL_STALE_MS = 60_000;
const PARTIAL = new RegExp(String.raw`^\..+\.${MARK_PATTERN}\.[0-9a-f]{12}\.partial$`);
/** Before the host and instance were added: `.NAME.PID.RANDOM.partial`, always of this host. */
const OLD_PARTIAL = /^\..+\.(\d+)\.[0-9a-f]{12}\.partial$/;

/** Random bytes for temporary names, drawn 1.5 KB at a time: one draw per file cost more than its write. */
let tokens = Buffer.alloc(0);
let tokenAt = 0;

function token(): string {
  if (tokenAt + 6 > tokens.length) {
    tokens = randomBytes(6 * 256);
    tokenAt = 0;
  }
  tokenAt += 6;
  return tokens.toString("hex", tokenAt - 6, tokenAt);
}

function tempName(target: string): string {
  return join(dirname(target), `.${basename(target)}.${PROCESS_MARK}.${token()}.partial`);
}

/**
 * Bytes gathered before a write: a result of a few hundred KB goes down in one system call rather
 * than one per network chunk, and memory stays bounded whatever the size of the result.
 */
const WRITE_BATCH = 256 * 1024;

/** Writes every byte of `chunks`, however many calls the system takes. */
async function writeAll(file: FileHandle, chunks: Buffer[]): Promise<void> {
  let rest = chunks;
  while (rest.length > 0) {
    const { bytesWritten } = await file.writev(rest);
    // A file takes bytes or fails; nothing written at all would loop here for ever.
    if (bytesWritten === 0 && rest.some((c) => c.length > 0)) throw new Error("the file took no bytes");
    rest = skip(rest, bytesWritten);
  }
}

/** Streams `body` into `file`, hashing and counting on the way. */
async function copyInto(
  file: FileHandle,
  body: Readable,
  signal: AbortSignal | undefined,
  observe: ((chunk: Buffer) => void) | undefined,
): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash("sha256");
  let bytes = 0;
  let batch: Buffer[] = [];
  let batched = 0;
  for await (const chunk of body) {
    if (signal?.aborted) throw signal.reason ?? new Error("aborted");
    const buffer = chunk as Buffer;
    observe?.(buffer);
    hash.update(buffer);
    bytes += buffer.length;
    batch.push(buffer);
    batched += buffer.length;
    if (batched >= WRITE_BATCH) {
      await writeAll(file, batch);
      batch = [];
      batched = 0;
    }
  }
  await writeAll(file, batch);
  return { bytes, sha256: hash.digest("hex") };
}

function skip(chunks: Buffer[], bytes: number): Buffer[] {
  let left = bytes;
  let i = 0;
  while (i < chunks.length && left >= (chunks[i] as Buffer).length) left -= (chunks[i++] as Buffer).length;
  const rest = chunks.slice(i);
  if (left > 0 && rest.length > 0) rest[0] = (rest[0] as Buffer).subarray(left);
  return rest;
}

/**
 * Whether a temporary file was left by a writer that is gone. Never one of this process. On this
 * host, one whose pid is ours (an earlier process with our pid: a container restarted with the same
 * host name) or dead. Any, once not written for PARTIAL_STALE_MS: a pid of another host means nothing
 * here. (Two live processes with the same host name in different pid namespaces, writing into one
 * folder, could remove each other's files: that write then fails and is retried, nothing is lost.)
 */
async function isLeftover(dir: string, name: string): Promise<boolean> {
  const m = PARTIAL.exec(name);
  const old = m ? undefined : OLD_PARTIAL.exec(name);
  if (!m && !old) return false;
  if (m && m[2] === HOST_TAG && m[3] === INSTANCE) return false;
  const pid = Number((m ?? old)?.[1]);
  // An old name has no token: one with our pid is an earlier process's (never this one's own).
  if (m ? writerGone(pid, m[2] as string, m[3]) : writerGone(pid, HOST_TAG, "")) return true;
  const info = await stat(join(dir, name)).catch(() => undefined);
  return info !== undefined && Date.now() - info.mtimeMs > PARTIAL_STALE_MS;
}

/** Removes the temporary files in `dir` whose writer is gone (killed mid-write); returns how many. */
async function removeLeftovers(dir: string): Promise<number> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return 0;
  }
  let removed = 0;
  for (const name of names) {
    if (await isLeftover(dir, name))
      removed += await unlink(join(dir, name)).then(
        () => 1,
        () => 0,
      );
  }
  return removed;
}

/** How deep below the run's folder the start of a run looks for leftovers (reports/shards/I-of-N). */
const SWEEP_DEPTH = 3;

/** A folder's renames in flight to the disk: the sync running, the one queued behind it, its handle. */
interface DirSync {
  running?: Promise<void> | undefined;
  queued?: Promise<void> | undefined;
  /** Kept open from one sync to the next queued behind it; closed when no sync waits. */
  handle?: FileHandle | undefined;
}

/**
 * Flushes a folder's entries to disk, so that a reboot keeps the renames made in it. A sync covers
 * whatever was renamed before it started, whenever its handle was opened: a sync queued right
 * behind another reuses the handle instead of opening the folder again.
 */
async function syncFolder(dir: string, s: DirSync): Promise<void> {
  try {
    s.handle ??= await open(dir, "r");
    await s.handle.sync();
  } catch (error) {
    // Some file systems cannot sync a folder (the data itself was flushed); one not opened is an error.
    if (!s.handle) throw error;
  } finally {
    const handle = s.handle;
    if (handle && !s.queued) {
      s.handle = undefined;
      await handle.close().catch(() => undefined);
    }
  }
}

export class LocalSink implements Sink {
  readonly root: string;
  /** Folders made and swept of leftovers once each: a run writes thousands of files into a few. */
  private readonly prepared = new Map<string, Promise<void>>();
  private readonly dirSyncs = new Map<string, DirSync>();

  constructor(root: string) {
    this.root = resolve(root);
  }

  localPath(key: string): string {
    const path = resolve(this.root, key);
    if (!path.startsWith(`${this.root}/`) && path !== this.root)
      throw new Error(`key escapes the output folder: ${key}`);
    return path;
  }

  uri(key: string): string {
    return this.localPath(key);
  }

  /**
   * At the start of a run: the temporary files of writers that are gone, in the run's folder and
   * the folders below it. A folder is swept when first written into too, but a run may write
   * nothing more where a killed download left one: its row removed since, or every other result of
   * that folder stored already.
   */
  async cleanup(_before: Date): Promise<{ aborted: number; removed: number }> {
    let removed = 0;
    const sweep = async (dir: string, depth: number): Promise<void> => {
      removed += await removeLeftovers(dir);
      if (depth >= SWEEP_DEPTH) return;
      const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
      for (const entry of entries)
        if (entry.isDirectory() && !entry.name.startsWith(".")) await sweep(join(dir, entry.name), depth + 1);
    };
    await sweep(this.root, 0);
    return { aborted: 0, removed };
  }

  private prepare(dir: string): Promise<void> {
    let ready = this.prepared.get(dir);
    if (!ready) {
      ready = mkdir(dir, { recursive: true })
        .then(() => removeLeftovers(dir))
        .then(() => undefined);
      this.prepared.set(dir, ready);
      ready.catch(() => this.prepared.delete(dir));
    }
    return ready;
  }

  async write(key: string, body: Readable, options: WriteOptions = {}): Promise<Written> {
    const target = this.localPath(key);
    const dir = dirname(target);
    const temp = tempName(target);
    let file: FileHandle;
    try {
      await this.prepare(dir);
      file = await open(temp, "w");
    } catch (error) {
      // The folder cannot take the file: the body (a download) is let go at once, not left open.
      body.destroy();
      throw error;
    }
    try {
      // One handle from the first byte to the flush: no second open to sync what was written.
      const written = await copyInto(file, body, options.signal, options.observe);
      if (options.expectedBytes !== undefined && written.bytes !== options.expectedBytes) {
        throw new SizeMismatchError(
          `${key}: received ${written.bytes} bytes, Content-Length said ${options.expectedBytes}`,
        );
      }
      // The caller records the object as stored once this returns: its bytes must be on disk first.
      await file.datasync();
      await file.close();
      await options.check?.(temp);
      await options.beforeReplace?.();
      await rename(temp, target);
      await this.syncDir(dir);
      return { uri: target, ...written };
    } catch (error) {
      body.destroy();
      await file.close().catch(() => undefined);
      await unlink(temp).catch(() => undefined);
      throw error;
    }
  }

  /**
   * Makes the renames in `dir` durable. A sync that starts after a caller's rename covers it, so
   * callers that arrive while one runs share the single sync queued behind it: a thousand results
   * cost a few folder syncs, not a thousand.
   */
  private syncDir(dir: string): Promise<void> {
    let slot = this.dirSyncs.get(dir);
    if (!slot) {
      slot = {};
      this.dirSyncs.set(dir, slot);
    }
    const s = slot;
    const begin = (): Promise<void> => {
      s.running = syncFolder(dir, s).finally(() => {
        s.running = undefined;
      });
      return s.running;
    };
    if (s.queued) return s.queued;
    if (!s.running) return begin();
    s.queued = s.running
      .catch(() => undefined)
      .then(() => {
        s.queued = undefined;
        return begin();
      });
    return s.queued;
  }

  async keep(from: string, to: string): Promise<void> {
    const source = this.localPath(from);
    const target = this.localPath(to);
    // A hard link refuses an existing name where a rename would replace it: a kept version is never
    // overwritten. The name the source loses after is then the only change.
    try {
      await link(source, target);
      await unlink(source);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EEXIST" || code === "ENOENT") throw error;
      // A file system without hard links: the name is checked free, then renamed to.
      if (
        await stat(target).then(
          () => true,
          () => false,
        )
      )
        throw Object.assign(new Error(`${target} exists: a kept version is never replaced`), {
          code: "EEXIST",
        });
      await rename(source, target);
    }
    await this.syncDir(dirname(target));
  }

  async writeText(key: string, text: string): Promise<string> {
    const target = this.localPath(key);
    await this.prepare(dirname(target));
    const temp = tempName(target);
    try {
      await writeFile(temp, text);
      await rename(temp, target);
    } catch (error) {
      await unlink(temp).catch(() => undefined);
      throw error;
    }
    return target;
  }

  async readHead(key: string, bytes: number): Promise<Buffer | undefined> {
    let handle: FileHandle;
    try {
      handle = await open(this.localPath(key), "r");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
    try {
      if (!(await handle.stat()).isFile()) return undefined;
      const buffer = Buffer.alloc(bytes);
      const { bytesRead } = await handle.read(buffer, 0, bytes, 0);
      return buffer.subarray(0, bytesRead);
    } finally {
      await handle.close();
    }
  }

  async readText(key: string, maxBytes: number): Promise<string | undefined> {
    const path = this.localPath(key);
    let handle: FileHandle;
    try {
      handle = await open(path, "r");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
    try {
      const info = await handle.stat();
      if (!info.isFile()) return undefined;
      if (info.size > maxBytes)
        throw new OutputError(`${path} is ${info.size} bytes, more than the ${maxBytes} expected of it`);
      return await handle.readFile("utf8");
    } finally {
      await handle.close();
    }
  }

  async folders(prefix: string, max: number): Promise<string[]> {
    try {
      const entries = await readdir(this.localPath(prefix), { withFileTypes: true });
      return entries
        .filter((e) => e.isDirectory())
        .map((e) => e.name)
        .slice(0, max);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw error;
    }
  }

  async stat(key: string): Promise<{ bytes: number } | undefined> {
    try {
      const info = await stat(this.localPath(key));
      return info.isFile() ? { bytes: info.size } : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * One listing per folder, and a stat only for the names it holds: a new run of 2,000 jobs would
   * otherwise make 2,000 failed stats (each a thrown error) before its first create. A name present
   * only in another case is asked of the file system (one file on macOS), as `stat` would.
   */
  async statMany(keys: readonly string[]): Promise<Array<{ bytes: number } | undefined>> {
    const listings = new Map<string, Promise<Set<string> | undefined>>();
    const listing = (dir: string) => {
      let names = listings.get(dir);
      if (!names) {
        names = readdir(dir).then(
          (found) => new Set(found.flatMap((name) => [name, name.toLowerCase()])),
          (error: NodeJS.ErrnoException) => (error.code === "ENOENT" ? new Set<string>() : undefined),
        );
        listings.set(dir, names);
      }
      return names;
    };
    // Names present are stat'ed 32 at a time: a resumed run of 200,000 rows holds that many.
    const looking = pLimit(32);
    return Promise.all(
      keys.map(async (key) => {
        let path: string;
        try {
          path = this.localPath(key);
        } catch {
          return undefined;
        }
        const names = await listing(dirname(path));
        const name = basename(path);
        // No listing (not a folder, not readable): the key is asked alone, as before.
        if (names && !names.has(name) && !names.has(name.toLowerCase())) return undefined;
        return looking(() => this.stat(key));
      }),
    );
  }

  async probe(): Promise<void> {
    const probe = join(this.root, `.clapper-probe-${process.pid}-${randomBytes(4).toString("hex")}`);
    try {
      await mkdir(this.root, { recursive: true });
      await writeFile(probe, "");
      await unlink(probe);
    } catch (caught) {
      await unlink(probe).catch(() => undefined);
      const error =
        (caught as NodeJS.ErrnoException).code === "ENOENT" ? await whyMissing(this.root, caught) : caught;
      const code = (error as NodeJS.ErrnoException).code;
      // What the system said, in words and by its code, then what to do.
      const why =
        code === "EACCES" || code === "EPERM"
          ? `permission denied, ${code}: give this user write access or choose another folder with --output`
          : code === "EROFS"
            ? "read-only file system, EROFS: choose another folder with --output"
            : code === "ENOSPC"
              ? "no space left on the device, ENOSPC"
              : code === "ENOTDIR" || code === "EEXIST"
                ? `a file stands where a folder is needed, ${code}`
                : (code ?? (error as Error).message);
      throw new OutputError(`the output folder ${this.root} is not writable (${why})`, false, {
        cause: error,
      });
    }
  }
}

/**
 * Why a folder that `mkdir -p` could not make is missing. Node's recursive mkdir reports ENOENT
 * when a parent cannot be made, whatever the system said of that parent (EROFS on a read-only
 * mount, EACCES): the nearest existing ancestor is asked directly, so the message says what the
 * system said. The first error when the ancestor can be written after all.
 */
async function whyMissing(folder: string, first: unknown): Promise<unknown> {
  let at = dirname(folder);
  while ((await stat(at).catch(() => undefined)) === undefined && dirname(at) !== at) at = dirname(at);
  const trial = join(at, `.clapper-probe-${process.pid}-${randomBytes(4).toString("hex")}`);
  try {
    await mkdir(trial);
    await rmdir(trial).catch(() => undefined);
    return first;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ? error : first;
  }
}
