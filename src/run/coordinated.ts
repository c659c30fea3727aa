// A run under a coordinator (`--coordinator`): the seams that every clapper process on the account
// shares through Redis. The run's lock lives there with a lease, so a killed container's lock frees
// itself. The ledger is the run's own (the balance, what its journal spent) joined to the shared
// ones: the run's cap across its processes, and the named pool across runs. A reservation needs
// all of them; a coordinator that cannot be asked halts the run (ends `unreachable`) before any create.

import type { z } from "zod";
import { SpeechTask } from "../api/speech.js";
import { VideoTask } from "../api/video.js";
import { LocalLedger, type PointsLedger } from "../budget/ledger.js";
import {
  type Coordinator,
  type CoordLock,
  CoordLockHeldError,
  periodId,
  type SharedLedger,
  type SharedSightings,
} from "../coord/index.js";
import { type Lock, LockHeldError, type LockOptions } from "../locks/file-lock.js";
import type { BudgetPool } from "../manifest/index.js";
import type { Sharing } from "../rate/limiter.js";
import { isS3State } from "../state/location.js";
import type { Sightings } from "../tracking/track.js";
import { DEFAULT_SEAMS } from "./context.js";
import type { LedgerInput, Seams } from "./types.js";

export interface CoordinatedOptions {
  coordinator: Coordinator;
  /** The manifest's `budget.pool`, if any. */
  pool?: BudgetPool | undefined;
  /** The coordinator failed a call: the run halts (ends `unreachable`), state saved. */
  lose(error: unknown): void;
}

/** What the coordinator gives the request gate: the shared rates and in-flight caps. */
export function sharing(coordinator: Coordinator, lose: (error: unknown) => void): Sharing {
  return {
    pace: (scope, settings) => coordinator.rate(scope, settings),
    cap: (service, inFlight) => coordinator.slots(service, inFlight),
    lost: lose,
  };
}

/** The lock and the ledger, through the coordinator. */
export function coordinatedSeams(
  o: CoordinatedOptions,
): Pick<Seams, "lock" | "ledger" | "pool" | "holdRun" | "sightings"> {
  return {
    sightings: {
      video: sightingsOf(o.coordinator.sightings("video"), VideoTask, (t) => t.id),
      speech: sightingsOf(o.coordinator.sightings("speech"), SpeechTask, (t) => t.task_id),
    },
    lock: (path, options) => coordinatedLock(o, path, options),
    ledger: (input) => jointLedger(o, input),
    holdRun: (run, points) => o.coordinator.holdRun(run, points),
    pool: async () => {
      if (!o.pool) return undefined;
      const period = periodId(o.pool.period, new Date());
      const view = await o.coordinator.pool(o.pool.name, period);
      return {
        name: o.pool.name,
        period: o.pool.period,
        periodId: period,
        cap: o.pool.maxPoints,
        committed: (view?.reserved ?? 0) + (view?.spent ?? 0),
      };
    },
  };
}

/**
 * The tracker's view of the shared sightings. What another process wrote is read like a service's
 * answer: checked against the same schema, and dropped when it is not a task.
 */
function sightingsOf<T>(
  shared: SharedSightings,
  schema: z.ZodType<T>,
  idOf: (task: T) => string,
): Sightings<T> {
  return {
    tell: (tasks) => shared.tell(tasks.map((t) => [idOf(t), JSON.stringify(t)] as const)),
    async recall(ids) {
      const raw = await shared.recall(ids);
      return ids.map((_, i) => {
        const r = raw[i];
        if (!r) return undefined;
        let value: unknown;
        try {
          value = JSON.parse(r.task);
        } catch {
          return undefined;
        }
        const parsed = schema.safeParse(value);
        return parsed.success ? { task: parsed.data, at: r.at } : undefined;
      });
    },
  };
}

/**
 * The run's lock as a lease in Redis, named by the state's path: a dead container's lock is gone
 * once its lease runs out, with no file left behind to judge. The lock file beside the state is
 * taken too, so that a command run without the coordinator on the same state (`report`, a run
 * whose shell lacks CLAPPER_REDIS_URL) is refused rather than let in beside this one. A state in
 * S3 has no folder beside it: the coordinator's lock is its only one (a run on it without the
 * coordinator is refused before it starts).
 */
