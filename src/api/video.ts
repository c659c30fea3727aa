// Schemas and rules of the video generation service (/work/shared/spec/video-generation-api.md):
// the create-task body with its content rules, prompt labels, resolution tiers, point costs,
// output sizes, list queries, and the tolerant response shapes the HTTP client validates.
// Rules are pure functions returning Issue[] with paths; nothing here throws on bad input.
import { z } from "zod";
import { charLength, formatPath, type Issue, intInRange, show } from "./common.js";
import { checkAbsoluteUrl, checkPublicUrl, parseDataUrl, type UrlCheckOptions } from "./urls.js";

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
/** Ratios with a fixed output size; `adaptive` resolves to one of these. */
export type FixedRatio = Exclude<VideoRatio, "adaptive">;
export const FIXED_RATIOS = [
  "21:9",
  "16:9",
  "4:3",
  "1:1",
  "3:4",
  "9:16",
] as const satisfies readonly FixedRatio[];

export const VIDEO_STATUSES = ["queued", "running", "succeeded", "failed", "cancelled"] as const;
export const VideoStatus = requiredEnum(VIDEO_STATUSES);
export type VideoStatus = z.infer<typeof VideoStatus>;
export const TERMINAL_STATUSES: readonly VideoStatus[] = ["succeeded", "failed", "cancelled"];

export const RESOLUTIONS = ["480P", "768P", "1080P", "2K", "4K"] as const;
export type ResolutionTier = (typeof RESOLUTIONS)[number];

export const CONTENT_TYPES = ["text", "image_url", "video_url", "audio_url"] as const;
export type ContentType = (typeof CONTENT_TYPES)[number];
export const CONTENT_ROLES = [
  "first_frame",
  "last_frame",
  "reference_image",
  "reference_video",
  "reference_audio",
] as const;
export type ContentRole = (typeof CONTENT_ROLES)[number];

// ---------------------------------------------------------------------------------------------
// Content elements

/**
 * Problem with a material URL, or null: an absolute http/https URL or a base64 data URL
 * `data:<mime>;base64,<data>`. Whether the address is public is checked by `materialUrlIssues`.
 */
export function materialUrlProblem(url: string): string | null {
  if (/^data:/i.test(url)) {
    const meta = /^data:([^,]*),/is.exec(url)?.[1];
    if (meta === undefined) return `expected a data URL like "data:image/png;base64,...", got ${show(url)}`;
    if (!/;base64$/i.test(meta)) {
      return `expected a base64 data URL "data:<mime>;base64,<data>", got ${show(url)}`;
    }
    const mime = meta.replace(/;base64$/i, "").split(";")[0] ?? "";
    if (mime === "")
      return `expected a media type in the data URL, like "data:image/png;base64,...", got ${show(url)}`;
    const parsed = parseDataUrl(url);
    if (parsed === null)
      return `expected a valid media type and base64 data in the data URL, got ${show(url)}`;
    if (parsed.data.length === 0) return `expected data after "base64," in the data URL, got ${show(url)}`;
    return null;
  }
  return checkAbsoluteUrl(url);
}

const MaterialUrl = z
  .string({
    error: (iss) =>
      iss.input === undefined ? "is required" : `expected a URL string, got ${show(iss.input)}`,
  })
  .superRefine((url, ctx) => {
    const problem = materialUrlProblem(url);
    if (problem !== null) ctx.addIssue({ code: "custom", message: problem, input: url });
  });

function materialObject(type: string) {
  return z.object(
    { url: MaterialUrl },
    {
      error: (iss) =>
        iss.input === undefined
          ? `is required when type is "${type}"`
          : `expected an object like {"url": "https://..."}, got ${show(iss.input)}`,
    },
  );
}

/** The role schema for one content type: names the roles that fit, and where a known role belongs. */
function roleFor<const R extends readonly [ContentRole, ...ContentRole[]]>(type: ContentType, roles: R) {
  return z
    .enum(roles, {
      error: (iss) => {
        const got = iss.input;
        const fits = roles.map((r) => show(r)).join(", ");
        const owner = ROLE_TYPE[got as ContentRole];
        const hint = owner ? ` (${show(got)} is for ${owner} elements)` : "";
        return `expected one of ${fits} for ${type === "video_url" ? "a" : "an"} ${type} element, got ${show(got)}${hint}`;
      },
    })
    .optional();
}

