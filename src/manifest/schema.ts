// The manifest's JSON Schema, for editors (VS Code's YAML extension shows each field's description
// and default on hover, offers the enumerated values, and underlines what clapper would refuse).
// Draft-07: the draft the YAML language server validates with.
//
// Made from what the reader itself uses, never written twice: the field tables (fields.ts,
// source.ts, assemble.ts, index.ts) give the names and their YAML types, the services' zod schemas
// (src/api/) give the types and limits of the options sent on (through z.toJSONSchema), and the
// constants the checks use give the rest. What is written here is what no table holds: the words
// of each description, and the few limits that zod keeps in refinements JSON Schema cannot see
// (each marked where it is added). The tables are typed by the field lists, so a field added to
// the reader without a description here fails to compile. `npm run build` writes the result to
// schema/manifest.schema.json (scripts/schema.mjs), and test/manifest/schema.test.ts checks that the
// two are the same and that the schema accepts every manifest clapper accepts.
//
// What a schema cannot judge is left to `clapper plan`: files (materials, voices, templates,
// skills, CSV rows), rules between fields (a skill needs use_context_ir: true, the content rules
// of frames and references, emotion_vector's sum and its companions), ids that must be unique or
// name a shot, what a {{ template }} fills in, and a line's voice given only in the defaults.
import { z } from "zod";
import {
  EMOTION_DIMENSIONS,
  MAX_EMOTION_DESCRIPTION_CHARS,
  MAX_TEXT_CHARS,
  SPEECH_DEFAULTS,
} from "../api/speech.js";
import { SpeechCreateRequest } from "../api/speech-request.js";
import { RESOLUTIONS, resolutionTier } from "../api/video.js";
import { CONTENT_LIMITS, VideoCreateRequest } from "../api/video-request.js";
import {
  type FIELDS as ASSEMBLE_FIELDS,
  DEFAULT_ASSEMBLE,
  MAX_DB,
  MAX_TRANSITION_S,
  MIN_DB,
  TRANSITIONS,
} from "../episode/settings.js";
import { POOL_NAME, POOL_PERIODS } from "./budget.js";
import { ID_PATTERN } from "./expand.js";
import { MAX_TAKES } from "./expand-shot.js";
import { LINE_FIELDS, SHOT_FIELDS } from "./fields.js";
import type { TOP_LEVEL_FIELDS } from "./read-yaml.js";
import { NAME, NAME_CHARS } from "./settings.js";
import { DEFAULT_TIMING, MAX_SHOT_S, MAX_TIMING_S, MIN_SHOT_S } from "./timing.js";

type Json = { [key: string]: unknown };
type ShotField = keyof typeof SHOT_FIELDS;
type LineField = keyof typeof LINE_FIELDS;
type FieldType = (typeof SHOT_FIELDS)[ShotField] | (typeof LINE_FIELDS)[LineField];

/** What the hover shows, and the limits a field has beyond its type. */
interface Doc {
  description: string;
  default?: unknown;
  examples?: unknown[];
  /** Limits of the value (a zod schema's JSON Schema, or keywords), merged into its YAML shape. */
  rule?: Json;
}

export const SCHEMA_DRAFT = "http://json-schema.org/draft-07/schema#";

/** A service schema's JSON Schema, without its own `$schema`: the rule of one manifest field. */
function fromZod(schema: z.ZodType): Json {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, {
    target: "draft-7",
    io: "input",
    unrepresentable: "any",
  }) as Json;
  return rest;
}

const VIDEO = VideoCreateRequest.shape;
const SPEECH = SpeechCreateRequest.shape;

const SCALAR = ["string", "number", "boolean"];
/** Text that is not blank: what the reader trims and refuses when empty. */
const NOT_BLANK = "\\S";
/** `auto`, as fields.ts reads it (trimmed, any case). */
const AUTO = "^\\s*[Aa][Uu][Tt][Oo]\\s*$";
/** A prompt or text with `{{ name }}` is measured after it is filled, which a schema cannot do. */
const FILLED = "\\{\\{";
/**
 * A voice: `preset:ID`, `custom:ID` (ID not blank), a Windows path, or anything without a
 * `word:` prefix (a file, judged by plan). VoiceResolver refuses any other prefix, `Preset:` too.
 */
