// What may be sent to the video generation service (/work/shared/spec/video-generation-api.md):
// the create-task body with its content rules (1-7), prompt labels (rule 8) and cross-field rules.
// Rules are pure functions returning Issue[] with paths; nothing here throws on bad input.
import { z } from "zod";
import { charLength, formatPath, type Issue, intInRange, show } from "./common.js";
import { checkAbsoluteUrl, checkPublicUrl, parseDataUrl } from "./urls.js";
import { CONTENT_TYPES, type ContentRole, type ContentType, VideoModel, VideoRatio } from "./video.js";

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

const TextElement = z.object({
  type: z.literal("text"),
  text: z.string({
    error: (iss) =>
      iss.input === undefined
        ? 'is required when type is "text"'
        : `expected a string, got ${show(iss.input)}`,
  }),
  role: z.never({ error: (iss) => `a text element takes no role, got ${show(iss.input)}` }).optional(),
});
const ImageElement = z.object({
  type: z.literal("image_url"),
  image_url: materialObject("image_url"),
  role: roleFor("image_url", ["first_frame", "last_frame", "reference_image"]),
});
const VideoElement = z.object({
  type: z.literal("video_url"),
  video_url: materialObject("video_url"),
  role: roleFor("video_url", ["reference_video"]),
});
const AudioElement = z.object({
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
type MaterialKind =
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
function labelCounts(content: readonly ContentElement[]): {
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
function crossFieldIssues(request: {
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
