// Stage 2, admission: plan with the services (price, balance, voices), prove the output writable,
// open the state, and decide the work and whether it fits the budget, on a copy: nothing is written
// to the state until the run is admitted, and nothing is submitted in this stage.
import { randomUUID } from "node:crypto";
import { dirname } from "node:path";
import pLimit from "p-limit";
import { AuthenticationError, isUnavailable, PermissionError } from "../../api/index.js";
import type { PointsLedger } from "../../budget/ledger.js";
import { fitFromState, logFitted } from "../../episode/fitting.js";
import { type Job, unfitted, type VideoJob } from "../../manifest/index.js";
import { outputKey } from "../../manifest/outputs.js";
import { serviceFor } from "../../services/index.js";
import { OutputError, type Sink } from "../../sinks/sink.js";
import {
  checkOutputOwner,
  checkOwner,
  type LocatedRun,
  manifestFromState,
  recordOutputOwner,
} from "../../state/locate.js";
import { damagedMessage, isDamagedState, type RepairInput } from "../../state/repair.js";
import type { Attempt, RunRecord, RunState } from "../../state/run-state.js";
import { StateStoreError } from "../../state/s3-journal.js";
import { startStep } from "../../trace.js";
import { type Admission, admit, declaration, shardsTable } from "../admit.js";
import { CallbackListener } from "../callbacks.js";
import { matchesOnly, type RunContext } from "../context.js";
import { errorInfo } from "../errors.js";
import { idempotencyKey } from "../idempotency.js";
import { type PlanResult, plan } from "../plan.js";
import { inShard, type Shard } from "../shard.js";
import {
  type LedgerInput,
  type PoolStanding,
  type RunOutcome,
  runLedgerKey,
  type StateStore,
} from "../types.js";
import type { Opened } from "./open.js";

export interface Admitted {
  planned: PlanResult;
  store: StateStore;
  /** The work, what the store holds, and the cap. */
  admission: Admission;
  ledger: PointsLedger;
  maxPoints: number | undefined;
  selected: (job: Job) => boolean;
  /** Started before the state is opened, so that a busy port is a usage error with nothing written. */
  listener: CallbackListener | undefined;
}

