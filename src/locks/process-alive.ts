// Whether a process of this machine still runs: what decides if a temporary file or a lock a
// process left is still its own (local outputs, the run's lock file, an episode being assembled).

export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
