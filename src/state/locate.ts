// Where a run's state lives, found one way by every command (run, status, report, cancel): from the
// manifest as the full loader reads it, so the name is validated before any path is built from it,
// and a quick parse can never point a command at another run's state.
import { existsSync, realpathSync } from "node:fs";
import { mkdir, readFile, realpath, writeFile } from "node:fs/promises";
import { basename, dirname, join, relative, resolve } from "node:path";
import { type LoadedManifest, loadManifest, type ManifestInfo, type Problem } from "../manifest/index.js";
import { type Shard, shardLabel } from "../run/shard.js";
import { isS3State, parseS3State } from "./location.js";
import type { RunState } from "./run-state.js";

export interface LocatedRun {
  loaded: LoadedManifest;
  manifest: ManifestInfo;
  /** The manifest's real path: what the state records as its owner. */
  realPath: string;
  /** The journal file, or s3://BUCKET/PREFIX. */
  statePath: string;
  /** The part of the manifest this process works on; undefined for the whole of it. */
  shard?: Shard;
}

export type Located = { ok: true; run: LocatedRun } | { ok: false; errors: Problem[]; warnings: Problem[] };

/** `.clapper/NAME/state.jsonl`, or `.clapper/NAME/shard-I-of-N/state.jsonl` for a shard. */
export function defaultStatePath(manifestDir: string, name: string, shard?: Shard): string {
  const folder = join(manifestDir, ".clapper", name);
  return join(shard ? join(folder, `shard-${shardLabel(shard)}`) : folder, "state.jsonl");
}

/**
 * `--state`: a file relative to cwd, or s3://BUCKET/PREFIX as one spelling (the lock is named by
 * it). A shard's state in S3 is `PREFIX/shard-I-of-N`: every pod of a scheduler is given the same
 * command line. A file given with a shard is the shard's own (a machine's disk is its own).
 */
function statePlace(state: string, cwd: string, shard: Shard | undefined): string {
  if (!isS3State(state)) return resolve(cwd, state);
  const place = parseS3State(state).uri;
  return shard ? `${place}/shard-${shardLabel(shard)}` : place;
}

/**
 * Loads the manifest offline (no service is asked; speech lines are priced later) and names its
 * state. A manifest with errors has no state: every path would be built from unchecked input.
 */
export async function locateRun(o: {
  manifest: string;
  cwd: string;
  state?: string;
  shard?: Shard | undefined;
}): Promise<Located> {
  const loaded = await loadManifest(o.manifest, { cwd: o.cwd });
  if (!loaded.manifest || loaded.errors.length > 0) {
    return { ok: false, errors: loaded.errors, warnings: loaded.warnings };
  }
  const manifest = loaded.manifest;
  const statePath = o.state
    ? statePlace(o.state, o.cwd, o.shard)
    : defaultStatePath(manifest.dir, manifest.name, o.shard);
  const realPath = await realpath(manifest.path).catch(() => manifest.path);
  return { ok: true, run: { loaded, manifest, realPath, statePath, ...(o.shard ? { shard: o.shard } : {}) } };
}

export interface Ownership {
  /** The state belongs to another manifest that still exists: using it would mix two runs. */
  refuse?: string;
  /** The state's manifest is gone (moved or renamed), or this is its copy: this one takes the state over. */
  warning?: string;
}

/** A path as the file system resolves it (symbolic links followed), or undefined when nothing is there. */
function real(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}

/**
 * Where a recorded owner sits seen from `base` (the state's folder, or the output folder), for a
 * project copied or moved whole (`cp -a`, a checkout copied with its `.clapper/`): the manifest
 * that lies where the owner lay relative to its state is the owner's copy. Absolute paths say
 * nothing once a folder is copied or a volume is mounted elsewhere.
 */
function relativeOwner(base: string, relativePath: string | undefined): string | undefined {
  return relativePath === undefined ? undefined : resolve(base, relativePath);
}

/**
 * Whether `located`'s manifest may use `state`. Two manifests are the same one when one lies where
 * the other lay, seen from the state: a copy or a move of the whole project adopts its state. A
 * state whose owner is another manifest that still exists is refused: two manifests with one name
 * would share state and outputs.
 */
