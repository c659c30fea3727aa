// The video service's poller. Video tasks say how long they still need
// (estimated_remaining_seconds, in whole seconds), which bounds the next look; once the pace is
// learnt a video is looked at once, at its end, by the single query that its URL needs anyway.
import type { VideoTask } from "../api/video.js";
import type { VideoClient } from "../api/video-client.js";
import type { Entry } from "./entry.js";
import { PAGE_MARGIN, PAGE_SIZE, VideoPages } from "./pages.js";
import { Poller } from "./poller.js";
import { clamp, firstAt, lateWait } from "./scheduler.js";
import type { TrackHint, TrackOptions, TrackTrouble } from "./track.js";

/** The longest a due video waits for others to come due with it while the pace is unknown. */
const VIDEO_GATHER_MS = 250;
/** Videos due together, with the pace learnt, that are asked about with a list rather than one by one. */
const LIST_WHEN_PREDICTED = 10;

export class VideoPoller extends Poller<VideoTask> {
  /** What the video list's pages were seen to hold. */
  private readonly pages = new VideoPages();

  constructor(
    private readonly client: VideoClient,
    options: TrackOptions,
    signal: AbortSignal,
    trouble?: TrackTrouble,
  ) {
    super(options, signal, trouble);
  }

  /**
   * A look at a video that should have ended is ranked: it is most likely the fetch of a finished
   * result's URL, which the gate lets go before queued creates (see src/rate/limiter.ts).
   */
  protected get(taskId: string, ended: boolean) {
    return this.client.getTask(taskId, { signal: this.signal, ...(ended ? { rank: 1 } : {}) });
  }

  protected idOf(task: VideoTask) {
    return task.id;
  }

  protected statusOf(task: VideoTask) {
    return task.status;
  }

  protected override remainingOf(task: VideoTask): number | undefined {
    return task.estimated_remaining_seconds;
  }

  /**
   * Before any video ended here, the first look is one interval in (by a list, with the others
   * created meanwhile): the service's estimate of what is left decides the next. Once the pace is
   * learnt, the first look is at the predicted end, and for a video that ends there it is the one
   * look its download needs anyway (lists carry no URL).
   */
  protected override firstWait(hint: TrackHint): number {
    if (hint.expectedMs === undefined) return 0;
    // A look at once would find it queued: one interval later it has the service's estimate too.
    if (!this.observed.learnt) return Math.min(hint.expectedMs, this.options.minIntervalMs);
    return firstAt(this.options, this.pace(), hint.expectedMs);
  }

  /**
   * Look again when the task should be done. The service's estimate is in whole seconds, rounded
   * up, and at least 1 while open, so it bounds what is left from below only by a second less; the
   * pace learnt from the videos that ended here places the end within that. Past the predicted end
   * and still open, short looks that grow a little each time. Never busier than the minimum.
   */
  protected nextInterval(task: VideoTask, entry: Entry<VideoTask>): number {
    const remaining = (task.estimated_remaining_seconds ?? 0) * 1000;
    if (!this.observed.learnt || entry.expectedMs === undefined) return clamp(this.options, remaining * 0.8);
    const now = Date.now();
    const expected = entry.expectedMs * this.pace();
    entry.plan ??= { endAt: entry.since + expected, attempt: 0, late: 0 };
    const atLeast = Math.max(0, remaining - 1000) * 0.8;
    if (now < entry.plan.endAt) return clamp(this.options, Math.max(atLeast, entry.plan.endAt - now));
    return clamp(this.options, Math.max(atLeast, lateWait(entry.plan, expected)));
  }

  override track(
    taskId: string,
    createdAt: number,
    onUpdate: (task: VideoTask) => void = () => {},
    hint: TrackHint = {},
  ): Promise<VideoTask> {
    const tracked = super.track(taskId, createdAt, onUpdate, hint);
    const entry = this.entries.get(taskId);
    if (entry?.expectedMs !== undefined && this.observed.learnt) {
      entry.plan = { endAt: entry.since + entry.expectedMs * this.pace(), attempt: 0, late: 0 };
    }
    return tracked;
  }

  /** Learns the pace from a video that succeeded (created_at and updated_at bound its time). */
  protected override ended(entry: Entry<VideoTask>, task: VideoTask): void {
    if (task.status !== "succeeded" || entry.expectedMs === undefined) return;
    this.observed.sample(entry, entry.expectedMs, { from: task.created_at, to: task.updated_at });
  }

  /**
   * Until the pace is learnt the first looks are at once, so the videos created in the same moment
   * (a rate that is still growing lets them go a few at a time) wait briefly to share one list.
   */
  protected override gatherMs(): number {
    return !this.observed.learnt ? Math.min(VIDEO_GATHER_MS, this.options.minIntervalMs / 2) : 0;
  }

  /**
   * Every video that succeeded needs one look of its own for its URL, so single looks are the
   * cheapest once predictions place them at the end. While the pace is unknown the looks mostly
   * find tasks still running, and a list page costs what a single look does and tells of every
   * video followed; so does it when many come due together.
   */
  protected override useList(due: readonly Entry<VideoTask>[]): boolean {
    if (!this.observed.learnt) return due.length > 0 && this.entries.size > 1;
    return due.length >= LIST_WHEN_PREDICTED;
  }

  /**
   * Reads pages until every due task was seen, the pages run out, or the budget is spent: as
   * many pages as the followed tasks could fill, plus a margin, and never more than `total` has.
   */
  protected async pollMany(due: Entry<VideoTask>[]): Promise<void> {
    const waiting = new Set(due.map((e) => e.taskId));
    const followed = this.entries.size;
    // Open tasks of other processes on the account (shards, other runs) share the pages with this
    // one's: each page of them is a page more that this one's tasks may be spread over.
    let othersOpen = 0;
    const read = new Set<number>();
    let page: number | undefined = this.pages.first();
    while (page !== undefined && waiting.size > 0) {
      read.add(page);
      this.requests += 1;
      // Asked at the length learnt: after a short page, where pages are placed by either size.
      const pageSize = Math.min(PAGE_SIZE, this.pages.pageLength);
      const list = await this.client.listPage(page, { pageSize }, { signal: this.signal });
      this.pages.learn(page, list.items, list.total);
      othersOpen += this.takePage(list.items, waiting);
      const budget = Math.min(
        this.pages.lastPage(),
        Math.ceil((followed + othersOpen) / this.pages.pageLength) + PAGE_MARGIN,
      );
      page = read.size < budget ? this.pages.next(read) : undefined;
    }
    await this.fallback(due, waiting);
  }
}
