// The video service behind the one service shape (src/services/index.ts).
import { incompleteWarning, MAX_LIST_PAGES } from "../api/index.js";
import {
  basePoints,
  UPSCALE_TIERS,
  VIDEO_STATUSES,
  type VideoStatus,
  type VideoTask,
  videoPoints,
} from "../api/video.js";
import type { VideoJob } from "../manifest/index.js";
import { shotOf } from "../manifest/job.js";
import { expectedVideoMs } from "../tracking/durations.js";
import type { BodyInputs, ServiceClients, TaskService } from "./index.js";
import { MaterialError } from "./staging.js";

const MAX_CREATE_BODY = 72 * 1024 * 1024;

export type VideoService = TaskService<VideoJob, VideoTask>;

export const videoService: VideoService = {
  kind: "video",
  row: "shot",
  pricedAtCreate: false,
  contentType: "video/mp4",
  retention: "",

  estimate: (job) => job.points ?? 0,
  nominalMs: (job) => expectedVideoMs({ ...job.request, duration: job.duration }),
  async body(job, inputs, signal) {
    const body = await videoBody(job, inputs, signal);
    const { callback } = inputs;
    return {
      ...body,
      ...(callback ? { callback_url: callback.url, callback_token: callback.token } : {}),
    };
  },
  create: (clients, body, call) => clients.video.createTask(body as never, call),
  get: (clients, taskId, call) => clients.video.getTask(taskId, call),
  // Ranked: the task succeeded and is paid for, so its fetch goes before queued creates.
  getPaid: (clients, taskId, signal) => clients.video.getTask(taskId, { signal, rank: 1 }),
  cancel: (clients, taskId, call) => clients.video.cancelTask(taskId, call),
  statuses: new Set(VIDEO_STATUSES),
  async listNewest(clients, status, limit, call) {
    const filter = status ? { status: status as VideoStatus } : {};
    const videos = await newestVideos(clients.video, filter, limit, call);
    return {
      items: videos.items,
      ...(videos.complete ? {} : { warning: incompleteWarning("video tasks", videos) }),
    };
  },
  track: (trackers, taskId, createdAt, onUpdate, hint) =>
    trackers.video.track(taskId, createdAt, onUpdate, hint),
  trackHint(job) {
    return { expectedMs: videoService.nominalMs(job) };
  },

  id: (task) => task.id,
  status: (task) => task.status,
  createdAt: (task) => task.created_at,
  resultUrl: (task) => task.content?.url,
  detail: (task) => `${task.resolution} ${task.duration}s ${task.ratio}`,
  errorMessage: (task) => (task.error?.message ? String(task.error.message) : undefined),
  failure: (task) => ({
    code: String(task.error?.code ?? "task_failed"),
    message: String(task.error?.message ?? "the task failed"),
  }),
  // A video's cost is its price as reserved: the task states none.
  statedCost: () => undefined,
  taskCost: (task) => videoPoints(task.resolution, task.duration),
  cost(job, task) {
    // The base price when an upscale fell back to 768P.
    const fallback = task.resolution === "768P" ? videoService.fallbackPoints(job) : undefined;
    return fallback ?? job.points ?? 0;
  },
  requested: (job) => job.tier,
  // The resolution the service says it delivered: 768P when a requested upscale failed.
  delivered: (task) => String(task.resolution).slice(0, 32),
  fallbackPoints: (job) => (UPSCALE_TIERS.includes(job.tier) ? basePoints(job.duration) : undefined),
  resultLimit: (job) => ({ kind: "video", seconds: job.duration, tier: job.tier }),
  expectedSeconds: (job) => job.duration,
  shot: shotOf,
};

/**
 * The create body with every material at an address the service can fetch: staged in S3 and
 * presigned, or inline as a Data URL (then the 72 MiB body limit is checked before sending).
 */
async function videoBody(job: VideoJob, inputs: BodyInputs, signal: AbortSignal) {
  const content = [...job.request.content];
  let inline = 0;
  for (const { contentIndex, ref } of job.materials) {
    const item = content[contentIndex];
    if (!item || item.type === "text") continue;
    const url = await inputs.stager.url(ref, signal);
    if (url.startsWith("data:")) inline += url.length;
    const field = item.type;
    content[contentIndex] = { ...item, [field]: { url } } as typeof item;
  }
  if (inline > MAX_CREATE_BODY - 64 * 1024) {
    throw new MaterialError(
      `${job.id}: the materials make the request ${Math.ceil(inline / 1024 / 1024)} MiB as Data URLs, over the service's 72 MiB body limit; configure S3 (--output s3://... or --staging s3://...) so they can be staged`,
    );
  }
  const skillId = job.skill ? (inputs.skillIds.get(job.skill.name) ?? job.skill.name) : undefined;
  return { ...job.request, content, ...(skillId ? { skill_id: skillId } : {}) };
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
  video: ServiceClients["video"],
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
