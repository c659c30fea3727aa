// Walks the services' task lists page by page. The speech list pages by offset, the video list by
// page number. A page may come back shorter than asked, so an offset walk goes on from the items
// received, never from the items asked for (which skipped tasks). A list also changes while it is
// walked (a new task moves the others down a page), so an item may show twice: each is yielded
// once. Both walks stop at an empty page or once `total` is reached, and are bounded in pages.

export interface ListPage<T> {
  items: readonly T[];
  total: number;
}

function* unseen<T>(items: readonly T[], keyOf: (item: T) => string, seen: Set<string>): Generator<T> {
  for (const item of items) {
    const key = keyOf(item);
    if (seen.has(key)) continue;
    seen.add(key);
    yield item;
  }
}

/** `fetchPage(offset)` gets the items from `offset` on; the next offset is what arrived so far. */
export async function* walkByOffset<T>(
  fetchPage: (offset: number) => Promise<ListPage<T>>,
  keyOf: (item: T) => string,
): AsyncGenerator<T> {
  const seen = new Set<string>();
  let offset = 0;
  // Every page but the last brings at least one item, so the first `total` bounds the pages; items
  // past it are tasks that arrived during the walk, which a listing taken at its start lacks too.
  let maxPages = Number.POSITIVE_INFINITY;
  for (let pages = 1; pages <= maxPages; pages++) {
    const { items, total } = await fetchPage(offset);
    if (pages === 1) maxPages = total + 1;
    yield* unseen(items, keyOf, seen);
    offset += items.length;
    if (items.length === 0 || offset >= total) return;
  }
}

/**
 * `fetchPage(n)` gets page n (from 1) at a fixed page size: the service cuts its pages at the size
 * it applies, whatever it was asked, so numbering stays consistent even with short pages.
 */
export async function* walkByPage<T>(
  fetchPage: (pageNum: number) => Promise<ListPage<T>>,
  keyOf: (item: T) => string,
): AsyncGenerator<T> {
  const seen = new Set<string>();
  let received = 0;
  let longest = 0;
  for (let page = 1; ; page++) {
    const { items, total } = await fetchPage(page);
    yield* unseen(items, keyOf, seen);
    received += items.length;
    longest = Math.max(longest, items.length);
    // The last page by `total` at the longest page seen: no page after it can hold anything.
    if (items.length === 0 || received >= total || page >= Math.ceil(total / longest)) return;
  }
}
