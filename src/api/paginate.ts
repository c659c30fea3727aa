// Walks the services' lists page by page. The speech task list pages by offset; the video task list
// and the skill list by page number. Nothing promises full pages: a service may serve fewer items
// than asked, and place page N at (N-1) x the size asked or at (N-1) x the size it served. A list
// also changes while it is walked (a new task moves the others down a page), so an item may show
// on two pages: each is yielded once. A walk goes on until it has seen `total` distinct items, and
// ends early only at an empty page, a page that adds nothing new, or its page bound; it then says
// so (`complete: false`), since a caller that takes a partial list for the whole one shows 4 skills
// of 6, or creates a twin of a skill it did not see.
import { ClapperApiError } from "./errors.js";

interface ListPage<T> {
  items: readonly T[];
  total: number;
}

/** How a walk ended: `total` as the service last said it, `seen` distinct items. */
interface ListEnd {
  total: number;
  seen: number;
  /** Whether every item `total` counts was seen. */
  complete: boolean;
}

/** A whole list, and whether it is whole. */
export interface ListResult<T> {
  items: T[];
  total: number;
  complete: boolean;
}

/** A list walk: `for await` takes its items; `collectList` also gets how it ended. */
export type ListWalk<T> = AsyncGenerator<T, ListEnd, undefined>;

/**
 * The most pages one walk reads, whatever the service says: every page must bring a new item, and
 * a service that invents new ones (and a growing `total`) forever must not keep a command going.
 */
export const MAX_LIST_PAGES = 10_000;

/** Raised where acting on a partial list would do harm (creating a twin of a skill not seen). */
export class IncompleteListError extends ClapperApiError {
  override name = "IncompleteListError";
  constructor(message: string) {
    super(message, undefined, undefined, "incomplete_list");
  }
}

/** "the service lists 6 skills but served 4 distinct ones; the list may be incomplete" */
export function incompleteWarning(
  what: string,
  list: { total: number } & ({ seen: number } | { items: readonly unknown[] }),
): string {
  const seen = "seen" in list ? list.seen : list.items.length;
  return `the service lists ${list.total} ${what} but served ${seen} distinct ones; the list may be incomplete`;
}

/** The walk's items, and how it ended. */
export async function collectList<T>(walk: ListWalk<T>): Promise<ListResult<T>> {
  const items: T[] = [];
  for (;;) {
    const next = await walk.next();
    if (next.done) return { items, total: next.value.total, complete: next.value.complete };
    items.push(next.value);
  }
}

/**
 * At most `limit` items of the walk, and how it ended when it ended before `limit` (undefined
 * when `limit` was reached: the rest was not wanted, so whether it was whole does not matter).
 */
export async function takeList<T>(
  walk: ListWalk<T>,
  limit: number,
): Promise<{ items: T[]; end: ListEnd | undefined }> {
  const items: T[] = [];
  while (items.length < limit) {
    const next = await walk.next();
    if (next.done) return { items, end: next.value };
    items.push(next.value);
  }
  await walk.return({ total: 0, seen: items.length, complete: true });
  return { items, end: undefined };
}

/** One answer that is the whole list (voices, packages: no paging), each item once. */
export function wholeList<T>(page: ListPage<T>, keyOf: (item: T) => string): ListResult<T> {
  const seen = new Set<string>();
  const items = [...unseen(page.items, keyOf, seen)];
  return { items, total: page.total, complete: items.length >= page.total };
}

function* unseen<T>(items: readonly T[], keyOf: (item: T) => string, seen: Set<string>): Generator<T> {
  for (const item of items) {
    const key = keyOf(item);
    if (seen.has(key)) continue;
    seen.add(key);
    yield item;
  }
}

/** Counts pages and the largest `total` heard; says when a walk must stop. */
class Progress {
  total = 0;
  private largest = 0;
  pages = 0;
  constructor(readonly seen: Set<string>) {}

  page(total: number): void {
    this.pages += 1;
    this.total = total;
    this.largest = Math.max(this.largest, total);
  }

  /** Every page brings a new item, so `total` bounds the pages, give or take a list that grows. */
  get bounded(): boolean {
    return this.pages >= Math.min(MAX_LIST_PAGES, this.largest + 2);
  }

  get whole(): boolean {
    return this.seen.size >= this.total;
  }

  end(): ListEnd {
    return { total: this.total, seen: this.seen.size, complete: this.whole };
  }
}

/**
 * `fetchPage(offset)` gets the items from `offset` on. The next offset is the items served so far
 * (never the items asked for, which skipped the rest of a short page). Repeats count in the
 * offset, so the walk does not stop once the offset reaches `total`: it goes on while it has seen
 * fewer than `total` distinct items and the last page brought one.
 */
export async function* walkByOffset<T>(
  fetchPage: (offset: number) => Promise<ListPage<T>>,
  keyOf: (item: T) => string,
): ListWalk<T> {
  const p = new Progress(new Set());
  let offset = 0;
  for (;;) {
    const { items, total } = await fetchPage(offset);
    p.page(total);
    const before = p.seen.size;
    yield* unseen(items, keyOf, p.seen);
    offset += items.length;
    if (p.whole || items.length === 0 || p.seen.size === before || p.bounded) return p.end();
  }
}

/**
 * `fetchPage(n, size)` gets page n (from 1) of `size` items. A page shorter than asked, before
 * `total` is reached, shows the size the service serves: the next pages are asked at that size,
 * where the service places page N at (N-1) x the size, whichever size it counts by. The items
 * consumed so far (full pages, then the short one) may be no multiple of the new size: the walk
 * goes on from the page holding the next unseen item, its first items seen already.
 */
export async function* walkByPage<T>(
  fetchPage: (pageNum: number, pageSize: number) => Promise<ListPage<T>>,
  keyOf: (item: T) => string,
  pageSize = 100,
): ListWalk<T> {
  const p = new Progress(new Set());
  let size = Math.max(1, Math.floor(pageSize));
  let page = 1;
  for (;;) {
    const { items, total } = await fetchPage(page, size);
    p.page(total);
    const before = p.seen.size;
    yield* unseen(items, keyOf, p.seen);
    if (p.whole || items.length === 0 || p.seen.size === before || p.bounded) return p.end();
    if (items.length < size) {
      const consumed = (page - 1) * size + items.length;
      size = items.length;
      page = Math.floor(consumed / size) + 1;
    } else {
      // More than asked (an item repeated in front) does not move where the next page starts.
      page += 1;
    }
  }
}
