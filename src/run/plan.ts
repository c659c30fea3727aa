// `plan`: load and check a manifest, estimate every job's points, and, when the services are
// reachable, check voices and skills against them and the total against the balance and budget;
// with the run's state (read by the caller), what the next run generates, reuses and reserves.
// Never creates a task, never writes the state.
import type { PointsSummary } from "../api/common.js";
import { type Clients, collectList, type ListResult } from "../api/index.js";
import type { ResolutionTier } from "../api/video.js";
import { PriceError, priceFrom, SpeechDisabledError } from "../budget/pricing.js";
import { type Job, type LoadedManifest, loadManifest, type Problem, unfitted } from "../manifest/index.js";
import { KEPT_PROBLEMS } from "../manifest/problems.js";
import { jobsOf, serviceFor } from "../services/index.js";
import {
  type JobState,
  openAttempt,
  paidNotStored,
  type RunRecord,
  type RunState,
} from "../state/run-state.js";
import { startStep } from "../trace.js";
import { admit, declaration, type StoreEntry } from "./admit.js";
import { inShard, type Shard } from "./shard.js";

export interface PlanOptions {
  manifest: string;
  cwd?: string;
  /** When given, prices, balance, voices and skills are read from the services. */
  clients?: Pick<Clients, "video" | "speech">;
  /** Points per 10 counted characters when the service cannot be asked. */
  speechPrice?: number;
  signal?: AbortSignal;
  /** The manifest, loaded already (offline) by the caller: only priced here, not read again. */
  loaded?: LoadedManifest;
  /** Plan this shard's jobs only (its counts and points are the shard's). */
  shard?: Shard | undefined;
}

export interface PlanResult extends LoadedManifest {
  points: { video: number; speech: number | null; total: number | null };
  counts: { video: number; speech: number; total: number };
  byResolution: Partial<Record<ResolutionTier, { jobs: number; points: number }>>;
  speechPrice: { value: number | null; source: "service" | "option" | "unknown"; countedChars: number };
  balance?: PointsSummary;
  budget?: number;
  /**
   * `duration: auto` shots not fitted yet: their points are estimates; the run admits them at the
   * longest duration they could get, so `fits` is judged on `atMost` (the total with those).
   */
  auto?: { shots: number; estimated: number; atMost: number | null };
  /** Whether the total fits both the balance (when known) and the budget (when set). */
  fits?: boolean;
  /** The shard planned, when one was asked for: `jobs` are its own. */
  shard?: Shard;
}

export async function plan(options: PlanOptions): Promise<PlanResult> {
  const call = options.signal ? { signal: options.signal } : {};
  // Every question to the services at once: the price and the balance are asked while the manifest
  // is read (offline, its lines priced once the price is known), the voices and the skills as soon
  // as it is read. A failure is the one it was when they were asked one after another.
  const asked = readPrices(options, call);
  // Handled now, not only once the manifest is read: a refusal that comes first (a malformed
  // pricing answer) would otherwise be an unhandled rejection, which ends the process.
  asked.catch(() => undefined);
  let unpriced: LoadedManifest;
  try {
    unpriced =
      options.loaded ?? (await loadManifest(options.manifest, options.cwd ? { cwd: options.cwd } : {}));
  } catch (error) {
    await asked.catch(() => undefined);
    throw error;
  }
  const checked =
    options.clients && unpriced.manifest
      ? serviceChecks(
          unpriced.jobs,
          unpriced.manifest.skills.map((s) => s.name),
          options.clients,
          call,
        )
      : Promise.resolve([]);
  const [{ speechPrice, balance, priceFault, speechOff, optionProblems }, found] = await allInOrder([
    asked,
    checked,
  ] as const);
  const whole = priced(unpriced, speechPrice.value);
  const shard = options.shard;
  const loaded = shard ? { ...whole, jobs: whole.jobs.filter((job) => inShard(job, shard)) } : whole;
  const errors = [...optionProblems, ...loaded.errors];
  // A voice or skill not among what an incomplete list served is a warning, never an error.
  const warnings = [...loaded.warnings, ...found.filter((p) => p.severity === "warning")];
  let omittedErrors =
    (loaded.omitted?.errors ?? 0) +
    keepBounded(
      errors,
      found.filter((p) => p.severity === "error"),
    );
  const lines = jobsOf(loaded.jobs, "speech");
  // A price the service states that cannot be used is its fault, not the manifest's: said once the
  // manifest itself is sound (ends `unreachable`), and only when there are lines to price.
  if (lines.length > 0) omittedErrors += keepBounded(errors, speechOff);
  if (lines.length > 0 && priceFault && errors.length === 0) throw priceFault;

  const { video, speech, byResolution, countedChars } = tally(loaded.jobs);
  speechPrice.countedChars += countedChars;
  const total = speech === null ? null : video + speech;
  const budget = loaded.manifest?.maxPoints;
  const auto = autoTally(loaded.jobs, total);
  const fits = fitsIn(auto ? auto.atMost : total, balance, budget);
  const omitted =
    omittedErrors + (loaded.omitted?.warnings ?? 0) > 0
      ? { omitted: { errors: omittedErrors, warnings: loaded.omitted?.warnings ?? 0 } }
      : {};
  return {
    ...loaded,
    ...omitted,
    errors,
    warnings,
    points: { video, speech, total },
    counts: { video: loaded.jobs.length - lines.length, speech: lines.length, total: loaded.jobs.length },
    byResolution,
    speechPrice,
    ...(balance ? { balance } : {}),
    ...(budget !== undefined ? { budget } : {}),
    ...(auto ? { auto } : {}),
    ...(fits !== undefined ? { fits } : {}),
    ...(shard ? { shard: { index: shard.index, total: shard.total } } : {}),
  };
}

