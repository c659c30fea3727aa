// Starting a run, as both front ends do it (the CLI's `run` and the library's `run()`): the run
// located, the services and the coordinator opened, the remembered rate read, the run's options made
// from the settings, the run, and everything given back in reverse order. What each front end does
// with the outcome (a printed answer and an exit code, or a resolved report) stays with it.

import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import type { Logger } from "pino";
import { callbackOptions, checkCallbackHost } from "../cli/commands/run/callback.js";
import { sandboxStatePath } from "../cli/commands/run/state.js";
import type { ConnectExtras, Connection, ConnectionArgs } from "../cli/config.js";
import { ExitError, fsExit, isFsError } from "../cli/errors.js";
import { ExitCode, exitCodeOf } from "../cli/exit-code.js";
import type { CoordinatorUrl } from "../coord/url.js";
import type { Problem } from "../manifest/problems.js";
import { startMetrics } from "../metrics/index.js";
import { DEFAULT_CEILING_RPS, type RememberedRate } from "../rate/controller.js";
import { ServiceGate, type Sharing } from "../rate/limiter.js";
import { ratesPath, readRates, writeRates } from "../rate/remembered.js";
import { type Progress, type RunOutcome, run, type Seams } from "../run/run.js";
import { inShard, type Shard } from "../run/shard.js";
import { DEFAULT_IN_FLIGHT, type MaxFailures, type RunOptions } from "../run/types.js";
import type { S3ClientOptions } from "../sinks/s3.js";
import { type LocatedRun, locateRun } from "../state/locate.js";
import { isS3State } from "../state/location.js";
import { startStep } from "../trace.js";

/** What a run is asked to do: the `run` command's flags, by their camelCase names. */
export interface RunSettings {
  /** The manifest (YAML or CSV), relative to `cwd`. */
  manifest: string;
  /** Output folder or `s3://bucket/prefix`, instead of the manifest's `output`. */
  output?: string | undefined;
  /** The run's state file or `s3://BUCKET/PREFIX` (default `.clapper/NAME/state.jsonl` beside the manifest). */
  state?: string | undefined;
  /** `s3://bucket/prefix` for local materials. */
  staging?: string | undefined;
  /** The S3 client's settings (`--s3-endpoint`, `--s3-path-style`). */
  s3?: S3ClientOptions | undefined;
  /** Spend at most this many points in this run. */
  maxPoints?: number | undefined;
  /** Job or row ids to work on (`shot/s01`, `n02`); the others stand as earlier runs left them. */
  only?: string[] | undefined;
  /** Try failed and cancelled jobs again. */
  retryFailed?: boolean | undefined;
  /** Forget earlier state and results; generate everything anew. */
  fresh?: boolean | undefined;
  /** Stills of the videos for report.html's grid, made with ffmpeg beside the run (default true). */
  stills?: boolean | undefined;
  /** Rebuild a damaged state file from its readable lines, then run. */
  repairState?: boolean | undefined;
  /** Attempts per job (default 2). */
  maxAttempts?: number | undefined;
  /** Highest request rate for the account (default 20/s), found as the run goes unless `fixedRps`. */
  rps?: number | undefined;
  fixedRps?: boolean | undefined;
  /** Whether the service limits requests per key (one rate) or per service (default `key`). */
  rateScope?: "key" | "service" | undefined;
  /** Tasks in flight per service (default 512). */
  inFlight?: number | undefined;
  /** Shortest wait between two looks at a task, in seconds (default 1). */
  pollInterval?: number | undefined;
  /** Seconds a task may stay unreadable before the run leaves it for the next run (default 600). */
  giveUpAfter?: number | undefined;
  /** Take the run's lock even if another run seems to hold it. */
  breakLock?: boolean | undefined;
  /** Largest result to download, in MiB (default: derived from each job). */
  maxResultMb?: number | undefined;
  /** Stop submitting once this many jobs (or this share of ended jobs) failed. */
  maxFailures?: MaxFailures | undefined;
  /** Stop at this time, state saved. */
  deadline?: Date | undefined;
  /** Allow loopback and private addresses for result downloads and the callback URL. */
  allowPrivateUrls?: boolean | undefined;
  /** The public URL the video service posts status callbacks to, and where its listener binds. */
  callbackUrl?: string | undefined;
  callbackListen?: string | undefined;
  /** One shard of the manifest (`source`: where it was chosen, for the log). */
  shard?: (Shard & { source?: string }) | undefined;
  /** The Redis coordinator (`parseCoordinatorUrl`). */
  coordinator?: CoordinatorUrl | undefined;
  /** Prometheus text written here every 15 s and at the end (node_exporter's textfile collector). */
  metricsFile?: string | undefined;
  /** A Pushgateway the metrics are pushed to at the end (job="clapper", grouped by run and shard). */
  pushgateway?: string | undefined;
  /** With the in-process sandbox: its state file (default `sandbox.json` beside the run's state) and time scale. */
  sandboxState?: string | undefined;
  sandboxTimeScale?: number | undefined;
}

