// The run's progress for the live display: counts kept up to date job by job (O(1) per change), and
// a snapshot handed over at every change, only when someone listens (the display throttles its own
// redraws). Synchronous on purpose: a listener sees each change before the run goes on.
//
// The counts are those the run's report will give, so that the live line and the summary printed
// under it agree: a job is "generated" when this campaign (every process of the run, an
// interrupted one included) made its result, "reused" when its result is an earlier run's, and the
// points spent are the campaign's, not only this process's.

import { campaignStart, madeIn } from "../report/build.js";
import { type JobState, type RunState, spentPoints } from "../state/run-state.js";
import type { Phase, Progress } from "./types.js";

type Status = JobState["status"];
type Kind = "video" | "speech";

interface FeedSources {
  total: number;
  /** The run's state as the journal has it now: whether a stored result is this run's or reused. */
  state: () => RunState;
  /** The jobs this run works on (the others are left as they stand: reused, failed, not selected). */
  work: ReadonlySet<string>;
  cap?: number;
  ledger: () => { reserved: number; spent: number };
  inFlight: (kind: Kind) => ReadonlyArray<{ since: number; remaining?: { seconds: number; at: number } }>;
  durations: (kind: Kind) => readonly number[];
  inFlightLimit: { video: number; speech: number };
}

/**
 * What the live line shows beyond the run's `Progress`, in the words of the report: the jobs this
 * run is to generate, and the unfinished ones it leaves alone (outside `--only`).
 */
export interface FeedProgress extends Progress {
  /** Jobs this run generates (or generated already, in an earlier process of it). */
  work: number;
  /** Jobs not finished that this run does not work on (not selected by `--only`). */
  idle: number;
  /**
   * Rows removed from the manifest that the report lists as cancelled (their tasks were paid for
   * in this run, or are still followed).
   */
  removed: number;
}

const EMPTY_COUNTS: Progress["counts"] = {
  pending: 0,
  submitting: 0,
  running: 0,
  collecting: 0,
  stored: 0,
  failed: 0,
  cancelled: 0,
};

const UNFINISHED: ReadonlySet<Status> = new Set(["pending", "submitting", "running", "collecting"]);

interface Seen {
  kind: Kind;
  status: Status;
  reused: boolean;
  /** Unfinished, and not this run's work. */
  idle: boolean;
  /** Among the jobs this run works on. */
  work: boolean;
}

export class ProgressFeed {
  private phase: Phase = "planning";
  private sources: FeedSources | undefined;
  private readonly counts = { ...EMPTY_COUNTS };
  private readonly byKind = { video: { ...EMPTY_COUNTS }, speech: { ...EMPTY_COUNTS } };
  private readonly idleByKind = { video: 0, speech: 0 };
  private readonly seen = new Map<string, Seen>();
  private reused = 0;
  /** Jobs of the work that ended reused (found in the store, or an auto shot whose fit kept it). */
  private reusedWork = 0;
  /** Stored results this campaign made before this process started (an interrupted run's). */
  private madeBefore = 0;
  private removed = 0;
  /** What the campaign spent before this process: the ledger counts this process's spending only. */
  private spentBefore = 0;
  private campaign = 0;
  /** When the campaign began (ms): a result stored since is this campaign's. */
  private since: number | undefined;

  constructor(
    private readonly emit: ((progress: Progress) => void) | undefined,
    private readonly startedAt: number,
  ) {}

  /** The jobs are known: from here the phase follows what the jobs are doing. */
  start(sources: FeedSources, jobs: ReadonlyArray<{ id: string; kind: Kind; status: Status }>): void {
    this.sources = sources;
    const state = sources.state();
    this.campaign = state.campaign;
    this.since = campaignStart(state);
    const planned = new Set<string>();
    for (const job of jobs) {
      planned.add(job.id);
      this.job(job.id, job.kind, job.status, false);
      const seen = this.seen.get(job.id);
      if (seen?.status === "stored" && !seen.reused && !sources.work.has(job.id)) this.madeBefore += 1;
    }
    for (const st of Object.values(state.jobs)) {
      this.spentBefore += spentPoints(st, this.campaign);
      // Listed by the report as cancelled rows: paid for in this run, or still followed.
      if (
        !planned.has(st.id) &&
        (spentPoints(st, this.campaign) > 0 || st.attempts.some((a) => a.spent === undefined))
      )
        this.removed += 1;
    }
  }

