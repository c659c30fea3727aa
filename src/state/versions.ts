// Earlier outputs of a job kept beside its current one, as the state records them.
import type { JobState } from "./run-state.js";

/** An earlier output of a job, kept under its own name (`shots/s02.v1.mp4`) when a new result replaced it. */
export interface KeptVersion {
  uri: string;
  /** The replaced output's, as the state recorded it when it was stored. */
  sha256: string;
  bytes: number;
  /** When it was set aside for the new result (ms since the epoch, this machine's clock). */
  at: number;
}

/** The last part of a version's uri: what tells two versions of one job apart, wherever they are. */
export function versionName(uri: string): string {
  return uri.slice(uri.lastIndexOf("/") + 1);
}

export function keepVersion(job: JobState, version: KeptVersion): void {
  const versions = job.versions ?? [];
  const at = versions.findIndex((v) => versionName(v.uri) === versionName(version.uri));
  if (at >= 0) {
    // A relocation names the same file where it now is; the move it records was made long ago.
    const moved = versions[at] as KeptVersion;
    versions[at] = { ...moved, uri: version.uri };
    if (job.keeping === moved.uri) job.keeping = version.uri;
  } else {
    versions.push(version);
    job.keeping = version.uri;
  }
  job.versions = versions;
}

/** What an edited job keeps of its versions: the files stay its own, whatever its row becomes. */
export function keptOf(job: JobState | undefined): Pick<JobState, "versions" | "keeping" | "former"> {
  return {
    ...(job?.versions ? { versions: job.versions } : {}),
    ...(job?.keeping ? { keeping: job.keeping } : {}),
    ...(job?.former ? { former: job.former } : {}),
  };
}