const VOICE = "^(?:(?:preset|custom):.*\\S.*|[A-Za-z]:[\\\\/].*|(?![A-Za-z]+:).*)$";

const MATERIAL = "a local file (relative to the manifest), an https:// URL or an s3://bucket/key URI";

/** The longest text a field takes, unless it has `{{ }}` to fill first. */
function maxText(max: number): Json {
  return { if: { pattern: FILLED }, else: { maxLength: max } };
}

const SHOT: { [K in ShotField]: Doc } = {
  id: {
    description:
      "The shot's id: names its job (shot/ID) and its file (shots/ID.mp4). Letters, digits, '.', '_' or '-', at most 64; unique among the shots.",
    rule: { pattern: ID_PATTERN.source },
  },
  prompt: {
    description: `What the video shows. {{ name }} is filled from vars, the row's vars and its fields. At most ${CONTENT_LIMITS.textChars} characters. Use prompt or template, not both; neither is needed when frames or references are given.`,
    rule: maxText(CONTENT_LIMITS.textChars),
  },
  template: {
    description:
      "The prompt from a template file (templates/NAME.md or .txt), filled with {{ name }} from vars, the row's vars and its fields. Instead of prompt.",
  },
  model: { description: "The video model.", default: "Vid-H3", rule: fromZod(VIDEO.model) },
  resolution: {
    description:
      "Output resolution, case-sensitive: 480P or 768P native; 1080P, 2K and 4K upscale the native 768P video. Points per second: 480P 5, 768P 10, 1080P 19, 2K 20, 4K 22.",
    default: resolutionTier(undefined),
    // The service takes any text (and renders the unknown as 768P without a word); clapper does not.
    rule: { type: "string", enum: [...RESOLUTIONS] },
  },
  duration: {
    description: `Seconds, ${MIN_SHOT_S} to ${MAX_SHOT_S}; or auto: as long as the shot's narration (its lines, with the timing: gaps), once they are spoken.`,
    default: 5,
    examples: [5, "auto"],
    rule: fromZod(VIDEO.duration),
  },
  ratio: {
    description:
      'Aspect ratio; adaptive follows the first frame, last frame or first reference image (16:9 without one). Quote it in YAML: ratio: "16:9".',
    default: "16:9",
    rule: fromZod(VIDEO.ratio),
  },
  use_context_ir: {
    description: "Let the service optimize the prompt first; needed by skill.",
    default: false,
    rule: fromZod(VIDEO.use_context_ir),
  },
  skill: {
    description:
      "A skill applied while the prompt is optimized (requires use_context_ir: true): a name from the skills: map (synced before the run) or a skill the account has.",
    rule: { pattern: NOT_BLANK },
  },
  mute_audio: {
    description: "Remove every audio track from the delivered video.",
    default: false,
    rule: fromZod(VIDEO.mute_audio),
  },
  aigc_watermark: {
    description: "Add an AIGC watermark to the video.",
    default: false,
    rule: fromZod(VIDEO.aigc_watermark),
  },
  first_frame: {
    description: `The image the video starts from: ${MATERIAL}. Not with reference materials.`,
  },
  last_frame: {
    description: `The image the video ends on: ${MATERIAL}. Not with reference materials.`,
  },
  reference_images: {
    description: `Reference images (<Picture 1>, ... in the prompt), at most ${CONTENT_LIMITS.referenceImages}: each ${MATERIAL}. At most ${CONTENT_LIMITS.referenceItems} reference items in all.`,
    rule: { maxItems: CONTENT_LIMITS.referenceImages },
  },
  reference_videos: {
    description: `Reference videos (<Video 1>, ...), at most ${CONTENT_LIMITS.referenceVideos}: each ${MATERIAL}.`,
    rule: { maxItems: CONTENT_LIMITS.referenceVideos },
  },
  reference_audios: {
    description: `Reference audios (<Audio 1>, ...), at most ${CONTENT_LIMITS.referenceAudios}, with at least one reference image or video: each ${MATERIAL}.`,
    rule: { maxItems: CONTENT_LIMITS.referenceAudios },
  },
  takes: {
    description: `How many variants to generate (shot/ID/take-N), 1 to ${MAX_TAKES}; each is paid for.`,
    default: 1,
    rule: { minimum: 1, maximum: MAX_TAKES },
  },
  vars: {
    description: "Template variables of this shot, over the manifest's vars.",
  },
};

