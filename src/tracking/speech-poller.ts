// The speech service's poller. Speech tasks say nothing of the time they still need: a line's end
// is predicted from its text (durations.ts) and the pace learnt here.
import type { SpeechTask } from "../api/speech.js";
import type { SpeechClient } from "../api/speech-client.js";
import { attemptMs, expectedSpeechMs, SPEECH_QUEUE_MS } from "./durations.js";
import type { Entry } from "./entry.js";
import { PAGE_MARGIN, PAGE_SIZE } from "./pages.js";
import { Poller } from "./poller.js";
import { clamp, lateWait } from "./scheduler.js";
import type { TrackHint, TrackOptions, TrackTrouble } from "./track.js";

/** Looks before a line's nominal end while the service's pace is not learnt yet. */
const EARLY_LOOKS = 2;
/** The longest a due line waits for others to come due with it (see `gatherMs`). */
const SPEECH_GATHER_MS = 250;

export class SpeechPoller extends Poller<SpeechTask> {
  constructor(
    private readonly client: SpeechClient,
    options: TrackOptions,
    signal: AbortSignal,
    trouble?: TrackTrouble,
  ) {
    super(options, signal, trouble);
  }

  protected get(taskId: string) {
    return this.client.getTask(taskId, { signal: this.signal });
  }

  protected idOf(task: SpeechTask) {
    return task.task_id;
  }

  protected statusOf(task: SpeechTask) {
    return task.status;
  }

  /** Lines end close together in a busy run: a short wait lets one list see several of them. */
  protected override gatherMs(): number {
    return Math.min(SPEECH_GATHER_MS, this.options.minIntervalMs / 2);
  }

  override track(
    taskId: string,
    createdAt: number,
    onUpdate: (task: SpeechTask) => void = () => {},
    hint: TrackHint = {},
  ): Promise<SpeechTask> {
    const tracked = super.track(taskId, createdAt, onUpdate, hint);
    const entry = this.entries.get(taskId);
    if (entry && hint.expectedMs !== undefined) {
      entry.plan = { endAt: entry.since + hint.expectedMs * this.pace(), attempt: 0, late: 0 };
    }
    return tracked;
  }

  protected override firstWait(hint: TrackHint): number {
    return hint.expectedMs === undefined ? 0 : clamp(this.options, hint.expectedMs * this.pace());
  }

  /**
   * Looks when the task should end (the spec's fixed 3 s looks finish lines late on average by
   * half of that); once past it and still open, short looks that grow a little each time.
   */
  protected nextInterval(task: SpeechTask, entry: Entry<SpeechTask>): number {
    const now = Date.now();
    let plan = entry.plan;
    const nominal = plan?.attemptMs ?? attemptMs(task.input.text, task.input.speed);
    const run = nominal * this.pace();
    if (!plan) {
      plan = { endAt: entry.since + SPEECH_QUEUE_MS * this.pace() + run, attempt: task.attempt, late: 0 };
      entry.plan = plan;
    } else if (task.attempt > plan.attempt) {
      // A retry began since the last look: one more attempt from about now.
      if (task.attempt > 1) Object.assign(plan, { endAt: now + run, late: 0 });
      plan.attempt = task.attempt;
    }
    plan.attemptMs = nominal;
    if (now < plan.endAt) {
      // Until a line here has ended, the nominal end may be far too late (a faster service, a
      // sandbox at a small time scale: seconds late for every line of the first wave). Two looks
      // come first, after the shortest interval and twice it, never past the nominal end: two list
      // requests for the whole wave.
      if (!this.observed.learnt && (plan.early ?? 0) < EARLY_LOOKS) {
        const probe = this.options.minIntervalMs * 2 ** (plan.early ?? 0);
        plan.early = (plan.early ?? 0) + 1;
        return clamp(this.options, Math.min(plan.endAt - now, probe));
      }
      return clamp(this.options, plan.endAt - now);
    }
    return clamp(this.options, lateWait(plan, run));
  }

  /** Learns the pace from a line that ended on its first attempt (a retry's time is not its own). */
  protected override ended(entry: Entry<SpeechTask>, task: SpeechTask): void {
    if (task.status !== "succeeded" || task.attempt !== 1) return;
    this.observed.sample(entry, expectedSpeechMs(task.input.text, task.input.speed), {
      from: task.created_at,
      to: task.finished_at,
    });
  }

  /**
   * A list page costs what a single look does and tells of every line followed, and of the lines
   * created a moment later (a single look at the first of a wave would be followed by a list).
   */
  protected override useList(due: readonly Entry<SpeechTask>[]): boolean {
    return due.length > 0;
  }

  /**
   * The list is newest first by the spec and filtered from the oldest due task on. Pages are
   * walked by the items received (a page may come back short), until every due task was seen,
   * `total` is reached, or as many pages as the followed tasks could fill plus a margin were read.
   */
  protected async pollMany(due: Entry<SpeechTask>[]): Promise<void> {
    const waiting = new Set(due.map((e) => e.taskId));
    const oldest = Math.min(...due.map((e) => e.createdAt));
    const followed = this.entries.size;
    let othersOpen = 0;
    let pageLength = PAGE_SIZE;
    let offset = 0;
    for (let pages = 1; waiting.size > 0; pages++) {
      this.requests += 1;
      const list = await this.client.listPage(
        offset,
        { startTime: Math.max(1, oldest - 60), limit: PAGE_SIZE },
        { signal: this.signal },
      );
      othersOpen += this.takePage(list.items, waiting);
      offset += list.items.length;
      if (list.items.length === 0 || offset >= list.total) break;
      pageLength = Math.min(pageLength, list.items.length);
      if (pages >= Math.ceil((followed + othersOpen) / pageLength) + PAGE_MARGIN) break;
    }
    await this.fallback(due, waiting);
  }
}
