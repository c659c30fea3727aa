// Where a run's state lives, found one way by every command (run, status, report, cancel): from the
// manifest as the full loader reads it, so the name is validated before any path is built from it,
// and a quick parse can never point a command at another run's state.
import { existsSync } from "node:fs";
import { realpath } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { RunState } from "../engine/state.js";
import { type LoadedManifest, loadManifest, type ManifestInfo, type Problem } from "../manifest/index.js";
import { type Shard, shardLabel } from "./shard.js";
import { isS3State, parseS3State } from "./state-location.js";

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
  /** The state's manifest is gone (moved or renamed): this one takes the state over. */
  warning?: string;
}

/** Whether `located`'s manifest may use `state`. */
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
  if (existsSync(owner)) {
    return {
      refuse: `the state ${located.statePath} belongs to ${owner}, another manifest named "${name}": two manifests with one name would share state and outputs; give this one another name (name: ...), or its own --state and --output`,
    };
  }
  return {
    warning: `the state ${located.statePath} was made for ${owner}, which no longer exists; ${located.manifest.display} takes it over (moved or renamed?)`,
  };
}