const LINE: { [K in LineField]: Doc } = {
  id: {
    description:
      "The line's id: names its job (line/ID) and its file (lines/ID.wav). Letters, digits, '.', '_' or '-', at most 64; unique among the lines.",
    rule: { pattern: ID_PATTERN.source },
  },
  text: {
    description: `What is said, at most ${MAX_TEXT_CHARS} characters, with at least one letter or digit. {{ name }} is filled from vars, the row's vars and its fields. Use text or template, not both.`,
    rule: maxText(MAX_TEXT_CHARS),
  },
  template: {
    description:
      "The text from a template file (templates/NAME.md or .txt), filled with {{ name }} from vars, the row's vars and its fields. Instead of text.",
  },
  shot: {
    description:
      "The id of the shot this line narrates: it is placed in that shot when the episode is assembled, and times a shot of duration: auto.",
  },
  voice: {
    description:
      "Who speaks: preset:VOICE_ID, custom:VOICE_ID (clapper voices list), or a reference audio file relative to the manifest (wav, mp3, flac, ogg or m4a; 0.5 to 15 s).",
    examples: ["preset:en_female_bright", "custom:VOICE_ID", "voices/host.wav"],
    rule: { pattern: VOICE },
  },
  save_voice_as: {
    description:
      "With a reference audio file as voice: also save it as a custom voice of this name (1 to 64 characters).",
    rule: { pattern: NOT_BLANK },
  },
  language: {
    description: "The language of the text, case-sensitive.",
    default: SPEECH_DEFAULTS.language,
    rule: fromZod(SPEECH.language),
  },
  speed: {
    description: "Speaking speed, 0.5 to 2.0 (0 means 1.0).",
    default: SPEECH_DEFAULTS.speed,
    // The service's own range, kept in a refinement zod cannot export (SpeechSpeed in src/api/speech.ts).
    rule: { ...fromZod(SPEECH.speed), anyOf: [{ const: 0 }, { minimum: 0.5, maximum: 2 }] },
  },
  auto_emotion: {
    description: "Infer the emotion from the text. Set it to false to use emotion_vector.",
    default: SPEECH_DEFAULTS.auto_emotion,
    rule: fromZod(SPEECH.auto_emotion),
  },
  emotion_description: {
    description: `How it is said, in a few words (at most ${MAX_EMOTION_DESCRIPTION_CHARS} characters): "wistful", "a whisper, afraid".`,
    rule: { ...fromZod(SPEECH.emotion_description), maxLength: MAX_EMOTION_DESCRIPTION_CHARS },
  },
  emotion_strength: {
    description: "How strongly the emotion shows, 0 to 1.",
    default: SPEECH_DEFAULTS.emotion_strength,
    rule: fromZod(SPEECH.emotion_strength),
  },
  emotion_vector: {
    description: `${EMOTION_DIMENSIONS.length} weights, ${EMOTION_DIMENSIONS.join(", ")}: each 0 to 0.8, summing to more than 0 and at most 0.8. Needs auto_emotion: false and no emotion_description.`,
    examples: [[0, 0, 0.3, 0, 0, 0, 0, 0]],
    rule: {
      ...fromZod(SPEECH.emotion_vector),
      minItems: EMOTION_DIMENSIONS.length,
      maxItems: EMOTION_DIMENSIONS.length,
    },
  },
  emotion_vector_mode: {
    description:
      "single (exactly one non-zero weight) or mixed; only with emotion_vector, whose weights choose it when left out.",
    rule: fromZod(SPEECH.emotion_vector_mode),
  },
  pronunciations: {
    description:
      "How words of the text are said: {word, kind, value} with kind pinyin (one toned syllable per Han character: deng1 ta3), alias (text said instead), cmu (ARPAbet phonemes) or kana. Each word once, and in the text.",
    rule: pronunciationRule(),
  },
  vars: {
    description: "Template variables of this line, over the manifest's vars.",
  },
};