/** What the front end opens the run with. */
interface RunWiring {
  cwd: string;
  env: NodeJS.ProcessEnv;
  signal: AbortSignal;
  logger: Logger;
  /** How the services are reached (`sandbox`, or `base-url` and a key), and the one way to connect. */
  connection: ConnectionArgs;
  connect(
    args: ConnectionArgs,
    env: NodeJS.ProcessEnv,
    logger: Logger,
    extras?: ConnectExtras,
  ): Promise<Connection>;
  onProgress?: ((progress: Progress) => void) | undefined;
  /** Called once the run has ended, before the services and the coordinator are given back. */
  afterRun?: ((outcome: RunOutcome, opened: Opened) => Promise<void>) | undefined;
}

/** What was opened for the run, as `afterRun` sees it. */
interface Opened {
  located: LocatedRun;
  coordinated: Coordinated | undefined;
}

/** Why a run did not start: its manifest's problems, or a setting that cannot work (with its exit code). */
type Refusal =
  | { reason: "manifest"; errors: readonly Problem[]; warnings: readonly Problem[] }
  | { reason: "setting"; code: number; message: string };

export type Started = { refused: Refusal } | { outcome: RunOutcome; located: LocatedRun };

/** Locates, connects, runs and gives back; a refusal comes back before anything is submitted. */
export async function startRun(settings: RunSettings, w: RunWiring): Promise<Started> {
  const { logger, env } = w;
  const limits = {
    rps: settings.rps ?? DEFAULT_CEILING_RPS,
    ...(settings.fixedRps ? { fixed: true } : {}),
    inFlight: settings.inFlight ?? DEFAULT_IN_FLIGHT,
  };
  const gate = new ServiceGate({ video: limits, speech: limits }, { scope: settings.rateScope ?? "key" });
  try {
    const found = await locateForRun(settings, w.cwd);
    if ("refused" in found) return found;
    const { located } = found;
    startStep("run located (manifest loaded, state folder made)");
    const { shard } = settings;
    if (shard) {
      logger.info(
        { event: "shard", shard: `${shard.index}/${shard.total}`, from: shard.source ?? "options" },
        `shard ${shard.index} of ${shard.total} (${shard.source ?? "options"}): ${located.loaded.jobs.filter((job) => inShard(job, shard)).length} of ${located.loaded.jobs.length} jobs`,
      );
    }
    // Checked before anything is connected: without the coordinator, nothing would lock the state.
    if (isS3State(located.statePath) && !settings.coordinator) {
      return refused(
        `--state ${located.statePath}: a state in S3 is locked through the coordinator (a pod has no disk to keep a lock file on): pass --coordinator redis://HOST:PORT (or set CLAPPER_REDIS_URL); nothing was submitted`,
      );
    }
    if (settings.callbackUrl)
      await checkCallbackHost(settings.callbackUrl, settings.allowPrivateUrls === true);
    const conn = await w.connect(w.connection, env, logger, {
      gate,
      ...(settings.allowPrivateUrls ? { allowPrivateUrls: true } : {}),
      ...(w.connection.sandbox
        ? {
            sandboxStateFile: settings.sandboxState ?? sandboxStatePath(located),
            sandboxTimeScale: settings.sandboxTimeScale ?? 0.01,
          }
        : {}),
    });
    startStep("services connected");
    return await runConnected(settings, w, { located, conn, gate });
  } finally {
    await gate.stop();
  }
}

