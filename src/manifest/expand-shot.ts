// A shot row becomes its video jobs, one per take: materials resolved into the content list, the
// video service's rules applied, then a fingerprint of the fully resolved request and its points.
import { formatPath, type Issue } from "../api/common.js";
import { RESOLUTIONS, resolutionTier, videoPoints } from "../api/video.js";
import { labelIssues, VideoCreateRequest } from "../api/video-request.js";
import { type DefaultsRead, type ExpandContext, RowExpansion } from "./expand.js";
import type { ShotValues } from "./fields.js";
import type { SkillRef, VideoJob } from "./job.js";
import { type MaterialKind, type MaterialRef, type MaterialResolver, materialIdentity } from "./materials.js";
import { didYouMean, quoted } from "./problems.js";
import type { RawRow } from "./rows.js";
import { DEFAULT_TIMING, fingerprintOf } from "./timing.js";

export const MAX_TAKES = 20;

type Shot = RowExpansion<ShotValues>;
type Content = VideoCreateRequest["content"];

/** The content list being built, and the manifest field each element came from. */
interface ContentBuild {
  content: Content;
  fields: string[];
  refs: Array<{ contentIndex: number; ref: MaterialRef }>;
}

/** The content element type of each kind of material. */
const CONTENT_TYPE = { image: "image_url", video: "video_url", audio: "audio_url" } as const satisfies Record<
  MaterialKind,
  string
>;

/** The material fields of a shot: the kind each holds and the role it plays in the content. */
const MATERIAL_FIELDS = [
  { field: "reference_images", kind: "image", role: "reference_image" },
  { field: "reference_videos", kind: "video", role: "reference_video" },
  { field: "reference_audios", kind: "audio", role: "reference_audio" },
] as const;

export async function expandShot(
  row: RawRow,
  ctx: ExpandContext,
  materials: MaterialResolver,
  defaultsRead: DefaultsRead,
): Promise<VideoJob[]> {
  const shot = RowExpansion.open<ShotValues>("shot", row, ctx, defaultsRead);
  if (!shot) return [];
  const v = shot.values;
  const built = await buildContent(shot, materials);
  checkResolution(shot);
  const skill = readSkill(shot);
  const takes = v.takes ?? 1;
  if (v.takes !== undefined && (takes < 1 || takes > MAX_TAKES)) {
    shot.at("takes").error(`expected an integer from 1 to ${MAX_TAKES}, got ${takes}`);
  }
  const parsed = checkRequest(shot, built, skill);
  if (!parsed || !shot.sound) return [];
  return videoJobs(shot, parsed, built.refs, skill, takes);
}

/** The prompt (or its template) and the materials, in the order the service reads them. */
async function buildContent(shot: Shot, materials: MaterialResolver): Promise<ContentBuild> {
  const v = shot.values;
  const prompt = await shot.text("prompt");
  const built: ContentBuild = { content: [], fields: [], refs: [] };
  if (prompt !== undefined || v.template !== undefined || v.prompt !== undefined) {
    // When the template or the inline text could not be filled (reported already), a stand-in
    // keeps the content rules from adding "no text" to that error.
    built.content.push({ type: "text", text: prompt ?? "(template)" });
    built.fields.push(v.template !== undefined ? "template" : "prompt");
  }
  const add = async (field: string, raw: string, kind: MaterialKind, role: string) => {
    const ref = await materials.resolve(raw, kind);
    if ("error" in ref) {
      shot.at(field).error(ref.error);
      return;
    }
    // Placeholder addresses keep the service's URL rules quiet until staging gives real ones.
    const url =
      ref.source === "url"
        ? ref.url
        : `https://staged.clapper.invalid/${materialIdentity(ref).replace(":", "/")}`;
    const type = CONTENT_TYPE[kind];
    built.refs.push({ contentIndex: built.content.length, ref });
    built.content.push({ type, [type]: { url }, role } as Content[number]);
    built.fields.push(field);
  };
  if (v.first_frame !== undefined) await add("first_frame", v.first_frame, "image", "first_frame");
  if (v.last_frame !== undefined) await add("last_frame", v.last_frame, "image", "last_frame");
  for (const { field, kind, role } of MATERIAL_FIELDS)
    for (const [i, item] of (v[field] ?? []).entries()) await add(`${field}[${i}]`, item, kind, role);
  return built;
}

/** The service renders any unknown resolution as native 768P without a word; the manifest refuses it. */
function checkResolution(shot: Shot): void {
  const { resolution } = shot.values;
  if (resolution === undefined || (RESOLUTIONS as readonly string[]).includes(resolution)) return;
  const upper = resolution.toUpperCase();
  const hint = (RESOLUTIONS as readonly string[]).includes(upper)
    ? ` (did you mean ${JSON.stringify(upper)}? the service would silently render ${JSON.stringify(resolution)} as 768P)`
    : didYouMean(resolution, RESOLUTIONS);
  shot
    .at("resolution")
    .error(
      `expected one of ${RESOLUTIONS.join(", ")} (case-sensitive), got ${JSON.stringify(resolution)}${hint}`,
    );
}