export async function admitRun(ctx: RunContext, opened: Opened): Promise<Admitted | RunOutcome> {
  const { options } = ctx;
  const { located, sink } = opened;
  const statePath = located.statePath;
  const planned = await planWith(ctx, opened);
  if ("end" in planned) return planned;
  startStep("planned (priced, output probed)");
  const listener = await listen(ctx, statePath);
  if (listener && "end" in listener) return listener;

  const openedState = await openStore(ctx, opened, planned);
  if ("end" in openedState) return openedState;
  const { store, lostData } = openedState;
  const { fence, generation } = opened.lock;
  const ownership = checkOwner(store.state, located);
  if (ownership.refuse) return { end: "refused", message: ownership.refuse, statePath };
  if (ownership.warning) ctx.log.warn({ event: "state-adopted" }, ownership.warning);
  // A local output folder says whose results it holds: another manifest of this name is refused.
  const outputRoot = localRoot(sink);
  if (outputRoot !== undefined) {
    const output = await checkOutputOwner(outputRoot, located);
    if (output.refuse)
      return { end: "refused", message: `${output.refuse}; nothing was submitted`, statePath };
  }

  const only = options.only;
  const shard = located.shard;
  const chosen = (job: Job) => inShard(job, shard) && (!only || matchesOnly(job, only));
  // Shots timed to narration stored already are fitted now, so that reuse is judged on the very
  // request; the others wait for their lines during the run. With --fresh the chosen lines are made
  // again, and may come out longer or shorter: their shots wait for the new ones.
  const ids = new Map(planned.jobs.map((job) => [job.id, job]));
  const remade = (id: string) => {
    const line = ids.get(id);
    return line !== undefined && chosen(line);
  };
  const wait = options.fresh ? (shot: VideoJob) => (shot.auto?.lines ?? []).some(remade) : undefined;
  for (const shot of await fitFromState(planned.jobs, store.state, sink, wait)) logFitted(ctx.log, shot);
  // A shot waiting for its narration needs its lines, even when --only names the shot alone.
  const narration = new Set(
    planned.jobs.flatMap((job) => (unfitted(job) && chosen(job) ? job.auto.lines : [])),
  );
  const selected = (job: Job) => chosen(job) || narration.has(job.id);
  const stored = await storeHolds(ctx, sink, planned.jobs, selected, statePath);
  if (!Array.isArray(stored)) return stored;
  const available = planned.balance?.available_points ?? 0;
  const maxPoints = options.maxPoints ?? located.manifest.maxPoints;
  let pool: PoolStanding | undefined;
  try {
    pool = await ctx.seams.pool?.();
  } catch (error) {
    // The coordinator is gone before anything was submitted: the run ends `unreachable`, nothing written.
    ctx.halt.unreachable(error);
    return ctx.stoppedEarly(statePath);
  }
  const admission = admit({
    state: store.state,
    opening: opening(opened, planned),
    ...(options.fresh ? { fresh: { epoch: randomUUID() } } : {}),
    jobs: planned.jobs,
    stored,
    selected,
    retryFailed: options.retryFailed === true,
    maxPoints,
    available,
    pool,
    uri: (key) => sink.uri(key),
  });
  if (admission.refused) {
    return {
      end: "over-budget",
      budget: admission.refused,
      warnings: planned.warnings,
      statePath,
      message: "the budget or the balance is too small: nothing was submitted",
    };
  }
  const refusal = await holdShare(ctx, located, store, admission, planned.warnings, maxPoints);
  if (refusal) return refusal;
  // Admitted: from here the state is written.
  if (lostData) {
    ctx.log.warn(
      { event: "coordinator-data-lost" },
      "the coordinator lost its data since this run last used it (a restart without persistence, a flush): this run's settled spending is counted again in its shared budgets; other runs' is counted when they next run",
    );
  }
  if (fence !== undefined && (fence !== store.state.fence || generation !== store.state.fence_generation)) {
    await store.append(
      { t: "lock", fence, holder: opened.lock.owner.host, ...(generation ? { generation } : {}) },
      { durable: true },
    );
  }
  if (outputRoot !== undefined) await recordOutputOwner(outputRoot, located);
  if (admission.records.some((r) => r.t === "fresh")) await store.keepCopy?.();
  for (const r of admission.records) void store.append(r).catch(ctx.fail);
  await store.append({ t: "balance", available }, { durable: true });
  // Every event of this run carries the run's name and id, so interleaved runs stay apart.
  ctx.log = options.logger.child({ run: located.manifest.name, run_id: store.state.run?.id });
  logAdmitted(ctx, opened, planned, admission, { maxPoints, available });
  const ledger = await ctx.seams.ledger(
    ledgerInput(store.state, admission, located.manifest.name, maxPoints, lostData, shard),
  );
  await withdrawLapsed(ctx, store, ledger);
  return { planned, store, admission, ledger, maxPoints, selected, listener };
}

/**
 * The run's state, opened under the lock's fencing token: a refusal here (a damaged, refused or
 * unreachable state, or a later holder's writes) has written and submitted nothing.
 */
async function openStore(
  ctx: RunContext,
  opened: Opened,
  planned: PlanResult,
): Promise<{ store: StateStore; lostData: boolean } | RunOutcome> {
  const { options } = ctx;
  const { located } = opened;
  const statePath = located.statePath;
  // Fencing: a later holder of the coordinator's lock wrote here, so this one's lease ran out.
  // Tokens of another generation of the coordinator's data (it lost them) are not compared.
  const fence = opened.lock.fence;
  const generation = opened.lock.generation;
  let store: StateStore;
  try {
    store = await ctx.seams.openState(statePath, {
      ...(fence !== undefined ? { fence } : {}),
      ...(generation !== undefined ? { generation } : {}),
      ...(options.s3 ? { s3: options.s3 } : {}),
      ...(options.repairState ? { repair: repairInput(ctx, located, planned.jobs) } : {}),
    });
  } catch (error) {
    if (isDamagedState(error)) {
      return { end: "refused", message: damagedMessage(error, located.manifest.display), statePath };
    }
    if (!(error instanceof StateStoreError)) throw error;
    // Nothing was written and nothing submitted.
    if (error.kind === "unreachable") ctx.halt.unreachable(error);
    const end = (
      { unreachable: "unreachable", refused: "refused", damaged: "refused", superseded: "locked" } as const
    )[error.kind];
    return { end, message: `${error.message}; nothing was submitted`, statePath };
  }
  startStep("state opened");
  ctx.store = store;
  ctx.defer(() => store.close());
  if (opened.lockLost.aborted) store.freeze();
  const lostData =
    generation !== undefined &&
    store.state.fence_generation !== undefined &&
    store.state.fence_generation !== generation;
  if (fence !== undefined && !lostData && (store.state.fence ?? 0) > fence) {
    return {
      end: "locked",
      message: `a later holder of the run's lock (fencing token ${store.state.fence}) has written ${statePath}; this process (token ${fence}) stops without writing`,
      statePath,
    };
  }
  return { store, lostData };
}