const ROLE_TYPE: Record<ContentRole, ContentType> = {
  first_frame: "image_url",
  last_frame: "image_url",
  reference_image: "image_url",
  reference_video: "video_url",
  reference_audio: "audio_url",
};

export const TextElement = z.object({
  type: z.literal("text"),
  text: z.string({
    error: (iss) =>
      iss.input === undefined
        ? 'is required when type is "text"'
        : `expected a string, got ${show(iss.input)}`,
  }),
  role: z.never({ error: (iss) => `a text element takes no role, got ${show(iss.input)}` }).optional(),
});
export const ImageElement = z.object({
  type: z.literal("image_url"),
  image_url: materialObject("image_url"),
  role: roleFor("image_url", ["first_frame", "last_frame", "reference_image"]),
});
export const VideoElement = z.object({
  type: z.literal("video_url"),
  video_url: materialObject("video_url"),
  role: roleFor("video_url", ["reference_video"]),
});
export const AudioElement = z.object({
  type: z.literal("audio_url"),
  audio_url: materialObject("audio_url"),
  role: roleFor("audio_url", ["reference_audio"]),
});

/** One request content element. Unknown fields (and the material objects of other types) are stripped. */
export const ContentElement = z.discriminatedUnion(
  "type",
  [TextElement, ImageElement, VideoElement, AudioElement],
  {
    error: (iss) => {
      // The union reports a non-object element as invalid_type, though its issue type names only invalid_union.
      if ((iss.code as string) === "invalid_type") return `expected an object, got ${show(iss.input)}`;
      if (iss.code === "invalid_union") {
        const type = (iss.input as { type?: unknown } | undefined)?.type;
        if (type === undefined) return "is required";
        return `expected one of ${CONTENT_TYPES.map((t) => show(t)).join(", ")}, got ${show(type)}`;
      }
      return undefined;
    },
  },
);
export type ContentElement = z.infer<typeof ContentElement>;

/** What an element is to the service: a prompt, a frame, or a reference item. */
export type MaterialKind =
  | "text"
  | "first_frame"
  | "last_frame"
  | "reference_image"
  | "reference_video"
  | "reference_audio";

/** The kind of an element; an image_url without role is a first frame, video/audio are references. */
export function materialKind(element: ContentElement): MaterialKind {
  switch (element.type) {
    case "text":
      return "text";
    case "image_url":
      return element.role ?? "first_frame";
    case "video_url":
      return "reference_video";
    case "audio_url":
      return "reference_audio";
  }
}

const KIND_WORDS: Record<Exclude<MaterialKind, "text">, string> = {
  first_frame: "a first frame",
  last_frame: "a last frame",
  reference_image: "a reference image",
  reference_video: "a reference video",
  reference_audio: "a reference audio",
};

/** What a material file may weigh, by media type (the spec's Material table). */
export type MediaType = "image" | "video" | "audio";
export const MATERIAL_BYTES: Readonly<Record<MediaType, number>> = {
  image: 30 * 1024 * 1024,
  video: 50 * 1024 * 1024,
  audio: 15 * 1024 * 1024,
};

export const CONTENT_LIMITS = {
  textChars: 7000,
  firstFrames: 1,
  lastFrames: 1,
  referenceImages: 9,
  referenceVideos: 3,
  referenceAudios: 3,
  referenceItems: 12,
} as const;

/** Indexes of the elements of each kind, in order of appearance. */
function indexByKind(content: readonly ContentElement[]): Record<MaterialKind, number[]> {
  const out: Record<MaterialKind, number[]> = {
    text: [],
    first_frame: [],
    last_frame: [],
    reference_image: [],
    reference_video: [],
    reference_audio: [],
  };
  content.forEach((element, i) => {
    out[materialKind(element)].push(i);
  });
  return out;
}

/** `text`, `frames` (first/last frame) or `reference`; content that mixes frames and references counts as reference. */
export function videoMode(content: readonly ContentElement[]): "text" | "frames" | "reference" {
  const k = indexByKind(content);
  if (k.reference_image.length + k.reference_video.length + k.reference_audio.length > 0) return "reference";
  if (k.first_frame.length + k.last_frame.length > 0) return "frames";
  return "text";
}

