// Task list pages: how many items a page asks for, how far past what the followed tasks could fill
// a walk goes, and (for the video list, whose spec states no order) what its pages were seen to
// hold, which chooses the pages to read, never the answer.

/** Items asked for per list page: the most either service gives. */
export const PAGE_SIZE = 100;
/** List pages read beyond those the followed tasks could fill, before single looks take over. */
export const PAGE_MARGIN = 2;

/** The page length and order the video list was seen to have. */
export class VideoPages {
  /**
   * Whether pages were seen to list newer tasks after older ones. The spec states no order, so
   * this only chooses which page to read first (the end, where new tasks then are); every page
   * may still be read within the budget, and single looks cover what none showed.
   */
  private newestLast = false;
  /** `total` at the last list, and the page length the service actually gives. */
  private listed = { total: 0, pageLength: PAGE_SIZE };

  /** The page length the service gives. */
  get pageLength(): number {
    return this.listed.pageLength;
  }

  /** The page to read first: where new tasks were last seen listed. */
  first(): number {
    return this.newestLast ? this.lastPage() : 1;
  }

  lastPage(): number {
    return Math.max(1, Math.ceil(this.listed.total / this.listed.pageLength));
  }

  /** The page length and order the service shows: they choose pages, never the answer. */
  learn(page: number, items: ReadonlyArray<{ created_at: number }>, total: number): void {
    const length = this.listed.pageLength;
    // A page short of a full one before the last: the service gives fewer a page than asked.
    const capped = items.length > 0 && items.length < length && page * length < total;
    if (items.length > length || capped) this.listed.pageLength = items.length;
    this.listed.total = total;
    const first = items[0]?.created_at;
    const last = items.at(-1)?.created_at;
    if (first !== undefined && last !== undefined && first !== last) this.newestLast = first < last;
  }

  /** The unread page nearest to where new tasks were last seen listed. */
  next(read: ReadonlySet<number>): number | undefined {
    const last = this.lastPage();
    for (let i = 0; i < last; i++) {
      const page = this.newestLast ? last - i : i + 1;
      if (!read.has(page)) return page;
    }
    return undefined;
  }
}
