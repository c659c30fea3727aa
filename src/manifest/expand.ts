// Rows become jobs: defaults merged, templates filled, materials and voices resolved, the services'
// own rules applied (src/api/) with every issue mapped back to the manifest field it came from,
// then a fingerprint of the fully resolved request and an estimate of its points.
import { resolve } from "node:path";
import { formatPath, type Issue, issuesFromZod } from "../api/common.js";
import type { ReferenceAudioFacts } from "../api/reference-audio.js";
import {
  countBillableChars,
  EMOTION_VECTOR_MODES,
  PRONUNCIATION_KINDS,
  SPEECH_LANGUAGES,
  speechPoints,
} from "../api/speech.js";
import { SpeechCreateRequest, UploadUrlRequest } from "../api/speech-request.js";
import {
  RESOLUTIONS,
  type ResolutionTier,
  resolutionTier,
  VIDEO_MODELS,
  VIDEO_RATIOS,
  videoPoints,
} from "../api/video.js";
import { labelIssues, VideoCreateRequest } from "../api/video-request.js";
import { type LineValues, type Origins, readFields, type ShotValues } from "./fields.js";
import { checkRegularFile, FileError } from "./files.js";
import {
  type MaterialKind,
  type MaterialRef,
  type MaterialResolver,
  materialIdentity,
  sha256File,
} from "./materials.js";
import { didYouMean, type Problems, quoted } from "./problems.js";
import type { RawRow } from "./rows.js";
import { displayPath, type RawManifest } from "./source.js";
import { malformedMessage, renderTemplate, type TemplateStore } from "./templates.js";
import { type AutoDuration, DEFAULT_TIMING, fingerprintOf } from "./timing.js";

export const MAX_TAKES = 20;
export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** A voice as the manifest names it, resolved as far as possible without the service. */
export type VoiceSpec =
  | { source: "preset" | "custom"; voiceId: string }
  | ({ source: "file"; path: string; sha256: string; saveAs?: string } & ReferenceAudioFacts);

export interface SkillRef {
  name: string;
  /** Set when the manifest's `skills` map defines it (synced before a run). */
  file?: string;
  sha256?: string;
}

interface JobBase {
  /** `shot/s01`, `shot/s02/take-2`, `line/n01`. */
  id: string;
  rowId: string;
  file: string;
  line: number;
  fingerprint: string;
  /** Estimated points; null when the speech price is unknown. */
  points: number | null;
}

export interface VideoJob extends JobBase {
  kind: "video";
  take?: number;
  tier: ResolutionTier;
  /** Seconds; for an auto shot not fitted yet, the estimate. */
  duration: number;
  /** `duration: auto`: timed to its narration lines (src/manifest/timing.ts). */
  auto?: AutoDuration;
  /** The create body, with material URLs still to be staged (`materials[i]` fills `content[contentIndex]`). */
  request: VideoCreateRequest;
  materials: Array<{ contentIndex: number; ref: MaterialRef }>;
  skill?: SkillRef;
}

export interface SpeechJob extends JobBase {
  kind: "speech";
  shot?: string;
  countedChars: number;
  /** The create body; `voice` is filled from `voiceSpec` at run time (a file becomes an asset). */
  request: Omit<SpeechCreateRequest, "voice">;
  voice: VoiceSpec;
}

export type Job = VideoJob | SpeechJob;

export interface ExpandContext {
  manifest: RawManifest;
  /** Paths in messages are shown relative to it. */
  cwd: string;
  problems: Problems;
  templates: TemplateStore;
  vars: Record<string, string>;
  skills: Map<string, SkillRef>;
  /** Points per 10 counted characters; undefined when unknown. */
  speechPrice: number | undefined;
}

/** The defaults of a kind, read once; `broken` when one of them could not be read (reported once). */
export interface DefaultsRead {
  values: Record<string, unknown>;
  origins: Origins;
  broken?: boolean;
}