/** The service's rule list, with the words and values that must not be blank. */
function pronunciationRule(): Json {
  const rule = fromZod(SPEECH.pronunciations);
  const item = rule.items as Json;
  const properties = item.properties as Record<string, Json>;
  return {
    ...rule,
    items: {
      ...item,
      properties: {
        word: {
          ...properties.word,
          pattern: NOT_BLANK,
          description: "A word of the text, 1 to 64 characters.",
        },
        kind: { ...properties.kind, description: "pinyin, alias, cmu or kana." },
        value: {
          ...properties.value,
          pattern: NOT_BLANK,
          description: "How it is said, 1 to 512 characters.",
        },
      },
    },
  };
}

/** Template variables: text (numbers and true/false are read as text). */
const VAR_VALUE = { type: [...SCALAR, "null"] };

/** How YAML may write a value of each field type: what `coerce` in fields.ts accepts. */
function shapeOf(type: FieldType, rule: Json = {}): Json {
  switch (type) {
    case "string":
      // Numbers and true/false are read as text, unless the field is one of a few words.
      return "enum" in rule ? rule : { ...rule, type: SCALAR };
    case "path":
      // One item: the service takes one first frame and one last frame.
      return { ...rule, type: ["string", "array"], items: { type: "string" }, minItems: 1, maxItems: 1 };
    case "int":
      return { ...rule, type: "integer" };
    case "duration":
      return { anyOf: [rule, { const: "auto" }, { type: "string", pattern: AUTO }] };
    case "number":
      return { ...rule, type: "number" };
    case "bool":
      return { ...rule, type: "boolean" };
    case "strings":
      // One item may be written without the list.
      return { ...rule, type: ["string", "array"], items: { type: "string" } };
    case "numbers":
      return { items: { type: "number" }, ...rule, type: "array" };
    case "vars":
      return { ...rule, type: "object", additionalProperties: VAR_VALUE };
    case "pronunciations":
      return rule;
  }
}

function fieldSchema(type: FieldType, doc: Doc): Json {
  const { description, rule, ...rest } = doc;
  return { description, ...rest, ...shapeOf(type, rule) };
}

/** A shot or a line (`withId`), or the defaults of one (no id: each row has its own). */
function rowSchema<K extends string>(
  types: Record<K, FieldType>,
  docs: Record<K, Doc>,
  description: string,
  withId: boolean,
): Json {
  const properties: Json = {};
  for (const name of Object.keys(types) as K[]) {
    if (name === "id" && !withId) continue;
    properties[name] = fieldSchema(types[name], docs[name]);
  }
  return {
    type: "object",
    description,
    properties,
    patternProperties: {
      // `vars.NAME: value` is a template variable, as a CSV column is.
      "^vars\\..+$": { ...VAR_VALUE, description: "A template variable of this row." },
      // A YAML merge key (`<<: *anchor`), for editors that do not merge.
      "^<<$": {},
    },
    additionalProperties: false,
    ...(withId ? { required: ["id"] } : {}),
  };
}

const CSV_FILE = "\\.[Cc][Ss][Vv]$";

