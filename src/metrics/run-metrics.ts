// A run's numbers in Prometheus' terms, in a registry of its own (never prom-client's global one,
// which a program embedding clapper may use for itself). Every series carries `run="<name>"`, the
// run's name as report.json has it, so that one collector can hold the files of many manifests.
//
// While the run goes, the jobs and points follow the live feed (src/run/feed.ts) in the report's
// words; at the end the report itself replaces them, so the last file says what report.json says.
import { Counter, Gauge, Registry } from "prom-client";
import type { Report } from "../report/model.js";
import type { Progress } from "../run/types.js";

const SERVICES = ["video", "speech"] as const;
type Service = (typeof SERVICES)[number];
const JOB_STATUSES = ["succeeded", "failed", "cancelled", "skipped", "pending"] as const;
const RUN_STATUSES = ["running", "succeeded", "partial", "failed", "interrupted"] as const;
type RunStatus = (typeof RUN_STATUSES)[number];

/** Where the request rate the gate lets through now is read (src/rate/limiter.ts's ServiceGate). */
export type RateSource = Record<Service, { currentRps: number }>;

export class RunMetrics {
  readonly registry = new Registry();
  private readonly jobs: Gauge<"status">;
  private readonly spent: Gauge;
  private readonly lastRun: Gauge;
  private readonly lastSuccess: Gauge;
  private readonly runStatus: Gauge<"status">;
  private readonly requests: Counter<"service" | "code">;
  private readonly limited: Counter<"service">;
  private readonly inFlight: Gauge<"service">;
  private ended: number | undefined;

  constructor(
    run: string,
    private readonly startedAt: number,
    rates: RateSource,
    lastSuccess: number | undefined,
  ) {
    this.registry.setDefaultLabels({ run });
    const registers = [this.registry];
    this.jobs = new Gauge({
      name: "clapper_jobs",
      help: "Jobs of the run by status, in report.json's words",
      labelNames: ["status"],
      registers,
    });
    this.spent = new Gauge({ name: "clapper_points_spent", help: "Points the run spent", registers });
    const metrics = this;
    new Gauge({
      name: "clapper_run_duration_seconds",
      help: "How long the run took (while it runs: so far)",
      registers,
      collect() {
        this.set(((metrics.ended ?? Date.now()) - metrics.startedAt) / 1000);
      },
    });
    this.lastRun = new Gauge({
      name: "clapper_last_run_timestamp_seconds",
      help: "When the latest run ended (while it runs: when it started), in seconds since the epoch",
      registers,
    });
    this.lastSuccess = new Gauge({
      name: "clapper_last_success_timestamp_seconds",
      help: "When a run of this manifest last ended succeeded, in seconds since the epoch",
      registers,
    });
    this.runStatus = new Gauge({
      name: "clapper_run_status",
      help: "1 for the run's status (running while it runs), 0 for the others",
      labelNames: ["status"],
      registers,
    });
    this.requests = new Counter({
      name: "clapper_requests_total",
      help: "Requests to the services' APIs by service and HTTP status (error: no answer)",
      labelNames: ["service", "code"],
      registers,
    });
    this.limited = new Counter({
      name: "clapper_rate_limited_total",
      help: "Requests the services answered 429 (too many requests)",
      labelNames: ["service"],
      registers,
    });
    new Gauge({
      name: "clapper_request_rate",
      help: "Requests per second the run lets through to the service now (the rate it found or settled at)",
      labelNames: ["service"],
      registers,
      collect() {
        for (const service of SERVICES) this.set({ service }, round(rates[service].currentRps));
      },
    });
    this.inFlight = new Gauge({
      name: "clapper_tasks_in_flight",
      help: "Tasks of the run created at the service and not ended",
      labelNames: ["service"],
      registers,
    });
    for (const service of SERVICES) {
      this.limited.inc({ service }, 0);
      this.inFlight.set({ service }, 0);
    }
    for (const status of JOB_STATUSES) this.jobs.set({ status }, 0);
    this.spent.set(0);
    this.lastRun.set(startedAt / 1000);
    this.status("running");
    // Unknown until a run succeeds: written as nothing rather than 0, which would read as "long ago".
    if (lastSuccess !== undefined) this.lastSuccess.set(lastSuccess);
  }

  /** An answer (or a failed attempt) of the service's API. */
  request(service: Service, code: string): void {
    this.requests.inc({ service, code });
    if (code === "429") this.limited.inc({ service });
  }

  /** The live feed's news, in the report's words: a stored job is succeeded, or skipped when reused. */
  progress(p: Progress): void {
    if (this.ended !== undefined) return;
    const c = p.counts;
    this.jobs.set({ status: "succeeded" }, Math.max(0, c.stored - p.reused));
    this.jobs.set({ status: "skipped" }, p.reused);
    this.jobs.set({ status: "failed" }, c.failed);
    this.jobs.set({ status: "cancelled" }, c.cancelled);
    this.jobs.set({ status: "pending" }, c.pending + c.submitting + c.running + c.collecting);
    this.spent.set(p.spent);
    const flying: Record<Service, number> = { video: 0, speech: 0 };
    for (const task of p.inFlight) flying[task.kind] += 1;
    for (const service of SERVICES) this.inFlight.set({ service }, flying[service]);
  }

  /**
   * The run ended: its report's counts and points, when it has a report (a manifest refused or a
   * budget too small has none: the run then counts as failed). Returns the last success (seconds).
   */
  finish(report: Report | undefined, now = Date.now()): number | undefined {
    this.ended = now;
    this.lastRun.set(now / 1000);
    // This process follows nothing any more; an interrupted run leaves tasks at the service.
    const flying: Record<Service, number> = { video: 0, speech: 0 };
    for (const job of report?.jobs ?? []) flying[job.kind] += job.in_flight?.tasks ?? 0;
    for (const service of SERVICES) this.inFlight.set({ service }, flying[service]);
    if (report) {
      for (const status of JOB_STATUSES) this.jobs.set({ status }, report.counts[status]);
      this.spent.set(report.points.spent);
    }
    const status = report?.run.status ?? "failed";
    this.status(status);
    if (status === "succeeded") {
      this.lastSuccess.set(now / 1000);
      return now / 1000;
    }
    return undefined;
  }

  private status(now: RunStatus): void {
    for (const status of RUN_STATUSES) this.runStatus.set({ status }, status === now ? 1 : 0);
  }

  /** The exposition text (Prometheus' text format 0.0.4). */
  text(): Promise<string> {
    return this.registry.metrics();
  }
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}
