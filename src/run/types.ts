// The run's shapes: what a caller gives `run()` and what it gets back, the progress it hears, and
// the seams a second machine replaces (the lock, the state store, the ledger, the request gate, the
// sink). Today's implementations are the defaults (src/run/context.ts).
import type { Logger } from "pino";
import type { Clients } from "../api/index.js";
import type { SpeechTask } from "../api/speech.js";
import type { VideoTask } from "../api/video.js";
import type { PointsLedger } from "../budget/ledger.js";
import type { Lock, LockOptions } from "../locks/file-lock.js";
import type { Problem } from "../manifest/index.js";
import { DEFAULT_CEILING_RPS } from "../rate/controller.js";
import type { ServiceLimits, TaskLimit } from "../rate/limiter.js";
import type { Report } from "../report/model.js";
import type { MaterialStager } from "../services/staging.js";
import type { S3ClientOptions } from "../sinks/s3.js";
import type { Sink } from "../sinks/sink.js";
import type { LocatedRun } from "../state/locate.js";
import type { RepairInput } from "../state/repair.js";
import type { RunRecord, RunState } from "../state/run-state.js";
import type { Sightings, TrackOptions } from "../tracking/track.js";
import type { BudgetRow } from "./admit.js";
import type { RunEnd, RunEndOrBug } from "./end.js";
import type { Shard } from "./shard.js";

/** The run's state: what happened, record by record, and the state those records make. */
export interface StateStore {
  readonly state: RunState;
  /** `durable`: on disk (or wherever it lives) before the promise settles; write-ahead depends on it. */
  append(record: RunRecord, options?: { durable?: boolean }): Promise<void>;
  /** Not one more record: another process writes this state now. */
  freeze(): void;
  /** Before `--fresh` changes the state: a copy of it as it was, kept. */
  keepCopy?(): Promise<void>;
  close(): Promise<void>;
}

/** What opening the state may need besides its path. */
export interface StateOpenOptions {
  /** The run lock's fencing token and its coordinator's data generation (a state in S3 names its writes by it). */
  fence?: number;
  generation?: string;
  /** The S3 client's settings (`--s3-endpoint`), for a state in S3. */
  s3?: S3ClientOptions;
  /** `--repair-state`: a damaged journal is rebuilt from its readable lines before it is opened. */
  repair?: RepairInput;
}

/** Tasks in flight per service, around each job's life. */
export interface RunGate {
  video: { tasks: TaskLimit };
  speech: { tasks: TaskLimit };
  stop(): Promise<void>;
}

/**
 * What the stages use and a coordinator (or a test) may replace. The defaults: a lease file beside
 * the state, the journal file, a ledger in this process, and the folder or S3 of the output.
 */
export interface Seams {
  lock(path: string, options: LockOptions): Promise<Lock>;
  openState(path: string, options?: StateOpenOptions): Promise<StateStore>;
  ledger(input: LedgerInput): PointsLedger | Promise<PointsLedger>;
  /** With a coordinator: what the account's other processes read of tasks, and what this one reads. */
  sightings?: { video: Sightings<VideoTask>; speech: Sightings<SpeechTask> };
  /**
   * With a coordinator: holds `points` of a run's shared cap for this process when they fit (a
   * shard's admission, exact when shards are admitted at once); 0 lets go of the rest.
   */
  holdRun?(
    run: { key: string; name: string; cap: number },
    points: number,
  ): Promise<{ ok: boolean; committed: number }>;
  /** With a coordinator and a `budget.pool`: what the pool has committed in its current period. */
  pool?(): Promise<PoolStanding | undefined>;
  outputs(
    options: Pick<RunOptions, "output" | "staging" | "s3">,
    manifest: { dir: string; name: string; output?: string },
    cwd: string,
  ): { sink: Sink; stager: MaterialStager };
}

/** A named budget pool as the coordinator holds it now. */
export interface PoolStanding {
  name: string;
  period: "day" | "week" | "month" | "total";
  /** `2026-11-25`, `2026-W48`, `2026-11` or `total`. */
  periodId: string;
  cap: number;
  /** Reserved and spent in this period, by every run that names the pool. */
  committed: number;
}

