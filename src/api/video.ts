// The video generation service's vocabulary (/work/shared/spec/video-generation-api.md): its
// enumerations, resolution tiers and point costs, and the tolerant response shapes the HTTP client
// validates. What may be sent, with the content rules, is in video-request.ts.
import { z } from "zod";
import { show } from "./common.js";

// ---------------------------------------------------------------------------------------------
// Enumerations

/** z.enum whose message for a missing value is "is required" (the shared map says "got nothing"). */
function requiredEnum<const T extends readonly [string, ...string[]]>(values: T) {
  return z.enum(values, { error: (iss) => (iss.input === undefined ? "is required" : undefined) });
}

export const VIDEO_MODELS = ["Vid-H3", "vid-h3-lite"] as const;
export const VideoModel = requiredEnum(VIDEO_MODELS);
export type VideoModel = z.infer<typeof VideoModel>;

export const VIDEO_RATIOS = ["adaptive", "21:9", "16:9", "4:3", "1:1", "3:4", "9:16"] as const;
export const VideoRatio = requiredEnum(VIDEO_RATIOS);
export type VideoRatio = z.infer<typeof VideoRatio>;
export const VIDEO_STATUSES = ["queued", "running", "succeeded", "failed", "cancelled"] as const;
export const VideoStatus = requiredEnum(VIDEO_STATUSES);
export type VideoStatus = z.infer<typeof VideoStatus>;

export const RESOLUTIONS = ["480P", "768P", "1080P", "2K", "4K"] as const;
export type ResolutionTier = (typeof RESOLUTIONS)[number];

export const CONTENT_TYPES = ["text", "image_url", "video_url", "audio_url"] as const;
export type ContentType = (typeof CONTENT_TYPES)[number];
const CONTENT_ROLES = [
  "first_frame",
  "last_frame",
  "reference_image",
  "reference_video",
  "reference_audio",
] as const;
export type ContentRole = (typeof CONTENT_ROLES)[number];

/** What a material file may weigh, by media type (the spec's Material table). */
export type MediaType = "image" | "video" | "audio";
export const MATERIAL_BYTES: Readonly<Record<MediaType, number>> = {
  image: 30 * 1024 * 1024,
  video: 50 * 1024 * 1024,
  audio: 15 * 1024 * 1024,
};

// ---------------------------------------------------------------------------------------------
// Resolution, points and output size

/** The tier the service processes: only the five exact (case-sensitive) values; anything else is native 768P. */
export function resolutionTier(resolution: string | undefined): ResolutionTier {
  return (RESOLUTIONS as readonly string[]).includes(resolution ?? "")
    ? (resolution as ResolutionTier)
    : "768P";
}

export const POINTS_PER_SECOND: Record<ResolutionTier, number> = {
  "480P": 5,
  "768P": 10,
  "1080P": 19,
  "2K": 20,
  "4K": 22,
};

/** Tiers that upscale the native 768P video; when the upscale fails only the base points are charged. */
export const UPSCALE_TIERS: readonly ResolutionTier[] = ["1080P", "2K", "4K"];

const BASE_POINTS_PER_SECOND = 10;

/** Points reserved (and, on success, deducted) for a task. */
export function videoPoints(resolution: string | undefined, duration = 5): number {
  return POINTS_PER_SECOND[resolutionTier(resolution)] * duration;
}

/** Points of native 768P generation: what a task whose upscale failed is charged. */
export function basePoints(duration = 5): number {
  return BASE_POINTS_PER_SECOND * duration;
}

// ---------------------------------------------------------------------------------------------
// Responses (tolerant: added fields pass, optional fields may be missing)

const int = () => z.number().int();

const VideoTaskUsage = z.looseObject({
  input_seconds: int().optional(),
  input_image_count: int().optional(),
  use_context_ir: z.boolean().optional(),
  total_seconds: int().optional(),
  output_seconds: int().optional(),
});

export const VideoTask = z.looseObject({
  id: z.string(),
  model: z.string(),
  status: VideoStatus,
  error: z
    .looseObject({ code: z.union([z.string(), z.number()]).optional(), message: z.string().optional() })
    .nullish(),
  created_at: int(),
  updated_at: int(),
  content: z.looseObject({ url: z.string().optional() }).nullish(),
  resolution: z.string(),
  duration: int(),
  ratio: z.string(),
  task_type: z.string(),
  modality: z.string(),
  estimated_remaining_seconds: int(),
  usage: VideoTaskUsage,
});
export type VideoTask = z.infer<typeof VideoTask>;

/** Single-task query response and callback body. */
export const VideoTaskResponse = z.looseObject({ task: VideoTask });
export type VideoTaskResponse = z.infer<typeof VideoTaskResponse>;

/** A task id goes into paths and the journal: an empty or enormous one is not a task id. */
export const VideoCreateResponse = z.looseObject({ task_id: z.string().min(1).max(256) });
export type VideoCreateResponse = z.infer<typeof VideoCreateResponse>;

export const VideoTaskList = z.looseObject({ items: z.array(VideoTask), total: int() });
export type VideoTaskList = z.infer<typeof VideoTaskList>;

export const VideoCancelResponse = z.looseObject({
  task_id: z.string(),
  action: z.literal("delete"),
  status: VideoStatus,
});
export type VideoCancelResponse = z.infer<typeof VideoCancelResponse>;

export const Skill = z.looseObject({
  id: z.string(),
  name: z.string(),
  description: z.string().optional(),
  content: z.string(),
  official: z.boolean(),
  created_at: int().optional(),
  updated_at: int().optional(),
});
export type Skill = z.infer<typeof Skill>;

export const SkillResponse = z.looseObject({ skill: Skill });
export type SkillResponse = z.infer<typeof SkillResponse>;

export const SkillList = z.looseObject({ items: z.array(Skill), total: int() });
export type SkillList = z.infer<typeof SkillList>;

export const SkillDeleteResponse = z.looseObject({ skill_id: z.string() });
export type SkillDeleteResponse = z.infer<typeof SkillDeleteResponse>;

/** Body of create (POST) and update (PUT) skill. Unknown fields are stripped. */
export const SkillWriteRequest = z.object({
  name: z.string().refine((name) => name.trim() !== "", {
    error: (iss) => `expected a non-empty name, got ${show(iss.input)}`,
  }),
  description: z.string().optional(),
  content: z.string().min(1, { error: (iss) => `expected non-empty content, got ${show(iss.input)}` }),
});
export type SkillWriteRequest = z.infer<typeof SkillWriteRequest>;
