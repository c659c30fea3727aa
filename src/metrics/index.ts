// The run's metrics, as the run command asks for them (`--metrics-file`, `--pushgateway`). This
// module is loaded by every run; prom-client and the rest are loaded only when a flag asks.
import type { Logger } from "pino";
import type { Report } from "../report/model.js";
import type { Progress } from "../run/types.js";
import type { RateSource } from "./run-metrics.js";

export interface MetricsRequest {
  file?: string | undefined;
  pushgateway?: string | undefined;
  /** The run's name, as report.json's run.name. */
  run: string;
  /** A shard's index: its push is grouped by it too, so shards of one run do not replace each other's. */
  shard?: number;
  /** The run's state file: the last success is kept beside it (a local state only). */
  statePath: string;
  rates: RateSource;
  logger: Logger;
  env: NodeJS.ProcessEnv;
}

export interface RunMetricsSession {
  /**
   * The run, measured: its progress feed told to the metrics too, and at its end the last file
   * written and the push made, each bounded in time; a failure to do either is only a warning.
   */
  around<O extends { onProgress?: (p: Progress) => void }, R extends { report?: Report }>(
    run: (options: O) => Promise<R>,
  ): (options: O) => Promise<R>;
}

const NONE: RunMetricsSession = { around: (run) => run };

export async function startMetrics(o: MetricsRequest): Promise<RunMetricsSession> {
  if (!o.file && !o.pushgateway) return NONE;
  const { openSession } = await import("./session.js");
  return openSession(o);
}

/** `--pushgateway URL`: an http or https URL; `refuse` makes the usage error of a message. */
export function pushgatewayUrl(raw: string, refuse: (message: string) => Error): string {
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    throw refuse(`expected the gateway's http(s) URL (http://pushgateway:9091), got ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw refuse(`expected an http or https URL, got ${JSON.stringify(raw)}`);
  }
  if (url.search || url.hash)
    throw refuse(`the gateway's URL takes no query or fragment, got ${JSON.stringify(raw)}`);
  return url.toString();
}
