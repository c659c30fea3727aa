// `clapper tasks ...`: look at (and cancel) what a run left behind, on both services.
import {
  ClapperApiError,
  type Clients,
  incompleteWarning,
  isUnavailable,
  MAX_LIST_PAGES,
  NotFoundError,
  takeList,
} from "../../../api/index.js";
import type { SpeechStatus, SpeechTask } from "../../../api/speech.js";
import type { VideoStatus, VideoTask } from "../../../api/video.js";
import type { Listed } from "../../command.js";
import { ExitError } from "../../errors.js";
import { date, table } from "../../output.js";

export type TaskKind = "video" | "speech";

export interface TasksOptions {
  clients: Pick<Clients, "video" | "speech">;
  signal?: AbortSignal;
}

/** One row for both kinds of task. */
export interface TaskRow {
  kind: TaskKind;
  id: string;
  status: string;
  created_at: number;
  detail: string;
  points?: number;
  error?: string;
  url?: string;
}

function videoRow(t: VideoTask): TaskRow {
  return {
    kind: "video",
    id: t.id,
    status: t.status,
    created_at: t.created_at,
    detail: `${t.resolution} ${t.duration}s ${t.ratio}`,
    ...(t.error?.message ? { error: String(t.error.message) } : {}),
    ...(t.content?.url ? { url: t.content.url } : {}),
  };
}

function speechRow(t: SpeechTask): TaskRow {
  return {
    kind: "speech",
    id: t.task_id,
    status: t.status,
    created_at: t.created_at,
    detail: `attempt ${t.attempt}/${t.max_attempts}`,
    points: t.point_cost,
    ...(t.error_message ? { error: t.error_message } : {}),
    ...(t.output_url ? { url: t.output_url } : {}),
  };
}

import { ENDED, outcomeOf, SPEECH_STATUSES, VIDEO_STATUSES } from "./statuses.js";

export { TASK_STATUSES } from "./statuses.js";

export async function listTasks(
  o: TasksOptions & { kind?: TaskKind; status?: string; limit: number },
): Promise<Listed<TaskRow>> {
  if (o.status !== undefined && !VIDEO_STATUSES.has(o.status) && !SPEECH_STATUSES.has(o.status)) {
    const known = [...new Set([...VIDEO_STATUSES, ...SPEECH_STATUSES])].join(", ");
    throw new ExitError(2, `--status must be one of ${known}, got ${JSON.stringify(o.status)}`);
  }
  if (!(Number.isInteger(o.limit) && o.limit > 0)) {
    throw new ExitError(2, `--limit must be a positive whole number, got ${o.limit}`);
  }
  const opts = o.signal ? { signal: o.signal } : {};
  const rows: TaskRow[] = [];
  const warnings: string[] = [];
  if (o.kind !== "speech" && (o.status === undefined || VIDEO_STATUSES.has(o.status))) {
    const filter = o.status ? { status: o.status as VideoStatus } : {};
    const videos = await newestVideos(o.clients.video, filter, o.limit, opts);
    for (const t of videos.items) rows.push(videoRow(t));
    if (!videos.complete) warnings.push(incompleteWarning("video tasks", videos));
  }
  if (o.kind !== "video" && (o.status === undefined || SPEECH_STATUSES.has(o.status))) {
    const filter = o.status ? { statuses: [o.status as SpeechStatus] } : {};
    const walk = o.clients.speech.listTasks({ ...filter, limit: Math.min(100, o.limit) }, opts);
    const { items, end } = await takeList(walk, o.limit);
    for (const t of items) rows.push(speechRow(t));
    if (end && !end.complete) warnings.push(incompleteWarning("speech tasks", end));
  }
  return { items: rows.sort((a, b) => b.created_at - a.created_at).slice(0, o.limit), warnings };
}

/** Items asked for per page of the video list: the most it gives. */
const VIDEO_PAGE = 100;

/**
 * At least the `limit` newest video tasks (fewer when there are fewer), each once. The spec states
 * no order for the video list: the first page shows which way this service lists, and the pages
 * are read from the end that holds the newest tasks. Every task read is returned; the caller
 * sorts. `complete` says whether the tasks read hold the `limit` newest (or all of them).
 */