/** The rest of the run once the services are reached: rates, coordinator, the run, the rates kept. */
async function runConnected(
  settings: RunSettings,
  w: RunWiring,
  opened: { located: LocatedRun; conn: Connection; gate: ServiceGate },
): Promise<Started> {
  const { located, conn, gate } = opened;
  const { logger } = w;
  const rates = await rememberedRates(located.statePath, settings.s3 ?? {});
  const remembered = await rates.read(conn.account);
  gate.resume(remembered);
  if (Object.keys(remembered).length > 0) {
    const from = Object.entries(remembered)
      .map(([scope, r]) => `${r?.rps}/s ${scope === "key" ? "for the key" : `for ${scope}`}`)
      .join(", ");
    logger.info(
      { event: "rate-start", rates: remembered },
      `starting at the rate the last run found: ${from}`,
    );
  }
  startStep("remembered rates read");
  const lease = leaseFromEnv(w.env);
  if (located.manifest.pool && !settings.coordinator) {
    await conn.close();
    return refused(
      `${settings.manifest}: budget.pool "${located.manifest.pool.name}" is shared by every run that names it, through a coordinator: pass --coordinator redis://HOST:PORT (or set CLAPPER_REDIS_URL); nothing was submitted`,
    );
  }
  let coordinated: Coordinated | undefined;
  if (settings.coordinator) {
    try {
      coordinated = await coordinate(settings.coordinator, conn.account, located, w.signal, lease);
    } catch (error) {
      await conn.close();
      if (error instanceof ExitError) return refused(error.message, error.code);
      throw error;
    }
    gate.share(coordinated.sharing);
  }
  try {
    const metrics = await startMetrics({
      file: settings.metricsFile,
      pushgateway: settings.pushgateway,
      run: located.manifest.name,
      ...(settings.shard ? { shard: settings.shard.index } : {}),
      statePath: located.statePath,
      rates: gate,
      logger,
      env: w.env,
    });
    const outcome = await metrics.around(run)(
      runOptions(settings, { ...w, located, conn, gate, coordinated, lease }),
    );
    await w.afterRun?.(outcome, { located, coordinated });
    return { outcome, located };
  } finally {
    await remember(rates, conn.account, gate, logger);
    // Given back in reverse order: the coordinator was taken after the services.
    await coordinated?.close();
    await conn.close();
  }
}

function refused(message: string, code: number = ExitCode.Usage): { refused: Refusal } {
  return { refused: { reason: "setting", code, message } };
}

/** The run's options: its settings, and what was opened for it. */
function runOptions(
  s: RunSettings,
  opened: RunWiring & {
    located: LocatedRun;
    conn: RunOptions["clients"];
    gate: ServiceGate;
    coordinated: Coordinated | undefined;
    lease: { leaseMs: number; heartbeatMs: number } | undefined;
  },
): RunOptions {
  const { located, conn: clients, gate, coordinated, lease } = opened;
  const track = {
    ...(s.pollInterval !== undefined ? { minIntervalMs: s.pollInterval * 1000 } : {}),
    ...(s.giveUpAfter !== undefined ? { giveUpMs: s.giveUpAfter * 1000 } : {}),
  };
  return {
    manifest: s.manifest,
    cwd: opened.cwd,
    located,
    clients,
    exitCodeOf,
    breakLock: s.breakLock ?? false,
    ...(s.maxResultMb !== undefined ? { maxResultBytes: Math.floor(s.maxResultMb * 1024 * 1024) } : {}),
    gate,
    statePath: located.statePath,
    logger: opened.logger,
    signal: opened.signal,
    env: opened.env,
    ...(s.maxAttempts !== undefined ? { maxAttempts: s.maxAttempts } : {}),
    retryFailed: s.retryFailed ?? false,
    fresh: s.fresh ?? false,
    ...(s.stills === false ? { stills: false } : {}),
    ...(s.repairState ? { repairState: true } : {}),
    track,
    ...(s.output ? { output: s.output } : {}),
    ...(s.staging ? { staging: s.staging } : {}),
    ...(s.callbackUrl
      ? { callback: callbackOptions(s.callbackUrl, s.callbackListen, s.allowPrivateUrls === true) }
      : {}),
    s3: s.s3 ?? {},
    ...(s.maxPoints !== undefined ? { maxPoints: s.maxPoints } : {}),
    ...(s.only && s.only.length > 0 ? { only: s.only } : {}),
    ...(s.maxFailures ? { maxFailures: s.maxFailures } : {}),
    ...(s.deadline ? { deadline: s.deadline } : {}),
    ...(opened.onProgress ? { onProgress: opened.onProgress } : {}),
    ...(coordinated ? { seams: coordinated.seams, lost: coordinated.lost } : {}),
    ...(lease ? { lease } : {}),
  };
}

/**
 * Test-only (documented in docs/configuration.md): CLAPPER_LOCK_LEASE_MS shortens the run lock's lease (and
 * the coordinator's holder lease), so that a test sees a killed holder's lock freed in seconds.
 */
function leaseFromEnv(env: NodeJS.ProcessEnv): { leaseMs: number; heartbeatMs: number } | undefined {
  const ms = Number(env.CLAPPER_LOCK_LEASE_MS);
  if (!Number.isInteger(ms) || ms < 200) return undefined;
  return { leaseMs: ms, heartbeatMs: Math.max(50, Math.floor(ms / 6)) };
}