/**
 * A shard is admitted by holding its whole estimate of the run's shared cap, atomically beside
 * every other shard's hold, reservations and spending: shards admitted at the same moment cannot
 * both take the rest. A refusal, or a coordinator gone, when it cannot be held.
 */
async function holdShare(
  ctx: RunContext,
  located: LocatedRun,
  store: StateStore,
  admission: Admission,
  warnings: PlanResult["warnings"],
  maxPoints: number | undefined,
): Promise<RunOutcome | undefined> {
  const shard = located.shard;
  const statePath = located.statePath;
  if (shard && maxPoints !== undefined && ctx.seams.holdRun) {
    const run = {
      key: runLedgerKey({ state: "", name: located.manifest.name, campaign: store.state.campaign, shard }),
      name: `${located.manifest.name} (campaign ${store.state.campaign})`,
      cap: maxPoints,
    };
    let held: { ok: boolean; committed: number };
    try {
      held = await ctx.seams.holdRun(run, admission.newCost);
    } catch (error) {
      ctx.halt.unreachable(error);
      return ctx.stoppedEarly(statePath);
    }
    if (!held.ok) {
      return {
        end: "over-budget",
        budget: shardsTable(
          { total: shard.total, cap: maxPoints, committed: held.committed },
          admission.work.length,
          admission.newCost,
        ),
        warnings: warnings,
        statePath,
        message: "the budget or the balance is too small: nothing was submitted",
      };
    }
    const holdRun = ctx.seams.holdRun;
    // What the shard did not reserve goes back when it ends (or with its lease when it dies).
    ctx.defer(() =>
      holdRun(run, 0).then(
        () => undefined,
        () => undefined,
      ),
    );
  }
  return undefined;
}

/** The plan, with the service's price, balance and voices; a refusal here has submitted nothing. */
async function planWith(ctx: RunContext, opened: Opened): Promise<PlanResult | RunOutcome> {
  const { options } = ctx;
  const { located, sink } = opened;
  let planned: PlanResult;
  try {
    planned = await plan({
      manifest: options.manifest,
      cwd: ctx.cwd,
      clients: options.clients,
      signal: ctx.signal,
      loaded: located.loaded,
      ...(located.shard ? { shard: located.shard } : {}),
    });
  } catch (error) {
    // Ctrl-C while the balance or the voices are read: nothing was submitted, nothing to save.
    if (ctx.signal.aborted) return ctx.stoppedEarly();
    if (isUnavailable(error)) {
      ctx.halt.unreachable(error);
      return { ...ctx.stoppedEarly(), warnings: located.loaded.warnings };
    }
    // A missing, wrong or revoked key is a usage error: nothing was submitted.
    if (error instanceof AuthenticationError || error instanceof PermissionError) {
      return { end: "refused", message: error.message };
    }
    throw error;
  }
  if (planned.errors.length > 0)
    return { end: "manifest-invalid", errors: planned.errors, warnings: planned.warnings };
  // Before anything is paid for: a result that cannot be stored would be paid for and lost.
  try {
    await sink.probe();
  } catch (error) {
    if (!(error instanceof OutputError)) throw error;
    return {
      end: error.unreachable ? "unreachable" : "refused",
      message: `${error.message}; nothing was submitted`,
      warnings: planned.warnings,
    };
  }
  return planned;
}