/** What a run's ledger starts from, once the run is admitted. */
export interface LedgerInput {
  /** Points this run may still commit: its cap less what it spent, and no more than the balance. */
  cap: number;
  /** Points held by attempts an earlier process left open (the service holds them too). */
  openReserved: number;
  /** Those attempts, by idempotency key: a shared ledger keeps (or restores) their reservations. */
  open: ReadonlyArray<{ id: string; points: number }>;
  /**
   * What the journal knows of an attempt, by key: a shared ledger that still holds a reservation
   * the journal has settled (its process lost the coordinator before it could say so) settles it.
   */
  attempt(id: string): { reserved: number; spent?: number } | undefined;
  /**
   * The run as the coordinator names it: its state's id, its manifest's name and campaign, and the
   * key of its shared cap (`runLedgerKey`).
   */
  run: { state: string; name: string; campaign: number; key: string };
  /**
   * The coordinator lost its data since this journal last used it (its generation changed): the
   * journal's settled spending, to be counted again in the shared budgets.
   */
  restore?: Array<{ id: string; spent: number; at: number; thisCampaign: boolean }>;
  /** The run's own points cap (`budget.max_points`, `--max-points`), before this run's spending. */
  maxPoints?: number;
}

export interface RunOptions {
  manifest: string;
  cwd?: string;
  clients: Clients;
  /** The run, located already by the caller (the CLI needs its state folder before connecting). */
  located?: LocatedRun;
  /** Output folder or s3://bucket/prefix overriding the manifest's `output`; a folder is relative to cwd. */
  output?: string;
  /** Where local materials are staged for the services to fetch (s3://...); default: beside an S3 output. */
  staging?: string;
  /** S3-compatible endpoint (`--s3-endpoint`); otherwise the AWS SDK's configuration. */
  s3?: S3ClientOptions;
  /** Journal file, or s3://BUCKET/PREFIX; default `.clapper/<name>/state.jsonl` beside the manifest. */
  statePath?: string;
  /** Work on one shard of the manifest (its own state and reports); ignored when `located` is given. */
  shard?: Shard;
  /** Take the run's lock even when another process seems to hold it (`--break-lock`). */
  breakLock?: boolean;
  /** The lock's lease and heartbeat (defaults: 30 s and 5 s); tests use short ones. */
  lease?: { leaseMs: number; heartbeatMs: number };
  maxPoints?: number;
  /** Job ids (or row ids, or id prefixes like `shot/s02`) to work on; the rest are left as they are. */
  only?: string[];
  retryFailed?: boolean;
  fresh?: boolean;
  /** `--no-stills`: report.html without stills (no ffmpeg beside the run); `clapper report` can make them later. */
  stills?: boolean;
  /** `--repair-state`: rebuild a damaged state from its readable lines (see state/repair.ts). */
  repairState?: boolean;
  /** Attempts per job in one run, the first included. */
  maxAttempts?: number;
  /** Per-result download limit in bytes, instead of the one derived from each job (`--max-result-mb`). */
  maxResultBytes?: number;
  limits?: { video: ServiceLimits; speech: ServiceLimits };
  track?: Partial<TrackOptions>;
  /**
   * Video status callbacks: the service posts to `url`, which must reach the listener started at
   * `listen` (directly, or through a tunnel or proxy). Polling goes on as a slow safety net.
   */
  callback?: { url: string; listen: { host: string; port: number } };
  /** Aborting stops submissions, saves state and ends the run as interrupted. */
  signal?: AbortSignal;
  logger: Logger;
  onProgress?: (progress: Progress) => void;
  env?: NodeJS.ProcessEnv;
  /** Gate shared with the clients' HTTP layer; created here when absent. */
  gate?: RunGate;
  /** Replacements for the defaults of the seams (a coordinator, or in-memory fakes in tests). */
  seams?: Partial<Seams>;
  /** Stop submitting once too many jobs failed; what is in flight ends as `jobs-failed`. */
  maxFailures?: MaxFailures;
  /** Stop submitting and waiting at this time; state saved; the run ends `interrupted`. */
  deadline?: Date;
  /**
   * Aborted (with the error as its reason) when a dependency outside the run is lost, the
   * coordinator: the run halts as for an unreachable service, state saved, `unreachable`.
   */
  lost?: AbortSignal;
  /**
   * The exit code the caller will end with for each end (the CLI's `exitCodeOf`): the run's last
   * log line states it, so that the log never says a code the process does not end with. Passed in
   * rather than imported, because only the CLI knows exit codes.
   */
  exitCodeOf: (end: RunEndOrBug) => number;
}

