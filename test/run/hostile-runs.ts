// What the kill tests against the hostile service share: the balance as the sandbox itself tells it,
// one run stopped at a chosen moment, runs until one ends by itself, and what the state says was paid.
import { attemptCost } from "../../src/state/run-state.js";
import type { HostileService } from "../fixtures/hostile.js";
import { type CliResult, cli, journalRecords, type LogEvent, replay, type Workspace } from "./harness.js";

const ARGS = ["--log-format", "json", "--poll-interval", "0.05", "--give-up-after", "5"];

/** The account's balance, asked of the sandbox itself once nothing is reserved. */
export async function balance(svc: HostileService, key: string): Promise<number> {
  for (let i = 0; ; i++) {
    const res = await fetch(`${svc.sandbox.url}/vid/v2/query/point_usage_summary`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const b = (await res.json()) as { total_points: number; reserved_points: number };
    if (b.reserved_points === 0 || i > 200) return b.total_points;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export interface HostileRun {
  svc: HostileService;
  ws: Workspace;
  key: string;
  /** CLAPPER_RETRY_BASE_MS: the first retry's wait. */
  retryBaseMs: number;
}

/** One run, stopped by `signal` `afterMs` after its first log line (or never). */
export function run(r: HostileRun, stop?: { signal: NodeJS.Signals; afterMs: number }): Promise<CliResult> {
  let sent = false;
  return cli(["run", r.ws.manifest, ...ARGS], {
    cwd: r.ws.dir,
    env: {
      CLAPPER_BASE_URL: r.svc.url,
      CLAPPER_API_KEY: r.key,
      CLAPPER_RETRY_BASE_MS: String(r.retryBaseMs),
    },
    killAfterMs: 60_000,
    ...(stop
      ? {
          // Once: a second SIGTERM is a forced stop, another story.
          on: (_e: LogEvent) => {
            if (sent) return undefined;
            sent = true;
            return stop.signal;
          },
          onDelayMs: stop.afterMs,
        }
      : {}),
  }).done;
}

/** Runs until one ends by itself (not stopped by a signal, not interrupted): its result. */
export async function runUntilEnded(r: HostileRun, story: string[]): Promise<CliResult> {
  for (let i = 0; i < 6; i++) {
    const result = await run(r);
    story.push(result.signal ? `killed ${result.signal}` : `exit ${result.code}`);
    if (result.signal === null && result.code !== 4) return result;
  }
  throw new Error(`no run ended by itself: ${story.join("; ")}`);
}

/** What every attempt in the state cost: what the account paid, by clapper's own account. */
export async function paidByState(ws: Workspace): Promise<number> {
  const state = replay(await journalRecords(ws.statePath));
  return Object.values(state.jobs)
    .flatMap((job) => job.attempts)
    .reduce((sum, a) => sum + attemptCost(a), 0);
}
