// Text-to-speech service (/work/shared/spec/text-to-speech-api.md): request schemas with every rule
// of the spec, the normalized `task.input` the service echoes, billing, query/header parsing, and
// the loose response schemas the HTTP client validates against.
//
// Request schemas are strict (the spec: "unsupported request body fields cause an error") and carry
// no transforms, so their input and output types are the same; normalizeSpeechInput applies the
// effective defaults. Nothing here throws: failures are zod issues / `Issue[]` with field paths.
import { z } from "zod";
import {
  charLength,
  type Issue,
  intInRange,
  issuesFromZod,
  numberInRange,
  PointsSummary,
  show,
} from "./common.js";

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
/** States after which a task never changes again (stop polling). */
export const TERMINAL_SPEECH_STATUSES: readonly SpeechStatus[] = ["succeeded", "failed", "cancelled"];

export const POINT_STATUSES = ["reserved", "consumed", "released"] as const;
export const PointStatus = z.enum(POINT_STATUSES);
export type PointStatus = z.infer<typeof PointStatus>;

export const MAX_ATTEMPTS = 3;

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
export type EmotionDimension = (typeof EMOTION_DIMENSIONS)[number];

export const EMOTION_VECTOR_MODES = ["single", "mixed"] as const;
export const EmotionVectorMode = z.enum(EMOTION_VECTOR_MODES);
export type EmotionVectorMode = z.infer<typeof EmotionVectorMode>;

export const PRONUNCIATION_KINDS = ["pinyin", "alias", "cmu", "kana"] as const;
export const PronunciationKind = z.enum(PRONUNCIATION_KINDS);
export type PronunciationKind = z.infer<typeof PronunciationKind>;

export const VOICE_SOURCES = ["preset", "custom", "asset"] as const;
export const VOICE_KINDS = ["preset", "custom"] as const;
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
export const BILLING_UNIT_CHARACTERS = 10;

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
const UPLOAD_EXTENSIONS = Object.keys(UPLOAD_CONTENT_TYPES) as UploadExtension[];

// ---------------------------------------------------------------------------------------------
// Small rule helpers
// ---------------------------------------------------------------------------------------------

/** Floating-point slack for the emotion vector sum, so 0.1 * 8 (= 0.8000000000000002) passes. */
const SUM_EPSILON = 1e-9;

const LETTER_OR_DIGIT = /[\p{L}\p{Nd}]/u;
const LETTER_OR_DIGIT_GLOBAL = /[\p{L}\p{Nd}]/gu;
const CONTROL = /\p{Cc}/u;
const HAN_ONLY = /^\p{Script=Han}+$/u;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

function listOr(items: readonly string[]): string {
  if (items.length <= 1) return items.join("");
  return `${items.slice(0, -1).join(", ")} or ${items[items.length - 1]}`;
}

