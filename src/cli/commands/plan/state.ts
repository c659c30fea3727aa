// What `plan` reads of a run's state to say what the next run does: found as `run` and `status`
// find it, read without writing (a run may be appending to it right now), and never a reason not to
// plan: a state that cannot be read, or that belongs to another manifest, is a warning.
import { join, resolve } from "node:path";
import { type Job, outputKey } from "../../../manifest/index.js";
import type { Problem } from "../../../manifest/problems.js";
import type { StoreEntry } from "../../../run/admit.js";
import { type JobNext, type NextRun, nextRun, type PlanResult } from "../../../run/plan.js";
import { inShard, type Shard } from "../../../run/shard.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import { checkOwner, defaultStatePath, type LocatedRun } from "../../../state/locate.js";
import { isS3State } from "../../../state/location.js";
import { initialState, type RunState } from "../../../state/run-state.js";

export interface PlanStates {
  /** Where the state was looked for (the first shard's, when each shard has its own). */
  path: string;
  /** Each state read, with the part of the manifest it covers (a shard's, or all of it). */
  groups: Array<{ path: string; shard?: Shard; state: RunState }>;
  /** Said with the plan's warnings: why a state was not used, or that a run holds it now. */
  warnings: Problem[];
  /** False when a state could not be used: the plan then does not say what the next run does. */
  usable: boolean;
  /** Whether any state held a run (a file that exists, with records). */
  found: boolean;
}

/** What the plan says of the next run, beside the plan of the manifest. */
export interface PlanNext {
  state: { path: string; found: boolean };
  /** Null when the state could not be read. */
  next: NextRun | null;
  jobs: ReadonlyMap<string, JobNext>;
}

const warning = (file: string, message: string): Problem => ({
  severity: "warning",
  file,
  line: 0,
  field: "",
  message,
});

/**
 * The states of the run: its own, a shard's (`located.shard`), or each shard's when the manifest is
 * listed split in `shards` without an index (their default places beside the manifest).
 */
export async function readPlanStates(
  located: LocatedRun,
  o: { shards?: number | undefined; stateGiven: boolean; s3?: S3ClientOptions },
): Promise<PlanStates> {
  const { manifest } = located;
  const places: Array<{ path: string; shard?: Shard }> =
    !located.shard && o.shards !== undefined && o.shards > 1
      ? Array.from({ length: o.shards }, (_, i) => {
          const shard = { index: i + 1, total: o.shards as number };
          return { path: defaultStatePath(manifest.dir, manifest.name, shard), shard };
        })
      : [{ path: located.statePath }];
  const out: PlanStates = {
    path: places[0]?.path ?? located.statePath,
    groups: [],
    warnings: [],
    usable: true,
    found: false,
  };
  if (o.stateGiven && places.length > 1) {
    out.warnings.push(
      warning(
        located.statePath,
        "--state with --shards N and no index: which shard's state it is cannot be told; give --shard I/N to plan that shard's next run",
      ),
    );
    out.usable = false;
    return out;
  }
  const { readState } = await import("../run/state.js");
  const { lockHolder } = await import("../../../locks/file-lock.js");
  for (const place of places) {
    let state: RunState;
    try {
      state = await readState(place.path, o.s3, manifest.display);
    } catch (error) {
      out.warnings.push(
        warning(
          place.path,
          `the run's state cannot be read (${(error as Error).message}); the plan does not say what the next run does`,
        ),
      );
      out.usable = false;
      continue;
    }
    const owner = checkOwner(state, { ...located, statePath: place.path });
    if (owner.refuse) {
      out.warnings.push(warning(place.path, `${owner.refuse}; the plan does not use it`));
      out.usable = false;
      continue;
    }
    if (owner.warning) out.warnings.push(warning(place.path, owner.warning));
    if (state.run !== undefined || Object.keys(state.jobs).length > 0) out.found = true;
    if (!isS3State(place.path)) {
      const held = await lockHolder(`${place.path}.lock`).catch(() => undefined);
      if (held) {
        const who = held.owner ? ` (pid ${held.owner.pid} on ${held.owner.host})` : "";
        out.warnings.push(
          warning(
            place.path,
            `a run of this state is going on now${who}: the next run is told from the state as it stands`,
          ),
        );
      }
    }
    out.groups.push({ path: place.path, ...(place.shard ? { shard: place.shard } : {}), state });
  }
  return out;
}

/**
 * What the store holds of each job whose state says it is stored for this version, as a run without
 * --output finds it: a local output folder is listed (a result deleted is made again); an output in
 * S3 is not asked (the plan is offline), and the state is taken at its word.
 */
async function storedOf(
  located: LocatedRun,
  jobs: readonly Job[],
  state: RunState,
): Promise<Array<StoreEntry | undefined>> {
  const recorded = jobs.map((job) => {
    const st = state.jobs[job.id];
    return st?.output && st.output.fingerprint === job.fingerprint ? st.output : undefined;
  });
  const { manifest } = located;
  const target = manifest.output ?? "./output";
  if (/^s3:\/\//i.test(target)) return recorded.map((o) => (o ? { bytes: o.bytes } : undefined));
  const { LocalSink } = await import("../../../sinks/local.js");
  const sink = new LocalSink(join(resolve(manifest.dir, target), manifest.name));
  const asked = jobs.filter((_, i) => recorded[i] !== undefined);
  const found = await sink.statMany(asked.map(outputKey)).catch(() => asked.map(() => undefined));
  const byId = new Map(asked.map((job, i) => [job.id, found[i]]));
  return jobs.map((job) => byId.get(job.id));
}

/** The next run of the planned jobs over the states read: each state for the jobs it covers. */
export async function planNext(
  result: PlanResult,
  located: LocatedRun,
  states: PlanStates,
): Promise<PlanNext> {
  const state = { path: states.path, found: states.found };
  if (!states.usable) return { state, next: null, jobs: new Map() };
  const groups = states.groups.length > 0 ? states.groups : [{ path: states.path, state: initialState() }];
  const jobs = new Map<string, JobNext>();
  let next: NextRun | undefined;
  const add = (a: number | null, b: number | null) => (a === null || b === null ? null : a + b);
  for (const group of groups) {
    const shard = "shard" in group ? group.shard : undefined;
    const mine = shard ? result.jobs.filter((job) => inShard(job, shard)) : result.jobs;
    const decided = nextRun({
      jobs: mine,
      state: group.state,
      stored: await storedOf(located, mine, group.state),
      maxPoints: result.budget,
      available: result.balance?.available_points,
    });
    for (const [id, j] of decided.jobs) jobs.set(id, j);
    const n = decided.next;
    next = next
      ? {
          generate: next.generate + n.generate,
          reuse: next.reuse + n.reuse,
          retry: next.retry + n.retry,
          points: add(next.points, n.points),
          openReserved: next.openReserved + n.openReserved,
          retryFailed: {
            newTasks: next.retryFailed.newTasks + n.retryFailed.newTasks,
            downloads: next.retryFailed.downloads + n.retryFailed.downloads,
            points: add(next.retryFailed.points, n.retryFailed.points),
          },
          // Each shard is admitted on its own: a verdict over their sum would be no shard's.
          firstRun: next.firstRun && n.firstRun,
        }
      : n;
  }
  return { state, next: next ?? null, jobs };
}
