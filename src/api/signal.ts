// A signal that follows its callers' signals and may also time out, with a timer that can be
// stopped while the signal still follows (a download's body must not be cut short by the budget
// that limited opening it).

interface LinkedSignal {
  signal: AbortSignal;
  /** The timeout fired (the signal's reason is a TimeoutError, as AbortSignal.timeout's is). */
  readonly timedOut: boolean;
  /** Stops the timeout; the signal still follows its parents. */
  stopTimer(): void;
  /** Lets the signal go: no timeout any more. */
  done(): void;
}

/**
 * A signal aborted by any of `parents` (with its reason) or after `timeoutMs`. `done()` must be
 * called once the signal is no longer needed, so its timer does not outlive it.
 */
export function linkedSignal(
  parents: ReadonlyArray<AbortSignal | undefined>,
  timeoutMs?: number,
): LinkedSignal {
  const timer = new AbortController();
  let timedOut = false;
  // Unref'd like AbortSignal.timeout's: a timeout alone keeps no process alive. Not
  // AbortSignal.timeout itself: its timer cannot be stopped.
  let handle: NodeJS.Timeout | undefined =
    timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          timer.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError"));
        }, timeoutMs).unref();
  const sources = parents.filter((p): p is AbortSignal => p !== undefined);
  const stopTimer = () => {
    clearTimeout(handle);
    handle = undefined;
  };
  return {
    // The first aborted parent gives its reason, as before the timer could fire.
    signal: sources.length === 0 ? timer.signal : AbortSignal.any([...sources, timer.signal]),
    get timedOut() {
      return timedOut;
    },
    stopTimer,
    done: stopTimer,
  };
}
