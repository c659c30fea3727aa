// The temporary folders ffmpeg works in (the stills of a review page; the local copies of the shots
// an episode is assembled from, which may be gigabytes fetched from S3). A process killed with
// SIGKILL runs no `finally`: its folder stays. So each folder is named after its maker (pid, host,
// token: src/locks/process-alive.ts), and making one removes those whose maker is gone. (Two
// containers sharing a host name, a temporary folder and a uid see each other's pids as their own:
// one could remove the other's folder, as with the output folder's temporary files. A still is then
// a placeholder, an assembly fails and is run again; neither spends points.)
import { lstat, mkdtemp, opendir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MARK_PATTERN, PROCESS_MARK, writerGone } from "../locks/process-alive.js";

type WorkFolderKind = "stills" | "assemble";

/** `clapper-KIND-PID.HOSTINSTANCE-` and mkdtemp's 6 characters. */
const NAME = new RegExp(`^clapper-(?:stills|assemble)-${MARK_PATTERN}-[A-Za-z0-9]{6}$`);
/**
 * A folder of another host (a temporary folder shared between machines) is removed only once
 * nothing in it changed for this long: a pid of another host means nothing here, and an assembly's
 * ffmpeg may write for hours into a file made at its start.
 */
export const WORK_FOLDER_STALE_MS = 24 * 3600_000;

const tidied = new Map<string, Promise<number>>();

/** Makes a work folder in `root` (the system's temporary folder), first removing those left by makers now gone. */
export async function makeWorkFolder(kind: WorkFolderKind, root: string = tmpdir()): Promise<string> {
  // Once per process and folder: a large run makes stills in many batches, and what a killed
  // process left is gone after the first.
  const tidy = tidied.get(root) ?? removeLeftFolders(root);
  tidied.set(root, tidy);
  await tidy;
  return await mkdtemp(join(root, `clapper-${kind}-${PROCESS_MARK}-`));
}

/** Removes the work folders in `root` whose maker is gone; returns how many. Never fails: it only tidies. */
export async function removeLeftFolders(root: string = tmpdir()): Promise<number> {
  let removed = 0;
  try {
    // Entry by entry: a shared temporary folder may hold a great many.
    for await (const entry of await opendir(root)) {
      if (await removeIfLeft(root, entry.name)) removed++;
    }
  } catch {
    // A folder that cannot be read, or stops being readable midway, is left as it is.
  }
  return removed;
}

async function removeIfLeft(root: string, name: string): Promise<boolean> {
  const m = NAME.exec(name);
  if (!m) return false;
  const gone = writerGone(Number(m[1]), m[2] as string, m[3]);
  if (gone === false) return false;
  const path = join(root, name);
  // lstat: a link named like ours is not ours to follow; another user's folder is theirs.
  const info = await lstat(path).catch(() => undefined);
  if (!info?.isDirectory() || (process.getuid && info.uid !== process.getuid())) return false;
  if (gone === undefined && Date.now() - info.mtimeMs <= WORK_FOLDER_STALE_MS) return false;
  return await rm(path, { recursive: true, force: true }).then(
    () => true,
    () => false,
  );
}