/** What the run is doing now, for the live display. */
export type Phase = "planning" | "pre-flight" | "submitting" | "waiting" | "collecting" | "reporting";

export interface Progress {
  phase: Phase;
  /** When the run started (epoch ms), before planning. */
  startedAt: number;
  counts: Record<
    "pending" | "submitting" | "running" | "collecting" | "stored" | "failed" | "cancelled",
    number
  >;
  /** Jobs reused from an earlier run (counted in `stored` too): not work of this run. */
  reused: number;
  total: number;
  reserved: number;
  spent: number;
  /** The run's points cap, when it has one. */
  cap?: number;
  /**
   * Tasks of this run in flight now: their kind, when they were created (epoch ms) and, for video,
   * the service's own `estimated_remaining_seconds` at the last look (and when that look was).
   */
  inFlight: ReadonlyArray<{
    kind: "video" | "speech";
    createdAt: number;
    remaining?: { seconds: number; at: number };
  }>;
  /** Tasks of this run that ended, per kind: how long each took from create to end (ms). */
  durations: { video: readonly number[]; speech: readonly number[] };
  /** Jobs of this run not created yet, per kind (waiting for a slot or not started). */
  queued: { video: number; speech: number };
  /** Tasks in flight allowed per service. */
  inFlightLimit: { video: number; speech: number };
}

/** `--max-failures N|P%`: stop submitting once more than this many jobs (or this share of ended jobs) failed. */
export type MaxFailures = { count: number } | { percent: number };

/** Why a run stopped submitting before it had done all its work. */
export type StoppedBy = "max-failures" | "deadline" | "unreachable" | "budget" | "signal";

export interface RunOutcome {
  /** Why the run ended; the CLI says it as an exit code. */
  end: RunEnd;
  message?: string;
  /** Why the run stopped before doing all its work (also in the report's `run.stopped_by`). */
  stoppedBy?: StoppedBy;
  errors?: Problem[];
  warnings?: Problem[];
  budget?: BudgetRow[];
  report?: Report;
  reportUris?: string[];
  statePath?: string;
  /** Requests made by the trackers (the run's polling cost). */
  pollRequests?: number;
  /** The campaign this run finished (set when it ended, not when interrupted): names a sharded run. */
  finishedCampaign?: number;
}

/**
 * Tasks in flight per service. The services queue tasks themselves, so the cap is not about them:
 * it bounds what this process holds. A task in flight holds a promise and a few kilobytes while it
 * is followed; sockets and files are held only while a result streams, and those are bounded by
 * the HTTP pools (64 connections to the API's origin, 16 to each result origin), not by this cap.
 * Points at risk need no cap of their own: the whole run's cost is admitted before the first
 * create, and a killed run's tasks are resumed and collected, not lost. What the cap still bounds
 * is how much is already under way when `--max-failures` stops new creates, and the memory of a
 * huge run: 512 per service lets a 1,000-job run start everything at once (at 128, 72 of 200
 * shots waited for a slot and the 400-job makespan was 3.3x the bound).
 */
export const DEFAULT_IN_FLIGHT = 512;

export const DEFAULT_LIMITS = {
  video: { rps: DEFAULT_CEILING_RPS, inFlight: DEFAULT_IN_FLIGHT },
  speech: { rps: DEFAULT_CEILING_RPS, inFlight: DEFAULT_IN_FLIGHT },
} as const satisfies { video: ServiceLimits; speech: ServiceLimits };

/**
 * The key of a run's cap in the coordinator: one state's campaign; for a shard, the campaign of
 * the manifest split in N, which all N shards share (each keeps its own state and campaign count,
 * equal as long as the shards run together).
 */
export function runLedgerKey(o: {
  state: string;
  name: string;
  campaign: number;
  shard?: { total: number } | undefined;
}): string {
  return o.shard ? `shards:${o.name}:${o.shard.total}:${o.campaign}` : `${o.state}:${o.campaign}`;
}