async function newestVideos(
  video: Clients["video"],
  filter: { status?: VideoStatus },
  limit: number,
  opts: { signal?: AbortSignal },
): Promise<{ items: VideoTask[]; total: number; seen: number; complete: boolean }> {
  const first = await video.listPage(1, { ...filter, pageSize: VIDEO_PAGE }, opts);
  const found = new Map(first.items.map((t) => [t.id, t]));
  const total = first.total;
  // A first page shorter than asked and than the list shows the size the service serves. The
  // other pages are asked at that size, where the service places them whether it counts pages by
  // the size asked or by the size served (asked at 100, page 3 would start at task 200 or at 8).
  const served = Math.max(1, first.items.length);
  const size = served < Math.min(VIDEO_PAGE, total) ? served : VIDEO_PAGE;
  const pages = first.items.length === 0 ? 1 : Math.min(MAX_LIST_PAGES, Math.ceil(total / size));
  const head = first.items[0]?.created_at ?? 0;
  const oldestFirst = head < (first.items.at(-1)?.created_at ?? 0);
  // Listed oldest first, the first page holds the oldest tasks: only later pages count to the limit.
  let counted = oldestFirst ? 0 : found.size;
  for (let i = 2; i <= pages && counted < limit; i++) {
    const list = await video.listPage(oldestFirst ? pages + 2 - i : i, { ...filter, pageSize: size }, opts);
    const before = found.size;
    for (const t of list.items) found.set(t.id, t);
    // An empty page, or one of tasks read already, ends the walk: the rest cannot be reached.
    if (found.size === before) break;
    counted += found.size - before;
  }
  const complete = found.size >= total || counted >= Math.min(limit, total);
  return { items: [...found.values()], total, seen: found.size, complete };
}

/** Asks the named service, or both in turn when the kind is not given. */
async function eitherKind<T>(
  kind: TaskKind | undefined,
  id: string,
  video: () => Promise<T>,
  speech: () => Promise<T>,
): Promise<T> {
  if (kind === "video") return video();
  if (kind === "speech") return speech();
  try {
    return await video();
  } catch (error) {
    if (!(error instanceof NotFoundError)) throw error;
  }
  try {
    return await speech();
  } catch (error) {
    if (error instanceof NotFoundError) throw new ExitError(1, `no video or speech task ${id}`);
    throw error;
  }
}

export async function getTask(o: TasksOptions & { id: string; kind?: TaskKind }): Promise<TaskRow> {
  const opts = o.signal ? { signal: o.signal } : {};
  return eitherKind(
    o.kind,
    o.id,
    async () => videoRow(await o.clients.video.getTask(o.id, opts)),
    async () => speechRow(await o.clients.speech.getTask(o.id, opts)),
  );
}

/** What `tasks cancel` did: cancelled, accepted and stopping, or nothing to do (it had ended). */
export interface CancelledTask {
  kind: TaskKind;
  id: string;
  status: string;
  outcome: "cancelled" | "stopping" | "ended";
}

/** The service answered and said no (not: it could not be reached, or would not serve). */
function refusal(error: unknown): boolean {
  return error instanceof ClapperApiError && error.status !== undefined && !isUnavailable(error);
}

export async function cancelTask(o: TasksOptions & { id: string; kind?: TaskKind }): Promise<CancelledTask> {
  const opts = o.signal ? { signal: o.signal } : {};
  const one = async (
    kind: TaskKind,
    cancel: () => Promise<{ status: string }>,
    look: () => Promise<{ status: string }>,
  ): Promise<CancelledTask> => {
    try {
      const { status } = await cancel();
      return { kind, id: o.id, status, outcome: outcomeOf(status) };
    } catch (error) {
      // Refused: a task that had ended has nothing to cancel, which is no failure; one past
      // cancelling (a line already generating) is, and says so. A service out of reach is neither.
      if (error instanceof NotFoundError || !refusal(error)) throw error;
      const { status } = await look();
      if (ENDED.has(status)) return { kind, id: o.id, status, outcome: "ended" };
      throw error;
    }
  };
  return eitherKind<CancelledTask>(
    o.kind,
    o.id,
    () =>
      one(
        "video",
        () => o.clients.video.cancelTask(o.id, opts),
        () => o.clients.video.getTask(o.id, opts),
      ),
    () =>
      one(
        "speech",
        () => o.clients.speech.cancelTask(o.id, opts),
        () => o.clients.speech.getTask(o.id, opts),
      ),
  );
}

export function renderCancelled(r: CancelledTask): string {
  const at = `${r.kind} task ${r.id}`;
  if (r.outcome === "cancelled") return `${at}: cancelled`;
  if (r.outcome === "ended") return `${at}: had already ended (${r.status}); nothing to cancel`;
  return `${at}: cancel accepted; it was ${r.status} on an execution node and stops shortly (look again with clapper tasks get ${r.id})`;
}

export function renderTasks(rows: readonly TaskRow[]): string {
  if (rows.length === 0) return "no tasks";
  return table(rows, [
    { header: "KIND", value: (r) => r.kind },
    { header: "TASK_ID", value: (r) => r.id },
    { header: "STATUS", value: (r) => r.status },
    { header: "CREATED", value: (r) => date(r.created_at) },
    { header: "DETAIL", value: (r) => r.detail },
    { header: "ERROR", value: (r) => r.error },
  ]);
}

export function renderTask(r: TaskRow): string {
  const lines = [
    `kind: ${r.kind}`,
    `id: ${r.id}`,
    `status: ${r.status}`,
    `created: ${date(r.created_at)}`,
    `detail: ${r.detail}`,
  ];
  if (r.points !== undefined) lines.push(`points: ${r.points}`);
  if (r.error) lines.push(`error: ${r.error}`);
  if (r.url) lines.push(`result: ${r.url}`);
  return lines.join("\n");
}
