// The run's journal in an S3-compatible store (`--state s3://BUCKET/PREFIX`), so that a pod with no
// disk resumes where a killed one stopped. The file journal's contract (src/state/journal.ts):
// records change the state in memory at once and are written in order; the records of one turn of
// the event loop go out in one PutObject (group commit); a durable append resolves only once its
// object is stored (write-ahead depends on it); the others ride with the next durable one, or go
// after FLUSH_DELAY_MS, or at close.
//
// Under PREFIX/journal/, read with one listing:
//   seg-<seq>-<fence>-<parent>.jsonl  one flush, JSON lines; extends node (seq - 1, parent)
//   snapshot-<seq>-<fence>.json       the state as of node (seq, fence)
//   claim-<fence>.json                put by each writer before it reads: who, which generation
// `fence` is the writer's fencing token: the coordinator lock's token, plus an offset when the
// coordinator lost its data (its tokens start again at 1), so that tokens in the store never go back.
//
// The replay rule. The head is the node of the highest fence (its highest seq); the state is the
// chain from the head back through each segment's parent to the first snapshot met, or to seq 1.
// A writer only extends the chain it read. So a zombie (a writer that lost the lock and has not
// noticed yet) can only add a branch of its own once a newer writer has read: that branch is off
// the head's chain and is ignored, and what the zombie wrote before is on the chain, because the
// newer writer read it. Compaction puts the snapshot first, then deletes what it covers, and only
// while no higher fence has claimed the state (else the writer stands down and writes no more): a
// crash in between leaves both, and readers stop at the snapshot.
import { hostname } from "node:os";
import type { S3Client } from "@aws-sdk/client-s3";
import pLimit from "p-limit";
import { ObjectTooLargeError, readBoundedText, type S3Location, sdk, storeError } from "../sinks/s3.js";

/** A group of objects a writer leaves before it snapshots them away. */
const COMPACT_EVERY = 128;
/** How long records that need not be durable wait for company. */
const FLUSH_DELAY_MS = 100;
/** Each try of each call to the store; the SDK retries transient errors within it. */
const TIMEOUT_MS = 20_000;
const TRIES = 3;
/** A flush larger than this is split (readers refuse segments over MAX_SEGMENT_BYTES). */
const SEGMENT_BYTES = 8 * 1024 * 1024;
const MAX_SEGMENT_BYTES = 64 * 1024 * 1024;
const MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024;
const MAX_CLAIM_BYTES = 64 * 1024;
/** A thousand keys a page: a state compacts long before this. */
const MAX_LIST_PAGES = 100;
/** A compaction between the listing and the reads (an object gone): listed and read again. */
const OPEN_TRIES = 4;

type StateStoreErrorKind =
  /** The store cannot be reached or does not answer: run again later (exit 6). */
  | "unreachable"
  /** The store refused (credentials, permissions, no such bucket): a setting to fix (exit 2). */
  | "refused"
  /** An object that clapper did not write as it is: named, to be moved aside (exit 2). */
  | "damaged"
  /** A later holder of the run's lock has claimed the state: this process must not write (exit 5). */
  | "superseded";

