// One run's metrics from start to end: the file rewritten every interval while the run goes and
// once at its end, the push at the end, and the last success carried over from earlier runs.
//
// Nothing here may change how the run ends: a file that cannot be written or a gateway that does
// not answer is a warning naming it, bounded in time, and the exit code stays the run's.

import type { Report } from "../report/model.js";
import type { Progress } from "../run/types.js";
import { isS3State } from "../state/location.js";
import type { MetricsRequest, RunMetricsSession } from "./index.js";
import {
  keepSuccess,
  keptSuccessPath,
  lastSuccessInFile,
  readKeptSuccess,
  replaceFile,
} from "./metrics-file.js";
import { PUSH_TIMEOUT_MS, pushMetrics, shownUrl } from "./push.js";
import { watchRequests } from "./requests.js";
import { RunMetrics } from "./run-metrics.js";

/** How often the file is rewritten while the run goes: a scrape every 15-60 s sees a fresh one. */
const INTERVAL_MS = 15_000;

/**
 * Test-only (documented in docs/metrics.md): CLAPPER_METRICS_INTERVAL_MS rewrites the file more
 * often, and CLAPPER_PUSHGATEWAY_TIMEOUT_MS bounds the push sooner, so a test need not wait.
 */
function fromEnv(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const ms = Number(env[name]);
  return Number.isInteger(ms) && ms >= 50 && ms <= fallback ? ms : fallback;
}

export async function openSession(o: MetricsRequest): Promise<RunMetricsSession> {
  const local = !isS3State(o.statePath);
  const kept = local ? keptSuccessPath(o.statePath) : undefined;
  const known = await Promise.all([
    kept ? readKeptSuccess(kept) : undefined,
    o.file ? lastSuccessInFile(o.file, o.run) : undefined,
  ]);
  const lastSuccess = known.reduce<number | undefined>(
    (a, b) => (b === undefined ? a : a === undefined ? b : Math.max(a, b)),
    undefined,
  );
  const metrics = new RunMetrics(o.run, Date.now(), o.rates, lastSuccess);
  const unwatch = watchRequests((service, code) => metrics.request(service, code));
  let latest: Progress | undefined;
  let writing: Promise<void> | undefined;
  const warned = new Set<string>();

  const writeFile = async (final: boolean): Promise<void> => {
    const file = o.file;
    if (!file) return;
    if (latest) metrics.progress(latest);
    try {
      await replaceFile(file, await metrics.text());
    } catch (error) {
      const message = (error as Error).message;
      // Once a message while the run goes (the next tick would say it again), and at the end.
      if (!final && warned.has(message)) return;
      warned.add(message);
      o.logger.warn(
        { event: "metrics-file-failed", path: file, error: message },
        `the metrics file ${file} was not written: ${message}`,
      );
    }
  };
  const tick = () => {
    writing ??= writeFile(false).finally(() => {
      writing = undefined;
    });
  };
  const timer = o.file
    ? setInterval(tick, fromEnv(o.env, "CLAPPER_METRICS_INTERVAL_MS", INTERVAL_MS))
    : undefined;
  // The timer alone must not keep a process alive that has nothing else to do.
  timer?.unref();

  const stop = () => {
    if (timer) clearInterval(timer);
    unwatch();
  };

  const finish = async (report: Report | undefined): Promise<void> => {
    stop();
    await writing;
    if (latest) metrics.progress(latest);
    const succeeded = metrics.finish(report);
    await Promise.all([
      writeFile(true),
      push(o, metrics, fromEnv(o.env, "CLAPPER_PUSHGATEWAY_TIMEOUT_MS", PUSH_TIMEOUT_MS)),
      succeeded !== undefined && kept ? keep(o, kept, succeeded) : undefined,
    ]);
  };

  return {
    around: (run) => async (options) => {
      const told = options.onProgress;
      const onProgress = (p: Progress) => {
        latest = p;
        told?.(p);
      };
      try {
        const outcome = await run({ ...options, onProgress });
        await finish(outcome.report);
        return outcome;
      } finally {
        // A run that threw (a bug) leaves no timer or listener behind; its metrics are not written.
        stop();
      }
    },
  };
}

async function push(o: MetricsRequest, metrics: RunMetrics, timeoutMs: number): Promise<void> {
  if (!o.pushgateway) return;
  const gateway = shownUrl(o.pushgateway);
  try {
    await pushMetrics(
      o.pushgateway,
      o.run,
      o.shard,
      { text: await metrics.text(), contentType: metrics.registry.contentType },
      timeoutMs,
    );
    o.logger.debug({ event: "metrics-pushed", gateway }, `metrics pushed to ${gateway}`);
  } catch (error) {
    const e = error as Error;
    const message =
      e.name === "TimeoutError" || e.name === "AbortError" || /timeout/i.test(e.name)
        ? `no answer within ${timeoutMs / 1000} s`
        : e.message;
    o.logger.warn(
      { event: "metrics-push-failed", gateway, error: message },
      `the metrics were not pushed to ${gateway}: ${message}`,
    );
  }
}

async function keep(o: MetricsRequest, path: string, seconds: number): Promise<void> {
  try {
    await keepSuccess(path, seconds);
  } catch (error) {
    o.logger.warn(
      { event: "last-success-not-kept", path, error: (error as Error).message },
      `the time of this success was not kept in ${path}: ${(error as Error).message}`,
    );
  }
}
