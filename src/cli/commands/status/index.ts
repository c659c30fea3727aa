// `clapper status MANIFEST`: where the run stands, from its state (offline).
import { lockHolder } from "../../../locks/file-lock.js";
import type { Report } from "../../../report/model.js";
import { plural } from "../../../report/words.js";
import type { Shard } from "../../../run/shard.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import { isS3State } from "../../../state/location.js";
import { table } from "../../output.js";
import { locate, neverRun, ownState, reportFromState } from "../run/state.js";

/** `status` of a manifest never run: the report's shape, its jobs pending, `run.status` "not-run". */
export type StatusReport = Omit<Report, "run"> & {
  run: Omit<Report["run"], "status" | "started_at"> & {
    /** `running`: a live process holds the run's lock; `interrupted` is a run begun and not held. */
    status: Report["run"]["status"] | "not-run" | "running";
    started_at: string | null;
    /** Who runs it, while it is running. */
    holder?: { pid: number; host: string; since: string };
  };
};

export async function status(o: {
  manifest: string;
  cwd: string;
  state?: string | undefined;
  shard?: Shard | undefined;
  s3?: S3ClientOptions;
}): Promise<StatusReport> {
  const located = await locate(o.manifest, o.cwd, o);
  const state = await ownState(located, o.s3);
  const report = await reportFromState(located, state);
  if (report.run.status === "interrupted" && !isS3State(located.statePath)) {
    // Begun and not finished: running, if a live process holds its lock; else it was stopped.
    const held = await lockHolder(`${located.statePath}.lock`);
    if (held) {
      const o = held.owner;
      return {
        ...report,
        run: {
          ...report.run,
          status: "running",
          ...(o ? { holder: { pid: o.pid, host: o.host, since: o.started_at } } : {}),
        },
        note: `running now${o ? ` (pid ${o.pid} on ${o.host}, since ${o.started_at})` : ""}: the counts are what its state holds so far`,
      };
    }
  }
  if (!neverRun(state)) return report;
  return {
    ...report,
    run: { ...report.run, status: "not-run", started_at: null, finished_at: null },
    note: `not run yet: clapper run ${located.manifest.display} starts it`,
  };
}

export function renderStatus(r: StatusReport): string {
  const c = r.counts;
  const all = r.jobs.reduce((sum, j) => sum + (j.spent_total ?? j.points), 0);
  const head =
    r.run.status === "not-run"
      ? `run ${r.run.name}: not run yet (${plural(c.total, "job")} planned; clapper run ${r.run.manifest} starts it)`
      : `run ${r.run.name}: ${r.run.status}${r.run.holder ? ` (pid ${r.run.holder.pid} on ${r.run.holder.host})` : ""} (${plural(c.total, "job")}: ${c.succeeded} succeeded, ${c.skipped} skipped, ${c.failed} failed, ${c.cancelled} cancelled, ${c.pending} pending; ${r.points.spent} points spent in ${r.run.finished_at === null ? "this" : "the last"} run, ${all} in all runs)`;
  const edited = r.jobs.filter((j) => j.edited).length;
  return [
    head,
    "",
    table(r.jobs, [
      { header: "JOB", value: (j) => j.id },
      { header: "KIND", value: (j) => j.kind },
      { header: "STATUS", value: (j) => j.status },
      // The status stays what the run made of the earlier version; the mark says it is stale.
      { header: "EDITED", value: (j) => (j.edited ? "edited" : "") },
      { header: "POINTS", value: (j) => j.points, align: "right" },
      { header: "IN ALL", value: (j) => j.spent_total ?? j.points, align: "right" },
      { header: "ATTEMPTS", value: (j) => j.attempts, align: "right" },
      { header: "TASK", value: (j) => j.task_id },
      // Earlier outputs kept beside the current one (shots/s02.v1.mp4, ...).
      { header: "KEPT", value: (j) => j.versions?.length || "", align: "right" },
      { header: "OUTPUT / ERROR", value: (j) => j.output?.uri ?? j.error?.message },
    ]),
    ...(edited > 0
      ? [
          "",
          `${plural(edited, "row")} edited in the manifest since ${edited === 1 ? "its" : "their"} output was made: the next run generates ${edited === 1 ? "it" : "them"} again (clapper plan ${r.run.manifest} says what it costs)`,
        ]
      : []),
    "",
    "POINTS: what the last run spent on the job; IN ALL: what its outputs cost over every run; KEPT: earlier versions of its output kept beside it",
  ].join("\n");
}