  /** A job's status now; returns what it was (for the caller's own rules, e.g. --max-failures). */
  job(id: string, kind: Kind, status: Status, publish = true): Status | undefined {
    const was = this.seen.get(id);
    const now = this.classify(id, kind, status);
    if (!was || was.status !== now.status || was.reused !== now.reused) {
      if (was) this.count(was, -1);
      this.count(now, 1);
      this.seen.set(id, now);
    }
    if (publish) this.flush();
    return was?.status;
  }

  setPhase(phase: Phase): void {
    this.phase = phase;
    this.flush();
  }

  flush(): void {
    if (!this.emit) return;
    try {
      this.emit(this.snapshot());
    } catch {
      // A display that fails must not fail the job whose change it was shown.
    }
  }

  private classify(id: string, kind: Kind, status: Status): Seen {
    const s = this.sources;
    const st = status === "stored" ? s?.state().jobs[id] : undefined;
    const work = s?.work.has(id) ?? false;
    return {
      kind,
      status,
      reused: st !== undefined && !madeIn(st, this.campaign, this.since),
      idle: s !== undefined && UNFINISHED.has(status) && !work,
      work,
    };
  }

  private count(seen: Seen, by: 1 | -1): void {
    this.counts[seen.status] += by;
    this.byKind[seen.kind][seen.status] += by;
    if (seen.idle) this.idleByKind[seen.kind] += by;
    if (seen.reused) this.reused += by;
    if (seen.reused && seen.work) this.reusedWork += by;
  }

  private snapshot(): FeedProgress {
    const s = this.sources;
    if (!s) {
      return {
        phase: this.phase,
        startedAt: this.startedAt,
        counts: { ...EMPTY_COUNTS },
        reused: 0,
        total: 0,
        reserved: 0,
        spent: 0,
        inFlight: [],
        durations: { video: [], speech: [] },
        queued: { video: 0, speech: 0 },
        inFlightLimit: { video: 0, speech: 0 },
        work: 0,
        idle: 0,
        removed: 0,
      };
    }
    const ledger = s.ledger();
    const inFlight = (["video", "speech"] as const).flatMap((kind) =>
      s.inFlight(kind).map((t) => ({
        kind,
        createdAt: t.since,
        ...(t.remaining ? { remaining: t.remaining } : {}),
      })),
    );
    // Jobs left alone wait for nothing: they are not queued work, and the ETA does not wait for them.
    const queued = (kind: Kind) =>
      Math.max(0, this.byKind[kind].pending + this.byKind[kind].submitting - this.idleByKind[kind]);
    return {
      phase: this.currentPhase(),
      startedAt: this.startedAt,
      counts: { ...this.counts },
      reused: this.reused,
      total: s.total,
      reserved: ledger.reserved,
      spent: this.spentBefore + ledger.spent,
      ...(s.cap !== undefined ? { cap: s.cap } : {}),
      inFlight,
      durations: { video: s.durations("video"), speech: s.durations("speech") },
      queued: { video: queued("video"), speech: queued("speech") },
      inFlightLimit: s.inFlightLimit,
      work: s.work.size + this.madeBefore - this.reusedWork,
      idle: this.idleByKind.video + this.idleByKind.speech,
      removed: this.removed,
    };
  }

  /** While jobs run, the phase is what the busiest part of the work is doing. */
  private currentPhase(): Phase {
    if (this.phase !== "submitting") return this.phase;
    const c = this.counts;
    if (c.submitting > 0) return "submitting";
    if (c.running > 0) return "waiting";
    if (c.collecting > 0) return "collecting";
    return "submitting";
  }

  /** The counts of this moment (a copy). */
  get current(): Progress["counts"] {
    return { ...this.counts };
  }
}