interface Prices {
  speechPrice: PlanResult["speechPrice"];
  balance: PointsSummary | undefined;
  /** A price the service gave that cannot be used: a fault only for a manifest with lines. */
  priceFault?: PriceError;
  /** Speech billing is off for the account: a problem only for a manifest with lines. */
  speechOff: Problem[];
  optionProblems: Problem[];
}

/** The speech price and the balance: from the services when reachable, else `--speech-price`. */
async function readPrices(options: PlanOptions, call: { signal?: AbortSignal }): Promise<Prices> {
  const prices: Prices = {
    speechPrice: { value: null, source: "unknown", countedChars: 0 },
    balance: undefined,
    optionProblems: [],
    speechOff: [],
  };
  if (options.clients) {
    // One read answers both: the balance is the account's, shared by the services, and the speech
    // pricing carries it (the spec's pricing-and-balance object), so the video summary is not asked.
    const pricing = await options.clients.speech.pricing(call);
    startStep("pricing and balance answered");
    prices.balance = pricing.balance;
    try {
      prices.speechPrice = { value: priceFrom(pricing).perTen, source: "service", countedChars: 0 };
    } catch (error) {
      if (error instanceof SpeechDisabledError) {
        prices.speechOff.push({
          severity: "error",
          file: options.manifest,
          line: 0,
          field: "",
          message: error.message,
        });
      } else if (error instanceof PriceError) {
        prices.priceFault = new PriceError(`the speech service's pricing cannot be used: ${error.message}`);
      } else throw error;
    }
  } else if (options.speechPrice !== undefined) {
    if (Number.isFinite(options.speechPrice) && options.speechPrice >= 0) {
      prices.speechPrice = { value: options.speechPrice, source: "option", countedChars: 0 };
    } else {
      prices.optionProblems.push({
        severity: "error",
        file: "--speech-price",
        line: 0,
        field: "",
        message: `expected points per 10 counted characters (a number >= 0), got ${options.speechPrice}`,
      });
    }
  }
  return prices;
}

/**
 * Adds `found` to `errors`, kept as the manifest's own problems are (a bounded list and a count):
 * one unknown voice in a 200,000-row CSV must not become 200,000 errors. Returns how many were left out.
 */
function keepBounded(errors: Problem[], found: readonly Problem[]): number {
  let omitted = 0;
  for (const p of found) {
    if (errors.length < KEPT_PROBLEMS) errors.push(p);
    else omitted += 1;
  }
  return omitted;
}