/** The coordinator, as the run holds it. */
export interface Coordinated {
  sharing: Sharing;
  /** Records a finished shard; true when every shard of its run has finished. */
  shardFinished(run: string, index: number, total: number): Promise<boolean>;
  seams: Partial<Seams>;
  /** Aborted with the error when the coordinator is lost mid-run. */
  lost: AbortSignal;
  close(): Promise<void>;
}

/**
 * Connects to the coordinator before anything is submitted: unreachable, the run exits 6 having
 * sent nothing. Loaded only when asked for (ioredis stays out of a run without one).
 */
async function coordinate(
  url: CoordinatorUrl,
  account: string,
  located: LocatedRun,
  signal: AbortSignal | undefined,
  lease: { leaseMs: number } | undefined,
): Promise<Coordinated> {
  const [{ connectCoordinator, CoordinatorUnavailableError }, { coordinatedSeams, sharing }] =
    await Promise.all([import("../coord/index.js"), import("../run/coordinated.js")]);
  const lost = new AbortController();
  const lose = (error: unknown) => {
    if (!lost.signal.aborted) lost.abort(error);
  };
  let coordinator: Awaited<ReturnType<typeof connectCoordinator>>;
  try {
    coordinator = await connectCoordinator(url.url, {
      account,
      ...(signal ? { signal } : {}),
      ...(lease ? { holderLeaseMs: lease.leaseMs } : {}),
      onLost: lose,
    });
  } catch (error) {
    if (error instanceof CoordinatorUnavailableError) {
      throw new ExitError(ExitCode.Unreachable, `${error.message}; nothing was submitted`);
    }
    throw error;
  }
  return {
    sharing: sharing(coordinator, lose),
    seams: coordinatedSeams({ coordinator, pool: located.manifest.pool, lose }),
    lost: lost.signal,
    shardFinished: (run, index, total) => coordinator.shardFinished(run, index, total),
    close: () => coordinator.close(),
  };
}

interface RateMemory {
  where: string;
  read(account: string): Promise<Record<string, RememberedRate>>;
  write(account: string, rates: Record<string, RememberedRate>): Promise<void>;
}

/** Where the rates are remembered: beside the state file, or under the prefix of a state in S3. */
async function rememberedRates(statePath: string, s3: S3ClientOptions): Promise<RateMemory> {
  if (isS3State(statePath)) {
    const { s3Rates } = await import("../state/store.js");
    return s3Rates(statePath, s3);
  }
  const path = ratesPath(statePath);
  return {
    where: path,
    read: (account) => readRates(path, account),
    write: (account, rates) => writeRates(path, account, rates),
  };
}

/** The rate this run found, for the next run on the account (a cache: a failure only costs time). */
async function remember(
  memory: RateMemory,
  account: string,
  gate: ServiceGate,
  logger: Logger,
): Promise<void> {
  const path = memory.where;
  if (gate.requests() === 0) return;
  const rates = gate.remember();
  const limited = gate.limitedCount();
  const found = Object.entries(rates)
    .map(
      ([scope, r]) =>
        `${r.rps}/s ${scope === "key" ? "for the key" : `for ${scope}`}${r.settled ? " (the service's limit)" : ""}`,
    )
    .join(", ");
  logger.info({ event: "rate", rates, limited, path }, `request rate: ${found}; ${limited} answered 429`);
  try {
    await memory.write(account, rates);
  } catch (error) {
    logger.debug({ event: "rate-not-kept", path, error: (error as Error).message }, "the rate was not kept");
  }
}

/**
 * Located once, before anything is connected: the sandbox's state lives beside the run's. A
 * manifest with errors is refused with its problems.
 */
async function locateForRun(
  s: RunSettings,
  cwd: string,
): Promise<{ located: LocatedRun } | { refused: Refusal }> {
  let found: Awaited<ReturnType<typeof locateRun>>;
  try {
    found = await locateRun({
      manifest: s.manifest,
      cwd,
      ...(s.state ? { state: s.state } : {}),
      ...(s.shard ? { shard: s.shard } : {}),
    });
  } catch (error) {
    if (isFsError(error)) throw fsExit(error, { action: "read the manifest", path: s.manifest });
    throw error;
  }
  if (!found.ok) return { refused: { reason: "manifest", errors: found.errors, warnings: found.warnings } };
  const statePath = found.run.statePath;
  if (isS3State(statePath)) return { located: found.run };
  try {
    await mkdir(dirname(statePath), { recursive: true });
  } catch (error) {
    throw fsExit(error, {
      action: "create the state folder",
      path: dirname(statePath),
      hint: "pass --state FILE in a writable place, or run from a writable folder",
    });
  }
  return { located: found.run };
}
