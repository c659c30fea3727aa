// The text-to-speech service's vocabulary (/work/shared/spec/text-to-speech-api.md): its
// enumerations and limits, billing, and the loose response schemas the HTTP client validates
// against. What may be sent, with every rule of the spec, is in speech-request.ts.
import { z } from "zod";
import { PointsSummary } from "./common.js";

// ---------------------------------------------------------------------------------------------
// Enumerations and constants
// ---------------------------------------------------------------------------------------------

export const SPEECH_LANGUAGES = ["ZH", "EN", "JA", "ES", "AR"] as const;
/** Case-sensitive: "zh" is rejected. */
export const SpeechLanguage = z.enum(SPEECH_LANGUAGES);
export type SpeechLanguage = z.infer<typeof SpeechLanguage>;

export const SPEECH_STATUSES = ["queued", "generating", "succeeded", "failed", "cancelled"] as const;
export const SpeechStatus = z.enum(SPEECH_STATUSES);
export type SpeechStatus = z.infer<typeof SpeechStatus>;

export const POINT_STATUSES = ["reserved", "consumed", "released"] as const;
const PointStatus = z.enum(POINT_STATUSES);

/** Order of the 8 elements of `emotion_vector`. */
export const EMOTION_DIMENSIONS = [
  "happy",
  "angry",
  "sad",
  "afraid",
  "disgusted",
  "low",
  "surprised",
  "calm",
] as const;

export const EMOTION_VECTOR_MODES = ["single", "mixed"] as const;
export const EmotionVectorMode = z.enum(EMOTION_VECTOR_MODES);
export type EmotionVectorMode = z.infer<typeof EmotionVectorMode>;

export const PRONUNCIATION_KINDS = ["pinyin", "alias", "cmu", "kana"] as const;
export const PronunciationKind = z.enum(PRONUNCIATION_KINDS);
export type PronunciationKind = z.infer<typeof PronunciationKind>;

export const VOICE_SOURCES = ["preset", "custom", "asset"] as const;
const VOICE_KINDS = ["preset", "custom"] as const;
export const VoiceKind = z.enum(VOICE_KINDS);
export type VoiceKind = z.infer<typeof VoiceKind>;

export const MAX_TEXT_CHARS = 2000;
export const MAX_EMOTION_DESCRIPTION_CHARS = 200;
export const MAX_EMOTION_VECTOR_SUM = 0.8;
export const MAX_PRONUNCIATIONS = 100;
export const MAX_REFERENCE_AUDIO_BYTES = 15728640;
export const MAX_FILE_NAME_CHARS = 255;
export const MAX_IDEMPOTENCY_KEY_CHARS = 128;
export const DEFAULT_LIST_LIMIT = 20;
export const MAX_LIST_LIMIT = 100;
/** Billing unit: `costs.text_to_speech` is the price of this many counted characters. */
const BILLING_UNIT_CHARACTERS = 10;

/** Effective defaults the service applies (and echoes in `task.input`). */
export const SPEECH_DEFAULTS = {
  language: "ZH",
  speed: 1,
  auto_emotion: true,
  emotion_strength: 0.8,
  save_voice: false,
} as const satisfies {
  language: SpeechLanguage;
  speed: number;
  auto_emotion: boolean;
  emotion_strength: number;
  save_voice: boolean;
};

/** Accepted `content_type` per reference-audio file extension (spec endpoint 7). */
export const UPLOAD_CONTENT_TYPES: Record<".wav" | ".mp3" | ".flac" | ".ogg" | ".m4a", readonly string[]> = {
  ".wav": ["audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"],
  ".mp3": ["audio/mpeg"],
  ".flac": ["audio/flac", "audio/x-flac"],
  ".ogg": ["audio/ogg"],
  ".m4a": ["audio/mp4", "audio/x-m4a"],
};
export type UploadExtension = keyof typeof UPLOAD_CONTENT_TYPES;

// ---------------------------------------------------------------------------------------------
// Billing
// ---------------------------------------------------------------------------------------------

const LETTER_OR_DIGIT_GLOBAL = /[\p{L}\p{Nd}]/gu;

/** Counted characters: Unicode letters (incl. Han) and decimal digits; not spaces, punctuation, symbols, emoji. */
export function countBillableChars(text: string): number {
  // Counted, not collected: text.match() built an array of every character, and this runs for
  // every line at each estimate and each look at its task.
  LETTER_OR_DIGIT_GLOBAL.lastIndex = 0;
  let n = 0;
  while (LETTER_OR_DIGIT_GLOBAL.test(text)) n++;
  return n;
}

/** Points of one request: ceil(counted characters x price per 10 / 10), rounded up once. */
export function speechPoints(text: string, pricePer10: number): number {
  return Math.ceil((countBillableChars(text) * pricePer10) / BILLING_UNIT_CHARACTERS);
}

