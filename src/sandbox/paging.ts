// How the sandbox cuts its lists into pages, and the paging faults a test can inject: a service
// written from the specs alone may serve fewer items than asked (nothing promises full pages),
// place page N by the size asked or by the size it served, and show an item on two pages. The
// video task list, the skill list and the speech task list all page through here.
import { z } from "zod";

export const PagingFaults = z.object({
  /** Serve at most this many items a page, whatever was asked (0: no cap). */
  page_cap: z.number().int().min(0),
  /**
   * Where page N of a page-number list starts when the cap cuts a page short: at (N-1) x the
   * page_size asked, or at (N-1) x the size served. Equal when nothing is cut.
   */
  page_placement: z.enum(["asked", "served"]),
  /** Every page that does not start the list also starts with the item listed just before it. */
  page_repeat: z.boolean(),
});
export type PagingFaults = z.infer<typeof PagingFaults>;

export const NO_PAGING_FAULTS: PagingFaults = { page_cap: 0, page_placement: "served", page_repeat: false };

/** Page `pageNum` (from 1) of `pageSize` items asked. */
export function numberedPage<T>(all: readonly T[], pageNum: number, pageSize: number, f: PagingFaults): T[] {
  const served = f.page_cap > 0 ? Math.min(pageSize, f.page_cap) : pageSize;
  const start = (pageNum - 1) * (f.page_placement === "asked" ? pageSize : served);
  return cut(all, start, served, f);
}

/** The items from `offset` on, `limit` asked. */
export function offsetPage<T>(all: readonly T[], offset: number, limit: number, f: PagingFaults): T[] {
  return cut(all, offset, f.page_cap > 0 ? Math.min(limit, f.page_cap) : limit, f);
}

function cut<T>(all: readonly T[], start: number, served: number, f: PagingFaults): T[] {
  const items = all.slice(start, start + served);
  // The item before the page, as a list that moved down by one between two requests shows it.
  const before = f.page_repeat && start > 0 ? all[start - 1] : undefined;
  return before === undefined ? items : [before, ...items];
}
