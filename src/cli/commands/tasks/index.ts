// `clapper tasks ...`: look at (and cancel) what a run left behind, on both services.
import { type Clients, NotFoundError } from "../../../api/index.js";
import type { SpeechStatus, SpeechTask } from "../../../api/speech.js";
import type { VideoStatus, VideoTask } from "../../../api/video.js";
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

import { SPEECH_STATUSES, VIDEO_STATUSES } from "./statuses.js";

export { TASK_STATUSES } from "./statuses.js";

export async function listTasks(
  o: TasksOptions & { kind?: TaskKind; status?: string; limit: number },
): Promise<TaskRow[]> {
  if (o.status !== undefined && !VIDEO_STATUSES.has(o.status) && !SPEECH_STATUSES.has(o.status)) {
    const known = [...new Set([...VIDEO_STATUSES, ...SPEECH_STATUSES])].join(", ");
    throw new ExitError(2, `--status must be one of ${known}, got ${JSON.stringify(o.status)}`);
  }
  if (!(Number.isInteger(o.limit) && o.limit > 0)) {
    throw new ExitError(2, `--limit must be a positive whole number, got ${o.limit}`);
  }
  const opts = o.signal ? { signal: o.signal } : {};
  const rows: TaskRow[] = [];
  if (o.kind !== "speech" && (o.status === undefined || VIDEO_STATUSES.has(o.status))) {
    const filter = o.status ? { status: o.status as VideoStatus } : {};
    for (const t of await newestVideos(o.clients.video, filter, o.limit, opts)) rows.push(videoRow(t));
  }
  if (o.kind !== "video" && (o.status === undefined || SPEECH_STATUSES.has(o.status))) {
    const filter = o.status ? { statuses: [o.status as SpeechStatus] } : {};
    let n = 0;
    for await (const t of o.clients.speech.listTasks({ ...filter, limit: Math.min(100, o.limit) }, opts)) {
      rows.push(speechRow(t));
      if (++n >= o.limit) break;
    }
  }
  return rows.sort((a, b) => b.created_at - a.created_at).slice(0, o.limit);
}

/** Items asked for per page of the video list: the most it gives. */
const VIDEO_PAGE = 100;

/**
 * At least the `limit` newest video tasks (fewer when there are fewer). The spec states no order
 * for the video list: the first page shows which way this service lists, and the pages are read
 * from the end that holds the newest tasks. Every task read is returned; the caller sorts.
 */
async function newestVideos(
  video: Clients["video"],
  filter: { status?: VideoStatus },
  limit: number,
  opts: { signal?: AbortSignal },
): Promise<VideoTask[]> {
  const first = await video.listPage(1, { ...filter, pageSize: VIDEO_PAGE }, opts);
  const found = new Map(first.items.map((t) => [t.id, t]));
  // The page length the service applies, which may be less than asked: pages are cut at it.
  const pages = Math.ceil(first.total / Math.max(1, first.items.length));
  const head = first.items[0]?.created_at ?? 0;
  const oldestFirst = head < (first.items.at(-1)?.created_at ?? 0);
  // Listed oldest first, the first page holds the oldest tasks: only later pages count to the limit.
  let counted = oldestFirst ? 0 : first.items.length;
  for (let i = 2; i <= pages && counted < limit; i++) {
    const list = await video.listPage(
      oldestFirst ? pages + 2 - i : i,
      { ...filter, pageSize: VIDEO_PAGE },
      opts,
    );
    if (list.items.length === 0) break;
    for (const t of list.items) found.set(t.id, t);
    counted += list.items.length;
  }
  return [...found.values()];
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

export async function cancelTask(
  o: TasksOptions & { id: string; kind?: TaskKind },
): Promise<{ kind: TaskKind; id: string; status: string }> {
  const opts = o.signal ? { signal: o.signal } : {};
  return eitherKind<{ kind: TaskKind; id: string; status: string }>(
    o.kind,
    o.id,
    async () => ({
      kind: "video" as const,
      id: o.id,
      status: (await o.clients.video.cancelTask(o.id, opts)).status,
    }),
    async () => ({
      kind: "speech" as const,
      id: o.id,
      status: (await o.clients.speech.cancelTask(o.id, opts)).status,
    }),
  );
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