/** Number of input images (first frame, last frame and reference images), as `usage.input_image_count`. */
export function inputImageCount(content: readonly ContentElement[]): number {
  return content.filter((e) => e.type === "image_url").length;
}

/**
 * The image whose ratio `adaptive` follows: the first frame, else the last frame, else the first
 * reference image. Undefined when there is no image.
 */
export function adaptiveImageIndex(content: readonly ContentElement[]): number | undefined {
  const k = indexByKind(content);
  return k.first_frame[0] ?? k.last_frame[0] ?? k.reference_image[0];
}

/** Content rules 1-7 of the spec. Paths point at the offending element, e.g. `["content", 3, "role"]`. */
export function contentIssues(content: readonly ContentElement[]): Issue[] {
  const issues: Issue[] = [];
  const k = indexByKind(content);
  const at = (i: number, ...rest: string[]) => ["content", i, ...rest];
  const roleOmitted = (i: number) => content[i]?.role === undefined;

  // Rule 1: pure text-to-video needs a non-empty text.
  if (videoMode(content) === "text") {
    const texts = k.text;
    if (texts.length === 0) {
      issues.push({
        path: ["content"],
        message:
          "expected at least one non-empty text element for text-to-video, got no text and no image, video or audio",
      });
    } else if (texts.every((i) => textOf(content[i]).trim() === "")) {
      const first = texts[0] as number;
      issues.push({
        path: at(first, "text"),
        message: `expected a non-empty text for text-to-video (no image, video or audio is sent), got ${show(textOf(content[first]))}${texts.length > 1 ? ` and ${texts.length - 1} more empty text element(s)` : ""}`,
      });
    }
  }

  // Rule 2: texts joined with line feeds, at most 7000 characters.
  let total = 0;
  let crossing: number | undefined;
  k.text.forEach((i, n) => {
    total += charLength(textOf(content[i])) + (n > 0 ? 1 : 0);
    if (crossing === undefined && total > CONTENT_LIMITS.textChars) crossing = i;
  });
  if (crossing !== undefined) {
    issues.push({
      path: at(crossing, "text"),
      message: `expected at most ${CONTENT_LIMITS.textChars} characters in all text elements joined with line feeds, got ${total}`,
    });
  }

  // Rule 3: at most one first frame and one last frame.
  for (const [kind, word] of [
    ["first_frame", "first"],
    ["last_frame", "last"],
  ] as const) {
    const [first, ...extra] = k[kind];
    for (const i of extra) {
      const why =
        kind === "first_frame" && roleOmitted(i) ? " (an omitted image role means first_frame)" : "";
      issues.push({
        path: at(i, "role"),
        message: `expected at most 1 ${word} frame, got ${k[kind].length}: ${formatPath(at(first as number))} is already the ${word} frame${why}`,
      });
    }
  }

  // Rule 4: reference counts.
  const perKind = [
    ["reference_image", CONTENT_LIMITS.referenceImages, "reference images"],
    ["reference_video", CONTENT_LIMITS.referenceVideos, "reference videos"],
    ["reference_audio", CONTENT_LIMITS.referenceAudios, "reference audios"],
  ] as const;
  for (const [kind, max, words] of perKind) {
    const excess = k[kind][max];
    if (excess !== undefined) {
      issues.push({ path: at(excess), message: `expected at most ${max} ${words}, got ${k[kind].length}` });
    }
  }
  const refs = content
    .map((e, i) => [materialKind(e), i] as const)
    .filter(([kind]) => kind.startsWith("reference_"))
    .map(([, i]) => i);
  const overflow = refs[CONTENT_LIMITS.referenceItems];
  if (overflow !== undefined) {
    issues.push({
      path: at(overflow),
      message: `expected at most ${CONTENT_LIMITS.referenceItems} reference items in total, got ${refs.length} (${k.reference_image.length} images, ${k.reference_video.length} videos, ${k.reference_audio.length} audios)`,
    });
  }

  // Rule 5: a reference audio needs a reference image or video.
  const firstAudio = k.reference_audio[0];
  if (firstAudio !== undefined && k.reference_image.length + k.reference_video.length === 0) {
    issues.push({
      path: at(firstAudio),
      message:
        "a reference audio cannot be used alone: expected at least one reference image (role=reference_image) or reference video with it, got none",
    });
  }

  // Rules 6 and 7: frames cannot be mixed with references; an omitted image role means first_frame.
  const firstRef = refs[0];
  if (firstRef !== undefined) {
    const refKind = materialKind(content[firstRef] as ContentElement) as Exclude<MaterialKind, "text">;
    const refWhere = `${formatPath(at(firstRef))} is ${KIND_WORDS[refKind]}`;
    for (const i of [...k.first_frame, ...k.last_frame].sort((a, b) => a - b)) {
      const kind = materialKind(content[i] as ContentElement) as "first_frame" | "last_frame";
      const message = roleOmitted(i)
        ? `an omitted image role means first_frame, and first/last frames cannot be mixed with reference images, videos or audios (${refWhere}); all-reference mode needs role=reference_image on every image`
        : `${KIND_WORDS[kind]} cannot be mixed with reference images, videos or audios (${refWhere}); send frames or references, and in all-reference mode use role=reference_image`;
      issues.push({ path: at(i, "role"), message });
    }
  }
  return issues;
}

