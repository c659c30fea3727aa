// What every process on the account reads of a service's tasks, kept a few minutes: the services
// list all of the account's tasks on each page, so with several processes (the shards of a run)
// each would read pages full of the others' tasks and then look at its own one by one. One hash
// per window of time, so nothing grows without end: a sighting is written to the current window
// and read from it and the one before, and a window expires two windows after it began.
import type { Link } from "./link.js";

/** The length of a window: sightings older than one to two windows are not kept. */
const WINDOW_MS = 120_000;
/** Told sightings wait this long for others to go with them in one write. */
const FLUSH_MS = 20;
/** A sighting's text is refused above this (a task object is a few hundred bytes). */
export const MAX_SIGHTING_BYTES = 16 * 1024;

export interface RawSighting {
  /** When it was read: the reader's clock, epoch ms. */
  at: number;
  /** The task as the service answered it, as JSON. */
  task: string;
}

export class SharedSightings {
  private pending = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly link: Link,
    private readonly service: string,
  ) {}

  private key(window: number): string {
    return this.link.keys.sightings(this.service, window);
  }

  /** Queues what was read; written with whatever else is told within FLUSH_MS, in one round trip. */
  tell(entries: ReadonlyArray<readonly [id: string, task: string]>): void {
    if (this.link.lost) return;
    const at = Date.now();
    for (const [id, task] of entries)
      if (task.length <= MAX_SIGHTING_BYTES) this.pending.set(id, JSON.stringify({ at, task }));
    if (this.pending.size > 0) this.timer ??= setTimeout(() => this.flush(), FLUSH_MS);
  }

  private flush(): void {
    this.timer = undefined;
    const fields = [...this.pending].flat();
    this.pending = new Map();
    if (fields.length === 0) return;
    const key = this.key(Math.floor(Date.now() / WINDOW_MS));
    this.writing = this.writing
      .then(() =>
        this.link.run("share what was read", () =>
          this.link.redis
            .multi()
            .hset(key, ...fields)
            .pexpire(key, 2 * WINDOW_MS)
            .exec(),
        ),
      )
      // Best effort: a lost coordinator is noticed by everything else the run asks of it.
      .then(
        () => undefined,
        () => undefined,
      );
  }

  /** The newest sighting of each task (same order), from the current window and the one before. */
  async recall(ids: readonly string[]): Promise<Array<RawSighting | undefined>> {
    if (ids.length === 0 || this.link.lost) return [];
    const window = Math.floor(Date.now() / WINDOW_MS);
    const [now, before] = (await this.link.run("recall what was read", () =>
      this.link.redis
        .multi()
        .hmget(this.key(window), ...ids)
        .hmget(this.key(window - 1), ...ids)
        .exec(),
    )) as [[unknown, Array<string | null>], [unknown, Array<string | null>]];
    return ids.map((_, i) => newest(parse(now[1][i]), parse(before[1][i])));
  }

  /** Writes what is queued (at the end of a run). */
  async close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.flush();
    await this.writing;
  }
}

function parse(text: string | null | undefined): RawSighting | undefined {
  if (!text || text.length > MAX_SIGHTING_BYTES + 64) return undefined;
  try {
    const value = JSON.parse(text) as Partial<RawSighting>;
    return typeof value.at === "number" && typeof value.task === "string"
      ? { at: value.at, task: value.task }
      : undefined;
  } catch {
    return undefined;
  }
}

function newest(a: RawSighting | undefined, b: RawSighting | undefined): RawSighting | undefined {
  if (!a) return b;
  if (!b) return a;
  return a.at >= b.at ? a : b;
}
