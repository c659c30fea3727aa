// Earlier outputs kept when a job's new result replaces its stored one: `shots/s02.mp4` is set aside
// as `shots/s02.v1.mp4` (then v2, ...) once the new result is paid for, complete and checked, just
// before it takes the name. The version is journalled (durably) before the move, so a kill at any
// point leaves the old file under one of its two names and recorded, and the next store finishes it.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import type { Job } from "../manifest/index.js";
import type { Sink } from "../sinks/sink.js";
import type { JobState } from "../state/run-state.js";
import { type KeptVersion, versionName } from "../state/versions.js";
import type { JobContext } from "./job-context.js";

/** Kept versions looked for past the last one recorded (names taken by hand, or by a lost state). */
const MAX_NUMBERS = 1000;

/** `shots/s02.mp4`, 1 -> `shots/s02.v1.mp4`. */
function versionKey(key: string, n: number): string {
  const slash = key.lastIndexOf("/");
  const dot = key.lastIndexOf(".");
  return dot > slash + 1 ? `${key.slice(0, dot)}.v${n}${key.slice(dot)}` : `${key}.v${n}`;
}

/** The key of a recorded version, beside its job's output (wherever the state was written). */
function keyOfVersion(key: string, version: KeptVersion): string {
  return `${key.slice(0, key.lastIndexOf("/") + 1)}${versionName(version.uri)}`;
}

/**
 * What a new result of `job` must do before it takes `key`, or undefined when the state knows of
 * nothing stored there to keep (a first generation; a sink that keeps no versions).
 */
export function keeper(c: JobContext, job: Job, key: string): (() => Promise<void>) | undefined {
  const st = c.journal.state.jobs[job.id] as JobState | undefined;
  if (!c.sink.keep || !st || !(st.keeping || st.output || st.former)) return undefined;
  return () => keepEarlier(c, job, key);
}

async function keepEarlier(c: JobContext, job: Job, key: string): Promise<void> {
  const sink = c.sink;
  const st = c.journal.state.jobs[job.id] as JobState;
  const keep = sink.keep?.bind(sink);
  if (!keep) return;
  if (st.keeping) {
    // Recorded by a run killed around the move: made now unless it was (the old file is then at
    // the version's name, and what stands at the output's is a new result not yet recorded).
    const recorded = st.versions?.find((v) => v.uri === st.keeping);
    if (!recorded) return;
    const to = keyOfVersion(key, recorded);
    if (!(await sink.stat(to)) && (await sink.stat(key))) await keep(key, to);
    return;
  }
  const current = st.output ?? st.former;
  const found = await sink.stat(key);
  // Nothing stored under the name any more (removed by hand): nothing to keep.
  if (!current || !found) return;
  const to = await freeKey(sink, key, st);
  // The state's hash of what it stored, unless the file is not that one (replaced by hand).
  const sha256 =
    current.sha256 && found.bytes === current.bytes
      ? current.sha256
      : (found.metadata?.sha256 ?? (await hashOf(sink, key, found.bytes)));
  const version = { uri: sink.uri(to), sha256, bytes: found.bytes, at: Date.now() };
  await c.journal.append({ t: "version", id: job.id, version }, { durable: true });
  await keep(key, to);
  c.log.info({ job: job.id, event: "version-kept", uri: version.uri }, "earlier result kept");
}

/** The next version name no recorded version and no stored object holds. */
async function freeKey(sink: Sink, key: string, st: JobState): Promise<string> {
  let n = 0;
  for (const v of st.versions ?? []) {
    const m = /\.v(\d+)(?:\.[^./]*)?$/.exec(versionName(v.uri));
    if (m) n = Math.max(n, Number(m[1]));
  }
  for (let i = 1; i <= MAX_NUMBERS; i++) {
    const candidate = versionKey(key, n + i);
    if (!(await sink.stat(candidate))) return candidate;
  }
  throw new Error(`${key}: versions ${n + 1} to ${n + MAX_NUMBERS} are all taken`);
}

/** The sha256 of a stored file the state holds no hash for (read only where the sink is a folder). */
async function hashOf(sink: Sink, key: string, bytes: number): Promise<string> {
  if (!sink.localPath) return "";
  const hash = createHash("sha256");
  // Bounded by what stat said: a file growing under us is not read for ever.
  for await (const chunk of createReadStream(sink.localPath(key), { end: Math.max(0, bytes - 1) }))
    hash.update(chunk as Buffer);
  return hash.digest("hex");
}