function textOf(element: ContentElement | undefined): string {
  return element?.type === "text" ? element.text : "";
}

/** Numbers labels refer to: reference images (role=reference_image), video_url and audio_url elements. */
export function labelCounts(content: readonly ContentElement[]): {
  Picture: number;
  Video: number;
  Audio: number;
} {
  return {
    Picture: content.filter((e) => e.type === "image_url" && e.role === "reference_image").length,
    Video: content.filter((e) => e.type === "video_url").length,
    Audio: content.filter((e) => e.type === "audio_url").length,
  };
}

const LABEL_WORDS = {
  Picture: ["reference image", "reference images (image_url with role=reference_image)"],
  Video: ["video", "video_url elements"],
  Audio: ["audio", "audio_url elements"],
} as const;

/** Anything that looks like a label: any case, ASCII or full-width brackets and digits, any spacing. */
const LABEL_LIKE =
  /([<＜〈《‹])[\s\u3000]*(picture|pic|image|img|video|audio)[\s\u3000]*([0-9０-９]+)[\s\u3000]*([>＞〉》›])/giu;
const EXACT_LABEL = /^<(Picture|Video|Audio) ([0-9]+)>$/;

/**
 * Rule 8: labels in text elements that refer past the materials sent (the service loads nothing for
 * them), and near-miss spellings the service does not convert. The service accepts both; these are
 * warnings for the manifest checker. Paths are `["content", i, "text"]`.
 */
export function labelIssues(content: readonly ContentElement[]): Issue[] {
  const issues: Issue[] = [];
  const counts = labelCounts(content);
  content.forEach((element, i) => {
    if (element.type !== "text") return;
    for (const match of element.text.matchAll(LABEL_LIKE)) {
      const written = match[0];
      const exact = EXACT_LABEL.exec(written);
      if (exact) {
        const kind = exact[1] as keyof typeof counts;
        const n = Number(exact[2]);
        const [one, many] = LABEL_WORDS[kind];
        if (n < 1) {
          issues.push({
            path: ["content", i, "text"],
            message: `${written} refers to nothing: labels are numbered from 1, so it loads nothing`,
          });
        } else if (n > counts[kind]) {
          issues.push({
            path: ["content", i, "text"],
            message: `${written} refers to ${one} ${n}, but the request sends ${counts[kind]} ${many}; the label loads nothing`,
          });
        }
        continue;
      }
      const word = (match[2] ?? "").toLowerCase();
      const kind = word === "video" ? "Video" : word === "audio" ? "Audio" : "Picture";
      const digits = (match[3] ?? "").replace(/[０-９]/g, (d) => String(d.charCodeAt(0) - 0xff10));
      issues.push({
        path: ["content", i, "text"],
        message: `${show(written)} is not converted to a label: expected exactly "<${kind} ${Number(digits)}>" (English case, ASCII angle brackets, one space before the number)`,
      });
    }
  });
  return issues;
}

// ---------------------------------------------------------------------------------------------
// Create request

const CALLBACK_URL_MAX = 1024;
const CALLBACK_TOKEN_MAX = 512;