/** The video callbacks' listener, when asked for; a port in use is a usage error. */
async function listen(
  ctx: RunContext,
  statePath: string,
): Promise<CallbackListener | RunOutcome | undefined> {
  const callback = ctx.options.callback;
  if (!callback) return undefined;
  // Tasks are handed to the video poller once the jobs run; news before that is not lost, since
  // polling goes on as the safety net.
  const listener = new CallbackListener({
    ...callback.listen,
    onTask: (task) => ctx.onCallback?.(task),
  });
  let port: number;
  try {
    ({ port } = await listener.start());
  } catch (error) {
    const why = (error as NodeJS.ErrnoException).code ?? errorInfo(error).message;
    return {
      end: "refused",
      message: `the callback listener cannot listen on ${callback.listen.host}:${callback.listen.port} (${why}): pass --callback-listen [HOST:]PORT with a free port; nothing was submitted`,
      statePath,
    };
  }
  ctx.defer(() => listener.close());
  ctx.log.info({ event: "callbacks", url: callback.url, port }, "listening for video callbacks");
  return listener;
}

/**
 * What the store holds, asked for every selected job at once: by folder listings where the sink
 * can (statMany), else one stat each (a HEAD on S3), 32 at a time.
 */
async function storeHolds(
  ctx: RunContext,
  sink: Sink,
  jobs: readonly Job[],
  selected: (job: Job) => boolean,
  statePath: string,
): Promise<Array<Awaited<ReturnType<Sink["stat"]>>> | RunOutcome> {
  const looking = pLimit(32);
  try {
    if (sink.statMany) {
      const wanted = jobs.filter(selected);
      const found = await sink.statMany(wanted.map(outputKey));
      const byJob = new Map(wanted.map((job, i) => [job, found[i]]));
      return jobs.map((job) => byJob.get(job));
    }
    return await Promise.all(
      jobs.map((job) => (selected(job) ? looking(() => sink.stat(outputKey(job))) : undefined)),
    );
  } catch (error) {
    // The probe passed a moment ago, so this is the store's state (or its permissions for reads).
    const status = (error as { cause?: { $metadata?: { httpStatusCode?: number } } }).cause?.$metadata
      ?.httpStatusCode;
    const setting = status === 403 || status === 404 || status === 400 || status === 301;
    const message = `${errorInfo(error).message}; nothing was submitted`;
    if (setting) return { end: "refused", message, statePath };
    ctx.halt.unreachable(error);
    return {
      end: "unreachable",
      stoppedBy: "unreachable",
      message: `${message}: run again once it is reachable`,
      statePath,
    };
  }
}

/** What `--repair-state` needs to write lost records again: the jobs as planned and their keys. */
function repairInput(ctx: RunContext, located: LocatedRun, jobs: readonly Job[]): RepairInput {
  const name = located.manifest.name;
  return {
    refuse: (state) => checkOwner(state, located).refuse,
    jobs: new Map(
      jobs.map((job) => {
        const fallbackPoints = serviceFor(job.kind).fallbackPoints(job);
        return [
          job.id,
          {
            kind: job.kind,
            fingerprint: job.fingerprint,
            estimate: job.points ?? 0,
            ...(fallbackPoints !== undefined ? { fallbackPoints } : {}),
          },
        ];
      }),
    ),
    keyOf: (epoch, jobId, fingerprint, n) => idempotencyKey(name, epoch, jobId, fingerprint, n),
    onRepaired: (r) =>
      ctx.log.warn(
        { event: "state-repaired", dropped: r.dropped, rebuilt: r.rebuilt, copy: r.copy },
        `the state was repaired: ${r.dropped.length} damaged line${r.dropped.length === 1 ? "" : "s"} dropped (${r.dropped.join(", ")}), ${r.rebuilt.length} record${r.rebuilt.length === 1 ? "" : "s"} written again; the damaged file is kept as ${r.copy}`,
      ),
  };
}

/** The records that open this run: who it is, and every job of the plan with its fingerprint. */
function opening(opened: Opened, planned: PlanResult): RunRecord[] {
  const { manifest, realPath } = opened.located;
  const rel = manifestFromState(opened.located);
  return [
    {
      t: "run",
      id: randomUUID(),
      name: manifest.name,
      manifest: manifest.display,
      started_at: new Date().toISOString(),
      manifest_path: realPath,
      ...(rel !== undefined ? { manifest_rel: rel } : {}),
    },
    ...planned.jobs.map(declaration),
  ];
}

