// `clapper plan MANIFEST`: validate, expand, estimate. No task is ever created.

import { existsSync } from "node:fs";
import type { Clients } from "../../../api/index.js";
import { RESOLUTIONS } from "../../../api/video.js";
import { formatProblem, formatProblems, MAX_SHOT_S } from "../../../manifest/index.js";
import { plural } from "../../../report/words.js";
import type { JobNext, PlanResult } from "../../../run/plan.js";
import { type Shard, shardOf } from "../../../run/shard.js";
import { byKind, jobsOf } from "../../../services/index.js";
import type { S3ClientOptions } from "../../../sinks/s3.js";
import type { LocatedRun } from "../../../state/locate.js";
import { sandboxStatePath } from "../run/state.js";
import type { PlanNext } from "./state.js";

/** What a plan is made of: the manifest, the run's state, and the services when they are asked. */
export interface PlanInput {
  manifest: string;
  cwd: string;
  state?: string | undefined;
  /** One shard planned; `shards` alone lists every job with its shard. */
  shard?: Shard | undefined;
  shards?: number | undefined;
  speechPrice?: number | undefined;
  s3?: S3ClientOptions | undefined;
  signal?: AbortSignal | undefined;
  /** Opens the services (given the run when it was found); absent, the plan is made offline. */
  connect?: ((located: LocatedRun | undefined) => Promise<Clients>) | undefined;
}

/** The plan, and what the next run does when the run has a state (none for a manifest with errors). */
export interface Planned {
  result: PlanResult;
  shards: number | undefined;
  next: PlanNext | undefined;
}

/** `plan`, made as `clapper plan` and the library's `plan()` make it. No task is ever created. */
export async function makePlan(o: PlanInput): Promise<Planned> {
  const shards = o.shard?.total ?? o.shards;
  // The run's manifest and state, found as `run` finds them; a manifest with errors has none (the
  // plan says its errors), and a state that cannot be read is only a warning.
  const located = await locatePlanned(o);
  // Loaded on use, as the command loads this module: the run pipeline is not needed to start the CLI.
  const [{ readPlanStates, planNext }, { fitFromState }, { plan }] = await Promise.all([
    import("./state.js"),
    import("../../../episode/fitting.js"),
    import("../../../run/plan.js"),
  ]);
  const states = located
    ? await readPlanStates(located, { shards, stateGiven: o.state !== undefined, s3: o.s3 ?? {} })
    : undefined;
  const conn = o.connect ? await o.connect(located) : undefined;
  try {
    // Shots timed to narration the state holds are fitted as the run fits them: their fingerprints
    // (and so whether they are reused) follow the fit.
    const jobs = located ? [...located.loaded.jobs] : [];
    if (located && states?.usable) {
      for (const group of states.groups) await fitFromState(jobs, group.state);
    }
    const planned = await plan({
      manifest: o.manifest,
      cwd: o.cwd,
      ...(located ? { loaded: { ...located.loaded, jobs } } : {}),
      ...(conn ? { clients: conn } : {}),
      ...(o.speechPrice !== undefined ? { speechPrice: o.speechPrice } : {}),
      ...(o.shard ? { shard: o.shard } : {}),
      ...(o.signal ? { signal: o.signal } : {}),
    });
    const result = states ? { ...planned, warnings: [...planned.warnings, ...states.warnings] } : planned;
    const next =
      result.errors.length === 0 && located && states ? await planNext(result, located, states) : undefined;
    return { result, shards, next };
  } finally {
    await conn?.close();
  }
}

/** --sandbox-state, else the run's emulator state when the run has one: the plan sees the balance the run left. */
export function planSandboxState(
  given: string | undefined,
  located: LocatedRun | undefined,
): string | undefined {
  if (given) return given;
  const candidate = located ? sandboxStatePath(located) : undefined;
  return candidate && existsSync(candidate) ? candidate : undefined;
}

/** The run as `run` finds it; undefined for a manifest with errors or one that cannot be read (plan says why). */
async function locatePlanned(o: PlanInput): Promise<LocatedRun | undefined> {
  const { locateRun } = await import("../../../state/locate.js");
  const found = await locateRun({
    manifest: o.manifest,
    cwd: o.cwd,
    ...(o.state ? { state: o.state } : {}),
    ...(o.shard ? { shard: o.shard } : {}),
  }).catch(() => undefined);
  return found?.ok ? found.run : undefined;
}

/** Auto shots whose estimated duration the text plan names; `--json` has every one. */
const AUTO_SHOWN = 12;

