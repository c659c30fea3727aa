// One shape for the two services: what a job's life asks of the service that runs it (its create
// body, the create, reads, tracking, what a task's status, result, cost and failure mean, and its
// nominal length). The rest of clapper picks the service once, by the job's kind, and never tells
// video from speech again.
import type { Clients } from "../api/index.js";
import type { SpeechTask } from "../api/speech.js";
import type { VideoTask } from "../api/video.js";
import type { SpeechPrice } from "../budget/pricing.js";
import type { Job } from "../manifest/index.js";
import type { ResultLimitJob } from "../results/size-policy.js";
import type { SpeechPoller } from "../tracking/speech-poller.js";
import type { TrackHint } from "../tracking/track.js";
import type { VideoPoller } from "../tracking/video-poller.js";
import { type SpeechService, speechService, type VoiceRef } from "./speech.js";
import type { MaterialStager } from "./staging.js";
import { type VideoService, videoService } from "./video.js";

export type Kind = Job["kind"];
export type ServiceTask = VideoTask | SpeechTask;
export type ServiceClients = Pick<Clients, "video" | "speech">;
export interface Trackers {
  video: VideoPoller;
  speech: SpeechPoller;
}

/** What a create body is made of beyond the job: staged materials, synced skills, uploaded voices. */
export interface BodyInputs {
  stager: MaterialStager;
  skillIds: Map<string, string>;
  voiceRefs: Map<string, VoiceRef>;
  /** Where the service posts a task's news (only a service that calls back uses it). */
  callback?: { url: string; token: string } | undefined;
}

interface CreateCall {
  idempotencyKey: string;
  signal: AbortSignal;
  rank?: number;
  queueSignal?: AbortSignal;
}

interface TaskFailure {
  code: string;
  message: string;
}

/**
 * A service as a job's life sees it. `J` is its kind of job and `T` its kind of task; the pipeline
 * holds `TaskService` (every job, every task) and only ever hands a service its own jobs and tasks.
 * Methods, not function properties: their parameters compare both ways, which is what lets either
 * service stand for `TaskService`.
 */
export interface TaskService<J extends Job = Job, T extends ServiceTask = ServiceTask> {
  readonly kind: Kind;
  /** The manifest's word for a row of this kind: `--only shot/s01`, `--only line/n01`. */
  readonly row: "shot" | "line";
  /**
   * Whether each create is priced by a price read at run time (a line's points per character are
   * the service's to change); otherwise the job's own estimate, fixed by its request, is reserved.
   */
  readonly pricedAtCreate: boolean;
  /** The media type its results are stored as. */
  readonly contentType: string;
  /** Said when a succeeded task gives no result URL: how long the service keeps results, if it says. */
  readonly retention: string;

  /** The points a create of `job` is reserved at, with the speech price as read now. */
  estimate(job: J, price: SpeechPrice): number;
  /** How long its task should take at the service's nominal pace (orders the creates, longest first). */
  nominalMs(job: J): number;
  /** The create body, materials staged where the service can fetch them. */
  body(job: J, inputs: BodyInputs, signal: AbortSignal): Promise<unknown>;
  create(clients: ServiceClients, body: unknown, call: CreateCall): Promise<string>;
  get(clients: ServiceClients, taskId: string, call: { signal?: AbortSignal }): Promise<T>;
  /** Reads a succeeded (paid) task for its result URL. */
  getPaid(clients: ServiceClients, taskId: string, signal: AbortSignal): Promise<T>;
  cancel(
    clients: ServiceClients,
    taskId: string,
    call: { signal?: AbortSignal },
  ): Promise<{ status: string }>;
  /** The statuses its tasks may have. */
  readonly statuses: ReadonlySet<string>;
  /**
   * At least the `limit` newest tasks (fewer when there are fewer), each once, in no set order,
   * and what to warn of when the service did not serve them all.
   */
  listNewest(
    clients: ServiceClients,
    status: string | undefined,
    limit: number,
    call: { signal?: AbortSignal },
  ): Promise<{ items: T[]; warning?: string }>;
  /** Follows a task to its end through the run's tracker of this service. */
  track(
    trackers: Trackers,
    taskId: string,
    createdAt: number,
    onUpdate?: (task: T) => void,
    hint?: TrackHint,
  ): Promise<T>;
  /** What the tracker is told of the job's task before its first look. */
  trackHint(job: J): TrackHint | undefined;

  id(task: T): string;
  status(task: T): string;
  /** Unix seconds, as the service states them. */
  createdAt(task: T): number;
  resultUrl(task: T): string | undefined;
  /** What the task is, in a few words (a list's DETAIL column). */
  detail(task: T): string;
  /** The message a failed task gives, when it gives one. */
  errorMessage(task: T): string | undefined;
  /** What a failed task says went wrong. */
  failure(task: T): TaskFailure;
  /** The cost a task states of itself while it runs, when the service states one. */
  statedCost(task: T): number | undefined;
  /**
   * What the task cost, read from the task alone (when whose request it ran cannot be told);
   * undefined when the service states a cost that cannot be.
   */
  taskCost(task: T): number | undefined;
  /** What a succeeded task of `job` cost; undefined when the service states a cost that cannot be. */
  cost(job: J, task: T): number | undefined;
  /** The resolution a job asked for, when its service delivers one. */
  requested(job: J): string | undefined;
  /** The resolution the task delivered, when its service states one. */
  delivered(task: T): string | undefined;
  /** Points a succeeded task is charged when it delivered less than asked (a failed upscale). */
  fallbackPoints(job: J): number | undefined;
  /** What the result's size limit is derived from. */
  resultLimit(job: J): ResultLimitJob;
  /** The length the result must have, when the request fixes it. */
  expectedSeconds(job: J): number | undefined;
  /** The shot a job belongs to (its own row, or the shot a line names), if any. */
  shot(job: J): string | undefined;
}

const SERVICES: { readonly video: VideoService; readonly speech: SpeechService } = {
  video: videoService,
  speech: speechService,
};

/** The service that runs jobs and tasks of `kind`. */
export function serviceFor(kind: Kind): TaskService {
  return SERVICES[kind];
}

/** What jobs of each kind have, as a table: one entry a kind, looked up by the job's kind. */
type ByKind<R> = { readonly [K in Kind]: (job: Extract<Job, { kind: K }>) => R };

/** `table`'s entry for the job's kind, given the job. */
export function byKind<R>(job: Job, table: ByKind<R>): R {
  return (table[job.kind] as (job: Job) => R)(job);
}

/** The jobs of one kind, typed as such: for what only one service has (skills, voices, resolutions). */
export function jobsOf<K extends Kind>(jobs: readonly Job[], kind: K): Array<Extract<Job, { kind: K }>> {
  return jobs.filter((job): job is Extract<Job, { kind: K }> => job.kind === kind);
}

export { type VoiceRef, validCost, voiceHash } from "./speech.js";
