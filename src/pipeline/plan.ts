// `plan`: load and check a manifest, estimate every job's points, and, when the services are
// reachable, check voices and skills against them and the total against the balance and budget.
// Never creates a task.
import type { PointsSummary } from "../api/common.js";
import { type Clients, collectList, type ListResult } from "../api/index.js";
import { speechPoints } from "../api/speech.js";
import type { ResolutionTier } from "../api/video.js";
import { PriceError, priceFrom, SpeechDisabledError } from "../engine/pricing.js";
import { type Job, type LoadedManifest, loadManifest, type Problem, unfitted } from "../manifest/index.js";
import { KEPT_PROBLEMS } from "../manifest/problems.js";
import { traceStart } from "../trace.js";
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
  const lines = loaded.jobs.filter((j) => j.kind === "speech");
  // A price the service states that cannot be used is its fault, not the manifest's: said once the
  // manifest itself is sound (exit 6), and only when there are lines to price.
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
    traceStart("pricing and balance answered");
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
  for (const job of jobs) {
    if (job.kind === "video") {
      video += job.points ?? 0;
      const entry = byResolution[job.tier] ?? { jobs: 0, points: 0 };
      byResolution[job.tier] = entry;
      entry.jobs += 1;
      entry.points += job.points ?? 0;
    } else {
      countedChars += job.countedChars;
      speech = job.points === null || speech === null ? null : speech + job.points;
    }
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
  const jobs = loaded.jobs.map((job) =>
    job.kind === "speech" ? { ...job, points: speechPoints(job.request.text, price) } : job,
  );
  return { ...loaded, jobs };
}

/** What only the service can answer: do the named voices and skills exist? */
async function serviceChecks(
  jobs: readonly Job[],
  manifestSkills: readonly string[],
  clients: Pick<Clients, "video" | "speech">,
  call: { signal?: AbortSignal },
): Promise<Problem[]> {
  const problems: Problem[] = [];
  const wantsPreset = jobs.some((j) => j.kind === "speech" && j.voice.source === "preset");
  const wantsCustom = jobs.some((j) => j.kind === "speech" && j.voice.source === "custom");
  const externalSkills = new Set(
    jobs.flatMap((j) =>
      j.kind === "video" && j.skill && !manifestSkills.includes(j.skill.name) ? [j.skill.name] : [],
    ),
  );
  const none = { items: [], total: 0, complete: true };
  const [preset, custom, skills] = await Promise.all([
    wantsPreset ? clients.speech.listVoices("preset", call) : none,
    wantsCustom ? clients.speech.listVoices("custom", call) : none,
    externalSkills.size === 0 ? none : collectList(clients.video.listSkills({}, call)),
  ]);
  traceStart("voices and skills answered");
  const voices = { preset, custom };
  const ids = {
    preset: new Set(preset.items.map((v) => v.voice_id)),
    custom: new Set(custom.items.map((v) => v.voice_id)),
  };
  for (const job of jobs) {
    const at = { file: job.file, line: job.line };
    if (job.kind === "speech" && (job.voice.source === "preset" || job.voice.source === "custom")) {
      const { source, voiceId } = job.voice;
      if (!ids[source].has(voiceId)) {
        problems.push(
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
    }
    if (job.kind === "video" && job.skill && externalSkills.has(job.skill.name)) {
      const name = job.skill.name;
      if (!skills.items.some((s) => s.id === name || s.name === name)) {
        problems.push(
          unlisted(at, "skill", skills, `skill ${JSON.stringify(name)}`, "skills") ?? {
            severity: "error",
            ...at,
            field: "skill",
            message: `no skill ${JSON.stringify(name)} in the manifest's skills or on the service (see clapper skills list)`,
          },
        );
      }
    }
  }
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