/** Jobs and points per shard, when the manifest is split in `total`. */
export function shardTally(r: PlanResult, total: number) {
  const rows = Array.from({ length: total }, (_, i) => ({
    index: i + 1,
    jobs: 0,
    points: 0 as number | null,
  }));
  for (const job of r.jobs) {
    const row = rows[shardOf(job, total) - 1];
    if (!row) continue;
    row.jobs += 1;
    row.points = row.points === null || job.points === null ? null : row.points + job.points;
  }
  return rows;
}

/** `1 job`, `2 jobs`. */
const jobs = (n: number) => `${n} ${n === 1 ? "job" : "jobs"}`;

/** A job's next-run fields in `plan --json`: its action, and what the run reserves for it and why. */
function nextJson(j: JobNext | undefined) {
  if (!j) return {};
  return {
    action: j.action,
    next_points: j.points,
    ...(j.edited ? { edited: true } : {}),
    ...(j.missing ? { output_missing: true } : {}),
    ...(j.follows ? { follows: { task_id: j.follows.taskId, reserved_points: j.follows.reserved } } : {}),
    ...(j.retry
      ? {
          retry: {
            status: j.retry.status,
            error: j.retry.error ?? null,
            with: j.retry.with,
            points: j.retry.points,
          },
        }
      : {}),
  };
}

/** `next` in `plan --json`: what the next run does and reserves (null: the state cannot be read). */
function nextRunJson(n: PlanNext) {
  const x = n.next;
  return {
    state: { path: n.state.path, found: n.state.found },
    next: x
      ? {
          generate: x.generate,
          reuse: x.reuse,
          retry: x.retry,
          points: x.points,
          reserved_by_open_tasks: x.openReserved,
          retry_failed: {
            new_tasks: x.retryFailed.newTasks,
            downloads: x.retryFailed.downloads,
            points: x.retryFailed.points,
          },
          ...(x.fits !== undefined ? { fits: x.fits } : {}),
        }
      : null,
  };
}

/**
 * The contract shape of `plan --json` (BRIEF.md), plus a few fields more. `shards`: the number of
 * shards the manifest is split in, when given (each job then says its shard). `next`: what the next
 * run does, from the run's state (each job's `action`, and `next` for the run).
 */
export function planJson(r: PlanResult, shards?: number, next?: PlanNext) {
  const total = r.shard?.total ?? shards;
  return {
    manifest: r.manifest ? { name: r.manifest.name, path: r.manifest.display } : null,
    ...(r.shard ? { shard: r.shard } : {}),
    ...(total !== undefined && !r.shard ? { shards: shardTally(r, total) } : {}),
    jobs: r.jobs.map((j) => ({
      id: j.id,
      kind: j.kind,
      points: j.points,
      fingerprint: j.fingerprint,
      ...(total !== undefined ? { shard: shardOf(j, total) } : {}),
      source: `${j.file}:${j.line}`,
      ...byKind<object>(j, {
        video: (shot) => ({
          resolution: shot.tier,
          duration: shot.duration,
          // Timed to its narration: the duration and points are estimates until its lines exist.
          ...(shot.auto
            ? {
                auto: {
                  lines: shot.auto.lines,
                  estimated: shot.auto.fitted === undefined,
                  max_points: shot.auto.maxPoints,
                },
              }
            : {}),
        }),
        speech: (line) => ({ counted_characters: line.countedChars }),
      }),
      ...nextJson(next?.jobs.get(j.id)),
    })),
    points: r.points,
    counts: r.counts,
    speech_price: {
      value: r.speechPrice.value,
      source: r.speechPrice.source,
      counted_characters: r.speechPrice.countedChars,
    },
    ...(r.balance ? { balance: r.balance } : {}),
    ...(r.budget !== undefined ? { budget: { max_points: r.budget } } : {}),
    ...(r.auto
      ? { auto: { shots: r.auto.shots, estimated_points: r.auto.estimated, at_most: r.auto.atMost } }
      : {}),
    ...(r.fits !== undefined ? { fits: r.fits } : {}),
    ...(next ? nextRunJson(next) : {}),
    // The problems kept (a bounded number), and how many were found in all.
    errors: r.errors.map(formatProblem),
    warnings: r.warnings.map(formatProblem),
    // The same problems, each with its parts apart: for editors, CI annotations and scripts.
    problems: [...r.errors, ...r.warnings].map((p) => ({
      severity: p.severity,
      file: p.file,
      line: p.line,
      field: p.field,
      message: p.message,
    })),
    error_count: r.errors.length + (r.omitted?.errors ?? 0),
    warning_count: r.warnings.length + (r.omitted?.warnings ?? 0),
  };
}

