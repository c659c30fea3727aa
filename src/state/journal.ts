// The checkpoint journal: an append-only file of JSON lines, one record per state change. A crash
// can tear only the last line, which is dropped on load; records that must survive a crash (the
// intent to create, the task id) are flushed to disk before the caller goes on. When the file grows,
// it is compacted into a single snapshot record written to a temporary file and renamed over it.
import { type FileHandle, open, readFile, rename, rm, truncate } from "node:fs/promises";

interface JournalOptions<S, R> {
  path: string;
  /** The empty state a new journal starts from. */
  initial: () => S;
  /** Applies one record; must be deterministic, since replaying the file rebuilds the state. */
  apply: (state: S, record: R) => void;
  /** Compact once the file holds this many records (default 10,000). */
  compactEvery?: number;
  /** Applied to every record before it is applied and written (the runner redacts secrets here). */
  sanitize?: (record: R) => R;
}

type Op = { kind: "line"; line: string; durable: boolean } | { kind: "compact"; snapshot: string };
type Queued = Op & { resolve: () => void; reject: (error: unknown) => void };

interface SnapshotRecord<S> {
  t: "snapshot";
  state: S;
}

/**
 * A line that is not a record, with complete lines after it: damage from elsewhere (a disk, an
 * editor, a copy cut short), not a crash, which tears only the last line. Replaying around it could
 * resume with a wrong idea of what was created and paid for, so nothing goes on until it is repaired.
 */
export class JournalDamagedError extends Error {
  override name = "JournalDamagedError";
  constructor(
    readonly path: string,
    /** 1-based numbers of the lines that are not records. */
    readonly lines: readonly number[],
    /** Lines in the file. */
    readonly total: number,
  ) {
    const which = lines.length === 1 ? `line ${lines[0]}` : `lines ${lines.join(", ")}`;
    super(
      `${path}:${lines[0]}: the state file is damaged: ${which} of ${total} ${lines.length === 1 ? "is not a record" : "are not records"} clapper wrote`,
    );
  }
}

/** Every line of a journal's text, each with its record or why it has none; a torn last line apart. */
export function journalLines<T>(text: string): {
  /** `start`: the line's first byte in the file. */
  lines: Array<{ n: number; start: number; text: string; record?: T }>;
  /** Bytes up to the end of the last complete line. */
  goodBytes: number;
} {
  const lines: Array<{ n: number; start: number; text: string; record?: T }> = [];
  const totalBytes = Buffer.byteLength(text);
  let goodBytes = 0;
  let offset = 0;
  for (const [index, line] of text.split("\n").entries()) {
    const end = offset + Buffer.byteLength(line) + 1;
    // A line counts only with its newline: that is the last byte a write puts down.
    if (end > totalBytes) break;
    const start = offset;
    offset = end;
    goodBytes = end;
    if (line.trim() === "") continue;
    let record: T | undefined;
    try {
      const parsed = JSON.parse(line) as unknown;
      if (typeof parsed === "object" && parsed !== null && typeof (parsed as { t?: unknown }).t === "string")
        record = parsed as T;
    } catch {
      // not JSON: reported by the caller with its number
    }
    lines.push({ n: index + 1, start, text: line, ...(record !== undefined ? { record } : {}) });
  }
  return { lines, goodBytes };
}

export class Journal<S, R extends { t: string }> {
  state: S;
  private handle: FileHandle | undefined;
  private records = 0;
  /** Pending writes in call order: the order on disk is the order of calls. */
  private readonly queue: Queued[] = [];
  private draining: Promise<void> | undefined;
  /** Set when another process took the state over: nothing more may reach its file. */
  private frozen = false;
  /**
   * The first failed write, kept: a write that failed may have left part of a line, and nothing
   * may follow it, or a later line would reach the disk without the one before it.
   */
  private broken: { error: unknown } | undefined;

  private constructor(
    private readonly options: JournalOptions<S, R>,
    state: S,
  ) {
    this.state = state;
  }

  /** Opens (or creates) the journal and replays it. A torn last line is dropped and cut off. */
  static async open<S, R extends { t: string }>(options: JournalOptions<S, R>): Promise<Journal<S, R>> {
    const { journal, goodBytes, totalBytes } = await Journal.load<S, R>(options);
    if (goodBytes < totalBytes) await truncate(options.path, goodBytes);
    journal.handle = await open(options.path, "a");
    return journal;
  }

  /**
   * The state as the file holds it, without writing: for readers beside a live run (status,
   * cancel), which must not cut off the line the run is writing.
   */
  static async read<S, R extends { t: string }>(options: JournalOptions<S, R>): Promise<S> {
    return (await Journal.load<S, R>(options)).journal.state;
  }

