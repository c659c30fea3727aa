// The video service behind the one service shape (src/services/index.ts).
import { basePoints, UPSCALE_TIERS, type VideoTask, videoPoints } from "../api/video.js";
import { MaterialError } from "../engine/staging.js";
import { expectedVideoMs } from "../engine/tracker.js";
import type { VideoJob } from "../manifest/index.js";
import type { BodyInputs, TaskService } from "./index.js";

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
  track: (trackers, taskId, createdAt, onUpdate, hint) =>
    trackers.video.track(taskId, createdAt, onUpdate, hint),
  trackHint(job) {
    return { expectedMs: videoService.nominalMs(job) };
  },

  id: (task) => task.id,
  status: (task) => task.status,
  createdAt: (task) => task.created_at,
  resultUrl: (task) => task.content?.url,
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
  shot: (job) => job.rowId,
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