export function renderPlan(r: PlanResult, shards?: number, next?: PlanNext): string {
  const out: string[] = [];
  const name = r.manifest ? `${r.manifest.name} (${r.manifest.display})` : "";
  out.push(`plan for ${name}${r.shard ? `, shard ${r.shard.index} of ${r.shard.total}` : ""}`);
  const resolutions = RESOLUTIONS.flatMap((tier) => {
    const e = r.byResolution[tier];
    return e ? [`${tier}: ${jobs(e.jobs)}, ${e.points} points`] : [];
  }).join("; ");
  // `1 job ` pads to the width of `2 jobs`: the columns stay aligned.
  const count = (n: number) => `${String(n).padStart(5)} ${n === 1 ? "job " : "jobs"}`;
  out.push(
    `  video   ${count(r.counts.video)}  ${String(r.points.video).padStart(9)} points${resolutions ? `   (${resolutions})` : ""}`,
  );
  const price =
    r.counts.speech === 0
      ? ""
      : r.speechPrice.value === null
        ? "speech cost unknown: no service to ask; give --speech-price N, --sandbox or an API key"
        : `${r.speechPrice.countedChars} counted characters at ${r.speechPrice.value} points per 10 (${r.speechPrice.source === "service" ? "service price" : "--speech-price"})`;
  out.push(
    `  speech  ${count(r.counts.speech)}  ${String(r.points.speech ?? "?").padStart(9)} points${price ? `   (${price})` : ""}`,
  );
  out.push(`  total   ${count(r.counts.total)}  ${String(r.points.total ?? "?").padStart(9)} points`);
  if (r.auto) {
    out.push(
      `  auto    ${String(r.auto.shots).padStart(5)} shot${r.auto.shots === 1 ? " " : "s"} timed to their narration: ${r.auto.estimated} points estimated from the lines' text; at their longest (${MAX_SHOT_S} s) the run costs at most ${r.auto.atMost ?? "?"} points, which is what must fit`,
    );
    // The estimates themselves, a shot (not a take) each: enough to see what the narration asks for.
    const seen = new Set<string>();
    const estimates: string[] = [];
    for (const job of jobsOf(r.jobs, "video")) {
      if (!job.auto || job.auto.fitted !== undefined || seen.has(job.rowId)) continue;
      seen.add(job.rowId);
      estimates.push(`${job.rowId} ~${job.duration} s`);
    }
    const shown = estimates.slice(0, AUTO_SHOWN);
    const more = estimates.length - shown.length;
    out.push(
      `          estimated: ${shown.join(", ")}${more > 0 ? `, and ${more} more (plan --json lists all)` : ""}`,
    );
  }
  if (next) out.push(...renderNext(r, next));
  out.push(...verdicts(r, next));
  if (shards !== undefined && !r.shard) {
    out.push(`shards: ${shards}`);
    for (const s of shardTally(r, shards))
      out.push(
        `  ${`${s.index}/${shards}`.padEnd(9)} ${count(s.jobs)}  ${String(s.points ?? "?").padStart(9)} points`,
      );
  }
  return out.join("\n");
}

/**
 * Whether the balance and the budget allow the run. Once a run was made, the next run is judged,
 * as its admission judges it: its new tasks against the balance (open tasks hold their points at
 * the service already), new and open ones against the budget. Before, the whole manifest (auto
 * shots at their longest).
 */
function verdicts(r: PlanResult, next: PlanNext | undefined): string[] {
  const n = next?.next && next.state.found ? next.next : undefined;
  if (n) return nextVerdicts(r, n);
  const total = r.auto ? r.auto.atMost : r.points.total;
  const out: string[] = [];
  if (r.balance)
    out.push(
      `balance: ${r.balance.available_points} points available: ${word(total === null ? undefined : total <= r.balance.available_points)}`,
    );
  if (r.budget !== undefined)
    out.push(`budget:  max_points ${r.budget}: ${word(total === null ? undefined : total <= r.budget)}`);
  return out;
}

const word = (ok: boolean | undefined) => (ok === undefined ? "unknown" : ok ? "fits" : "DOES NOT FIT");

/** The verdicts on the next run, as its admission will judge it. */
function nextVerdicts(r: PlanResult, n: NonNullable<PlanNext["next"]>): string[] {
  const out: string[] = [];
  const what = ` the next run's ${n.points ?? "?"} points`;
  const newPoints = n.points === null ? null : n.points - n.openReserved;
  const balanceOk = r.balance && newPoints !== null ? newPoints <= r.balance.available_points : undefined;
  if (r.balance)
    out.push(`balance: ${r.balance.available_points} points available: ${word(balanceOk)}${what}`);
  if (r.budget !== undefined) {
    // Admission's verdict covers both: when it refuses and the balance suffices, the budget
    // (what is left of it in this run) is what does not.
    let budgetOk: boolean | undefined;
    if (n.fits === true) budgetOk = true;
    else if (n.fits === false)
      budgetOk = balanceOk === false ? n.points !== null && n.points <= r.budget : false;
    out.push(`budget:  max_points ${r.budget}: ${word(budgetOk)}${what}`);
  }
  return out;
}