function rowsSchema(kind: "shot" | "line"): Json {
  const plural = `${kind}s`;
  return {
    description: `The ${plural}: a list, or a CSV file of them (relative to the manifest) with one column per field, list items separated by |.`,
    type: ["array", "string"],
    items: { $ref: `#/definitions/${kind}` },
    pattern: CSV_FILE,
    examples: [`${plural}.csv`],
  };
}

function budgetSchema(): Json {
  const points = { type: "integer", minimum: 0 };
  return {
    type: ["object", "null"],
    description: "What this run may spend.",
    properties: {
      max_points: {
        ...points,
        description:
          "The most points this run reserves: it stops before spending (exit 3) when the jobs to do would cost more. --max-points overrides it.",
      },
      pool: {
        type: "object",
        description:
          "A budget shared by every run that names it, through the coordinator (--coordinator): exact under concurrency and kills.",
        properties: {
          name: {
            type: "string",
            pattern: POOL_NAME.source,
            description: "The pool's name: 1 to 64 letters, digits, '.', '_' or '-'.",
          },
          max_points: {
            ...points,
            description: "The points every run of the pool may spend together per period.",
          },
          period: {
            type: "string",
            enum: [...POOL_PERIODS],
            default: "total",
            description: "When the pool's spending starts again from 0 (total: never).",
          },
        },
        required: ["name", "max_points"],
        additionalProperties: false,
      },
    },
    additionalProperties: false,
  };
}

function timingSchema(): Json {
  const words = { lead: "before a shot's first line", gap: "between its lines", tail: "after its last line" };
  const properties: Json = {};
  for (const key of Object.keys(DEFAULT_TIMING) as Array<keyof typeof DEFAULT_TIMING>) {
    properties[key] = {
      type: "number",
      minimum: 0,
      maximum: MAX_TIMING_S,
      default: DEFAULT_TIMING[key],
      description: `Seconds of silence ${words[key]}.`,
    };
  }
  return {
    type: ["object", "null"],
    description:
      "Where narration sits in its shot: times the shots of duration: auto, and places lines when the episode is assembled.",
    properties,
    additionalProperties: false,
  };
}

function assembleSchema(): Json {
  const properties: { [K in (typeof ASSEMBLE_FIELDS)[number]]: Json } = {
    music: {
      type: ["string", "null"],
      pattern: NOT_BLANK,
      description: "A music bed under the whole episode: an audio file relative to the manifest.",
    },
    music_db: {
      type: "number",
      minimum: MIN_DB,
      maximum: MAX_DB,
      default: DEFAULT_ASSEMBLE.musicDb,
      description: `The music's gain in dB, ${MIN_DB} to ${MAX_DB} (negative: under the narration).`,
    },
    transition: {
      type: "string",
      enum: [...TRANSITIONS],
      default: DEFAULT_ASSEMBLE.transition,
      description: "fade: each shot fades in from black and out to black within its own length.",
    },
    transition_seconds: {
      type: "number",
      exclusiveMinimum: 0,
      maximum: MAX_TRANSITION_S,
      default: DEFAULT_ASSEMBLE.transitionSeconds,
      description: `How long a fade lasts, above 0 and at most ${MAX_TRANSITION_S} seconds.`,
    },
    takes: {
      type: ["object", "null"],
      additionalProperties: { type: "integer", minimum: 1 },
      description:
        "The take used for a shot of several takes (shot id: take number); others use take 1. picks.yaml overrides it.",
    },
  };
  return {
    type: ["object", "null"],
    description: "How clapper assemble cuts the run's shots and lines into one episode.",
    properties,
    additionalProperties: false,
  };
}