/** The run-level events of an admitted run: what it found, what it will do, what it may spend. */
function logAdmitted(
  ctx: RunContext,
  opened: Opened,
  planned: PlanResult,
  admission: Admission,
  money: { maxPoints: number | undefined; available: number },
): void {
  const { options, log } = ctx;
  const { manifest } = opened.located;
  for (const { job, uri, skipped } of admission.found) {
    log.info(
      { job: job.id, event: skipped ? "skipped" : "stored", uri },
      skipped ? "unchanged: the store holds this result" : "the store holds the result this run paid for",
    );
  }
  const work = admission.work;
  log.info(
    {
      event: "run-started",
      manifest: manifest.display,
      name: manifest.name,
      jobs: planned.jobs.length,
      todo: work.length,
      skipped: planned.jobs.length - work.length,
      ...(options.fresh ? { fresh: true } : {}),
      ...(options.retryFailed ? { retry_failed: true } : {}),
      ...(options.only ? { only: options.only } : {}),
    },
    `run started: ${work.length} of ${planned.jobs.length} jobs to do`,
  );
  const estimate = work.reduce((sum, job) => sum + (job.points ?? 0), 0);
  const { maxPoints, available } = money;
  log.info(
    {
      event: "admitted",
      estimate,
      ...(maxPoints !== undefined ? { cap: maxPoints } : {}),
      balance: available,
      ...(admission.openReserved > 0 ? { reserved_by_open_tasks: admission.openReserved } : {}),
    },
    `admitted: ${estimate} points estimated, balance ${available}${maxPoints !== undefined ? `, cap ${maxPoints}` : ""}`,
  );
}

/** The ledger's start: the admitted cap, and the journal's attempts by idempotency key. */
function ledgerInput(
  state: RunState,
  admission: Admission,
  name: string,
  maxPoints: number | undefined,
  lostData: boolean,
  shard: Shard | undefined,
): LedgerInput {
  const attempts = new Map<string, Attempt>();
  for (const st of Object.values(state.jobs))
    for (const a of [...st.attempts, ...(st.previous ?? [])]) attempts.set(a.key, a);
  const open = [...attempts.values()]
    .filter((a) => a.spent === undefined)
    .map((a) => ({ id: a.key, points: a.reserved }));
  return {
    cap: admission.cap,
    openReserved: admission.openReserved,
    open,
    attempt: (id) => {
      const a = attempts.get(id);
      return a ? { reserved: a.reserved, ...(a.spent !== undefined ? { spent: a.spent } : {}) } : undefined;
    },
    run: {
      state: state.id ?? state.run?.id ?? "unnamed",
      name,
      campaign: state.campaign,
      key: runLedgerKey({
        state: state.id ?? state.run?.id ?? "unnamed",
        name,
        campaign: state.campaign,
        shard,
      }),
    },
    ...(maxPoints !== undefined ? { maxPoints } : {}),
    ...(lostData
      ? {
          restore: [...attempts.values()].flatMap((a) =>
            a.spent !== undefined && a.spent > 0 && a.at !== undefined
              ? [{ id: a.key, spent: a.spent, at: a.at, thisCampaign: a.settledIn === state.campaign }]
              : [],
          ),
        }
      : {}),
  };
}

/**
 * Intents an earlier process wrote whose create it never sent (its shared reservation lapsed with
 * its lease before the create could leave) and which no longer fit a shared budget: taken back,
 * so that the job asks for a reservation again like any new attempt instead of being sent unpaid.
 */
async function withdrawLapsed(ctx: RunContext, store: StateStore, ledger: PointsLedger): Promise<void> {
  const keys = new Set(ledger.withdraw ?? []);
  if (keys.size === 0) return;
  for (const st of Object.values(store.state.jobs)) {
    const a = st.attempts.at(-1);
    if (!a || !keys.has(a.key) || a.taskId !== undefined || a.spent !== undefined) continue;
    await store.append({ t: "withdrawn", id: st.id, n: a.n }, { durable: true });
    await ledger.settle(a.reserved, 0);
    ctx.log.warn(
      { job: st.id, event: "withdrawn", attempt: a.n },
      "an earlier process's create was never sent and no longer fits the shared budget: withdrawn",
    );
  }
}

/** The folder of a local output (`undefined` for S3, where a path of another machine says nothing). */
function localRoot(sink: Sink): string | undefined {
  return sink.localPath ? dirname(sink.localPath(".clapper-owner.json")) : undefined;
}