  private static async load<S, R extends { t: string }>(options: JournalOptions<S, R>) {
    let text = "";
    try {
      text = await readFile(options.path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
    const journal = new Journal<S, R>(options, options.initial());
    const { lines, goodBytes } = journalLines<R | SnapshotRecord<S>>(text);
    // The last line without its newline is a torn write: dropped (open() cuts it off). A bad line
    // before the last complete one is damage from elsewhere.
    const damaged = lines.filter((l, i) => l.record === undefined && i < lines.length - 1).map((l) => l.n);
    if (damaged.length > 0) throw new JournalDamagedError(options.path, damaged, lines.length);
    let kept = goodBytes;
    for (const line of lines) {
      if (line.record === undefined) {
        // The last complete line is not a record: a write torn inside its own bytes. Dropped too.
        kept = line.start;
        break;
      }
      journal.replay(line.record);
    }
    return { journal, goodBytes: kept, totalBytes: Buffer.byteLength(text) };
  }

  private replay(record: R | SnapshotRecord<S>): void {
    if (record.t === "snapshot") {
      this.state = (record as SnapshotRecord<S>).state;
    } else {
      this.options.apply(this.state, record as R);
    }
    this.records += 1;
  }

  /**
   * Applies a record to the state and appends it. With `durable`, the promise resolves only after
   * the line reached the disk (fdatasync): use it for what a crash must not lose. Lines that arrive
   * while a write is under way go out together, with one fdatasync for the batch (group commit).
   */
  append(input: R, { durable = false }: { durable?: boolean } = {}): Promise<void> {
    const record = this.options.sanitize ? this.options.sanitize(input) : input;
    this.options.apply(this.state, record);
    if (this.frozen) return Promise.resolve();
    if (this.broken) return Promise.reject(this.broken.error);
    this.records += 1;
    const written = this.enqueue({ kind: "line", line: `${JSON.stringify(record)}\n`, durable });
    if (this.records >= (this.options.compactEvery ?? 10_000)) void this.compact().catch(() => undefined);
    return written;
  }

  /**
   * From now on, records change the state in memory only (the run winds down on what it knows) and
   * nothing more is written: the file belongs to the process that took the lock over.
   */
  freeze(): void {
    this.frozen = true;
    for (const q of this.queue.splice(0)) q.resolve();
  }

  /** Rewrites the journal as one snapshot: write aside, flush, rename (atomic on POSIX). */
  compact(): Promise<void> {
    if (this.frozen) return Promise.resolve();
    if (this.broken) return Promise.reject(this.broken.error);
    // The snapshot is taken now: it holds exactly the records appended so far. Their lines are
    // ahead of it in the queue (and end up in the file it replaces); later lines follow it.
    const snapshot = `${JSON.stringify({ t: "snapshot", state: this.state })}\n`;
    this.records = 1;
    return this.enqueue({ kind: "compact", snapshot });
  }

  private enqueue(op: Op): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ...op, resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    // The first write waits for the end of this turn of the event loop: the records of every
    // answer that came in with it go out in one write and one flush, not the first alone and then
    // the rest behind it.
    this.draining ??= new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.drain())
      .finally(() => {
        this.draining = undefined;
        // Something queued between the last check and now must not wait for the next append.
        if (this.queue.length > 0) this.kick();
      });
  }

  /** Works through the queue in order: runs of lines as one write, compactions in their place. */
  private async drain(): Promise<void> {
    while (this.queue.length > 0) {
      const head = this.queue[0] as Queued;
      if (head.kind === "compact") {
        this.queue.shift();
        await this.rewrite(head.snapshot).then(head.resolve, head.reject);
        continue;
      }
      const batch: Queued[] = [];
      while (this.queue[0]?.kind === "line") batch.push(this.queue.shift() as Queued);
      try {
        const handle = this.handle;
        if (!handle) throw new Error("journal is closed");
        // writeFile, not write: a write the disk cuts short (full, over a size limit) reports the
        // bytes it took as success; writeFile writes the rest, and meets the error itself.
        await handle.writeFile(batch.map((b) => (b.kind === "line" ? b.line : "")).join(""));
        if (batch.some((b) => b.kind === "line" && b.durable)) await handle.datasync();
        for (const b of batch) b.resolve();
      } catch (error) {
        this.broken = { error };
        for (const b of [...batch, ...this.queue.splice(0)]) b.reject(error);
      }
    }
  }

  private async rewrite(snapshot: string): Promise<void> {
    const tmp = `${this.options.path}.compact`;
    const out = await open(tmp, "w");
    try {
      await out.writeFile(snapshot);
      await out.datasync();
    } catch (error) {
      // The journal itself is untouched: the part of a snapshot written aside is not kept.
      await out.close().catch(() => undefined);
      await rm(tmp, { force: true }).catch(() => undefined);
      throw error;
    }
    await out.close();
    await this.handle?.close();
    await rename(tmp, this.options.path);
    this.handle = await open(this.options.path, "a");
  }

  /** Waits for every pending write, flushes, closes. */
  async close(): Promise<void> {
    while (this.draining) await this.draining;
    const handle = this.handle;
    this.handle = undefined;
    if (handle) {
      await handle.datasync().catch(() => undefined);
      await handle.close();
    }
  }
}