function topProperties(): { [K in (typeof TOP_LEVEL_FIELDS)[number]]: Json } {
  return {
    name: {
      type: ["string", "number"],
      pattern: NAME.source,
      maxLength: NAME_CHARS,
      description: `The run's name: its output folder, its state and its idempotency keys. Letters, digits, '.', '_' or '-', at most ${NAME_CHARS}. Default: the manifest's file name.`,
    },
    output: {
      type: "string",
      default: "./output",
      description:
        "Where results go: a folder relative to the manifest (each run in a folder of its name), or s3://bucket/prefix. --output overrides it.",
    },
    budget: budgetSchema(),
    defaults: {
      type: "object",
      description: "Fields every shot and every line starts from; a row's own fields win.",
      properties: {
        shot: rowSchema(SHOT_FIELDS, SHOT, "Defaults of every shot.", false),
        line: rowSchema(LINE_FIELDS, LINE, "Defaults of every line.", false),
      },
      additionalProperties: false,
    },
    vars: {
      type: ["object", "null"],
      additionalProperties: VAR_VALUE,
      description: "Template variables: {{ name }} in prompts, texts and templates.",
    },
    skills: {
      type: ["object", "null"],
      propertyNames: { pattern: NOT_BLANK },
      additionalProperties: { type: "string" },
      description:
        "Custom skills synced by name before the run (name: a Markdown file relative to the manifest), for the shots' skill: field.",
    },
    templates: {
      type: "string",
      description:
        "The folder of prompt and text templates, relative to the manifest. Default: templates/ beside the manifest, or beside its folder.",
    },
    shots: rowsSchema("shot"),
    lines: rowsSchema("line"),
    timing: timingSchema(),
    assemble: assembleSchema(),
  };
}

/** The manifest's JSON Schema (draft-07). */
export function manifestSchema(): Json {
  return {
    $schema: SCHEMA_DRAFT,
    title: "clapper manifest",
    description:
      "A storyboard for clapper: shots become videos, lines become narration. `clapper plan` checks what a schema cannot (files, ids, rules between fields).",
    type: "object",
    properties: topProperties(),
    patternProperties: {
      // `x-...` keys hold YAML anchors for the rows; they are not read.
      "^x-": { description: "Not read: a place for YAML anchors (&name) the rows use." },
    },
    additionalProperties: false,
    definitions: {
      shot: rowSchema(SHOT_FIELDS, SHOT, "One shot: a video job (one per take).", true),
      line: rowSchema(LINE_FIELDS, LINE, "One narration line: a speech job.", true),
    },
  };
}

/** Widest line Biome leaves an array on (biome.json's lineWidth): the file is formatted as Biome would. */
const LINE_WIDTH = 110;

/**
 * JSON as Biome formats it, so the written file passes `npm run lint` as it is: objects one key a
 * line, an array of plain values on one line when it fits, else one item a line.
 */
export function formatJson(value: unknown, indent = "", lead = 0): string {
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    const flat = flatArray(value);
    // The line holds what comes before the array and a comma after it.
    if (flat !== undefined && lead + flat.length + 1 <= LINE_WIDTH) return flat;
    const inner = `${indent}  `;
    const items = value.map((v) => `${inner}${formatJson(v, inner, inner.length)}`);
    return `[\n${items.join(",\n")}\n${indent}]`;
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value);
    if (entries.length === 0) return "{}";
    const inner = `${indent}  `;
    const lines = entries.map(([k, v]) => {
      const key = `${inner}${JSON.stringify(k)}: `;
      return `${key}${formatJson(v, inner, key.length)}`;
    });
    return `{\n${lines.join(",\n")}\n${indent}}`;
  }
  return JSON.stringify(value);
}

/** `[a, b]` when every item is a plain value or such an array; undefined otherwise. */
function flatArray(value: unknown[]): string | undefined {
  const parts: string[] = [];
  for (const item of value) {
    if (Array.isArray(item)) {
      const inner = item.length === 0 ? "[]" : flatArray(item);
      if (inner === undefined) return undefined;
      parts.push(inner);
    } else if (item !== null && typeof item === "object") return undefined;
    else parts.push(JSON.stringify(item));
  }
  return `[${parts.join(", ")}]`;
}

/** The text of schema/manifest.schema.json and of `clapper schema`. */
export function manifestSchemaText(): string {
  return `${formatJson(manifestSchema())}\n`;
}