/** The row's fields over the defaults of its kind; vars are merged key by key. */
function merged(kind: "shot" | "line", row: RawRow, ctx: ExpandContext, defaultsRead: DefaultsRead) {
  const own = readFields(kind, row.fields, row.file, ctx.problems);
  const values = { ...defaultsRead.values, ...own.values };
  const origins = { ...defaultsRead.origins, ...own.origins };
  if (defaultsRead.values.vars && own.values.vars) {
    values.vars = { ...(defaultsRead.values.vars as object), ...(own.values.vars as object) };
  }
  return { values, origins };
}

/**
 * Reports an issue at the origin of `field` (the row, or the defaults it inherited from); in YAML,
 * at the line of the very list item or key (`pronunciations[2].value`) when it has one.
 */
function at(ctx: ExpandContext, row: RawRow, origins: Origins, field: string) {
  const root = field.replace(/[[.].*$/, "");
  const origin = origins[root] ?? { file: row.file, line: row.line };
  let line = origin.line;
  for (
    let rest = field.slice(root.length);
    origin.paths && rest !== "";
    rest = rest.replace(/(\[\d+\]|\.[^.[]*)$/, "")
  ) {
    const nested = origin.paths[rest];
    if (nested) {
      line = nested;
      break;
    }
  }
  return {
    error: (message: string) => ctx.problems.error(origin.file, line, field, message),
    warn: (message: string) => ctx.problems.warn(origin.file, line, field, message),
  };
}

/** The values a few enumerated fields accept, for a "did you mean" after the service's message. */
const CHOICES: Record<string, readonly string[]> = {
  model: VIDEO_MODELS,
  ratio: VIDEO_RATIOS,
  language: SPEECH_LANGUAGES,
  emotion_vector_mode: EMOTION_VECTOR_MODES,
};

function withHint(field: string, message: string, values: Record<string, unknown>): string {
  const kind = /^pronunciations\[(\d+)\]\.kind$/.exec(field);
  const choices = kind ? PRONUNCIATION_KINDS : CHOICES[field];
  const got = kind
    ? (values.pronunciations as Array<{ kind?: unknown }> | undefined)?.[Number(kind[1])]?.kind
    : values[field];
  if (!choices || typeof got !== "string" || choices.includes(got)) return message;
  return `${message}${didYouMean(got, choices)}`;
}

/** What `{{ name }}` may name: the manifest's vars, the row's vars, then the row's own fields. */
function scopeOf(
  ctx: ExpandContext,
  values: Record<string, unknown>,
  textField: string,
): Record<string, string> {
  const scope: Record<string, string> = {
    ...ctx.vars,
    ...(values.vars as Record<string, string> | undefined),
  };
  for (const [k, v] of Object.entries(values)) {
    // The text does not fill itself.
    if (k === textField) continue;
    if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") scope[k] ??= String(v);
  }
  return scope;
}

function notDefined(missing: readonly string[]): string {
  const names = missing.map((m) => JSON.stringify(m)).join(", ");
  return `${names}, which ${missing.length > 1 ? "are" : "is"} not defined (vars, the row's vars.* or its fields)`;
}

/**
 * The text of a shot (`prompt`) or a line (`text`): written inline, or filled from a template. Both
 * are filled the same strict way, from the manifest's vars, the row's vars and the row's fields: an
 * inline `{{ name }}` sent as it is would be paid for and rendered as braces.
 */
async function fillText(
  ctx: ExpandContext,
  row: RawRow,
  origins: Origins,
  values: { id?: string; template?: string; vars?: Record<string, string> } & Record<string, unknown>,
  textField: "prompt" | "text",
): Promise<string | undefined> {
  const literal = values[textField] as string | undefined;
  if (values.template === undefined) {
    // Most text has no braces at all: nothing to fill.
    if (literal === undefined || !(literal.includes("{{") || literal.includes("}}"))) return literal;
    const filled = renderTemplate(literal, scopeOf(ctx, values, textField));
    if ("text" in filled) return filled.text;
    at(ctx, row, origins, textField).error(
      "malformed" in filled ? malformedMessage(filled.malformed) : `uses ${notDefined(filled.missing)}`,
    );
    return undefined;
  }
  if (literal !== undefined) {
    at(ctx, row, origins, "template").error(`set either ${textField} or template, not both`);
    return undefined;
  }
  const template = await ctx.templates.get(values.template);
  if (!template) {
    at(ctx, row, origins, "template").error(
      `no template ${JSON.stringify(values.template)} in the templates folder`,
    );
    return undefined;
  }
  if ("error" in template) {
    at(ctx, row, origins, "template").error(
      `template ${JSON.stringify(values.template)}: ${displayPath(template.file, ctx.cwd)}: ${template.error}`,
    );
    return undefined;
  }
  const filled = renderTemplate(template.text, scopeOf(ctx, values, textField));
  if ("malformed" in filled) {
    at(ctx, row, origins, "template").error(
      `template ${JSON.stringify(values.template)}: ${malformedMessage(filled.malformed)}`,
    );
    return undefined;
  }
  if ("missing" in filled) {
    at(ctx, row, origins, "template").error(
      `template ${JSON.stringify(values.template)} uses ${notDefined(filled.missing)}`,
    );
    return undefined;
  }
  return filled.text;
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

function speechField(path: ReadonlyArray<string | number>, textField: string): string {
  const [head] = path;
  if (head === "text") return textField;
  if (head === "voice") return "voice";
  if (head === "save_voice" || head === "voice_name") return "save_voice_as";
  return formatPath(path);
}

/** The row's id, reported when missing (no job without one) or when it is unfit for file names and keys. */
function checkedId(
  ctx: ExpandContext,
  row: RawRow,
  origins: Origins,
  id: string | undefined,
): string | undefined {
  if (id === undefined) {
    ctx.problems.error(row.file, row.line, "id", "is required");
    return undefined;
  }
  if (!ID_PATTERN.test(id)) {
    at(ctx, row, origins, "id").error(
      `expected letters, digits, ".", "_" or "-" (at most 64), got ${JSON.stringify(id)}`,
    );
  }
  return id;
}

export async function expandShot(
  row: RawRow,
  ctx: ExpandContext,
  materials: MaterialResolver,
  defaultsRead: DefaultsRead,
): Promise<VideoJob[]> {
  // Errors of this row's own fields count too: a row with a value that could not be read makes no job.
  const errorsBefore = ctx.problems.errorCount;
  const { values: raw, origins } = merged("shot", row, ctx, defaultsRead);
  const v = raw as ShotValues;
  const id = checkedId(ctx, row, origins, v.id);
  if (id === undefined) return [];

  const prompt = await fillText(ctx, row, origins, v as Record<string, unknown>, "prompt");
  const content: VideoCreateRequest["content"] = [];
  const contentFields: string[] = [];
  const refs: Array<{ contentIndex: number; ref: MaterialRef }> = [];
  if (prompt !== undefined || v.template !== undefined || v.prompt !== undefined) {
    // When the template or the inline text could not be filled (reported already), a stand-in
    // keeps the content rules from adding "no text" to that error.
    content.push({ type: "text", text: prompt ?? "(template)" });
    contentFields.push(v.template !== undefined ? "template" : "prompt");
  }
  const add = async (field: string, raw: string, kind: MaterialKind, role: string) => {
    const ref = await materials.resolve(raw, kind);
    if ("error" in ref) {
      at(ctx, row, origins, field).error(ref.error);
      return;
    }
    // Placeholder addresses keep the service's URL rules quiet until staging gives real ones.
    const url =
      ref.source === "url"
        ? ref.url
        : `https://staged.clapper.invalid/${materialIdentity(ref).replace(":", "/")}`;
    const type = kind === "image" ? "image_url" : kind === "video" ? "video_url" : "audio_url";
    refs.push({ contentIndex: content.length, ref });
    content.push({ type, [type]: { url }, role } as VideoCreateRequest["content"][number]);
    contentFields.push(field);
  };
  if (v.first_frame !== undefined) await add("first_frame", v.first_frame, "image", "first_frame");
  if (v.last_frame !== undefined) await add("last_frame", v.last_frame, "image", "last_frame");
  for (const [i, item] of (v.reference_images ?? []).entries())
    await add(`reference_images[${i}]`, item, "image", "reference_image");
  for (const [i, item] of (v.reference_videos ?? []).entries())
    await add(`reference_videos[${i}]`, item, "video", "reference_video");
  for (const [i, item] of (v.reference_audios ?? []).entries())
    await add(`reference_audios[${i}]`, item, "audio", "reference_audio");

  // The service renders any unknown resolution as native 768P without a word; the manifest refuses it.
  if (v.resolution !== undefined && !(RESOLUTIONS as readonly string[]).includes(v.resolution)) {
    const upper = v.resolution.toUpperCase();
    const hint = (RESOLUTIONS as readonly string[]).includes(upper)
      ? ` (did you mean ${JSON.stringify(upper)}? the service would silently render ${JSON.stringify(v.resolution)} as 768P)`
      : didYouMean(v.resolution, RESOLUTIONS);
    at(ctx, row, origins, "resolution").error(
      `expected one of ${RESOLUTIONS.join(", ")} (case-sensitive), got ${JSON.stringify(v.resolution)}${hint}`,
    );
  }
  let skill: SkillRef | undefined;
  if (v.skill !== undefined && v.skill.trim() === "") {
    // The service would refuse it at create, after the plan said all was well.
    at(ctx, row, origins, "skill").error(`expected the name of a skill, got ${quoted(v.skill)}`);
  } else if (v.skill !== undefined) {
    skill = ctx.skills.get(v.skill) ?? { name: v.skill };
    if (v.use_context_ir !== true) {
      at(ctx, row, origins, "skill").error(
        "requires use_context_ir: true (the service applies skills only in the prompt-optimization stage)",
      );
    }
  }
  const takes = v.takes ?? 1;
  if (v.takes !== undefined && (takes < 1 || takes > MAX_TAKES)) {
    at(ctx, row, origins, "takes").error(`expected an integer from 1 to ${MAX_TAKES}, got ${takes}`);
  }

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
    at(ctx, row, origins, "prompt").error(
      "is required: a prompt or a template, unless frames or reference materials are given",
    );
  }
  if (!parsed.success) {
    const seen = new Set<string>();
    for (const issue of issuesFromZod(parsed.error)) {
      // An empty content list is the missing prompt reported above.
      if (content.length === 0 && issue.path.length === 1 && issue.path[0] === "content") continue;
      const field = videoField(issue.path, contentFields);
      // The skill_id rule restates what was said above in the manifest's terms.
      if (field === "skill" && v.use_context_ir !== true) continue;
      const key = `${field}\n${issue.message}`;
      if (seen.has(key)) continue;
      seen.add(key);
      at(ctx, row, origins, field).error(inManifestTerms(withHint(field, issue.message, raw), contentFields));
    }
  } else if (ctx.problems.errorCount === errorsBefore) {
    // Labels are counted against the materials actually sent; with a material in error that count is moot.
    for (const issue of labelIssues(parsed.data.content) as Issue[]) {
      at(ctx, row, origins, videoField(issue.path, contentFields)).warn(
        inManifestTerms(issue.message, contentFields),
      );
    }
    if (parsed.data.ratio === "adaptive" && !parsed.data.content.some((c) => c.type === "image_url")) {
      at(ctx, row, origins, "ratio").warn(
        "adaptive follows the first frame, last frame or first reference image; with no image the video is 16:9",
      );
    }
  }
  if (ctx.problems.errorCount > errorsBefore || !parsed.success || defaultsRead.broken || row.unreadable)
    return [];

  const request = parsed.data;
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
    jobs.push({
      kind: "video",
      id: takes > 1 ? `shot/${id}/take-${take}` : `shot/${id}`,
      rowId: id,
      file: row.file,
      line: row.line,
      ...(takes > 1 ? { take } : {}),
      fingerprint: fingerprintOf({ v: 1, kind: "video", request: identity, ...(takes > 1 ? { take } : {}) }),
      points: videoPoints(request.resolution, duration),
      tier,
      duration,
      request,
      materials: refs,
      ...(skill ? { skill } : {}),
      // Lines, estimate and fingerprint are given once every line is expanded (linkAutoShots).
      ...(v.duration === "auto"
        ? {
            auto: {
              lines: [],
              timing: DEFAULT_TIMING,
              estimated: duration,
              maxPoints: 0,
              basis: { request: identity, ...(takes > 1 ? { take } : {}) },
            },
          }
        : {}),
    });
  }
  return jobs;
}

export class VoiceResolver {
  private readonly cache = new Map<
    string,
    Promise<({ sha256: string } & ReferenceAudioFacts) | { error: string }>
  >();

  constructor(private readonly baseDir: string) {}

  async resolve(raw: string): Promise<VoiceSpec | { error: string }> {
    const m = raw.match(/^(preset|custom):(.*)$/);
    if (m) {
      const id = (m[2] ?? "").trim();
      if (!id) return { error: `expected ${m[1]}:VOICE_ID, got ${JSON.stringify(raw)}` };
      return { source: m[1] as "preset" | "custom", voiceId: id };
    }
    const expected = "expected preset:ID, custom:ID or a reference audio file";
    const scheme = /^([a-z]+):(.*)$/i.exec(raw);
    if (scheme && !/^[a-z]:[\\/]/i.test(raw)) {
      const lower = (scheme[1] ?? "").toLowerCase();
      const hint = lower === "preset" || lower === "custom" ? ` (did you mean "${lower}:${scheme[2]}"?)` : "";
      return { error: `${expected}, got ${JSON.stringify(raw)}${hint}` };
    }
    const path = resolve(this.baseDir, raw);
    let entry = this.cache.get(path);
    if (!entry) {
      entry = inspectVoice(path);
      this.cache.set(path, entry);
    }
    const facts = await entry;
    if ("error" in facts) {
      // A bare word that is no file was most likely meant as a voice ID.
      if (!/[./\\]/.test(raw) && /file not found|cannot be read|expected a \.wav/.test(facts.error)) {
        return { error: `${expected}, got ${JSON.stringify(raw)} (did you mean "preset:${raw}"?)` };
      }
      // Messages name the file as the manifest wrote it.
      return {
        error: facts.error.replace(path, raw),
      };
    }
    return { source: "file", path, ...facts };
  }
}

/**
 * A reference voice file: a regular file outside /proc, /dev and /sys (a FIFO would hang the audio
 * reader), that the service accepts (type, size, duration, and the file name sent at upload).
 */
async function inspectVoice(
  path: string,
): Promise<({ sha256: string } & ReferenceAudioFacts) | { error: string }> {
  try {
    await checkRegularFile(path);
  } catch (error) {
    if (!(error instanceof FileError)) return { error: `${path}: cannot be read (${error})` };
    if (error.problem === "missing") return { error: `${path}: file not found` };
    if (error.problem === "unreadable") return { error: `${path}: ${error.message}` };
    return { error: `${path} is ${error.message}` };
  }
  let facts: ReferenceAudioFacts;
  try {
    // Loaded on use: its audio parser (music-metadata) is wanted only by manifests with voice files.
    const { inspectReferenceAudio } = await import("../api/reference-audio.js");
    facts = await inspectReferenceAudio(path);
  } catch (error) {
    return { error: (error as Error).message };
  }
  // The name travels as the upload's file_name; the service refuses control characters and
  // separators in it, after the plan would have said all was well.
  const upload = UploadUrlRequest.safeParse({
    file_name: facts.fileName,
    content_type: facts.contentType,
    file_size: facts.fileSize,
  });
  if (!upload.success) {
    const issue = issuesFromZod(upload.error).find((i) => i.path[0] === "file_name");
    if (issue) return { error: `expected a file name the service accepts at upload: ${issue.message}` };
  }
  try {
    return { ...facts, sha256: await sha256File(path, facts.fileSize) };
  } catch (error) {
    return { error: `${path}: ${(error as Error).message}` };
  }
}

export async function expandLine(
  row: RawRow,
  ctx: ExpandContext,
  voices: VoiceResolver,
  shotIds: ReadonlySet<string>,
  defaultsRead: DefaultsRead,
): Promise<SpeechJob[]> {
  const errorsBefore = ctx.problems.errorCount;
  const { values: raw, origins } = merged("line", row, ctx, defaultsRead);
  const v = raw as LineValues;
  const id = checkedId(ctx, row, origins, v.id);
  if (id === undefined) return [];
  if (v.shot !== undefined && !shotIds.has(v.shot)) {
    at(ctx, row, origins, "shot").error(
      `no shot ${JSON.stringify(v.shot)}${didYouMean(v.shot, [...shotIds])}`,
    );
  }
  const text = await fillText(ctx, row, origins, v as Record<string, unknown>, "text");
  const textField = v.template !== undefined ? "template" : "text";
  if (text === undefined && v.template === undefined && v.text === undefined)
    at(ctx, row, origins, "text").error("is required");

  let voice: VoiceSpec | undefined;
  if (v.voice === undefined) {
    at(ctx, row, origins, "voice").error("is required: preset:ID, custom:ID or a reference audio file");
  } else {
    const resolved = await voices.resolve(v.voice);
    if ("error" in resolved) at(ctx, row, origins, "voice").error(resolved.error);
    else voice = resolved;
  }
  if (v.save_voice_as !== undefined) {
    if (voice && voice.source !== "file") {
      at(ctx, row, origins, "save_voice_as").error(
        "only a reference audio file voice can be saved as a custom voice",
      );
    } else if (voice?.source === "file") {
      voice = { ...voice, saveAs: v.save_voice_as };
    }
  }

  const body = {
    // A stand-in when the text is missing or its template failed (reported already), so every
    // other option is still checked in this pass.
    text: text ?? "text",
    ...(v.language !== undefined ? { language: v.language } : {}),
    // Placeholder voice for the rule check; the real reference is filled at run time.
    voice:
      voice?.source === "file"
        ? { source: "asset", asset_id: "asset-to-upload" }
        : { source: voice?.source ?? "preset", voice_id: voice && "voiceId" in voice ? voice.voiceId : "x" },
    ...(v.speed !== undefined ? { speed: v.speed } : {}),
    ...(v.auto_emotion !== undefined ? { auto_emotion: v.auto_emotion } : {}),
    ...(v.emotion_description !== undefined ? { emotion_description: v.emotion_description } : {}),
    ...(v.emotion_strength !== undefined ? { emotion_strength: v.emotion_strength } : {}),
    ...(v.emotion_vector !== undefined ? { emotion_vector: v.emotion_vector } : {}),
    ...(v.emotion_vector_mode !== undefined ? { emotion_vector_mode: v.emotion_vector_mode } : {}),
    ...(v.pronunciations !== undefined ? { pronunciations: v.pronunciations } : {}),
    ...(voice?.source === "file" && voice.saveAs !== undefined
      ? { save_voice: true, voice_name: voice.saveAs }
      : {}),
  };
  const parsed = SpeechCreateRequest.safeParse(body);
  if (!parsed.success) {
    const seen = new Set<string>();
    for (const issue of issuesFromZod(parsed.error)) {
      const field = speechField(issue.path, textField);
      // Without a real text there is nothing to check the text, or a word's presence in it, against.
      if (text === undefined && (issue.path[0] === "text" || issue.message.startsWith("must occur in text")))
        continue;
      const key = `${field}\n${issue.message}`;
      if (seen.has(key)) continue;
      seen.add(key);
      at(ctx, row, origins, field).error(withHint(field, issue.message, raw));
    }
  }
  if (
    ctx.problems.errorCount > errorsBefore ||
    !parsed.success ||
    !voice ||
    text === undefined ||
    defaultsRead.broken ||
    row.unreadable
  ) {
    return [];
  }

  const { voice: _placeholder, ...request } = parsed.data;
  const countedChars = countBillableChars(request.text);
  const voiceIdentity =
    voice.source === "file" ? { source: "file", sha256: voice.sha256, saveAs: voice.saveAs } : voice;
  return [
    {
      kind: "speech",
      id: `line/${id}`,
      rowId: id,
      file: row.file,
      line: row.line,
      ...(v.shot !== undefined ? { shot: v.shot } : {}),
      fingerprint: fingerprintOf({ v: 1, kind: "speech", request, voice: voiceIdentity }),
      points: ctx.speechPrice === undefined ? null : speechPoints(request.text, ctx.speechPrice),
      countedChars,
      request,
      voice,
    },
  ];
}