export class StateStoreError extends Error {
  override name = "StateStoreError";
  constructor(
    readonly kind: StateStoreErrorKind,
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** An object listed a moment ago and gone now: a compaction ran meanwhile. */
class Gone extends Error {}

export interface S3JournalOptions<S, R> {
  client: S3Client;
  /** The state's own prefix. */
  location: S3Location;
  initial: () => S;
  /** Applies one record; deterministic, since replaying rebuilds the state. */
  apply: (state: S, record: R) => void;
  /** Applied to every record before it is applied and written (the runner redacts secrets here). */
  sanitize?: (record: R) => R;
  /** The writer's fencing token (the coordinator lock's); 0 without one. */
  fence?: number;
  /** The coordinator's data generation the token belongs to. */
  generation?: string;
  /** Compact once this many objects lie beyond the last snapshot (default 128). */
  compactEvery?: number;
  flushDelayMs?: number;
  timeoutMs?: number;
  tries?: number;
}

interface Segment {
  kind: "segment";
  seq: number;
  fence: number;
  parent: number;
  key: string;
}
interface Snapshot {
  kind: "snapshot";
  seq: number;
  fence: number;
  key: string;
}
interface Claim {
  kind: "claim";
  fence: number;
  key: string;
}
type Listed = Segment | Snapshot | Claim;

const pad = (n: number, width: number) => String(n).padStart(width, "0");
const segmentName = (seq: number, fence: number, parent: number) =>
  `seg-${pad(seq, 12)}-${pad(fence, 10)}-${pad(parent, 10)}.jsonl`;
const snapshotName = (seq: number, fence: number) => `snapshot-${pad(seq, 12)}-${pad(fence, 10)}.json`;
const claimName = (fence: number) => `claim-${pad(fence, 10)}.json`;

/** What a key under journal/ is; undefined for anything else (left alone). */
function parseKey(key: string): Listed | undefined {
  const name = key.slice(key.lastIndexOf("/") + 1);
  let m = /^seg-(\d+)-(\d+)-(\d+)\.jsonl$/.exec(name);
  if (m) return { kind: "segment", seq: Number(m[1]), fence: Number(m[2]), parent: Number(m[3]), key };
  m = /^snapshot-(\d+)-(\d+)\.json$/.exec(name);
  if (m) return { kind: "snapshot", seq: Number(m[1]), fence: Number(m[2]), key };
  m = /^claim-(\d+)\.json$/.exec(name);
  if (m) return { kind: "claim", fence: Number(m[1]), key };
  return undefined;
}

interface ReplayPlan {
  /** The node the state ends at: the next segment extends it. */
  head: { seq: number; fence: number };
  base: Snapshot | undefined;
  /** Segments after the base, in order. */
  path: Segment[];
}

/** A segment names a parent that is neither listed nor covered by a snapshot. */
class MissingLink extends Error {}

/** The chain to replay, by the rule at the top of this file; names only, nothing read. */
function replayPlan(listed: readonly Listed[]): ReplayPlan {
  const at = (seq: number, fence: number) => `${seq}/${fence}`;
  const segments = new Map<string, Segment>();
  const snapshots = new Map<string, Snapshot>();
  let head: Segment | Snapshot | undefined;
  for (const o of listed) {
    if (o.kind === "claim") continue;
    (o.kind === "segment" ? segments : snapshots).set(at(o.seq, o.fence), o as never);
    if (!head || o.fence > head.fence || (o.fence === head.fence && o.seq > head.seq)) head = o;
  }
  if (!head) return { head: { seq: 0, fence: 0 }, base: undefined, path: [] };
  const path: Segment[] = [];
  let base: Snapshot | undefined;
  let node = { seq: head.seq, fence: head.fence };
  for (;;) {
    base = snapshots.get(at(node.seq, node.fence));
    if (base) break;
    const segment = segments.get(at(node.seq, node.fence));
    if (!segment) {
      const by = path.at(-1);
      throw new MissingLink(
        `seg-${pad(node.seq, 12)}-${pad(node.fence, 10)}-*.jsonl${by ? ` (extended by ${by.key})` : ""} is missing and no snapshot covers it`,
      );
    }
    path.push(segment);
    if (segment.seq <= 1) break;
    node = { seq: segment.seq - 1, fence: segment.parent };
  }
  return { head: { seq: head.seq, fence: head.fence }, base, path: path.reverse() };
}

type Op =
  | { kind: "line"; line: string; durable: boolean; resolve: () => void; reject: (error: unknown) => void }
  | { kind: "compact"; state: string; resolve: () => void; reject: (error: unknown) => void };

export class S3Journal<S, R> {
  state: S;
  /** This writer's token in the store (the lock's fence, plus the store's offset). */
  private token = 0;
  /** The node the next segment extends. */
  private head = { seq: 0, fence: 0 };
  /** Objects beyond the last snapshot (segments, claims, others' leftovers): compaction's clock. */
  private since = 0;
  private compactQueued = false;
  private readonly queue: Op[] = [];
  private draining: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Writes that wait for no company: closing, or keepCopy's flush. */
  private forcing = 0;
  private frozen = false;
  private broken: unknown;
  private closed = false;
  /** The state's prefix with its slash, and its journal/ under it. */
  private readonly base: string;
  private readonly root: string;

  private constructor(private readonly options: S3JournalOptions<S, R>) {
    this.state = options.initial();
    const prefix = options.location.prefix;
    this.base = prefix ? `${prefix}/` : "";
    this.root = `${this.base}journal/`;
  }

  /** Claims the state with this writer's token, then reads it. */
  static async open<S, R>(options: S3JournalOptions<S, R>): Promise<S3Journal<S, R>> {
    const journal = new S3Journal<S, R>(options);
    for (let attempt = 1; ; attempt++) {
      try {
        await journal.claim();
        break;
      } catch (error) {
        // The claim read was removed by a compaction in between: listed again.
        if (!(error instanceof Gone) || attempt >= OPEN_TRIES) throw error;
      }
    }
    await journal.load();
    return journal;
  }

  /** The state as the store holds it, written to by nobody: status, report, cancel. */
  static async read<S, R>(options: S3JournalOptions<S, R>): Promise<S> {
    const journal = new S3Journal<S, R>(options);
    await journal.load();
    return journal.state;
  }

  /** Where the state lives, for messages. */
  get uri(): string {
    const { bucket, prefix } = this.options.location;
    return `s3://${bucket}/${prefix}`;
  }

  private objectUri(key: string): string {
    return `s3://${this.options.location.bucket}/${key}`;
  }

  /**
   * The token this writer writes under, put in a claim before anything is read: a writer that
   * compacts lists the claims before it deletes, and stands down for a higher one.
   */
  private async claim(): Promise<void> {
    const fence = this.options.fence ?? 0;
    const generation = this.options.generation ?? "";
    const listed = await this.list();
    let top: Claim | undefined;
    for (const o of listed) if (o.kind === "claim" && (!top || o.fence > top.fence)) top = o;
    const highest = listed.reduce((max, o) => Math.max(max, o.fence), 0);
    let offset = 0;
    let sameGeneration = true;
    if (top) {
      const text = await this.getText(top.key, MAX_CLAIM_BYTES);
      let claim: { offset?: unknown; generation?: unknown };
      try {
        claim = JSON.parse(text) as typeof claim;
      } catch {
        throw this.damaged(top.key, "not JSON");
      }
      if (typeof claim.offset !== "number" || !Number.isSafeInteger(claim.offset)) {
        throw this.damaged(top.key, "no offset");
      }
      sameGeneration = String(claim.generation ?? "") === generation;
      // A coordinator that lost its data counts tokens from 1 again: they are moved above every
      // token in the store, and the holders of that generation all move by the same offset.
      offset = sameGeneration ? claim.offset : highest;
    } else if (highest >= fence) {
      offset = highest;
    }
    this.token = fence + offset;
    if (top && sameGeneration && this.token < top.fence) {
      throw new StateStoreError(
        "superseded",
        `a later holder of the run's lock (token ${top.fence - offset}) has opened the state ${this.uri}; this process (token ${fence}) stops without writing`,
      );
    }
    const body = JSON.stringify({
      fence,
      offset,
      generation,
      host: hostname(),
      pid: process.pid,
      at: new Date().toISOString(),
    });
    await this.put(claimName(this.token), body, "application/json");
  }

  /** Lists, plans and replays; listed again when a compaction removed something meanwhile. */
  private async load(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const listed = await this.list();
      try {
        const plan = replayPlan(listed);
        this.state = await this.replay(plan);
        this.head = plan.head;
        this.since = listed.length - (plan.base ? 1 : 0);
        return;
      } catch (error) {
        if ((error instanceof MissingLink || error instanceof Gone) && attempt < OPEN_TRIES) continue;
        if (error instanceof MissingLink) {
          throw new StateStoreError(
            "damaged",
            `the state ${this.uri} is damaged: ${error.message}; move its journal/ aside to start over`,
          );
        }
        if (error instanceof Gone) {
          throw new StateStoreError(
            "unreachable",
            `the state ${this.uri} kept changing while it was read (${error.message}); run again`,
          );
        }
        throw error;
      }
    }
  }

  private async replay(plan: ReplayPlan): Promise<S> {
    let state = this.options.initial();
    if (plan.base) {
      const key = plan.base.key;
      const text = await this.getText(key, MAX_SNAPSHOT_BYTES);
      let body: { version?: unknown; seq?: unknown; fence?: unknown; state?: unknown };
      try {
        body = JSON.parse(text) as typeof body;
      } catch {
        throw this.damaged(key, "not JSON");
      }
      if (
        body.version !== 1 ||
        body.seq !== plan.base.seq ||
        body.fence !== plan.base.fence ||
        typeof body.state !== "object" ||
        body.state === null
      ) {
        throw this.damaged(key, "not a snapshot of this name");
      }
      state = body.state as S;
    }
    // Read side by side, applied in order.
    const reading = pLimit(16);
    const texts = await Promise.all(
      plan.path.map((s) => reading(() => this.getText(s.key, MAX_SEGMENT_BYTES))),
    );
    for (const [i, text] of texts.entries()) {
      const key = (plan.path[i] as Segment).key;
      // One PutObject wrote the whole segment: a bad line anywhere is damage, not a torn write.
      const lines = text.split("\n");
      if (lines.at(-1) !== "") throw this.damaged(key, "its last line has no newline");
      for (const [n, line] of lines.slice(0, -1).entries()) {
        let record: R;
        try {
          record = JSON.parse(line) as R;
        } catch {
          throw this.damaged(key, `line ${n + 1} is not JSON`);
        }
        if (typeof record !== "object" || record === null)
          throw this.damaged(key, `line ${n + 1} is not a record`);
        this.options.apply(state, record);
      }
    }
    return state;
  }

  private damaged(key: string, why: string): StateStoreError {
    return new StateStoreError(
      "damaged",
      `${this.objectUri(key)}: ${why}: the state ${this.uri} is damaged (not an object clapper wrote as it is); move it aside to go on without it`,
    );
  }

  /**
   * Applies a record to the state and appends it. With `durable`, the promise resolves once its
   * segment is stored; without, it waits up to FLUSH_DELAY_MS for company.
   */
  append(input: R, { durable = false }: { durable?: boolean } = {}): Promise<void> {
    const record = this.options.sanitize ? this.options.sanitize(input) : input;
    this.options.apply(this.state, record);
    if (this.frozen) return Promise.resolve();
    if (this.broken !== undefined) return Promise.reject(this.broken);
    if (this.closed) return Promise.reject(new Error(`the state ${this.uri} is closed`));
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ kind: "line", line: `${JSON.stringify(record)}\n`, durable, resolve, reject });
      if (durable) this.kick();
      else this.later();
    });
  }

  /** Nothing more is written: another process writes this state now. */
  freeze(): void {
    this.frozen = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const op of this.queue.splice(0)) op.resolve();
  }

  /**
   * Snapshots the state as of every record appended so far; the covered objects are deleted. Never
   * rejects: a compaction that fails only leaves more to read.
   */
  compact(): Promise<void> {
    if (this.frozen || this.broken !== undefined || this.closed) return Promise.resolve();
    this.compactQueued = true;
    // Taken now: it holds exactly the records appended so far, whose lines are ahead of it.
    const state = JSON.stringify(this.state);
    return new Promise<void>((resolve) => {
      this.queue.push({ kind: "compact", state, resolve, reject: () => resolve() });
      this.kick();
    });
  }

  /** Before `--fresh`: every object of the state copied under before-fresh-TIME/, as it was. */
  async keepCopy(): Promise<void> {
    await this.flush();
    const listed = await this.list();
    if (listed.length === 0) return;
    const { CopyObjectCommand } = sdk();
    const { bucket } = this.options.location;
    const stamp = new Date().toISOString().replace(/[:.]/g, "-");
    const copying = pLimit(8);
    await Promise.all(
      listed.map((o) =>
        copying(() => {
          const to = `${this.base}before-fresh-${stamp}/journal/${o.key.slice(this.root.length)}`;
          return this.call("copying", o.key, (signal) =>
            this.options.client.send(
              new CopyObjectCommand({
                Bucket: bucket,
                Key: to,
                CopySource: `${bucket}/${encodeURIComponent(o.key).replace(/%2F/g, "/")}`,
              }),
              { abortSignal: signal },
            ),
          );
        }),
      ),
    );
  }

  /** Waits for every pending write. */
  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
  }

  private async flush(): Promise<void> {
    this.forcing += 1;
    try {
      if (this.queue.length > 0) this.kick();
      while (this.draining) await this.draining;
    } finally {
      this.forcing -= 1;
    }
  }

  private urgent(): boolean {
    return this.forcing > 0 || this.queue.some((op) => op.kind === "compact" || op.durable);
  }

  private kick(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    // The first write waits for the end of this turn: every record of the answers that came in
    // with it goes out in the same object.
    this.draining ??= new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.drain())
      .finally(() => {
        this.draining = undefined;
        if (this.queue.length === 0) return;
        if (this.urgent()) this.kick();
        else this.later();
      });
  }

  private later(): void {
    if (this.draining || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.kick();
    }, this.options.flushDelayMs ?? FLUSH_DELAY_MS);
  }

  /** Works through the queue in order: runs of lines as one segment, compactions in their place. */
  private async drain(): Promise<void> {
    let first = true;
    // Records that need not be durable do not get an object of their own right after another one.
    while (this.queue.length > 0 && (first || this.urgent())) {
      first = false;
      const head = this.queue[0] as Op;
      if (head.kind === "compact") {
        this.queue.shift();
        await this.snapshot(head.state);
        head.resolve();
        continue;
      }
      const batch: Array<Extract<Op, { kind: "line" }>> = [];
      let chars = 0;
      for (let op = this.queue[0]; op?.kind === "line"; op = this.queue[0]) {
        if (batch.length > 0 && chars + op.line.length > SEGMENT_BYTES) break;
        batch.push(op);
        chars += op.line.length;
        this.queue.shift();
      }
      try {
        if (this.broken !== undefined) throw this.broken;
        await this.writeSegment(batch.map((b) => b.line).join(""));
        for (const b of batch) b.resolve();
      } catch (error) {
        // Nothing after a lost segment may be written: the chain would skip what it said.
        this.broken ??= error;
        for (const b of batch) b.reject(error);
        for (const op of this.queue.splice(0)) op.reject(error);
      }
    }
  }

  private async writeSegment(text: string): Promise<void> {
    if (this.frozen) return;
    const seq = this.head.seq + 1;
    await this.put(segmentName(seq, this.token, this.head.fence), text, "application/x-ndjson");
    this.head = { seq, fence: this.token };
    this.since += 1;
    if (this.since >= (this.options.compactEvery ?? COMPACT_EVERY) && !this.compactQueued) {
      void this.compact();
    }
  }

  /**
   * The snapshot of node (head), then what it covers deleted, unless a higher fence has claimed
   * the state: then this writer is the zombie and stops writing. A failure costs only the saving:
   * the objects stay, and the next compaction tries again.
   */
  private async snapshot(state: string): Promise<void> {
    this.compactQueued = false;
    const { seq, fence } = this.head;
    if (this.frozen || this.broken !== undefined || fence !== this.token || seq === 0) return;
    const body = `{"version":1,"seq":${seq},"fence":${fence},"state":${state}}`;
    if (Buffer.byteLength(body) > MAX_SNAPSHOT_BYTES) return;
    try {
      await this.put(snapshotName(seq, fence), body, "application/json");
      this.since = 0;
      const listed = await this.list();
      if (listed.some((o) => o.fence > this.token)) {
        this.freeze();
        return;
      }
      const covered = listed.filter(
        (o) =>
          o.fence < this.token ||
          (o.fence === this.token &&
            o.kind !== "claim" &&
            o.seq <= seq &&
            o.key !== this.root + snapshotName(seq, fence)),
      );
      const deleting = pLimit(8);
      await Promise.all(covered.map((o) => deleting(() => this.remove(o.key).catch(() => undefined))));
    } catch {
      // Compaction saves reads; the state is whole without it.
    }
  }

  // -------------------------------------------------------------------------------------------
  // calls to the store: each bounded in time and tries, its errors naming the object
  // -------------------------------------------------------------------------------------------

  private async call<T>(doing: string, key: string, send: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const timeoutMs = this.options.timeoutMs ?? TIMEOUT_MS;
    const tries = this.options.tries ?? TRIES;
    for (let attempt = 1; ; attempt++) {
      const signal = AbortSignal.timeout(timeoutMs);
      try {
        return await send(signal);
      } catch (error) {
        if (error instanceof StateStoreError || error instanceof Gone) throw error;
        const status = (error as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
        const name = (error as { name?: string }).name;
        if (status === 404 && (name === "NoSuchKey" || name === "NotFound"))
          throw new Gone(this.objectUri(key));
        const transient =
          signal.aborted || status === undefined || status >= 500 || status === 429 || status === 408;
        if (transient && attempt < tries) {
          await new Promise((resolve) => setTimeout(resolve, 250 * 2 ** (attempt - 1)));
          continue;
        }
        const what = `${doing} ${this.objectUri(key)}`;
        if (signal.aborted) {
          throw new StateStoreError(
            "unreachable",
            `S3: ${what} failed: no answer within ${Math.round(timeoutMs / 1000)} s (${tries} tries)`,
            { cause: error },
          );
        }
        const wrapped = storeError(error, what);
        throw new StateStoreError(transient ? "unreachable" : "refused", wrapped.message, { cause: error });
      }
    }
  }

  private async list(): Promise<Listed[]> {
    const { ListObjectsV2Command } = sdk();
    const out: Listed[] = [];
    let token: string | undefined;
    for (let page = 0; ; page++) {
      if (page >= MAX_LIST_PAGES) {
        throw new StateStoreError(
          "damaged",
          `the state ${this.uri} holds over ${MAX_LIST_PAGES * 1000} objects under journal/: not a state clapper keeps (it compacts every ${this.options.compactEvery ?? COMPACT_EVERY})`,
        );
      }
      const res = await this.call("listing", this.root, (signal) =>
        this.options.client.send(
          new ListObjectsV2Command({
            Bucket: this.options.location.bucket,
            Prefix: this.root,
            ...(token ? { ContinuationToken: token } : {}),
          }),
          { abortSignal: signal },
        ),
      );
      for (const o of res.Contents ?? []) {
        const parsed = o.Key ? parseKey(o.Key) : undefined;
        if (parsed && o.Key?.startsWith(this.root) && !o.Key.slice(this.root.length).includes("/")) {
          out.push(parsed);
        }
      }
      if (!res.IsTruncated || !res.NextContinuationToken) return out;
      token = res.NextContinuationToken;
    }
  }

  private async put(name: string, body: string, contentType: string): Promise<void> {
    const { PutObjectCommand } = sdk();
    const key = this.root + name;
    await this.call("writing", key, (signal) =>
      this.options.client.send(
        new PutObjectCommand({
          Bucket: this.options.location.bucket,
          Key: key,
          Body: body,
          ContentType: contentType,
        }),
        { abortSignal: signal },
      ),
    );
  }

  private async remove(key: string): Promise<void> {
    const { DeleteObjectCommand } = sdk();
    await this.call("deleting", key, (signal) =>
      this.options.client.send(new DeleteObjectCommand({ Bucket: this.options.location.bucket, Key: key }), {
        abortSignal: signal,
      }),
    );
  }

  /** An object's text, read up to `limit` bytes: a larger one is not one clapper wrote. */
  private getText(key: string, limit: number): Promise<string> {
    return this.call("reading", key, async (signal) => {
      let text: string | undefined;
      try {
        text = await readBoundedText(this.options.client, this.options.location.bucket, key, limit, signal);
      } catch (error) {
        if (error instanceof ObjectTooLargeError) throw this.damaged(key, error.message);
        throw error;
      }
      // Listed, then not there: as a 404 was before, never read as an empty object.
      if (text === undefined) throw new Gone(this.objectUri(key));
      return text;
    });
  }
}

/** Reads a small object of the state's prefix (the remembered rates); undefined when absent. */
export async function readSmallObject(
  client: S3Client,
  location: S3Location,
  key: string,
  limit: number,
): Promise<string | undefined> {
  try {
    return await readBoundedText(client, location.bucket, key, limit, AbortSignal.timeout(TIMEOUT_MS));
  } catch (error) {
    // Too large to be ours: as good as none (a cache).
    if (error instanceof ObjectTooLargeError) return undefined;
    throw error;
  }
}

/** Writes a small object of the state's prefix. */
export async function writeSmallObject(
  client: S3Client,
  location: S3Location,
  key: string,
  text: string,
): Promise<void> {
  const { PutObjectCommand } = sdk();
  await client.send(
    new PutObjectCommand({ Bucket: location.bucket, Key: key, Body: text, ContentType: "application/json" }),
    { abortSignal: AbortSignal.timeout(TIMEOUT_MS) },
  );
}