/** The points of the jobs, by kind and by video resolution; speech is null when a line has no price. */
function tally(jobs: readonly Job[]): {
  video: number;
  speech: number | null;
  byResolution: PlanResult["byResolution"];
  countedChars: number;
} {
  let video = 0;
  let speech: number | null = 0;
  let countedChars = 0;
  const byResolution: PlanResult["byResolution"] = {};
  for (const job of jobsOf(jobs, "video")) {
    video += job.points ?? 0;
    const entry = byResolution[job.tier] ?? { jobs: 0, points: 0 };
    byResolution[job.tier] = entry;
    entry.jobs += 1;
    entry.points += job.points ?? 0;
  }
  for (const job of jobsOf(jobs, "speech")) {
    countedChars += job.countedChars;
    speech = job.points === null || speech === null ? null : speech + job.points;
  }
  return { video, speech, byResolution, countedChars };
}

/** The auto shots not fitted yet: their estimated points, and the total were each at its longest. */
function autoTally(jobs: readonly Job[], total: number | null): PlanResult["auto"] {
  let shots = 0;
  let estimated = 0;
  let extra = 0;
  for (const job of jobs) {
    if (!unfitted(job)) continue;
    shots += 1;
    estimated += job.points ?? 0;
    extra += job.auto.maxPoints - (job.points ?? 0);
  }
  return shots === 0 ? undefined : { shots, estimated, atMost: total === null ? null : total + extra };
}

/** Whether `total` fits both the balance and the budget; undefined when neither is known, or no total. */
function fitsIn(
  total: number | null,
  balance: PointsSummary | undefined,
  budget: number | undefined,
): boolean | undefined {
  if (total === null || (balance === undefined && budget === undefined)) return undefined;
  return (
    (balance === undefined || total <= balance.available_points) && (budget === undefined || total <= budget)
  );
}

/**
 * Awaits every promise, then throws the failure of the first in the list that failed: work done at
 * once whose errors are reported as they were when it was done one after another.
 */
export async function allInOrder<T extends readonly unknown[]>(
  promises: { readonly [K in keyof T]: Promise<T[K]> },
): Promise<T> {
  const settled = await Promise.allSettled(promises);
  for (const s of settled) if (s.status === "rejected") throw s.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<unknown>).value) as unknown as T;
}

/** A manifest loaded without a speech price, with its lines priced now. */
function priced(loaded: LoadedManifest, price: number | null): LoadedManifest {
  if (price === null) return loaded;
  // Only a service priced at run time has jobs whose points wait for the price.
  const perTen = { perTen: price, version: 0 };
  const jobs = loaded.jobs.map((job) => {
    const service = serviceFor(job.kind);
    return service.pricedAtCreate ? { ...job, points: service.estimate(job, perTen) } : job;
  });
  return { ...loaded, jobs };
}