export function checkOwner(state: RunState, located: LocatedRun): Ownership {
  const owner = state.manifest_path;
  // No owner recorded (a new state, or one older than this rule): the run records this manifest.
  if (owner === undefined || owner === located.realPath) return {};
  const name = located.manifest.name;
  // A state in S3 is shared by pods whose checkouts lie anywhere: a path of another machine says
  // nothing here, whether it exists or not.
  if (isS3State(located.statePath)) {
    return {
      warning: `the state ${located.statePath} was last run from ${owner}; ${located.manifest.display} goes on with it`,
    };
  }
  const here = dirname(located.statePath);
  // A state older than `manifest_rel`, at this manifest's own default place: it was made beside a
  // manifest of this file name, which is this one's copy.
  const atHome = located.statePath === defaultStatePath(located.manifest.dir, name, located.shard);
  const beside =
    relativeOwner(here, state.manifest_rel) ??
    (atHome ? join(located.manifest.dir, basename(owner)) : undefined);
  if (beside !== undefined && real(beside) === located.realPath) {
    // Copied while tasks were in flight, the original still there: both would follow and report
    // the same tasks, and between them count their points twice.
    const inFlight = Object.values(state.jobs).filter((job) =>
      [...job.attempts, ...(job.previous ?? [])].some((a) => a.spent === undefined && a.taskId),
    ).length;
    if (inFlight > 0 && existsSync(owner)) {
      return {
        refuse: `the state ${located.statePath} was copied from ${owner} while ${inFlight} ${inFlight === 1 ? "job's task was" : "jobs' tasks were"} in flight: both projects would follow and report them; run the original until they end (clapper run ${owner}), then copy it again`,
      };
    }
    return {
      warning: `the state ${located.statePath} was made for ${owner}; ${located.manifest.display} lies where that manifest lay beside its state (a copy or a move of the project) and goes on with it`,
    };
  }
  const other = [owner, beside].find((p) => p !== undefined && existsSync(p));
  if (other !== undefined) {
    return {
      refuse: `the state ${located.statePath} belongs to ${other}, another manifest named "${name}": two manifests with one name would share state and outputs; give this one another name (name: ...), or its own --state and --output`,
    };
  }
  return {
    warning: `the state ${located.statePath} was made for ${owner}, which no longer exists; ${located.manifest.display} takes it over (moved or renamed?)`,
  };
}

/** The manifest's path from the state's folder, recorded with the state's owner (see `checkOwner`). */
export function manifestFromState(located: LocatedRun): string | undefined {
  return isS3State(located.statePath) ? undefined : relative(dirname(located.statePath), located.realPath);
}

/** The file in a local output folder that names the manifest whose results it holds. */
const OWNER_FILE = ".clapper-owner.json";

interface OutputOwner {
  manifest: string;
  /** The manifest's path from the output folder. */
  relative: string;
}

/**
 * Whether `located`'s manifest may write into the local output folder `root`: the same rule as a
 * state's, by the record the folder keeps (`.clapper-owner.json`). Two manifests with one name
 * writing into one folder would overwrite each other's results. S3 outputs are not judged: a
 * path of another machine says nothing here.
 */
export async function checkOutputOwner(root: string, located: LocatedRun): Promise<Ownership> {
  let text: string;
  try {
    text = await readFile(join(root, OWNER_FILE), "utf8");
  } catch {
    return {};
  }
  let recorded: Partial<OutputOwner>;
  try {
    recorded = JSON.parse(text) as Partial<OutputOwner>;
  } catch {
    return {};
  }
  const owner = typeof recorded.manifest === "string" ? recorded.manifest : undefined;
  const beside = relativeOwner(root, typeof recorded.relative === "string" ? recorded.relative : undefined);
  if (owner === undefined || owner === located.realPath) return {};
  if (beside !== undefined && real(beside) === located.realPath) return {};
  const other = [owner, beside].find((p) => p !== undefined && existsSync(p));
  if (other === undefined) return {};
  return {
    refuse: `the output folder ${root} holds the results of ${other}, another manifest named "${located.manifest.name}": give this one another name (name: ...) or its own --output`,
  };
}

/** Records in the local output folder `root` that `located`'s manifest writes there. */
export async function recordOutputOwner(root: string, located: LocatedRun): Promise<void> {
  const record: OutputOwner = { manifest: located.realPath, relative: relative(root, located.realPath) };
  await mkdir(root, { recursive: true });
  await writeFile(join(root, OWNER_FILE), `${JSON.stringify(record, null, 2)}\n`);
}