// ---------------------------------------------------------------------------------------------
// Responses (loose: added fields are tolerated; "omitted when unset" fields are optional)
// ---------------------------------------------------------------------------------------------

const int = () => z.number().int();

/** `task.input` as echoed: the request fields plus the effective defaults. */
export const SpeechTaskInput = z.looseObject({
  text: z.string(),
  language: SpeechLanguage,
  voice: z.looseObject({
    source: z.enum(VOICE_SOURCES),
    voice_id: z.string().optional(),
    asset_id: z.string().optional(),
  }),
  speed: z.number(),
  auto_emotion: z.boolean(),
  emotion_description: z.string().optional(),
  emotion_strength: z.number(),
  emotion_vector: z.array(z.number()).optional(),
  emotion_vector_mode: EmotionVectorMode.optional(),
  pronunciations: z
    .array(z.looseObject({ word: z.string(), kind: PronunciationKind, value: z.string() }))
    .optional(),
  save_voice: z.boolean(),
  voice_name: z.string().optional(),
});
export type SpeechTaskInput = z.infer<typeof SpeechTaskInput>;

export const SpeechTask = z.looseObject({
  task_id: z.string(),
  type: z.literal("text_to_speech"),
  input: SpeechTaskInput,
  status: SpeechStatus,
  attempt: int(),
  max_attempts: int(),
  point_cost: int(),
  /** Empty (or absent) for old unbilled records. */
  point_status: z.union([PointStatus, z.literal("")]).optional(),
  error_message: z.string(),
  output_url: z.string(),
  output_size: int(),
  created_at: int(),
  started_at: int(),
  finished_at: int(),
});
export type SpeechTask = z.infer<typeof SpeechTask>;

export const SpeechTaskResponse = z.looseObject({ task: SpeechTask });
export type SpeechTaskResponse = z.infer<typeof SpeechTaskResponse>;

/** A task id goes into paths and the journal: an empty or enormous one is not a task id. */
export const SpeechCreateResponse = z.looseObject({ task_id: z.string().min(1).max(256) });
export type SpeechCreateResponse = z.infer<typeof SpeechCreateResponse>;

/** Statuses with no tasks may be omitted; unknown future statuses are tolerated. */
const SpeechStatusCounts = z.looseObject({
  queued: int().optional(),
  generating: int().optional(),
  succeeded: int().optional(),
  failed: int().optional(),
  cancelled: int().optional(),
});

export const SpeechTaskList = z.looseObject({
  items: z.array(SpeechTask),
  total: int(),
  status_counts: SpeechStatusCounts,
});
export type SpeechTaskList = z.infer<typeof SpeechTaskList>;

export const SpeechCancelResponse = z.looseObject({ task_id: z.string(), status: z.literal("cancelled") });
export type SpeechCancelResponse = z.infer<typeof SpeechCancelResponse>;

export const SpeechDeleteResponse = z.looseObject({ task_id: z.string(), deleted: z.literal(true) });
export type SpeechDeleteResponse = z.infer<typeof SpeechDeleteResponse>;

export const Voice = z.looseObject({
  voice_id: z.string(),
  kind: VoiceKind,
  name: z.string(),
  description: z.string().optional(),
  language: z.string().optional(),
  voice_type: z.string().optional(),
  style_tags: z.array(z.string()),
  sample_text: z.string().optional(),
  audio_url: z.string(),
  created_at: int(),
});
export type Voice = z.infer<typeof Voice>;

export const VoiceList = z.looseObject({ items: z.array(Voice), total: int() });
export type VoiceList = z.infer<typeof VoiceList>;

export const VoiceResponse = z.looseObject({ voice: Voice });
export type VoiceResponse = z.infer<typeof VoiceResponse>;

export const VoiceDeleteResponse = z.looseObject({ voice_id: z.string(), deleted: z.literal(true) });
export type VoiceDeleteResponse = z.infer<typeof VoiceDeleteResponse>;

export const UploadTicket = z.looseObject({
  object_key: z.string(),
  upload_url: z.string(),
  public_url: z.string(),
  /** Currently "" (the signature is in upload_url). */
  authorization: z.string(),
  bucket: z.string(),
  region: z.string(),
  expires_at: int(),
});
export type UploadTicket = z.infer<typeof UploadTicket>;

export const Asset = z.looseObject({
  asset_id: z.string(),
  purpose: z.literal("speech_reference"),
  file_name: z.string(),
  content_type: z.string(),
  file_size: int(),
  duration_ms: int(),
  public_url: z.string(),
  created_at: int(),
});
export type Asset = z.infer<typeof Asset>;

export const AssetResponse = z.looseObject({ asset: Asset });
export type AssetResponse = z.infer<typeof AssetResponse>;

export const Pricing = z.looseObject({
  enabled: z.boolean(),
  pricing_version: int(),
  unit_characters: int(),
  costs: z.looseObject({ text_to_speech: int() }),
  balance: PointsSummary,
});
export type Pricing = z.infer<typeof Pricing>;