const CallbackUrl = z.string().superRefine((url, ctx) => {
  const length = charLength(url);
  if (length > CALLBACK_URL_MAX) {
    ctx.addIssue({
      code: "custom",
      message: `expected at most ${CALLBACK_URL_MAX} characters, got ${length}`,
      input: url,
    });
  }
  // Public addresses are checked by the caller (`requestUrlIssues`), which knows whether private ones are allowed.
  const problem = checkPublicUrl(url, { allowPrivate: true });
  if (problem !== null) ctx.addIssue({ code: "custom", message: problem, input: url });
});

const CallbackToken = z.string().superRefine((token, ctx) => {
  const length = charLength(token);
  if (length > CALLBACK_TOKEN_MAX) {
    ctx.addIssue({
      code: "custom",
      message: `expected at most ${CALLBACK_TOKEN_MAX} characters, got ${length}`,
      input: token,
    });
  }
});

const Resolution = z.string({
  error: (iss) =>
    iss.input === undefined
      ? "is required"
      : `expected a string such as "768P" or "1080P", got ${show(iss.input)}`,
});

const BaseCreateRequest = z.object({
  model: VideoModel,
  content: z.array(ContentElement).min(1),
  resolution: Resolution.optional(),
  duration: intInRange(4, 30).optional(),
  ratio: VideoRatio.optional(),
  callback_url: CallbackUrl.optional(),
  callback_token: CallbackToken.optional(),
  use_context_ir: z.boolean().optional(),
  skill_id: z.string().optional(),
  mute_audio: z.boolean().optional(),
  aigc_watermark: z.boolean().optional(),
});

/** Cross-field issues of a create request (callback_token needs callback_url, skill_id needs use_context_ir). */
export function crossFieldIssues(request: {
  callback_url?: unknown;
  callback_token?: unknown;
  skill_id?: unknown;
  use_context_ir?: unknown;
}): Issue[] {
  const issues: Issue[] = [];
  if (request.callback_token !== undefined && request.callback_url === undefined) {
    issues.push({ path: ["callback_token"], message: "requires callback_url, got no callback_url" });
  }
  if (request.skill_id !== undefined && request.use_context_ir !== true) {
    const got =
      request.use_context_ir === undefined
        ? "use_context_ir not set (default false)"
        : `use_context_ir=${show(request.use_context_ir)}`;
    issues.push({ path: ["skill_id"], message: `requires use_context_ir=true, got ${got}` });
  }
  return issues;
}

/**
 * Body of `POST /vid/v2/video_generation`. Unknown top-level fields are stripped. Content rules 1-7
 * and the cross-field rules run even when other fields are invalid, so one pass reports everything;
 * content rules run only once every content element is well-formed.
 */
export const VideoCreateRequest = BaseCreateRequest.superRefine(
  (request, ctx) => {
    const prior = ctx.issues.map((i) => i.path?.[0]);
    for (const issue of crossFieldIssues(request)) {
      // When the field a rule depends on already failed, the rule would only repeat that failure.
      const dependsOn = issue.path[0] === "skill_id" ? "use_context_ir" : "callback_url";
      if (prior.includes(dependsOn)) continue;
      ctx.addIssue({ code: "custom", path: [...issue.path], message: issue.message, input: request });
    }
    if (Array.isArray(request.content) && !prior.includes("content")) {
      for (const issue of contentIssues(request.content)) {
        ctx.addIssue({
          code: "custom",
          path: [...issue.path],
          message: issue.message,
          input: request.content,
        });
      }
    }
  },
  {
    when: (payload) =>
      typeof payload.value === "object" && payload.value !== null && !Array.isArray(payload.value),
  },
);
export type VideoCreateRequest = z.infer<typeof VideoCreateRequest>;

/**
 * Address checks of the URLs the service fetches or calls: material URLs and callback_url must not
 * point at loopback, private or other non-public address literals (unless `allowPrivate`), nor carry
 * user information. Data URLs are skipped. Host names pass; resolve them to check their addresses.
 */
