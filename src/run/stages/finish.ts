// Stage 5, finish: the report (report.json, report.md, junit.xml and the step summary), the
// `finish` record of a run that ended, and how it ended. An interrupted run (a stop, the deadline,
// an unreachable service) writes its report but not `finish`: the next run resumes it.

import type { Launch } from "../../episode/ffmpeg-run.js";
import { buildReport } from "../../report/build.js";
import { reportsFolder, writeReports } from "../../report/writing.js";
import type { RunContext } from "../context.js";
import { errorInfo } from "../errors.js";
import { inShard } from "../shard.js";
import type { RunOutcome, StoppedBy } from "../types.js";
import type { Admitted } from "./admission.js";
import type { Executed } from "./execute.js";
import type { Opened } from "./open.js";

/** The page's stills: none, or made through the helper the run's stills already started. */
function stillsOf(ctx: RunContext): { stills?: false | Launch } {
  if (ctx.options.stills === false) return { stills: false };
  return ctx.stills ? { stills: ctx.stills.launch } : {};
}

export async function finish(
  ctx: RunContext,
  opened: Opened,
  admitted: Admitted,
  executed: Executed,
): Promise<RunOutcome> {
  ctx.feed.setPhase("reporting");
  const { options, halt } = ctx;
  const { runner } = executed;
  const { sink, located } = opened;
  const { planned, store } = admitted;
  const interrupted = ctx.signal.aborted;
  const stoppedBy: StoppedBy | undefined =
    halt.by ?? executed.stoppedBy ?? (runner.stopped ? "budget" : undefined);
  const halted = halt.by && halt.by !== "signal" ? halt.message : undefined;
  const stopMessage = halted ?? runner.stopped;
  const notes = [halted, runner.stopped, runner.collectionPending, runner.unfinished].filter(
    (n): n is string => n !== undefined,
  );
  // With --only, the run is about the jobs it was asked to do; the others are listed as they stand.
  const chosen = options.only ? planned.jobs.filter(admitted.selected).map((job) => job.id) : undefined;
  const shard = located.shard;
  // A shard's report lists its own jobs: the others are another shard's to report.
  const jobs = shard ? planned.jobs.filter((job) => inShard(job, shard)) : planned.jobs;
  const report = buildReport({
    state: store.state,
    jobs,
    ...(shard ? { shard } : {}),
    manifest: located.manifest.display,
    name: located.manifest.name,
    interrupted,
    ...(chosen ? { selected: chosen } : {}),
    balanceAfter: interrupted
      ? undefined
      : (await options.clients.video.pointsSummary().catch(() => undefined))?.available_points,
    ...(notes.length > 0 ? { note: notes.join("; ") } : {}),
    ...(stoppedBy ? { stoppedBy } : {}),
    ...(stopMessage ? { stopMessage } : {}),
  });
  let reportUris: string[] | undefined;
  await ctx.stills?.settle();
  try {
    reportUris = await writeReports(sink, report, options.env ?? process.env, {
      folder: reportsFolder(shard),
      jobs,
      manifestPath: located.manifest.path,
      ...stillsOf(ctx),
      signal: ctx.signal,
      onWarning: (message) => ctx.log.warn({ event: "report-warning" }, message),
    });
  } catch (error) {
    // The outcome still reaches the caller and the journal; the reports can be written again.
    notes.push(
      `the reports could not be written to ${sink.uri(reportsFolder(shard))}: ${errorInfo(error).message}; the state is saved: run again (or clapper report) to write them`,
    );
    ctx.log.error({ event: "report-failed", error: errorInfo(error) }, "the reports could not be written");
  }
  if (sink.cleanup && !interrupted) {
    // Uploads this run could not abort when they failed (the store was unreachable then).
    await sink.cleanup(new Date()).catch(() => undefined);
  }
  const campaign = store.state.campaign;
  if (!interrupted) {
    await store.append(
      {
        t: "finish",
        finished_at: report.run.finished_at ?? new Date().toISOString(),
        ...(report.points.balance_after !== null ? { balance_after: report.points.balance_after } : {}),
      },
      { durable: true },
    );
  }
  const end = interrupted
    ? halt.end
    : report.run.status === "succeeded" && reportUris
      ? "succeeded"
      : "jobs-failed";
  return {
    end,
    report,
    ...(stoppedBy ? { stoppedBy } : {}),
    ...(reportUris ? { reportUris } : {}),
    statePath: located.statePath,
    warnings: planned.warnings,
    pollRequests: executed.pollRequests,
    ...(interrupted ? {} : { finishedCampaign: campaign }),
    ...(notes.length > 0 ? { message: notes.join("; ") } : {}),
  };
}
