// Whether a process of this machine still runs: what decides if a temporary file or a lock a
// process left is still its own (local outputs, the run's lock file, an episode being assembled,
// the work folders of stills and assembly).
import { createHash, randomBytes } from "node:crypto";
import { hostname } from "node:os";

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

// A pid alone cannot tell a dead writer from a live one in containers, where every run is pid 1
// again: what a process leaves behind is named with its pid, a tag of its host and a token of its own.
/** This host's name, hashed to 6 hex digits: a pid means something only on the host that wrote it. */
export const HOST_TAG = createHash("sha256").update(hostname()).digest("hex").slice(0, 6);
/** This process, in 10 hex digits, among every process that had its pid on this host. */
export const INSTANCE = randomBytes(5).toString("hex");
/** This process's mark in the names of what it leaves behind: `PID.HOSTINSTANCE`. */
export const PROCESS_MARK = `${process.pid}.${HOST_TAG}${INSTANCE}`;
/** A mark in a name, as a regular expression's source: the pid, the host tag and the token, as groups. */
export const MARK_PATTERN = String.raw`(\d+)\.([0-9a-f]{6})([0-9a-f]{10})`;

/**
 * Whether what a process named with these marks left was its last act: true when its writer is
 * gone (a dead pid of this host, or our pid from an earlier process), false when it is this process
 * or one alive here, undefined when this host cannot tell (another host's pid).
 */
export function writerGone(pid: number, host: string, instance: string | undefined): boolean | undefined {
  if (host !== HOST_TAG || !(pid > 0)) return undefined;
  if (pid === process.pid) return instance !== undefined && instance !== INSTANCE;
  return !processAlive(pid);
}