/** What only the service can answer: do the named voices and skills exist? */
async function serviceChecks(
  jobs: readonly Job[],
  manifestSkills: readonly string[],
  clients: Pick<Clients, "video" | "speech">,
  call: { signal?: AbortSignal },
): Promise<Problem[]> {
  const lines = jobsOf(jobs, "speech");
  const shots = jobsOf(jobs, "video");
  const wantsPreset = lines.some((j) => j.voice.source === "preset");
  const wantsCustom = lines.some((j) => j.voice.source === "custom");
  const externalSkills = new Set(
    shots.flatMap((j) => (j.skill && !manifestSkills.includes(j.skill.name) ? [j.skill.name] : [])),
  );
  const none = { items: [], total: 0, complete: true };
  const [preset, custom, skills] = await Promise.all([
    wantsPreset ? clients.speech.listVoices("preset", call) : none,
    wantsCustom ? clients.speech.listVoices("custom", call) : none,
    externalSkills.size === 0 ? none : collectList(clients.video.listSkills({}, call)),
  ]);
  startStep("voices and skills answered");
  const voices = { preset, custom };
  const ids = {
    preset: new Set(preset.items.map((v) => v.voice_id)),
    custom: new Set(custom.items.map((v) => v.voice_id)),
  };
  // Found per job, then said in the manifest's order.
  const found = new Map<Job, Problem>();
  for (const job of lines) {
    if (job.voice.source !== "preset" && job.voice.source !== "custom") continue;
    const { source, voiceId } = job.voice;
    if (ids[source].has(voiceId)) continue;
    const at = { file: job.file, line: job.line };
    found.set(
      job,
      unlisted(
        at,
        "voice",
        voices[source],
        `${source} voice ${JSON.stringify(voiceId)}`,
        `${source} voices`,
      ) ?? {
        severity: "error",
        ...at,
        field: "voice",
        message: `the service has no ${source} voice ${JSON.stringify(voiceId)} (see clapper voices list${source === "custom" ? " --custom" : ""})`,
      },
    );
  }
  for (const job of shots) {
    const name = job.skill?.name;
    if (name === undefined || !externalSkills.has(name)) continue;
    if (skills.items.some((s) => s.id === name || s.name === name)) continue;
    const at = { file: job.file, line: job.line };
    found.set(
      job,
      unlisted(at, "skill", skills, `skill ${JSON.stringify(name)}`, "skills") ?? {
        severity: "error",
        ...at,
        field: "skill",
        message: `no skill ${JSON.stringify(name)} in the manifest's skills or on the service (see clapper skills list)`,
      },
    );
  }
  const problems = jobs.flatMap((job) => {
    const problem = found.get(job);
    return problem ? [problem] : [];
  });
  // One message per row, however many takes it has.
  const seen = new Set<string>();
  return problems.filter((p) => {
    const key = `${p.file}:${p.line}:${p.field}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * What is not among the items of an incomplete list is not known to be missing: a warning at the
 * row that names it (the run goes on and the service decides). Undefined when the list is whole.
 */
function unlisted(
  at: { file: string; line: number },
  field: string,
  list: ListResult<unknown>,
  what: string,
  kind: string,
): Problem | undefined {
  if (list.complete) return undefined;
  return {
    severity: "warning",
    ...at,
    field,
    message: `${what} is not among the ${list.items.length} ${kind} the service served, but it lists ${list.total}: the list may be incomplete`,
  };
}

// ---------------------------------------------------------------------------------------------
// the next run: what a run of this manifest would do now, judged from the run's state
// ---------------------------------------------------------------------------------------------

/**
 * What the next run does with a job. `generate`: the state holds no result of this version (a new
 * row, an edited one, a result gone from the store, or a task still running that the run follows);
 * `reuse`: its result is stored and unchanged; `retry`: it failed or was cancelled, and only
 * `--retry-failed` makes it again (a result that was paid for but never stored is downloaded
 * again by any run, at no cost).
 */
export type NextAction = "generate" | "reuse" | "retry";

export interface JobNext {
  action: NextAction;
  /** Points the next run reserves for it: a new task's estimate, what its open task holds, or 0. */
  points: number | null;
  /** generate: the row changed since the state's version of it (its output or attempts). */
  edited?: true;
  /** generate: the state says its result is stored, but the store no longer holds it as stored. */
  missing?: true;
  /** generate: a task already created (an interrupted run's) is followed to its end, not made again. */
  follows?: { taskId: string | null; reserved: number };
  /** Earlier outputs of it kept so far (`shots/s02.v1.mp4`, ...); absent when none. */
  versions?: number;
  /** retry: how it ended, and what `--retry-failed` does for it (and at what cost). */
  retry?: {
    status: "failed" | "cancelled";
    error?: { code: string; message: string };
    with: "download" | "new-task";
    points: number | null;
  };
}

export interface NextRun {
  generate: number;
  reuse: number;
  retry: number;
  /**
   * Points the next run reserves before it creates anything: the estimates of the tasks it makes
   * (a shot timed to narration not stored yet at its longest), plus what tasks still open hold
   * (an interrupted run's, edited-away versions', removed rows'). The open ones are counted
   * because admission holds them against the balance and budget like new ones: the service
   * charges them when they end, and this run's report counts what they cost. Null when a line
   * to generate has no price (no service, no --speech-price).
   */
  points: number | null;
  /** Of `points`: what tasks still open hold. */
  openReserved: number;
  /** What `clapper run --retry-failed` would do beyond that: new tasks (at this estimate) and downloads. */
  retryFailed: { newTasks: number; downloads: number; points: number | null };
  /** Whether `points` fits the balance and the budget (as the run's admission judges), when either is known. */
  fits?: boolean;
  /** The state holds no run yet: everything is to be generated. */
  firstRun: boolean;
}

export interface NextRunInput {
  /** The planned (priced, fitted) jobs the state covers. */
  jobs: readonly Job[];
  state: RunState;
  /** What the store holds for each job (same order), as far as the plan can tell offline. */
  stored: ReadonlyArray<StoreEntry | undefined>;
  maxPoints?: number | undefined;
  available?: number | undefined;
}

/**
 * The next run of `jobs` over `state`, decided by the run's own admission (on a copy: nothing is
 * written), so that what the plan says is what the run does.
 */
export function nextRun(input: NextRunInput): { jobs: Map<string, JobNext>; next: NextRun } {
  const { jobs, state } = input;
  const opening: RunRecord[] = [
    // A run record as the run writes one: a finished campaign's state starts a new one.
    { t: "run", id: "plan", name: "", manifest: "", started_at: new Date(0).toISOString() },
    ...jobs.map(declaration),
  ];
  const base = {
    state,
    opening,
    jobs,
    stored: input.stored,
    selected: () => true,
    maxPoints: input.maxPoints,
    available: input.available ?? Number.POSITIVE_INFINITY,
    uri: (key: string) => key,
  };
  const plain = admit({ ...base, retryFailed: false });
  const work = new Set(plain.work.map((job) => job.id));
  const byJob = new Map<string, JobNext>();
  const next: NextRun = {
    generate: 0,
    reuse: 0,
    retry: 0,
    points: plain.openReserved,
    openReserved: plain.openReserved,
    retryFailed: { newTasks: 0, downloads: 0, points: 0 },
    firstRun: state.run === undefined && Object.keys(state.jobs).length === 0,
  };
  const add = (a: number | null, b: number | null) => (a === null || b === null ? null : a + b);
  for (const job of jobs) {
    const st = state.jobs[job.id];
    const kept = st?.versions?.length ?? 0;
    const decided = { ...jobNext(job, st, work.has(job.id)), ...(kept > 0 ? { versions: kept } : {}) };
    byJob.set(job.id, decided);
    next[decided.action] += 1;
    if (decided.action === "generate" && !decided.follows) next.points = add(next.points, decided.points);
    const retry = decided.retry;
    if (retry?.with === "download") next.retryFailed.downloads += 1;
    if (retry?.with === "new-task") {
      next.retryFailed.newTasks += 1;
      next.retryFailed.points = add(next.retryFailed.points, retry.points);
    }
  }
  if (next.points !== null && (input.maxPoints !== undefined || input.available !== undefined))
    next.fits = plain.refused === undefined;
  return { jobs: byJob, next };
}

/** What the next run does with one job, from its state (`st`) and whether admission works on it. */
function jobNext(job: Job, st: JobState | undefined, inWork: boolean): JobNext {
  // The state's record of this very version (an edited row's is of another).
  const cur = st !== undefined && st.fingerprint === job.fingerprint ? st : undefined;
  // The points a new task of it is held at: a shot still to be timed at the longest it may get.
  const estimate = unfitted(job) ? job.auto.maxPoints : job.points;
  if (cur && (cur.status === "failed" || cur.status === "cancelled") && !openAttempt(cur)) {
    const download = paidNotStored(cur);
    return {
      action: "retry",
      points: 0,
      retry: {
        status: cur.status,
        ...(cur.error ? { error: cur.error } : {}),
        with: download ? "download" : "new-task",
        points: download ? 0 : estimate,
      },
    };
  }
  if (!inWork && st?.status === "stored") return { action: "reuse", points: 0 };
  const edited =
    st !== undefined && (!cur || (st.output !== undefined && st.output.fingerprint !== job.fingerprint));
  const open = cur ? openAttempt(cur) : undefined;
  if (cur && (open || cur.status === "collecting")) {
    const reserved = open?.reserved ?? 0;
    return {
      action: "generate",
      points: reserved,
      follows: { taskId: (open ?? cur.attempts.at(-1))?.taskId ?? null, reserved },
    };
  }
  const missing = !edited && cur?.status === "stored";
  return {
    action: "generate",
    points: estimate,
    ...(edited ? { edited: true as const } : {}),
    ...(missing ? { missing: true as const } : {}),
  };
}
