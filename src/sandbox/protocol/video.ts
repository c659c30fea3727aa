// The video service's side of the protocol, which only the emulator needs: the list queries it
// parses, the URL checks it applies to a create, and the output size and usage it reports.
import type { Issue } from "../../api/common.js";
import { show } from "../../api/common.js";
import { checkPublicUrl, type UrlCheckOptions } from "../../api/urls.js";
import {
  type ResolutionTier,
  VIDEO_MODELS,
  VIDEO_STATUSES,
  type VideoModel,
  type VideoRatio,
  type VideoStatus,
} from "../../api/video.js";
import type { ContentElement } from "../../api/video-request.js";

/** Ratios with a fixed output size; `adaptive` resolves to one of these. */
type FixedRatio = Exclude<VideoRatio, "adaptive">;
const FIXED_RATIOS = ["21:9", "16:9", "4:3", "1:1", "3:4", "9:16"] as const satisfies readonly FixedRatio[];

/** Number of input images (first frame, last frame and reference images), as `usage.input_image_count`. */
export function inputImageCount(content: readonly ContentElement[]): number {
  return content.filter((e) => e.type === "image_url").length;
}

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
function resolveRatio(tier: ResolutionTier, ratio: VideoRatio, firstImage?: Size): FixedRatio {
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
// List queries

type ParseResult<T> = { ok: true; value: T } | { ok: false; issues: Issue[] };

interface VideoListQuery {
  page_num: number;
  page_size: number;
  status?: VideoStatus;
  model?: VideoModel;
  task_type?: "generation";
}

interface SkillListQuery {
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
