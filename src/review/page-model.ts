// What the review page is made of: the report's rows grouped as people review them (one row per
// shot in the manifest's order, its takes and its lines together; lines of no shot, and rows the
// manifest no longer has, apart), and what the filters read off each row.

import type { Job, SpeechJob, VideoJob } from "../manifest/index.js";
import { byKind } from "../report/kinds.js";
import type { Report, ReportJob } from "../report/model.js";
import type { Pick } from "./picks.js";

export interface ReviewPageInput {
  report: Report;
  /** The manifest's jobs, in its order; those without a row in the report are left out. */
  jobs: readonly Job[];
  /** Job id -> the address of its output as the page links it (relative to the page, or presigned). */
  links: ReadonlyMap<string, string>;
  /** A kept version's uri -> its address, as `links`. */
  versionLinks?: ReadonlyMap<string, string> | undefined;
  /** When the links stop working (presigned links), ISO 8601: shown on the page. */
  linksExpireAt?: string | undefined;
  /** A video's uri (an output's or a version's) -> its still, a `data:image/jpeg` URI. */
  stills?: ReadonlyMap<string, string> | undefined;
  /** picks.yaml's picks: shot id -> take (from 1), and the take's kept version when one was picked. */
  picks?: Readonly<Record<string, Pick>> | undefined;
  /** The assembled episode: its address, and its captions (WebVTT text) when written. */
  episode?: { href: string; captions?: string | undefined } | undefined;
  /** Served by `clapper review`: picks are sent to the server, with this token. */
  serve?: { token: string } | undefined;
}

/**
 * The filters of the page, as they mark rows (`data-filters`) and jobs (`data-status`): rows with a
 * failed job, with a job generated in this run, with a reused job.
 */
export type ReviewFilter = "failed" | "generated" | "reused";

export interface Entry<J extends Job = Job> {
  job: J | undefined;
  row: ReportJob;
}

export interface ShotRow {
  id: string;
  takes: Entry<VideoJob>[];
  lines: Entry<SpeechJob>[];
}

export interface Grouped {
  shots: ShotRow[];
  /** Lines that name no shot. */
  loose: Entry<SpeechJob>[];
  /** Report rows with no job of the manifest (rows removed from it). */
  others: Entry[];
}

/** The manifest's jobs of each kind, each in the manifest's order. */
function byKinds(jobs: readonly Job[]): { takes: VideoJob[]; lines: SpeechJob[] } {
  const takes: VideoJob[] = [];
  const lines: SpeechJob[] = [];
  for (const job of jobs) byKind(job, { video: (v) => takes.push(v), speech: (s) => lines.push(s) });
  return { takes, lines };
}

export function group(report: Report, jobs: readonly Job[]): Grouped {
  const rows = new Map(report.jobs.map((j) => [j.id, j]));
  const used = new Set<string>();
  const shots = new Map<string, ShotRow>();
  const shotRow = (id: string) => {
    let found = shots.get(id);
    if (!found) {
      found = { id, takes: [], lines: [] };
      shots.set(id, found);
    }
    return found;
  };
  const loose: Entry<SpeechJob>[] = [];
  const { takes, lines } = byKinds(jobs);
  // Takes first, so that rows follow the manifest's order of shots whatever the order of lines.
  for (const job of takes) {
    const row = rows.get(job.id);
    if (!row || used.has(job.id)) continue;
    used.add(job.id);
    shotRow(job.rowId).takes.push({ job, row });
  }
  for (const job of lines) {
    const row = rows.get(job.id);
    if (!row || used.has(job.id)) continue;
    used.add(job.id);
    // A line whose shot has no take here (another shard's) still gets its shot's row.
    if (job.shot !== undefined) shotRow(job.shot).lines.push({ job, row });
    else loose.push({ job, row });
  }
  const others = report.jobs.filter((r) => !used.has(r.id)).map((row) => ({ job: undefined, row }));
  return { shots: [...shots.values()], loose, others };
}

function filtersOf(row: ReportJob): ReviewFilter | undefined {
  if (row.status === "failed") return "failed";
  // Generated in this run: a result this run produced, not one it found and reused.
  if (row.status === "succeeded") return "generated";
  if (row.status === "skipped") return "reused";
  return undefined;
}

export function rowFilters(entries: readonly Entry[]): string {
  const set = new Set<ReviewFilter>();
  for (const e of entries) {
    const f = filtersOf(e.row);
    if (f) set.add(f);
  }
  return (["failed", "generated", "reused"] as const).filter((f) => set.has(f)).join(" ");
}

/** The take number of a take (1 for a shot of one take). */
export const takeNo = (e: Entry<VideoJob>, i: number): number => e.job?.take ?? i + 1;

/** The shot's pick, when picks.yaml names one of its takes (its current output, no kept version). */
export function pickOf(shot: ShotRow, picks: Readonly<Record<string, Pick>> | undefined): number | undefined {
  const pick = picks?.[shot.id];
  if (pick === undefined || pick.version !== undefined) return undefined;
  return shot.takes.some((t, i) => takeNo(t, i) === pick.take) ? pick.take : undefined;
}
