// The checkpoint journal: an append-only file of JSON lines, one record per state change. A crash
// can tear only the last line, which is dropped on load; records that must survive a crash (the
// intent to create, the task id) are flushed to disk before the caller goes on. When the file grows,
// it is compacted into a single snapshot record written to a temporary file and renamed over it.
import { type FileHandle, open, readFile, rename, truncate } from "node:fs/promises";

export interface JournalOptions<S, R> {
  path: string;
  /** The empty state a new journal starts from. */
  initial: () => S;
  /** Applies one record; must be deterministic, since replaying the file rebuilds the state. */
  apply: (state: S, record: R) => void;
  /** Compact once the file holds this many records (default 10,000). */
  compactEvery?: number;
}

interface SnapshotRecord<S> {
  t: "snapshot";
  state: S;
}

export class Journal<S, R extends { t: string }> {
  state: S;
  private handle: FileHandle | undefined;
  private records = 0;
  /** Writes are serialised so lines never interleave and order on disk is order of calls. */
  private tail: Promise<void> = Promise.resolve();

  private constructor(
    private readonly options: JournalOptions<S, R>,
    state: S,
  ) {
    this.state = state;
  }

  /** Opens (or creates) the journal and replays it. A torn last line is dropped and cut off. */
  static async open<S, R extends { t: string }>(options: JournalOptions<S, R>): Promise<Journal<S, R>> {
    let text = "";
    try {
      text = await readFile(options.path, "utf8");
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
    const journal = new Journal<S, R>(options, options.initial());
    const totalBytes = Buffer.byteLength(text);
    let goodBytes = 0;
    let offset = 0;
    for (const line of text.split("\n")) {
      const end = offset + Buffer.byteLength(line) + 1;
      // A line counts only with its newline: that is the last byte a write puts down.
      const complete = end <= totalBytes;
      offset = end;
      if (line.trim() === "") {
        if (complete) goodBytes = end;
        continue;
      }
      let record: R | SnapshotRecord<S>;
      try {
        record = JSON.parse(line) as R | SnapshotRecord<S>;
      } catch {
        // Only the last line can be torn by a crash; anything after it is ignored too.
        break;
      }
      if (!complete) break;
      journal.replay(record);
      goodBytes = end;
    }
    if (goodBytes < totalBytes) await truncate(options.path, goodBytes);
    journal.handle = await open(options.path, "a");
    return journal;
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
   * the line reached the disk (fdatasync): use it for what a crash must not lose.
   */
  append(record: R, { durable = false }: { durable?: boolean } = {}): Promise<void> {
    this.options.apply(this.state, record);
    this.records += 1;
    const line = `${JSON.stringify(record)}\n`;
    const write = this.tail.then(async () => {
      const handle = this.handle;
      if (!handle) throw new Error("journal is closed");
      await handle.write(line);
      if (durable) await handle.datasync();
    });
    this.tail = write.catch(() => undefined);
    return write.then(async () => {
      if (this.records >= (this.options.compactEvery ?? 10_000)) await this.compact();
    });
  }

  /** Rewrites the journal as one snapshot: write aside, flush, rename (atomic on POSIX). */
  compact(): Promise<void> {
    // The snapshot is taken now, synchronously: it holds exactly the records appended so far, whose
    // lines are all queued before this compaction. Records appended later are applied to the state
    // at once but written after the snapshot; taking the snapshot when the queue reaches it would
    // put them in the snapshot and again after it, and replaying would apply them twice.
    const snapshot = `${JSON.stringify({ t: "snapshot", state: this.state })}\n`;
    // Counted from the snapshot on, so that appends already queued do not each ask for another one.
    this.records = 1;
    const run = this.tail.then(async () => {
      const tmp = `${this.options.path}.compact`;
      const out = await open(tmp, "w");
      try {
        await out.write(snapshot);
        await out.datasync();
      } finally {
        await out.close();
      }
      await this.handle?.close();
      await rename(tmp, this.options.path);
      this.handle = await open(this.options.path, "a");
    });
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Waits for every pending write, flushes, closes. */
  async close(): Promise<void> {
    await this.tail;
    const handle = this.handle;
    this.handle = undefined;
    if (handle) {
      await handle.datasync().catch(() => undefined);
      await handle.close();
    }
  }
}