export function requestUrlIssues(
  request: { content: readonly ContentElement[]; callback_url?: string | undefined },
  opts: UrlCheckOptions = {},
): Issue[] {
  const issues: Issue[] = [];
  request.content.forEach((element, i) => {
    if (element.type === "text") return;
    const url = materialUrlOf(element);
    if (/^data:/i.test(url)) return;
    const problem = checkPublicUrl(url, opts);
    if (problem !== null) issues.push({ path: ["content", i, element.type, "url"], message: problem });
  });
  if (request.callback_url !== undefined) {
    const problem = checkPublicUrl(request.callback_url, opts);
    if (problem !== null) issues.push({ path: ["callback_url"], message: problem });
  }
  return issues;
}

function materialUrlOf(element: Exclude<ContentElement, { type: "text" }>): string {
  switch (element.type) {
    case "image_url":
      return element.image_url.url;
    case "video_url":
      return element.video_url.url;
    case "audio_url":
      return element.audio_url.url;
  }
}

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

export const BASE_POINTS_PER_SECOND = 10;

/** Points reserved (and, on success, deducted) for a task. */
export function videoPoints(resolution: string | undefined, duration = 5): number {
  return POINTS_PER_SECOND[resolutionTier(resolution)] * duration;
}

/** Points of native 768P generation: what a task whose upscale failed is charged. */
export function basePoints(duration = 5): number {
  return BASE_POINTS_PER_SECOND * duration;
}

export interface Size {
  width: number;
  height: number;
}

const NATIVE_480P: Record<FixedRatio, Size> = {
  "21:9": { width: 1120, height: 480 },
  "16:9": { width: 864, height: 480 },
  "4:3": { width: 640, height: 480 },
  "1:1": { width: 480, height: 480 },
  "3:4": { width: 480, height: 640 },
  "9:16": { width: 480, height: 864 },
};

// Not in the spec: chosen native 768P sizes (all even).
const NATIVE_768P: Record<FixedRatio, Size> = {
  "21:9": { width: 1792, height: 768 },
  "16:9": { width: 1360, height: 768 },
  "4:3": { width: 1024, height: 768 },
  "1:1": { width: 768, height: 768 },
  "3:4": { width: 768, height: 1024 },
  "9:16": { width: 768, height: 1360 },
};

const UPSCALE_SHORT_SIDE = { "1080P": 1080, "2K": 1440, "4K": 2160 } as const;

const RATIO_PARTS: Record<FixedRatio, readonly [number, number]> = {
  "21:9": [21, 9],
  "16:9": [16, 9],
  "4:3": [4, 3],
  "1:1": [1, 1],
  "3:4": [3, 4],
  "9:16": [9, 16],
};

const even = (x: number) => 2 * Math.round(x / 2);

/**
 * The fixed ratio a request resolves to. `adaptive` follows the image: the native size (480P sizes
 * at 480P, 768P sizes otherwise) whose ratio is nearest in log-ratio distance; 16:9 with no usable image.
 */
export function resolveRatio(tier: ResolutionTier, ratio: VideoRatio, firstImage?: Size): FixedRatio {
  if (ratio !== "adaptive") return ratio;
  const { width, height } = firstImage ?? { width: 0, height: 0 };
  if (!(width > 0 && height > 0 && Number.isFinite(width) && Number.isFinite(height))) return "16:9";
  const native = tier === "480P" ? NATIVE_480P : NATIVE_768P;
  const target = Math.log(width / height);
  let best: FixedRatio = "16:9";
  let bestDistance = Number.POSITIVE_INFINITY;
  for (const r of FIXED_RATIOS) {
    const distance = Math.abs(Math.log(native[r].width / native[r].height) - target);
    if (distance < bestDistance) {
      best = r;
      bestDistance = distance;
    }
  }
  return best;
}

/**
 * Output dimensions. 480P and 768P are native sizes; upscaled tiers have a short side of 1080, 1440
 * or 2160 and a long side computed from the ratio (spec: "computed from ratio"), rounded to even:
 * 16:9 gives 1920x1080, 2560x1440, 3840x2160.
 */
export function outputSize(tier: ResolutionTier, ratio: VideoRatio, firstImage?: Size): Size {
  const fixed = resolveRatio(tier, ratio, firstImage);
  if (tier === "480P") return { ...NATIVE_480P[fixed] };
  if (tier === "768P") return { ...NATIVE_768P[fixed] };
  const short = UPSCALE_SHORT_SIDE[tier];
  const [w, h] = RATIO_PARTS[fixed];
  return w >= h
    ? { width: even((short * w) / h), height: short }
    : { width: short, height: even((short * h) / w) };
}

