// The run's progress for the live display: counts kept up to date job by job (O(1) per change), and
// a snapshot handed over at every change, only when someone listens (the display throttles its own
// redraws). Synchronous on purpose: a listener sees each change before the run goes on.
import type { JobState } from "../engine/state.js";
import type { Phase, Progress } from "./types.js";

type Status = JobState["status"];
type Kind = "video" | "speech";

export interface FeedSources {
  total: number;
  reused: number;
  cap?: number;
  ledger: () => { reserved: number; spent: number };
  inFlight: (kind: Kind) => ReadonlyArray<{ since: number; remaining?: { seconds: number; at: number } }>;
  durations: (kind: Kind) => readonly number[];
  inFlightLimit: { video: number; speech: number };
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

export class ProgressFeed {
  private phase: Phase = "planning";
  private sources: FeedSources | undefined;
  private readonly counts = { ...EMPTY_COUNTS };
  private readonly byKind = { video: { ...EMPTY_COUNTS }, speech: { ...EMPTY_COUNTS } };
  private readonly seen = new Map<string, { kind: Kind; status: Status }>();

  constructor(
    private readonly emit: ((progress: Progress) => void) | undefined,
    private readonly startedAt: number,
  ) {}

  /** The jobs are known: from here the phase follows what the jobs are doing. */
  start(sources: FeedSources, jobs: ReadonlyArray<{ id: string; kind: Kind; status: Status }>): void {
    this.sources = sources;
    for (const job of jobs) this.job(job.id, job.kind, job.status, false);
  }

  /** A job's status now; returns what it was (for the caller's own rules, e.g. --max-failures). */
  job(id: string, kind: Kind, status: Status, publish = true): Status | undefined {
    const was = this.seen.get(id);
    if (was?.status !== status) {
      if (was) {
        this.counts[was.status] -= 1;
        this.byKind[was.kind][was.status] -= 1;
      }
      this.counts[status] += 1;
      this.byKind[kind][status] += 1;
      this.seen.set(id, { kind, status });
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

  private snapshot(): Progress {
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
    const queued = (kind: Kind) => this.byKind[kind].pending + this.byKind[kind].submitting;
    return {
      phase: this.currentPhase(),
      startedAt: this.startedAt,
      counts: { ...this.counts },
      reused: s.reused,
      total: s.total,
      reserved: ledger.reserved,
      spent: ledger.spent,
      ...(s.cap !== undefined ? { cap: s.cap } : {}),
      inFlight,
      durations: { video: s.durations("video"), speech: s.durations("speech") },
      queued: { video: queued("video"), speech: queued("speech") },
      inFlightLimit: s.inFlightLimit,
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