/** The skill the shot names, from the manifest's `skills` when it defines it. */
function readSkill(shot: Shot): SkillRef | undefined {
  const v = shot.values;
  if (v.skill === undefined) return undefined;
  if (v.skill.trim() === "") {
    // The service would refuse it at create, after the plan said all was well.
    shot.at("skill").error(`expected the name of a skill, got ${quoted(v.skill)}`);
    return undefined;
  }
  if (v.use_context_ir !== true) {
    shot
      .at("skill")
      .error(
        "requires use_context_ir: true (the service applies skills only in the prompt-optimization stage)",
      );
  }
  return shot.ctx.skills.get(v.skill) ?? { name: v.skill };
}

/** The create body checked by the service's rules; undefined when it breaks one (reported). */
function checkRequest(
  shot: Shot,
  built: ContentBuild,
  skill: SkillRef | undefined,
): VideoCreateRequest | undefined {
  const v = shot.values;
  const { content, fields } = built;
  const body = {
    model: v.model ?? "Vid-H3",
    content,
    ...(v.resolution !== undefined ? { resolution: v.resolution } : {}),
    ...(v.duration !== undefined && v.duration !== "auto" ? { duration: v.duration } : {}),
    ...(v.ratio !== undefined ? { ratio: v.ratio } : {}),
    ...(v.use_context_ir !== undefined ? { use_context_ir: v.use_context_ir } : {}),
    ...(skill ? { skill_id: skill.name } : {}),
    ...(v.mute_audio !== undefined ? { mute_audio: v.mute_audio } : {}),
    ...(v.aigc_watermark !== undefined ? { aigc_watermark: v.aigc_watermark } : {}),
  };
  const parsed = VideoCreateRequest.safeParse(body);
  if (content.length === 0) {
    shot
      .at("prompt")
      .error("is required: a prompt or a template, unless frames or reference materials are given");
  }
  if (!parsed.success) {
    shot.reportIssues(
      parsed.error,
      (path) => videoField(path, fields),
      (issue, field) =>
        // An empty content list is the missing prompt reported above.
        (content.length === 0 && issue.path.length === 1 && issue.path[0] === "content") ||
        // The skill_id rule restates what was said above in the manifest's terms.
        (field === "skill" && v.use_context_ir !== true),
      (message) => inManifestTerms(message, fields),
    );
    return undefined;
  }
  if (shot.clean) warnings(shot, parsed.data, fields);
  return parsed.data;
}

/** What the service would take but likely not as meant. */
function warnings(shot: Shot, request: VideoCreateRequest, fields: readonly string[]): void {
  // Labels are counted against the materials actually sent; with a material in error that count is moot.
  for (const issue of labelIssues(request.content) as Issue[]) {
    shot.at(videoField(issue.path, fields)).warn(inManifestTerms(issue.message, fields));
  }
  if (request.ratio === "adaptive" && !request.content.some((c) => c.type === "image_url")) {
    shot
      .at("ratio")
      .warn(
        "adaptive follows the first frame, last frame or first reference image; with no image the video is 16:9",
      );
  }
}

/** One job per take, each fingerprinted by the request with its materials' identities. */
function videoJobs(
  shot: Shot,
  request: VideoCreateRequest,
  refs: ContentBuild["refs"],
  skill: SkillRef | undefined,
  takes: number,
): VideoJob[] {
  const duration = request.duration ?? 5;
  const tier = resolutionTier(request.resolution);
  const identity = {
    ...request,
    content: request.content.map((c, i) => {
      const ref = refs.find((r) => r.contentIndex === i)?.ref;
      if (!ref || c.type === "text") return c;
      return { type: c.type, role: c.role, material: materialIdentity(ref) };
    }),
    ...(skill ? { skill_id: undefined, skill: { name: skill.name, sha256: skill.sha256 } } : {}),
  };
  const jobs: VideoJob[] = [];
  for (let take = 1; take <= takes; take++) {
    const ofTake = takes > 1 ? { take } : {};
    jobs.push({
      kind: "video",
      ...shot.jobBase(takes > 1 ? `shot/${shot.id}/take-${take}` : `shot/${shot.id}`),
      ...ofTake,
      fingerprint: fingerprintOf({ v: 1, kind: "video", request: identity, ...ofTake }),
      points: videoPoints(request.resolution, duration),
      tier,
      duration,
      request,
      materials: refs,
      ...(skill ? { skill } : {}),
      // Lines, estimate and fingerprint are given once every line is expanded (linkAutoShots).
      ...(shot.values.duration === "auto"
        ? {
            auto: {
              lines: [],
              timing: DEFAULT_TIMING,
              estimated: duration,
              maxPoints: 0,
              basis: { request: identity, ...ofTake },
            },
          }
        : {}),
    });
  }
  return jobs;
}

/** Maps a path of the video create body back to the manifest field it was built from. */
function videoField(path: ReadonlyArray<string | number>, contentFields: readonly string[]): string {
  const [head, index] = path;
  if (head === "content") return typeof index === "number" ? (contentFields[index] ?? "prompt") : "prompt";
  if (head === "skill_id") return "skill";
  return formatPath(path);
}

/** The service's messages name content elements (`content[2]`); the manifest names the field. */
function inManifestTerms(message: string, contentFields: readonly string[]): string {
  return message.replace(/content\[(\d+)\]/g, (whole, i: string) => contentFields[Number(i)] ?? whole);
}
