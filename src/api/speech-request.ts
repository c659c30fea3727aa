// What may be sent to the text-to-speech service (/work/shared/spec/text-to-speech-api.md): request
// schemas with every rule of the spec.
//
// Request schemas are strict (the spec: "unsupported request body fields cause an error") and carry
// no transforms, so their input and output types are the same. Nothing here throws: failures are
// zod issues / `Issue[]` with field paths.
import { z } from "zod";
import { charLength, type Issue, intInRange, issuesFromZod, numberInRange, show } from "./common.js";
import {
  EMOTION_DIMENSIONS,
  EmotionVectorMode,
  MAX_EMOTION_DESCRIPTION_CHARS,
  MAX_EMOTION_VECTOR_SUM,
  MAX_FILE_NAME_CHARS,
  MAX_PRONUNCIATIONS,
  MAX_REFERENCE_AUDIO_BYTES,
  MAX_TEXT_CHARS,
  PronunciationKind,
  SpeechLanguage,
  UPLOAD_CONTENT_TYPES,
  type UploadExtension,
  VOICE_SOURCES,
} from "./speech.js";

const UPLOAD_EXTENSIONS = Object.keys(UPLOAD_CONTENT_TYPES) as UploadExtension[];

// ---------------------------------------------------------------------------------------------
// Small rule helpers
// ---------------------------------------------------------------------------------------------

/** Floating-point slack for the emotion vector sum, so 0.1 * 8 (= 0.8000000000000002) passes. */
const SUM_EPSILON = 1e-9;

const LETTER_OR_DIGIT = /[\p{L}\p{Nd}]/u;
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
const SpeechText = z.string().superRefine((text, ctx) => {
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
function isTonedPinyinSyllable(syllable: string): boolean {
  const s = syllable.normalize("NFC").toLowerCase();
  return PINYIN_DIGIT_TONE.test(s) || PINYIN_MARKED.test(s);
}

/** Checks a pinyin value against its (trimmed) word; returns messages for the value field. */
function pinyinValueProblems(word: string, value: string): string[] {
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
function isCmuPhoneme(token: string): boolean {
  const t = token.toUpperCase();
  if (CMU_CONSONANTS.has(t)) return true;
  const m = /^([A-Z]{2})([012])?$/.exec(t);
  return m !== null && CMU_VOWELS.has(m[1] ?? "");
}

/** Hiragana ぁ-ゖ ゝゞ, katakana ァ-ヺ ー ヽヾ, small katakana ㇰ-ㇿ (checked after NFC). */
const KANA_CHAR = /^[\u3041-\u3096\u309D\u309E\u30A1-\u30FA\u30FC-\u30FE\u31F0-\u31FF]$/u;

function isKana(value: string): boolean {
  const s = value.normalize("NFC");
  return s !== "" && [...s].every((ch) => KANA_CHAR.test(ch));
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
const EmotionVector = z.array(numberInRange(0, MAX_EMOTION_VECTOR_SUM)).superRefine((vector, ctx) => {
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
function speechCreateCrossIssues(body: Record<string, unknown>): Issue[] {
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

type Checked<T> = { ok: true; value: T } | { ok: false; issues: Issue[] };

/** Validates a request body against one of the schemas above without throwing. */
export function checkSpeechRequest<S extends z.ZodType>(schema: S, body: unknown): Checked<z.output<S>> {
  const result = schema.safeParse(body);
  return result.success
    ? { ok: true, value: result.data }
    : { ok: false, issues: issuesFromZod(result.error) };
}