async function coordinatedLock(o: CoordinatedOptions, path: string, options: LockOptions): Promise<Lock> {
  let held: CoordLock;
  try {
    held = await o.coordinator.lock(`state:${path}`, {
      ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
      ...(options.heartbeatMs !== undefined ? { heartbeatMs: options.heartbeatMs } : {}),
      ...(options.breakLock ? { breakLock: true } : {}),
      ...(options.onLost ? { onLost: (error: Error) => options.onLost?.(error as never) } : {}),
      ...(options.wait ? { wait: options.wait } : {}),
    });
  } catch (error) {
    // Exit 5, with the coordinator's own words: who holds it, for how much longer, --break-lock.
    if (error instanceof CoordLockHeldError)
      throw new LockHeldError(path, undefined, 0, 0, false, error.message);
    throw error;
  }
  let file: Lock | undefined;
  try {
    if (!isS3State(path)) file = await DEFAULT_SEAMS.lock(path, options);
  } catch (error) {
    await held.release();
    throw error;
  }
  return {
    path,
    owner: file?.owner ?? {
      pid: held.owner.pid,
      host: held.owner.host,
      started_at: held.owner.started,
    },
    replaced: file?.replaced,
    get lost() {
      return held.lost || file?.lost === true;
    },
    fence: held.fence,
    generation: o.coordinator.generation,
    // Given back in reverse order.
    async release() {
      await file?.release();
      await held.release();
    },
  };
}

async function jointLedger(o: CoordinatedOptions, input: LedgerInput): Promise<PointsLedger> {
  const local = new LocalLedger(input.cap, input.openReserved);
  let shared: SharedLedger;
  try {
    shared = await o.coordinator.ledger({
      scope: input.run.state,
      ...(input.maxPoints !== undefined
        ? {
            run: {
              key: input.run.key,
              name: `${input.run.name} (campaign ${input.run.campaign})`,
              cap: input.maxPoints,
            },
          }
        : {}),
      pools: o.pool ? [{ name: o.pool.name, maxPoints: o.pool.maxPoints, period: o.pool.period }] : [],
      adopt: input.open.map((a) => ({ id: a.id, points: a.points })),
      settled: (id) => {
        const a = input.attempt(id);
        return a?.spent !== undefined ? { spent: a.spent } : undefined;
      },
      ...(input.restore ? { restore: input.restore } : {}),
    });
  } catch (error) {
    o.lose(error);
    throw error;
  }
  return new JointLedger(local, shared, o.lose);
}

/** Both ledgers must accept; the local one first (no round trip), given back if the shared one refuses. */
class JointLedger implements PointsLedger {
  private refused: string | undefined;

  constructor(
    private readonly local: LocalLedger,
    private readonly shared: SharedLedger,
    private readonly lose: (error: unknown) => void,
  ) {}

  async tryReserve(points: number, id?: string): Promise<boolean> {
    this.refused = undefined;
    if (!(await this.local.tryReserve(points, id))) return false;
    try {
      if (await this.shared.tryReserve(points, id)) return true;
      this.refused = this.shared.refusal?.() ?? "a shared budget is spent";
    } catch (error) {
      // No create without a reservation: the run halts, and the caller sees the stop.
      this.lose(error);
    }
    await this.local.settle(points, 0, id);
    return false;
  }

  async markSent(id: string): Promise<void> {
    try {
      await this.shared.markSent(id);
    } catch (error) {
      this.lose(error);
      throw error;
    }
  }

  async settle(reserved: number, spent: number, id?: string): Promise<void> {
    await this.local.settle(reserved, spent, id);
    try {
      await this.shared.settle(reserved, spent, id);
    } catch (error) {
      // The journal has it: the next run settles what the coordinator still holds.
      this.lose(error);
    }
  }

  async adjust(from: number, to: number, id?: string): Promise<boolean> {
    const within = await this.local.adjust(from, to, id);
    try {
      return (await this.shared.adjust(from, to, id)) && within;
    } catch (error) {
      this.lose(error);
      return within;
    }
  }

  snapshot() {
    return this.local.snapshot();
  }

  refusal(): string | undefined {
    return this.refused;
  }

  get withdraw(): readonly string[] {
    return this.shared.withdraw;
  }
}
