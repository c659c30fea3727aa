// Which take of each shot goes into the episode: the one picks.yaml (beside the manifest) picks,
// else the one the manifest's `assemble.takes` names, else take 1. Picks come from the review page
// and so change more often than the manifest: a pick wins.
import type { Job } from "../manifest/job.js";
import { didYouMean } from "../manifest/problems.js";
import { picksPath, readPicks } from "../review/picks.js";
import { isShot } from "./parts.js";

type TakeSource = "pick" | "manifest" | "default";

export interface TakeUsed {
  shot: string;
  take: number;
  source: TakeSource;
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
 * their takes. Throws PicksError naming picks.yaml's line and field.
 */
export function readShotPicks(manifestPath: string, jobs: readonly Job[]): Promise<Record<string, number>> {
  const counts = takeCounts(jobs);
  return readPicks(picksPath(manifestPath), (shot, take) => takeProblem(counts, shot, take));
}

/** The take of every shot, in manifest order, and where it was chosen. */
export function takesUsed(
  jobs: readonly Job[],
  manifestTakes: Readonly<Record<string, number>>,
  picks: Readonly<Record<string, number>>,
): TakeUsed[] {
  return [...takeCounts(jobs).keys()].map((shot): TakeUsed => {
    const picked = picks[shot];
    if (picked !== undefined) return { shot, take: picked, source: "pick" };
    const named = manifestTakes[shot];
    if (named !== undefined) return { shot, take: named, source: "manifest" };
    return { shot, take: 1, source: "default" };
  });
}