/** `U+0007` for control characters, `"<"` for printable ones. */
function describeChar(ch: string): string {
  if (CONTROL.test(ch)) {
    const code = ch.codePointAt(0) ?? 0;
    return `control character U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
  }
  return show(ch);
}

/** Rounds away float noise for messages: 0.9000000000000001 -> 0.9. */
function tidy(n: number): number {
  return Math.round(n * 1e9) / 1e9;
}

/** A string of at most `max` Unicode code points (zod's `.max` counts UTF-16 units). */
function maxChars(max: number) {
  return z.string().superRefine((s, ctx) => {
    const n = charLength(s);
    if (n > max)
      ctx.addIssue({ code: "custom", input: s, message: `expected at most ${max} characters, got ${n}` });
  });
}

/** A string whose trimmed length is `min..max` code points. */
function trimmedChars(min: number, max: number) {
  return z.string().superRefine((s, ctx) => {
    const n = charLength(s.trim());
    if (n < min || n > max) {
      ctx.addIssue({
        code: "custom",
        input: s,
        message: `expected ${min} to ${max} characters after trimming, got ${n}`,
      });
    }
  });
}

/** An identifier: a string that is not empty or blank. */
function nonEmptyId() {
  return z.string().superRefine((s, ctx) => {
    if (s.trim() === "")
      ctx.addIssue({ code: "custom", input: s, message: `expected a non-empty ID, got ${show(s)}` });
  });
}

// ---------------------------------------------------------------------------------------------
// Voice reference
// ---------------------------------------------------------------------------------------------

const PresetOrCustomVoiceRef = z.strictObject({
  source: z.enum(["preset", "custom"]),
  voice_id: nonEmptyId(),
});
const AssetVoiceRef = z.strictObject({
  source: z.literal("asset"),
  asset_id: nonEmptyId(),
});

/** `{source: "preset"|"custom", voice_id}` or `{source: "asset", asset_id}`; the other ID is an unsupported field. */
export const VoiceRef = z.discriminatedUnion("source", [PresetOrCustomVoiceRef, AssetVoiceRef], {
  error: (iss) => {
    if (iss.code !== "invalid_union") return undefined;
    const source = isRecord(iss.input) ? iss.input.source : undefined;
    if (source === undefined) return "is required";
    return `expected one of ${VOICE_SOURCES.map((s) => show(s)).join(", ")}, got ${show(source)}`;
  },
});
export type VoiceRef = z.infer<typeof VoiceRef>;

// ---------------------------------------------------------------------------------------------
// Text and pronunciations
// ---------------------------------------------------------------------------------------------

/** Body text: at most 2000 code points, at least one letter (incl. Han) or decimal digit. */
export const SpeechText = z.string().superRefine((text, ctx) => {
  const n = charLength(text);
  if (n > MAX_TEXT_CHARS) {
    ctx.addIssue({
      code: "custom",
      input: text,
      message: `expected at most ${MAX_TEXT_CHARS} characters, got ${n}`,
    });
  }
  if (!LETTER_OR_DIGIT.test(text)) {
    ctx.addIssue({
      code: "custom",
      input: text,
      message:
        `expected at least one letter, Han character or digit, got ${show(text)}` +
        (text === "" ? "" : " (only whitespace, punctuation or symbols)"),
    });
  }
});

/** Word and value text: trimmed length in range, no control characters nor `<`, `>`, `|`. */
function pronunciationText(min: number, max: number) {
  return trimmedChars(min, max).superRefine((s, ctx) => {
    const bad = [...s.trim()].filter((ch) => ch === "<" || ch === ">" || ch === "|" || CONTROL.test(ch));
    if (bad.length > 0) {
      const found = [...new Set(bad)].map(describeChar).join(", ");
      ctx.addIssue({
        code: "custom",
        input: s,
        message: `must not contain control characters or "<", ">", "|", got ${show(s)} (contains ${found})`,
      });
    }
  });
}

const TONE_MARKS = "āáǎàēéěèīíǐìōóǒòūúǔùǖǘǚǜńňǹḿ";
const PINYIN_DIGIT_TONE = /^[a-zü]+[1-5]$/u;
const PINYIN_MARKED = new RegExp(`^[a-zü]*[${TONE_MARKS}][a-zü]*$`, "u");

/** A pinyin syllable with a tone: `zhong1`, `lv4`, `lü4` or `zhōng` (one tone-marked vowel). */
export function isTonedPinyinSyllable(syllable: string): boolean {
  const s = syllable.normalize("NFC").toLowerCase();
  return PINYIN_DIGIT_TONE.test(s) || PINYIN_MARKED.test(s);
}

/** Checks a pinyin value against its (trimmed) word; returns messages for the value field. */
export function pinyinValueProblems(word: string, value: string): string[] {
  const problems: string[] = [];
  const syllables = value
    .trim()
    .split(/\s+/u)
    .filter((s) => s !== "");
  if (HAN_ONLY.test(word)) {
    const expected = charLength(word);
    if (syllables.length !== expected) {
      problems.push(
        `expected ${plural(expected, "pinyin syllable")} separated by spaces (one per Han character of ${show(word)}), found ${syllables.length}`,
      );
    }
  }
  const untoned = syllables.filter((s) => !isTonedPinyinSyllable(s));
  if (untoned.length > 0) {
    problems.push(
      `expected every syllable to carry a tone (a digit 1-5 like "zhong1" or a tone mark like "zhōng"), got ${untoned
        .map((s) => show(s))
        .join(", ")}`,
    );
  }
  return problems;
}

const CMU_VOWELS = new Set([
  "AA",
  "AE",
  "AH",
  "AO",
  "AW",
  "AY",
  "EH",
  "ER",
  "EY",
  "IH",
  "IY",
  "OW",
  "OY",
  "UH",
  "UW",
]);
const CMU_CONSONANTS = new Set([..."B CH D DH F G HH JH K L M N NG P R S SH T TH V W Y Z ZH".split(" ")]);

/** One of the 39 CMU/ARPAbet phonemes; vowels may carry a stress digit 0-2; case-insensitive. */
export function isCmuPhoneme(token: string): boolean {
  const t = token.toUpperCase();
  if (CMU_CONSONANTS.has(t)) return true;
  const m = /^([A-Z]{2})([012])?$/.exec(t);
  return m !== null && CMU_VOWELS.has(m[1] ?? "");
}

/** Hiragana ぁ-ゖ ゝゞ, katakana ァ-ヺ ー ヽヾ, small katakana ㇰ-ㇿ (checked after NFC). */
const KANA_CHAR = /^[\u3041-\u3096\u309D\u309E\u30A1-\u30FA\u30FC-\u30FE\u31F0-\u31FF]$/u;

export function isKana(value: string): boolean {
  const s = value.normalize("NFC");
  return s !== "" && [...s].every((ch) => KANA_CHAR.test(ch));
}

/** Hiragana to katakana (ゝゞ to ヽヾ); everything else unchanged. */
export function toKatakana(value: string): string {
  return value
    .normalize("NFC")
    .replace(/[\u3041-\u3096\u309D\u309E]/gu, (ch) => String.fromCodePoint((ch.codePointAt(0) ?? 0) + 0x60));
}

export const PronunciationRule = z
  .strictObject({
    word: pronunciationText(1, 64),
    kind: PronunciationKind,
    value: pronunciationText(1, 512),
  })
  .superRefine((rule, ctx) => {
    const word = rule.word.trim();
    const value = rule.value.trim();
    const atValue = (message: string) =>
      ctx.addIssue({ code: "custom", path: ["value"], input: rule.value, message });
    switch (rule.kind) {
      case "pinyin":
        if (word !== "" && !HAN_ONLY.test(word)) {
          ctx.addIssue({
            code: "custom",
            path: ["word"],
            input: rule.word,
            message: `expected only Han characters for kind "pinyin", got ${show(word)}`,
          });
        }
        if (value !== "") for (const p of pinyinValueProblems(word, value)) atValue(p);
        break;
      case "cmu": {
        const unknown = value.split(/\s+/u).filter((t) => t !== "" && !isCmuPhoneme(t));
        if (unknown.length > 0) {
          atValue(
            `expected CMU/ARPAbet phonemes separated by spaces (e.g. "T AH0 M EY1 T OW2"), got unknown ${unknown
              .map((t) => show(t))
              .join(", ")}`,
          );
        }
        break;
      }
      case "kana":
        if (value !== "" && !isKana(value)) {
          const other = [...value.normalize("NFC")].find((ch) => !KANA_CHAR.test(ch)) ?? "";
          atValue(
            `expected only hiragana or katakana, got ${show(value)} (${describeChar(other)} is not kana)`,
          );
        }
        break;
      case "alias":
        break;
    }
  });
export type PronunciationRule = z.infer<typeof PronunciationRule>;

// ---------------------------------------------------------------------------------------------
// Emotion vector
// ---------------------------------------------------------------------------------------------

/** 8 numbers 0..0.8 (not null), sum above 0 and at most 0.8. Cross-field rules live on the request. */
export const EmotionVector = z.array(numberInRange(0, MAX_EMOTION_VECTOR_SUM)).superRefine((vector, ctx) => {
  if (vector.length !== EMOTION_DIMENSIONS.length) {
    ctx.addIssue({
      code: "custom",
      input: vector,
      message: `expected exactly ${EMOTION_DIMENSIONS.length} elements (${EMOTION_DIMENSIONS.join(", ")}), got ${vector.length}`,
    });
    return;
  }
  // Out-of-range elements are already reported at their own index; a sum message would be noise.
  if (vector.some((v) => typeof v !== "number" || v < 0 || v > MAX_EMOTION_VECTOR_SUM)) return;
  const sum = vector.reduce((a, b) => a + b, 0);
  if (!(sum > 0) || sum > MAX_EMOTION_VECTOR_SUM + SUM_EPSILON) {
    ctx.addIssue({
      code: "custom",
      input: vector,
      message: `expected the elements to sum to more than 0 and at most ${MAX_EMOTION_VECTOR_SUM}, got ${tidy(sum)}`,
    });
  }
});

function nonZeroCount(vector: readonly unknown[]): number {
  return vector.filter((v) => typeof v === "number" && v !== 0).length;
}

/** The mode the service infers when none is sent: exactly one non-zero element is `single`. */
export function inferEmotionVectorMode(vector: readonly number[]): EmotionVectorMode {
  return nonZeroCount(vector) === 1 ? "single" : "mixed";
}

// ---------------------------------------------------------------------------------------------
// 1. Create speech task
// ---------------------------------------------------------------------------------------------

const SpeechSpeed = z.number().superRefine((speed, ctx) => {
  if (speed !== 0 && !(speed >= 0.5 && speed <= 2)) {
    ctx.addIssue({
      code: "custom",
      input: speed,
      message: `expected 0 (meaning 1.0) or a number from 0.5 to 2.0, got ${show(speed)}`,
    });
  }
});

/**
 * Rules between fields of a speech creation body. Runs on whatever object was sent (types already
 * wrong elsewhere are skipped here, they are reported by the field schemas), so a manifest gets
 * every problem in one pass.
 */
export function speechCreateCrossIssues(body: Record<string, unknown>): Issue[] {
  const issues: Issue[] = [];
  const vector = body.emotion_vector;
  const hasVector = vector !== undefined;

  if (hasVector) {
    if (body.auto_emotion !== false) {
      issues.push({
        path: ["auto_emotion"],
        message: `must be sent as false when emotion_vector is given, got ${show(body.auto_emotion)}`,
      });
    }
    const description = body.emotion_description;
    if (description !== undefined && description !== "") {
      issues.push({
        path: ["emotion_description"],
        message: `must be omitted or empty when emotion_vector is given, got ${show(description)}`,
      });
    }
  }

  const mode = body.emotion_vector_mode;
  if (mode !== undefined) {
    if (!hasVector) {
      issues.push({
        path: ["emotion_vector_mode"],
        message: `is only allowed together with emotion_vector, got ${show(mode)} without emotion_vector`,
      });
    } else if (mode === "single" && Array.isArray(vector)) {
      const n = nonZeroCount(vector);
      if (n !== 1) {
        issues.push({
          path: ["emotion_vector_mode"],
          message: `"single" requires exactly one non-zero element in emotion_vector, got ${n}`,
        });
      }
    }
  }

  if (body.save_voice === true) {
    const source = isRecord(body.voice) ? body.voice.source : undefined;
    if (source !== "asset") {
      issues.push({
        path: ["save_voice"],
        message: `may be true only when voice.source is "asset", got voice.source ${show(source)}`,
      });
    }
    if (body.voice_name === undefined) {
      issues.push({ path: ["voice_name"], message: "is required when save_voice is true" });
    }
  }

  const rules = body.pronunciations;
  if (Array.isArray(rules)) {
    const text = typeof body.text === "string" ? body.text : undefined;
    const firstIndex = new Map<string, number>();
    rules.forEach((rule: unknown, i) => {
      if (!isRecord(rule) || typeof rule.word !== "string") return;
      const word = rule.word.trim();
      if (word === "") return; // reported by the word's own length rule
      const earlier = firstIndex.get(word);
      if (earlier !== undefined) {
        issues.push({
          path: ["pronunciations", i, "word"],
          message: `must be unique within the request, got ${show(word)} again (already pronunciations[${earlier}].word)`,
        });
      } else {
        firstIndex.set(word, i);
      }
      if (text !== undefined && !text.includes(word)) {
        issues.push({
          path: ["pronunciations", i, "word"],
          message: `must occur in text, got ${show(word)} which text does not contain`,
        });
      }
    });
  }
  return issues;
}

export const SpeechCreateRequest = z
  .strictObject({
    text: SpeechText,
    language: SpeechLanguage.optional(),
    voice: VoiceRef,
    speed: SpeechSpeed.optional(),
    auto_emotion: z.boolean().optional(),
    emotion_description: maxChars(MAX_EMOTION_DESCRIPTION_CHARS).optional(),
    emotion_strength: numberInRange(0, 1).optional(),
    emotion_vector: EmotionVector.optional(),
    emotion_vector_mode: EmotionVectorMode.optional(),
    pronunciations: z.array(PronunciationRule).max(MAX_PRONUNCIATIONS).optional(),
    save_voice: z.boolean().optional(),
    voice_name: trimmedChars(1, 64).optional(),
  })
  .superRefine(
    (body, ctx) => {
      for (const issue of speechCreateCrossIssues(body as Record<string, unknown>)) {
        ctx.addIssue({ code: "custom", path: [...issue.path], message: issue.message, input: body });
      }
    },
    // Also after a type error in an unrelated field, as long as the body is an object.
    { when: (payload) => isRecord(payload.value) },
  );
export type SpeechCreateRequest = z.infer<typeof SpeechCreateRequest>;

/** `task.input`: the request with the service's effective defaults applied. */
export type SpeechInput = {
  text: string;
  language: SpeechLanguage;
  voice: VoiceRef;
  speed: number;
  auto_emotion: boolean;
  emotion_description?: string;
  emotion_strength: number;
  emotion_vector?: number[];
  emotion_vector_mode?: EmotionVectorMode;
  pronunciations?: PronunciationRule[];
  save_voice: boolean;
  voice_name?: string;
};

/** What the service echoes as `task.input` for a valid request. */
export function normalizeSpeechInput(req: SpeechCreateRequest): SpeechInput {
  const out: SpeechInput = {
    text: req.text,
    language: req.language ?? SPEECH_DEFAULTS.language,
    voice: { ...req.voice },
    speed: req.speed === undefined || req.speed === 0 ? SPEECH_DEFAULTS.speed : req.speed,
    auto_emotion: req.auto_emotion ?? SPEECH_DEFAULTS.auto_emotion,
    emotion_strength: req.emotion_strength ?? SPEECH_DEFAULTS.emotion_strength,
    save_voice: req.save_voice ?? SPEECH_DEFAULTS.save_voice,
  };
  if (req.emotion_description !== undefined) out.emotion_description = req.emotion_description;
  if (req.emotion_vector !== undefined) {
    out.emotion_vector = [...req.emotion_vector];
    out.emotion_vector_mode = req.emotion_vector_mode ?? inferEmotionVectorMode(req.emotion_vector);
  } else if (req.emotion_vector_mode !== undefined) {
    out.emotion_vector_mode = req.emotion_vector_mode;
  }
  if (req.pronunciations !== undefined) {
    out.pronunciations = req.pronunciations.map((rule) => {
      const value = rule.value.trim();
      return {
        word: rule.word.trim(),
        kind: rule.kind,
        value: rule.kind === "kana" ? toKatakana(value) : value,
      };
    });
  }
  if (req.voice_name !== undefined) out.voice_name = req.voice_name;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Billing
// ---------------------------------------------------------------------------------------------

/** Counted characters: Unicode letters (incl. Han) and decimal digits; not spaces, punctuation, symbols, emoji. */
export function countBillableChars(text: string): number {
  return text.match(LETTER_OR_DIGIT_GLOBAL)?.length ?? 0;
}

/** Points of one request: ceil(counted characters x price per 10 / 10), rounded up once. */
export function speechPoints(text: string, pricePer10: number): number {
  return Math.ceil((countBillableChars(text) * pricePer10) / BILLING_UNIT_CHARACTERS);
}

// ---------------------------------------------------------------------------------------------
// 7-9. Reference audio upload, asset registration, custom voices
// ---------------------------------------------------------------------------------------------

/** The accepted extension of a file name (case-insensitive), or undefined. */
export function uploadExtension(fileName: string): UploadExtension | undefined {
  const dot = fileName.lastIndexOf(".");
  if (dot < 0) return undefined;
  const ext = fileName.slice(dot).toLowerCase();
  return UPLOAD_EXTENSIONS.find((e) => e === ext);
}

const ReferenceFileName = z.string().superRefine((name, ctx) => {
  const add = (message: string) => ctx.addIssue({ code: "custom", input: name, message });
  const n = charLength(name);
  if (n < 1 || n > MAX_FILE_NAME_CHARS) add(`expected 1 to ${MAX_FILE_NAME_CHARS} characters, got ${n}`);
  const bad = [...new Set([...name].filter((ch) => ch === "/" || ch === "\\" || CONTROL.test(ch)))];
  if (bad.length > 0) {
    add(
      `must not contain directory separators or control characters, got ${show(name)} (contains ${bad.map(describeChar).join(", ")})`,
    );
  }
  if (n > 0 && uploadExtension(name) === undefined) {
    add(`expected a name ending in ${listOr(UPLOAD_EXTENSIONS)}, got ${show(name)}`);
  }
});

const referenceFileShape = {
  file_name: ReferenceFileName,
  content_type: z.string(),
  file_size: intInRange(1, MAX_REFERENCE_AUDIO_BYTES),
};

/** content_type must be one of the types accepted for the file name's extension (exact match). */
function checkContentType(body: { file_name: string; content_type: string }, ctx: z.RefinementCtx): void {
  const ext = uploadExtension(body.file_name);
  const accepted =
    ext === undefined ? [...new Set(Object.values(UPLOAD_CONTENT_TYPES).flat())] : UPLOAD_CONTENT_TYPES[ext];
  if (accepted.includes(body.content_type)) return;
  const forWhat = ext === undefined ? "" : ` for a ${ext} file`;
  ctx.addIssue({
    code: "custom",
    path: ["content_type"],
    input: body.content_type,
    message: `expected one of ${accepted.map((t) => show(t)).join(", ")}${forWhat}, got ${show(body.content_type)}`,
  });
}

export const UploadUrlRequest = z.strictObject(referenceFileShape).superRefine(checkContentType);
export type UploadUrlRequest = z.infer<typeof UploadUrlRequest>;

export const AssetRegisterRequest = z
  .strictObject({
    object_key: nonEmptyId(),
    ...referenceFileShape,
    duration_ms: intInRange(500, 15000),
  })
  .superRefine(checkContentType);
export type AssetRegisterRequest = z.infer<typeof AssetRegisterRequest>;

export const CustomVoiceCreateRequest = z.strictObject({
  asset_id: nonEmptyId(),
  name: trimmedChars(1, 64),
});
export type CustomVoiceCreateRequest = z.infer<typeof CustomVoiceCreateRequest>;

// ---------------------------------------------------------------------------------------------
// Headers, query strings, and a pure validation entry point
// ---------------------------------------------------------------------------------------------

export type Checked<T> = { ok: true; value: T } | { ok: false; issues: Issue[] };

/** Validates a request body against one of the schemas above without throwing. */
export function checkSpeechRequest<S extends z.ZodType>(schema: S, body: unknown): Checked<z.output<S>> {
  const result = schema.safeParse(body);
  return result.success
    ? { ok: true, value: result.data }
    : { ok: false, issues: issuesFromZod(result.error) };
}

/**
 * Idempotency-Key header: trimmed, 1..128 characters. Speech task and custom voice creation pass
 * `required = true`; with `required = false` (video create) a missing or blank key is simply absent.
 */
export function parseIdempotencyKey(
  value: string | undefined,
  required: boolean,
): { ok: true; key: string | undefined } | { ok: false; issue: Issue } {
  const path = ["Idempotency-Key"];
  const key = value?.trim() ?? "";
  if (key === "") {
    if (!required) return { ok: true, key: undefined };
    return {
      ok: false,
      issue: {
        path,
        message: `is required for this endpoint (1 to ${MAX_IDEMPOTENCY_KEY_CHARS} characters after trimming), got ${value === undefined ? "nothing" : show(value)}`,
      },
    };
  }
  const n = charLength(key);
  if (n > MAX_IDEMPOTENCY_KEY_CHARS) {
    return {
      ok: false,
      issue: {
        path,
        message: `expected 1 to ${MAX_IDEMPOTENCY_KEY_CHARS} characters after trimming, got ${n}`,
      },
    };
  }
  return { ok: true, key };
}

export interface SpeechListQuery {
  offset: number;
  limit: number;
  task_id?: string;
  statuses: SpeechStatus[];
  /** Inclusive lower bound of created_at; absent when 0 or omitted (unbounded). */
  start_time?: number;
  /** Inclusive upper bound of created_at; absent when 0 or omitted (unbounded). */
  end_time?: number;
}

/**
 * Query of `GET /audio/v1/speech/jobs`. An empty value (`offset=`) counts as omitted; a parameter
 * sent twice (other than `statuses`) is an error; unknown parameters are ignored.
 */
export function parseSpeechListQuery(
  params: URLSearchParams,
): { ok: true; value: SpeechListQuery } | { ok: false; issues: Issue[] } {
  const issues: Issue[] = [];

  const single = (name: string): string | undefined => {
    const values = params.getAll(name).filter((v) => v !== "");
    if (values.length > 1) {
      issues.push({
        path: [name],
        message: `expected a single value, got ${values.length}: ${show(values)}`,
      });
    }
    return values[0];
  };
  const integer = (name: string, min: number, max: number, expected: string): number | undefined => {
    const raw = single(name);
    if (raw === undefined) return undefined;
    const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      issues.push({ path: [name], message: `expected ${expected}, got ${show(raw)}` });
      return undefined;
    }
    return n;
  };

  const offset = integer("offset", 0, Number.MAX_SAFE_INTEGER, "an integer >= 0") ?? 0;
  const limit =
    integer("limit", 1, MAX_LIST_LIMIT, `an integer from 1 to ${MAX_LIST_LIMIT}`) ?? DEFAULT_LIST_LIMIT;
  const taskId = single("task_id");

  const statuses: SpeechStatus[] = [];
  const requested = params
    .getAll("statuses")
    .flatMap((v) => v.split(","))
    .map((v) => v.trim())
    .filter((v) => v !== "");
  requested.forEach((raw, i) => {
    const parsed = SpeechStatus.safeParse(raw);
    if (!parsed.success) {
      issues.push({
        path: ["statuses", i],
        message: `expected one of ${SPEECH_STATUSES.map((s) => show(s)).join(", ")}, got ${show(raw)}`,
      });
    } else if (!statuses.includes(parsed.data)) {
      statuses.push(parsed.data);
    }
  });

  const timeExpected = "a Unix time in seconds (a non-negative integer; 0 means unbounded)";
  const start = integer("start_time", 0, Number.MAX_SAFE_INTEGER, timeExpected);
  const end = integer("end_time", 0, Number.MAX_SAFE_INTEGER, timeExpected);
  if (start !== undefined && end !== undefined && start !== 0 && end !== 0 && end < start) {
    issues.push({ path: ["end_time"], message: `expected a time >= start_time ${start}, got ${end}` });
  }

  if (issues.length > 0) return { ok: false, issues };
  const value: SpeechListQuery = { offset, limit, statuses };
  if (taskId !== undefined) value.task_id = taskId;
  if (start !== undefined && start !== 0) value.start_time = start;
  if (end !== undefined && end !== 0) value.end_time = end;
  return { ok: true, value };
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
export const SpeechStatusCounts = z.looseObject({
  queued: int().optional(),
  generating: int().optional(),
  succeeded: int().optional(),
  failed: int().optional(),
  cancelled: int().optional(),
});
export type SpeechStatusCounts = z.infer<typeof SpeechStatusCounts>;

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