// ---------------------------------------------------------------------------------------------
// Responses (tolerant: added fields pass, optional fields may be missing)

const int = () => z.number().int();

export const VideoTaskUsage = z.looseObject({
  input_seconds: int().optional(),
  input_image_count: int().optional(),
  use_context_ir: z.boolean().optional(),
  total_seconds: int().optional(),
  output_seconds: int().optional(),
});
export type VideoTaskUsage = z.infer<typeof VideoTaskUsage>;

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

// ---------------------------------------------------------------------------------------------
// List queries

export type ParseResult<T> = { ok: true; value: T } | { ok: false; issues: Issue[] };

export interface VideoListQuery {
  page_num: number;
  page_size: number;
  status?: VideoStatus;
  model?: VideoModel;
  task_type?: "generation";
}

export interface SkillListQuery {
  page_num: number;
  page_size: number;
  keyword?: string;
}

/** A query value; an empty value counts as absent. The first occurrence wins. */
function queryValue(params: URLSearchParams, name: string): string | undefined {
  const value = params.get(name);
  return value === null || value === "" ? undefined : value;
}

/** Decimal integer parameter, or an issue naming the parameter and the value sent. */
function queryInt(
  params: URLSearchParams,
  name: string,
  fallback: number,
  min: number,
  max: number | undefined,
  issues: Issue[],
): number {
  const raw = queryValue(params, name);
  if (raw === undefined) return fallback;
  const n = /^[0-9]+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || (max !== undefined && n > max)) {
    const expected = max === undefined ? `an integer >= ${min}` : `an integer from ${min} to ${max}`;
    issues.push({ path: [name], message: `expected ${expected}, got ${show(raw)}` });
    return fallback;
  }
  return n;
}

function queryEnum<const T extends readonly string[]>(
  params: URLSearchParams,
  name: string,
  values: T,
  issues: Issue[],
): T[number] | undefined {
  const raw = queryValue(params, name);
  if (raw === undefined) return undefined;
  if ((values as readonly string[]).includes(raw)) return raw as T[number];
  issues.push({
    path: [name],
    message: `expected one of ${values.map((v) => show(v)).join(", ")}, got ${show(raw)}`,
  });
  return undefined;
}

/** Query of `GET /vid/v2/query/video_generation`. */
export function parseVideoListQuery(params: URLSearchParams): ParseResult<VideoListQuery> {
  const issues: Issue[] = [];
  const page_num = queryInt(params, "page_num", 1, 1, undefined, issues);
  const page_size = queryInt(params, "page_size", 20, 1, 100, issues);
  const status = queryEnum(params, "filter.status", VIDEO_STATUSES, issues);
  const model = queryEnum(params, "filter.model", VIDEO_MODELS, issues);
  const task_type = queryEnum(params, "filter.task_type", ["generation"] as const, issues);
  // `filter.task_ids`, `filter.task_ids[]`, `filter.task_ids[0]`, `filter[task_ids]`, with any value.
  if ([...params.keys()].some((key) => /^filter(\.task_ids|\[task_ids\])($|[[.])/.test(key))) {
    issues.push({ path: ["filter.task_ids"], message: "is not supported; query tasks one by one" });
  }
  if (issues.length > 0) return { ok: false, issues };
  const value: VideoListQuery = { page_num, page_size };
  if (status !== undefined) value.status = status;
  if (model !== undefined) value.model = model;
  if (task_type !== undefined) value.task_type = task_type;
  return { ok: true, value };
}

/** Query of `GET /vid/v2/skills`: page_size above 100 is treated as 100; keyword is trimmed. */
export function parseSkillListQuery(params: URLSearchParams): ParseResult<SkillListQuery> {
  const issues: Issue[] = [];
  const page_num = queryInt(params, "page_num", 1, 1, undefined, issues);
  const page_size = Math.min(100, queryInt(params, "page_size", 20, 1, undefined, issues));
  if (issues.length > 0) return { ok: false, issues };
  const value: SkillListQuery = { page_num, page_size };
  const keyword = params.get("keyword")?.trim();
  if (keyword) value.keyword = keyword;
  return { ok: true, value };
}
