import { AbortedError } from "../api/errors.js";
import { LONGEST_TIMER_MS } from "../rate/limiter.js";

/**
 * Waits `ms`; rejects at once when any of `signals` aborts: with the signal's reason when it is an
 * Error (a lost coordinator), else with an AbortedError saying `what` was waited for.
 */
export function sleep(ms: number, what: string, ...signals: Array<AbortSignal | undefined>): Promise<void> {
  const live = signals.filter((s): s is AbortSignal => s !== undefined);
  const reason = (s: AbortSignal): Error =>
    s.reason instanceof Error && s.reason.name !== "AbortError"
      ? s.reason
      : new AbortedError(`aborted while waiting for ${what}`, false);
  const aborted = live.find((s) => s.aborted);
  if (aborted) return Promise.reject(reason(aborted));
  if (ms <= 0) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      for (const s of live) s.removeEventListener("abort", onAbort);
    };
    const onAbort = (event: Event) => {
      done();
      reject(reason(event.target as AbortSignal));
    };
    // Node fires a longer timer at once; the callers' waits are bounded well below it.
    const timer = setTimeout(
      () => {
        done();
        resolve();
      },
      Math.min(ms, LONGEST_TIMER_MS),
    );
    for (const s of live) s.addEventListener("abort", onAbort, { once: true });
  });
}
