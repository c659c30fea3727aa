// Which take of each shot goes into the episode: the one picks.yaml (beside the manifest) picks,
// else the one the manifest's `assemble.takes` names, else take 1. Picks come from the review page
// and so change more often than the manifest: a pick wins. A pick may name one of the take's kept
// versions (`shots/s02.v1.mp4`): that earlier output goes in instead of the current one.
import type { Job } from "../manifest/job.js";
import { didYouMean } from "../manifest/problems.js";
import { type Pick, picksPath, readPicks } from "../review/picks.js";
import type { RunState } from "../state/run-state.js";
import { versionName } from "../state/versions.js";
import { isShot } from "./parts.js";

type TakeSource = "pick" | "manifest" | "default";

export interface TakeUsed {
  shot: string;
  take: number;
  /** The kept version picked (the N of `.vN`), when an earlier output of the take was. */
  version?: number;
  source: TakeSource;
}

/** The N of a kept version's name (`s02.v3.mp4` -> 3), or undefined for a name of another form. */
export function versionNumber(uri: string): number | undefined {
  const m = /\.v(\d+)(?:\.[^./]*)?$/.exec(versionName(uri));
  return m ? Number(m[1]) : undefined;
}

/** Why kept version `n` of `take` of `shot` cannot be picked from those `kept`, or undefined. */
export function versionProblem(
  kept: readonly { uri: string }[],
  take: number,
  shot: string,
  n: number,
): string | undefined {
  const known = kept.flatMap((v) => versionNumber(v.uri) ?? []);
  if (known.includes(n)) return undefined;
  return `version ${n} of take ${take} of shot ${shot} does not exist (${known.length > 0 ? `kept: ${known.join(", ")}` : "none is kept"})`;
}

/** Each shot of the manifest (by row id) with its number of takes, in manifest order. */
export function takeCounts(jobs: readonly Job[]): Map<string, number> {
  const takes = new Map<string, number>();
  for (const job of jobs) {
    if (isShot(job)) takes.set(job.rowId, Math.max(takes.get(job.rowId) ?? 0, job.take ?? 1));
  }
  return takes;
}

/** Why `take` of `shot` cannot be used, or undefined when the shot has that take. */
export function takeProblem(
  counts: ReadonlyMap<string, number>,
  shot: string,
  take: number,
): string | undefined {
  const count = counts.get(shot);
  if (count === undefined) return `no shot ${JSON.stringify(shot)}${didYouMean(shot, [...counts.keys()])}`;
  if (take > count)
    return `shot ${shot} has ${count} take${count === 1 ? "" : "s"}, so take ${take} does not exist`;
  return undefined;
}

/**
 * The picks beside the manifest at `manifestPath`, each checked against the manifest's shots and
 * their takes, and (given the run's state) each picked version against the take's kept ones. Throws
 * PicksError naming picks.yaml's line and field.
 */
export function readShotPicks(
  manifestPath: string,
  jobs: readonly Job[],
  state?: RunState,
): Promise<Record<string, Pick>> {
  const counts = takeCounts(jobs);
  return readPicks(picksPath(manifestPath), (shot, pick) => {
    const wrong = takeProblem(counts, shot, pick.take);
    if (wrong !== undefined) return { message: wrong };
    if (!state || pick.version === undefined) return undefined;
    const job = jobs.find((j) => isShot(j) && j.rowId === shot && (j.take ?? 1) === pick.take);
    const kept = job ? (state.jobs[job.id]?.versions ?? []) : [];
    const missing = versionProblem(kept, pick.take, shot, pick.version);
    return missing === undefined ? undefined : { message: missing, at: "version" };
  });
}

/** The take of every shot, in manifest order, and where it was chosen. */
export function takesUsed(
  jobs: readonly Job[],
  manifestTakes: Readonly<Record<string, number>>,
  picks: Readonly<Record<string, Pick>>,
): TakeUsed[] {
  return [...takeCounts(jobs).keys()].map((shot): TakeUsed => {
    const picked = picks[shot];
    if (picked !== undefined)
      return picked.version === undefined
        ? { shot, take: picked.take, source: "pick" }
        : { shot, take: picked.take, version: picked.version, source: "pick" };
    const named = manifestTakes[shot];
    if (named !== undefined) return { shot, take: named, source: "manifest" };
    return { shot, take: 1, source: "default" };
  });
}
