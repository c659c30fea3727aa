// The speech service's side of the protocol, which only the emulator needs: the list query it
// parses, and the `task.input` it echoes for a valid request (its effective defaults applied).
import { type Issue, show } from "../../api/common.js";
import {
  DEFAULT_LIST_LIMIT,
  type EmotionVectorMode,
  MAX_LIST_LIMIT,
  SPEECH_DEFAULTS,
  SPEECH_STATUSES,
  type SpeechLanguage,
  SpeechStatus,
} from "../../api/speech.js";
import type { PronunciationRule, SpeechCreateRequest, VoiceRef } from "../../api/speech-request.js";

/** How many times the service tries a task before it fails it. */
export const MAX_ATTEMPTS = 3;

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

/** The mode the service infers when none is sent: exactly one non-zero element is `single`. */
export function inferEmotionVectorMode(vector: readonly number[]): EmotionVectorMode {
  return nonZeroCount(vector) === 1 ? "single" : "mixed";
}

function nonZeroCount(vector: readonly unknown[]): number {
  return vector.filter((v) => typeof v === "number" && v !== 0).length;
}

/** Hiragana to katakana (ゝゞ to ヽヾ); everything else unchanged. */
export function toKatakana(value: string): string {
  return value
    .normalize("NFC")
    .replace(/[\u3041-\u3096\u309D\u309E]/gu, (ch) => String.fromCodePoint((ch.codePointAt(0) ?? 0) + 0x60));
}

interface SpeechListQuery {
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