/** Jobs the next run generates or leaves failed that the text names; `--json` has every one. */
const NEXT_SHOWN = 12;

/** A manifest path as a shell reads it: quoted when it holds anything but plain characters. */
function shellWord(path: string): string {
  return /^[\w@%+=:,./-]+$/.test(path) ? path : `'${path.replace(/'/g, "'\\''")}'`;
}

/** What the next run generates, reuses, follows and leaves failed, and what it reserves. */
function renderNext(r: PlanResult, plan: PlanNext): string[] {
  const n = plan.next;
  if (!n) return ["next run: not told (the run's state cannot be used: see the warning)"];
  const points = (p: number | null) => `${p ?? "?"} points`;
  const manifest = shellWord(r.manifest?.display ?? "MANIFEST");
  if (n.firstRun) return [`next run: the first; it generates every job (${points(n.points)})`];
  const follows = [...plan.jobs.values()].filter((j) => j.follows).length;
  const head =
    n.generate === 0
      ? `next run: generates nothing and reuses ${n.reuse}${n.openReserved > 0 ? ` (${points(n.openReserved)} reserved by tasks still open)` : ""}`
      : `next run: generates ${jobs(n.generate)} (${points(n.points)}${follows > 0 ? `; ${follows} of them follow${follows === 1 ? "s" : ""} a task already created` : ""}) and reuses ${n.reuse}`;
  const out = [head];
  const rf = n.retryFailed;
  if (rf.downloads > 0)
    out.push(
      `  ${jobs(rf.downloads)} failed after ${rf.downloads === 1 ? "its task was" : "their tasks were"} paid for: the next run downloads ${rf.downloads === 1 ? "its result" : "their results"} again at no cost`,
    );
  if (rf.newTasks > 0) {
    const one = rf.newTasks === 1;
    out.push(
      `  ${jobs(rf.newTasks)} failed or cancelled: the next run leaves ${one ? "it" : "them"} so; clapper run ${manifest} --retry-failed makes ${one ? "a new task for it" : "new tasks for them"} (about ${points(rf.points)} more)`,
    );
  }
  const rows: string[] = [];
  for (const job of r.jobs) {
    const j = plan.jobs.get(job.id);
    if (!j || j.action === "reuse") continue;
    const kept = j.versions ? ` (${plural(j.versions, "earlier version")} kept)` : "";
    rows.push(`  ${j.action.padEnd(9)} ${job.id}  ${nextWhy(j)}${kept}`);
  }
  out.push(...rows.slice(0, NEXT_SHOWN));
  if (rows.length > NEXT_SHOWN) out.push(`  and ${rows.length - NEXT_SHOWN} more (plan --json lists all)`);
  return out;
}

/** Why the next run does what it does with a job, and at what cost. */
function nextWhy(j: JobNext): string {
  if (j.retry) {
    const how = j.retry.error ? `${j.retry.status}: ${j.retry.error.message}` : j.retry.status;
    return j.retry.with === "download"
      ? `${how}; paid for: downloaded again at no cost`
      : `${how}; --retry-failed makes a new task (about ${j.retry.points ?? "?"} points)`;
  }
  if (j.follows)
    return `follows its task ${j.follows.taskId ?? "(being created)"} (${j.follows.reserved} points reserved)`;
  const why = j.edited
    ? "edited since its output"
    : j.missing
      ? "its stored output is gone"
      : "not generated yet";
  return `${j.points ?? "?"} points, ${why}`;
}

/** Errors, then warnings: the first `limit` of each, and a count of the rest (a broken file can have thousands). */
export function renderProblems(r: PlanResult, limit = 50): string {
  const out: string[] = [];
  const section = (list: PlanResult["errors"], omitted: number, noun: string) => {
    const total = list.length + omitted;
    if (total === 0) return;
    out.push(`${total} ${noun}${total === 1 ? "" : "s"}:`);
    for (const line of formatProblems(list, { limit, omitted })) out.push(`  ${line}`);
  };
  section(r.errors, r.omitted?.errors ?? 0, "error");
  section(r.warnings, r.omitted?.warnings ?? 0, "warning");
  return out.join("\n");
}
