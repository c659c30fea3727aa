// What a job's life is given: the clients and trackers, the sink and stager, the journal and ledger,
// what create bodies are made of, and the run's stop and its ways to report trouble.
import type { Logger } from "pino";
import type { Clients } from "../api/index.js";
import type { PointsLedger } from "../budget/ledger.js";
import type { SpeechPricer } from "../budget/pricing.js";
import type { Job } from "../manifest/index.js";
import type { Trackers, VoiceRef } from "../services/index.js";
import type { MaterialStager } from "../services/staging.js";
import type { Sink } from "../sinks/sink.js";
import type { StateStore } from "./types.js";

export interface JobContext {
  clients: Clients;
  sink: Sink;
  stager: MaterialStager;
  journal: StateStore;
  ledger: PointsLedger;
  pricer: SpeechPricer;
  /**
   * With a points cap, each speech create is priced by a pricing read made after the previous
   * create was answered, one at a time: only a price change between that read and the create can
   * then carry the run past its cap, and the task's own cost stops the run as soon as it shows.
   */
  exactSpeechPricing: boolean;
  trackers: Trackers;
  callback?: { url: string; token: string };
  name: string;
  maxAttempts: number;
  /** `--retry-failed`: a failed job gets a new task (once its paid result was fetched again, if any). */
  retryFailed?: boolean;
  /** Overrides the per-result size limit derived from each job (`--max-result-mb`). */
  maxResultBytes?: number;
  skillIds: Map<string, string>;
  voiceRefs: Map<string, VoiceRef>;
  /** Interrupt: stops everything, saves state. */
  signal: AbortSignal;
  log: Logger;
  progress: (job?: Job) => void;
  /** A journal write failed: the run cannot go on without losing track. */
  fail: (error: unknown) => void;
  /** A call failed after every retry: the run decides whether the service is gone (then it ends `unreachable`). */
  unavailable?: (error: unknown) => void;
  /** A result was stored (the review page's still of a video is made meanwhile). */
  onStored?: (job: Job, output: { uri: string; sha256: string }) => void;
  /** The store cannot be reached: the run stops, state saved (it ends `unreachable`). */
  unreachable?: (error: unknown) => void;
}
