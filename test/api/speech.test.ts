import { describe, expect, it } from "vitest";
import type { z } from "zod";
import { formatIssue, type Issue } from "../../src/api/common.js";
import {
  Asset,
  AssetResponse,
  countBillableChars,
  EMOTION_DIMENSIONS,
  MAX_REFERENCE_AUDIO_BYTES,
  POINT_STATUSES,
  Pricing,
  SPEECH_LANGUAGES,
  SPEECH_STATUSES,
  SpeechCancelResponse,
  SpeechCreateResponse,
  SpeechDeleteResponse,
  SpeechTask,
  SpeechTaskInput,
  SpeechTaskList,
  SpeechTaskResponse,
  speechPoints,
  UPLOAD_CONTENT_TYPES,
  UploadTicket,
  Voice,
  VoiceDeleteResponse,
  VoiceList,
  VoiceResponse,
} from "../../src/api/speech.js";
import {
  AssetRegisterRequest,
  CustomVoiceCreateRequest,
  checkSpeechRequest,
  SpeechCreateRequest,
  UploadUrlRequest,
  VoiceRef,
} from "../../src/api/speech-request.js";
import { parseIdempotencyKey } from "../../src/sandbox/protocol/idempotency.js";
import {
  inferEmotionVectorMode,
  MAX_ATTEMPTS,
  normalizeSpeechInput,
  parseSpeechListQuery,
  type SpeechInput,
  toKatakana,
} from "../../src/sandbox/protocol/speech.js";

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

function issuesOf(schema: z.ZodType, body: unknown): Issue[] {
  const result = checkSpeechRequest(schema, body);
  return result.ok ? [] : result.issues;
}

function expectValid(schema: z.ZodType, body: unknown): void {
  expect(issuesOf(schema, body).map(formatIssue)).toEqual([]);
}

/** Exactly one issue, at exactly `path`, whose message contains `part`. */
function expectOnlyIssue(schema: z.ZodType, body: unknown, path: Array<string | number>, part: string): void {
  const issues = issuesOf(schema, body);
  expect(issues.map(formatIssue)).toHaveLength(1);
  expect(issues[0]?.path).toEqual(path);
  expect(issues[0]?.message).toContain(part);
}

/** At least one issue at exactly `path` whose message contains `part`. */
function expectIssue(schema: z.ZodType, body: unknown, path: Array<string | number>, part: string): void {
  const issues = issuesOf(schema, body);
  const atPath = issues.filter((i) => JSON.stringify(i.path) === JSON.stringify(path));
  expect(
    atPath.map((i) => i.message).join(" | "),
    `issues: ${issues.map(formatIssue).join(" | ")}`,
  ).toContain(part);
}

const preset = { source: "preset", voice_id: "voice-1" } as const;
const base = { text: "你好，中国 world", voice: preset };
const req = (extra: Record<string, unknown>) => ({ ...base, ...extra });
const vector = (...values: Array<number | null>) => values;
const one = (i: number, v: number) => EMOTION_DIMENSIONS.map((_, j) => (j === i ? v : 0));
const rule = (word: string, kind: string, value: string) => ({ word, kind, value });
const withRules = (text: string, ...rules: unknown[]) => ({ text, voice: preset, pronunciations: rules });

// ---------------------------------------------------------------------------------------------
// Constants
// ---------------------------------------------------------------------------------------------

describe("constants", () => {
  it("match the spec", () => {
    expect(SPEECH_LANGUAGES).toEqual(["ZH", "EN", "JA", "ES", "AR"]);
    expect(SPEECH_STATUSES).toEqual(["queued", "generating", "succeeded", "failed", "cancelled"]);
    expect(POINT_STATUSES).toEqual(["reserved", "consumed", "released"]);
    expect(MAX_ATTEMPTS).toBe(3);
    expect(EMOTION_DIMENSIONS).toEqual([
      "happy",
      "angry",
      "sad",
      "afraid",
      "disgusted",
      "low",
      "surprised",
      "calm",
    ]);
    expect(MAX_REFERENCE_AUDIO_BYTES).toBe(15 * 1024 * 1024);
    expect(UPLOAD_CONTENT_TYPES).toEqual({
      ".wav": ["audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"],
      ".mp3": ["audio/mpeg"],
      ".flac": ["audio/flac", "audio/x-flac"],
      ".ogg": ["audio/ogg"],
      ".m4a": ["audio/mp4", "audio/x-m4a"],
    });
  });
});

// ---------------------------------------------------------------------------------------------
// Voice reference
// ---------------------------------------------------------------------------------------------

describe("VoiceRef", () => {
  it("accepts preset, custom and asset references", () => {
    expectValid(VoiceRef, { source: "preset", voice_id: "v1" });
    expectValid(VoiceRef, { source: "custom", voice_id: "v2" });
    expectValid(VoiceRef, { source: "asset", asset_id: "a1" });
    expectValid(SpeechCreateRequest, req({ voice: { source: "asset", asset_id: "a1" } }));
  });

  it("rejects the other ID field as unsupported", () => {
    expectOnlyIssue(
      VoiceRef,
      { source: "preset", voice_id: "v1", asset_id: "a1" },
      [],
      'unsupported field "asset_id"',
    );
    expectIssue(
      SpeechCreateRequest,
      req({ voice: { source: "asset", voice_id: "v1" } }),
      ["voice"],
      "voice_id",
    );
    expectIssue(
      SpeechCreateRequest,
      req({ voice: { source: "asset", voice_id: "v1" } }),
      ["voice", "asset_id"],
      "is required",
    );
  });

  it("rejects unknown fields", () => {
    expectOnlyIssue(
      VoiceRef,
      { source: "custom", voice_id: "v1", name: "x" },
      [],
      'unsupported field "name"',
    );
  });

  it("rejects a missing or unknown source, case-sensitively", () => {
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ voice: { source: "Preset", voice_id: "v" } }),
      ["voice", "source"],
      'got "Preset"',
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ voice: { voice_id: "v" } }),
      ["voice", "source"],
      "is required",
    );
  });

  it("requires the ID for the source, non-empty", () => {
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ voice: { source: "custom" } }),
      ["voice", "voice_id"],
      "is required",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ voice: { source: "preset", voice_id: " " } }),
      ["voice", "voice_id"],
      "non-empty",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ voice: { source: "asset", asset_id: "" } }),
      ["voice", "asset_id"],
      "non-empty",
    );
  });

  it("is required on the request", () => {
    expectOnlyIssue(SpeechCreateRequest, { text: "hi" }, ["voice"], "is required");
  });
});

// ---------------------------------------------------------------------------------------------
// Create speech task: single fields
// ---------------------------------------------------------------------------------------------

describe("SpeechCreateRequest fields", () => {
  it("accepts a minimal request and a full one", () => {
    expectValid(SpeechCreateRequest, base);
    expectValid(SpeechCreateRequest, {
      text: "中国 tomato 東京",
      language: "JA",
      voice: { source: "asset", asset_id: "asset-1" },
      speed: 1.25,
      auto_emotion: false,
      emotion_description: "",
      emotion_strength: 0,
      emotion_vector: one(2, 0.5),
      emotion_vector_mode: "single",
      pronunciations: [
        rule("中国", "pinyin", "zhong1 guo2"),
        rule("tomato", "cmu", "T AH0 M EY1 T OW2"),
        rule("東京", "kana", "とうきょう"),
      ],
      save_voice: true,
      voice_name: "Narrator",
    });
  });

  it("rejects unsupported body fields", () => {
    expectOnlyIssue(SpeechCreateRequest, req({ model: "x" }), [], 'unsupported field "model"');
  });

  it("text is required and must be a string", () => {
    expectOnlyIssue(SpeechCreateRequest, { voice: preset }, ["text"], "is required");
    expectOnlyIssue(SpeechCreateRequest, req({ text: 42 }), ["text"], "expected a string, got 42");
  });

  it("text is at most 2000 Unicode code points (not UTF-16 units)", () => {
    expectValid(SpeechCreateRequest, req({ text: `a${"😀".repeat(1999)}` }));
    expectValid(SpeechCreateRequest, req({ text: "字".repeat(2000) }));
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ text: "字".repeat(2001) }),
      ["text"],
      "expected at most 2000 characters, got 2001",
    );
  });

  it("text must contain a letter, Han character or digit", () => {
    expectValid(SpeechCreateRequest, req({ text: "中" }));
    expectValid(SpeechCreateRequest, req({ text: "...7!" }));
    expectValid(SpeechCreateRequest, req({ text: "٣" })); // Arabic-Indic digit
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ text: "  ，。!? 😀 ★ " }),
      ["text"],
      "only whitespace, punctuation or symbols",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ text: "" }),
      ["text"],
      "expected at least one letter, Han character or digit",
    );
  });

  it("language is one of the five codes, case-sensitive", () => {
    for (const language of SPEECH_LANGUAGES) expectValid(SpeechCreateRequest, req({ language }));
    expectOnlyIssue(SpeechCreateRequest, req({ language: "zh" }), ["language"], 'got "zh"');
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ language: "FR" }),
      ["language"],
      '"ZH", "EN", "JA", "ES", "AR"',
    );
  });

  it("speed is 0 or 0.5..2.0", () => {
    for (const speed of [0, 0.5, 1, 2]) expectValid(SpeechCreateRequest, req({ speed }));
    for (const speed of [0.4, 2.01, -1, 0.1]) {
      expectOnlyIssue(SpeechCreateRequest, req({ speed }), ["speed"], `from 0.5 to 2.0, got ${speed}`);
    }
    expectOnlyIssue(SpeechCreateRequest, req({ speed: "1" }), ["speed"], 'expected a number, got "1"');
  });

  it("auto_emotion and save_voice are booleans", () => {
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ auto_emotion: "false" }),
      ["auto_emotion"],
      "expected a boolean",
    );
    expectOnlyIssue(SpeechCreateRequest, req({ save_voice: 1 }), ["save_voice"], "expected a boolean, got 1");
  });

  it("emotion_description is at most 200 characters", () => {
    expectValid(SpeechCreateRequest, req({ emotion_description: "喜".repeat(200) }));
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ emotion_description: "喜".repeat(201) }),
      ["emotion_description"],
      "expected at most 200 characters, got 201",
    );
  });

  it("emotion_strength is 0..1", () => {
    for (const s of [0, 0.35, 1]) expectValid(SpeechCreateRequest, req({ emotion_strength: s }));
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ emotion_strength: 1.1 }),
      ["emotion_strength"],
      "from 0 to 1, got 1.1",
    );
    expectOnlyIssue(SpeechCreateRequest, req({ emotion_strength: -0.1 }), ["emotion_strength"], "got -0.1");
  });
});

// ---------------------------------------------------------------------------------------------
// Emotion vector
// ---------------------------------------------------------------------------------------------

describe("emotion_vector", () => {
  const manual = (v: unknown, extra: Record<string, unknown> = {}) =>
    req({ auto_emotion: false, emotion_vector: v, ...extra });

  it("accepts 8 numbers summing to at most 0.8, with float error tolerated", () => {
    expectValid(SpeechCreateRequest, manual([0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1]));
    // 0.03 + 0.4 + 0.2 + 0.17 is 0.8000000000000002 in floating point, which is still 0.8.
    expectValid(SpeechCreateRequest, manual(vector(0.03, 0.4, 0.2, 0.17, 0, 0, 0, 0)));
    expectValid(SpeechCreateRequest, manual(one(7, 0.8)));
    expectValid(SpeechCreateRequest, manual(vector(0.3, 0.2, 0, 0, 0.1, 0, 0.2, 0)));
    expectValid(SpeechCreateRequest, manual(one(0, 0.01), { emotion_description: "" }));
  });

  it("has exactly 8 elements", () => {
    expectOnlyIssue(
      SpeechCreateRequest,
      manual([0.1, 0.1]),
      ["emotion_vector"],
      "expected exactly 8 elements",
    );
    expectOnlyIssue(SpeechCreateRequest, manual([...one(0, 0.1), 0]), ["emotion_vector"], "got 9");
    expectOnlyIssue(SpeechCreateRequest, manual(one(0, 0.1).slice(1)), ["emotion_vector"], "got 7");
  });

  it("each element is a number 0..0.8, never null", () => {
    expectOnlyIssue(
      SpeechCreateRequest,
      manual(vector(0, 0, 0, 0.9, 0, 0, 0, 0)),
      ["emotion_vector", 3],
      "from 0 to 0.8, got 0.9",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      manual(vector(0, 0, 0, 0, 0, -0.1, 0, 0.1)),
      ["emotion_vector", 5],
      "got -0.1",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      manual(vector(0.1, 0, 0, 0, 0, null, 0, 0)),
      ["emotion_vector", 5],
      "got null",
    );
  });

  it("sums to more than 0 and at most 0.8", () => {
    expectOnlyIssue(
      SpeechCreateRequest,
      manual(one(0, 0)),
      ["emotion_vector"],
      "more than 0 and at most 0.8, got 0",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      manual(vector(0.5, 0.4, 0, 0, 0, 0, 0, 0)),
      ["emotion_vector"],
      "got 0.9",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      manual(vector(0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.11)),
      ["emotion_vector"],
      "got 0.81",
    );
  });

  it("requires auto_emotion=false sent explicitly", () => {
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ emotion_vector: one(0, 0.5) }),
      ["auto_emotion"],
      "must be sent as false",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ emotion_vector: one(0, 0.5) }),
      ["auto_emotion"],
      "got nothing",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ auto_emotion: true, emotion_vector: one(0, 0.5) }),
      ["auto_emotion"],
      "got true",
    );
  });

  it("requires emotion_description omitted or empty", () => {
    expectOnlyIssue(
      SpeechCreateRequest,
      manual(one(0, 0.5), { emotion_description: "cheerful" }),
      ["emotion_description"],
      'must be omitted or empty when emotion_vector is given, got "cheerful"',
    );
    // Without a vector a description is fine.
    expectValid(SpeechCreateRequest, req({ auto_emotion: false, emotion_description: "cheerful" }));
  });

  it("emotion_vector_mode is single or mixed, only together with the vector", () => {
    expectValid(SpeechCreateRequest, manual(one(4, 0.5), { emotion_vector_mode: "single" }));
    expectValid(SpeechCreateRequest, manual(one(4, 0.5), { emotion_vector_mode: "mixed" }));
    expectValid(
      SpeechCreateRequest,
      manual(vector(0.2, 0.2, 0, 0, 0, 0, 0, 0), { emotion_vector_mode: "mixed" }),
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      manual(one(4, 0.5), { emotion_vector_mode: "both" }),
      ["emotion_vector_mode"],
      'got "both"',
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ emotion_vector_mode: "mixed" }),
      ["emotion_vector_mode"],
      "only allowed together with emotion_vector",
    );
  });

  it("single requires exactly one non-zero element", () => {
    expectOnlyIssue(
      SpeechCreateRequest,
      manual(vector(0.2, 0.2, 0, 0, 0, 0, 0, 0), { emotion_vector_mode: "single" }),
      ["emotion_vector_mode"],
      "exactly one non-zero element in emotion_vector, got 2",
    );
  });

  it("infers the mode from the non-zero count", () => {
    expect(inferEmotionVectorMode(one(3, 0.4))).toBe("single");
    expect(inferEmotionVectorMode([0.1, 0, 0.1, 0, 0, 0, 0, 0])).toBe("mixed");
    expect(inferEmotionVectorMode(one(0, 0))).toBe("mixed");
  });
});

// ---------------------------------------------------------------------------------------------
// Pronunciations
// ---------------------------------------------------------------------------------------------

describe("pronunciations", () => {
  it("accepts up to 100 rules and rejects 101", () => {
    const words = Array.from({ length: 101 }, (_, i) => `w${String(i).padStart(3, "0")}`);
    const text = words.join(" ");
    const rules = words.map((w) => rule(w, "alias", "x"));
    expectValid(SpeechCreateRequest, withRules(text, ...rules.slice(0, 100)));
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules(text, ...rules),
      ["pronunciations"],
      "expected at most 100 elements, got 101",
    );
  });

  it("rules are strict objects with word, kind and value", () => {
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules("中国", { ...rule("中国", "alias", "x"), note: 1 }),
      ["pronunciations", 0],
      'unsupported field "note"',
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules("中国", { word: "中国", kind: "alias" }),
      ["pronunciations", 0, "value"],
      "is required",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules("中国", rule("中国", "ipa", "x")),
      ["pronunciations", 0, "kind"],
      'got "ipa"',
    );
  });

  it("word is 1..64 characters after trimming", () => {
    const w64 = "a".repeat(64);
    expectValid(SpeechCreateRequest, withRules(w64, rule(`  ${w64}  `, "alias", "x")));
    expectIssue(
      SpeechCreateRequest,
      withRules("a".repeat(65), rule("a".repeat(65), "alias", "x")),
      ["pronunciations", 0, "word"],
      "expected 1 to 64 characters after trimming, got 65",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules("中国", rule("   ", "alias", "x")),
      ["pronunciations", 0, "word"],
      "after trimming, got 0",
    );
  });

  it("value is 1..512 characters after trimming", () => {
    expectValid(SpeechCreateRequest, withRules("中国", rule("中国", "alias", `${"x".repeat(512)} `)));
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules("中国", rule("中国", "alias", "x".repeat(513))),
      ["pronunciations", 0, "value"],
      "expected 1 to 512 characters after trimming, got 513",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules("中国", rule("中国", "alias", " \t ")),
      ["pronunciations", 0, "value"],
      "got 0",
    );
  });

  it("word and value have no control characters nor < > |", () => {
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules("a<b", rule("a<b", "alias", "x")),
      ["pronunciations", 0, "word"],
      'contains "<"',
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules("中国", rule("中国", "alias", "a|b")),
      ["pronunciations", 0, "value"],
      'contains "|"',
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules("中国", rule("中国", "alias", "a>b")),
      ["pronunciations", 0, "value"],
      'contains ">"',
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules("中国", rule("中国", "alias", "a\u0007b")),
      ["pronunciations", 0, "value"],
      "control character U+0007",
    );
  });

  it("words are unique after trimming", () => {
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules("中国", rule("中国", "alias", "x"), rule(" 中国 ", "alias", "y")),
      ["pronunciations", 1, "word"],
      "must be unique within the request",
    );
  });

  it("the word must occur in the body text", () => {
    expectValid(SpeechCreateRequest, withRules("我爱中国。", rule(" 中国", "pinyin", "zhong1 guo2")));
    expectOnlyIssue(
      SpeechCreateRequest,
      withRules("我爱北京", rule("中国", "pinyin", "zhong1 guo2")),
      ["pronunciations", 0, "word"],
      'must occur in text, got "中国"',
    );
  });

  describe("pinyin", () => {
    const pinyin = (word: string, value: string) => withRules(`这是${word}。`, rule(word, "pinyin", value));

    it("accepts digit tones, tone marks and ü/v", () => {
      expectValid(SpeechCreateRequest, pinyin("中国", "zhong1 guo2"));
      expectValid(SpeechCreateRequest, pinyin("中国", "zhōng guó"));
      expectValid(SpeechCreateRequest, pinyin("中国", "Zhong1  guo2"));
      expectValid(SpeechCreateRequest, pinyin("绿", "lü4"));
      expectValid(SpeechCreateRequest, pinyin("绿", "lv4"));
      expectValid(SpeechCreateRequest, pinyin("绿", "lǜ"));
      expectValid(SpeechCreateRequest, pinyin("的", "de5"));
      expectValid(SpeechCreateRequest, pinyin("中国", "zho\u0304ng guo\u0301")); // combining marks (NFD)
    });

    it("the word must be Han characters only", () => {
      expectIssue(
        SpeechCreateRequest,
        withRules("AI芯片", rule("AI芯片", "pinyin", "ai4 ai4 xin1 pian4")),
        ["pronunciations", 0, "word"],
        'expected only Han characters for kind "pinyin", got "AI芯片"',
      );
    });

    it("needs one syllable per Han character, saying how many", () => {
      expectOnlyIssue(
        SpeechCreateRequest,
        pinyin("中国", "zhong1"),
        ["pronunciations", 0, "value"],
        "expected 2 pinyin syllables separated by spaces",
      );
      expectOnlyIssue(
        SpeechCreateRequest,
        pinyin("中国", "zhong1 guo2 ren2"),
        ["pronunciations", 0, "value"],
        "found 3",
      );
      expectIssue(
        SpeechCreateRequest,
        pinyin("中国", "zhong1guo2"),
        ["pronunciations", 0, "value"],
        "found 1",
      );
    });

    it("every syllable carries a tone", () => {
      expectOnlyIssue(
        SpeechCreateRequest,
        pinyin("中国", "zhong guo2"),
        ["pronunciations", 0, "value"],
        'carry a tone (a digit 1-5 like "zhong1" or a tone mark like "zhōng"), got "zhong"',
      );
      expectOnlyIssue(
        SpeechCreateRequest,
        pinyin("中国", "zhong6 guo2"),
        ["pronunciations", 0, "value"],
        'got "zhong6"',
      );
      expectOnlyIssue(
        SpeechCreateRequest,
        pinyin("中国", "zhōng1 guo2"),
        ["pronunciations", 0, "value"],
        'got "zhōng1"',
      );
      expectOnlyIssue(
        SpeechCreateRequest,
        pinyin("中国", "zhǒng guó2"),
        ["pronunciations", 0, "value"],
        'got "guó2"',
      );
      expectOnlyIssue(
        SpeechCreateRequest,
        pinyin("西安", "xi'1 an1"),
        ["pronunciations", 0, "value"],
        `got "xi'1"`,
      );
    });
  });

  describe("cmu", () => {
    const cmu = (value: string) => withRules("I like tomato.", rule("tomato", "cmu", value));

    it("accepts ARPAbet phonemes with optional vowel stress, any case", () => {
      expectValid(SpeechCreateRequest, cmu("T AH0 M EY1 T OW2"));
      expectValid(SpeechCreateRequest, cmu("t ah m ey t ow"));
      expectValid(SpeechCreateRequest, cmu("ZH NG HH JH DH TH CH SH ER0 OY2 AW1 UH0"));
    });

    it("rejects unknown phonemes, bad stress and stressed consonants", () => {
      expectOnlyIssue(
        SpeechCreateRequest,
        cmu("T AH3 M EY1 T OW2"),
        ["pronunciations", 0, "value"],
        'got unknown "AH3"',
      );
      expectOnlyIssue(
        SpeechCreateRequest,
        cmu("T1 AH0 XX"),
        ["pronunciations", 0, "value"],
        'got unknown "T1", "XX"',
      );
      expectOnlyIssue(
        SpeechCreateRequest,
        cmu("tomato"),
        ["pronunciations", 0, "value"],
        "CMU/ARPAbet phonemes separated by spaces",
      );
    });
  });

  describe("kana", () => {
    const kana = (value: string) => withRules("東京へ行く", rule("東京", "kana", value));

    it("accepts hiragana, katakana, ー and small kana", () => {
      expectValid(SpeechCreateRequest, kana("とうきょう"));
      expectValid(SpeechCreateRequest, kana("トーキョー"));
      expectValid(SpeechCreateRequest, kana("ぁゃっヵㇰ"));
    });

    it("rejects anything else", () => {
      expectOnlyIssue(
        SpeechCreateRequest,
        kana("tokyo"),
        ["pronunciations", 0, "value"],
        'expected only hiragana or katakana, got "tokyo" ("t" is not kana)',
      );
      expectOnlyIssue(SpeechCreateRequest, kana("東京"), ["pronunciations", 0, "value"], '"東" is not kana');
      expectOnlyIssue(
        SpeechCreateRequest,
        kana("とう きょう"),
        ["pronunciations", 0, "value"],
        '" " is not kana',
      );
    });
  });

  it("alias accepts free text", () => {
    expectValid(SpeechCreateRequest, withRules("SQL rocks", rule("SQL", "alias", "sequel")));
  });
});

// ---------------------------------------------------------------------------------------------
// save_voice / voice_name, and reporting everything at once
// ---------------------------------------------------------------------------------------------

describe("save_voice and voice_name", () => {
  const asset = { source: "asset", asset_id: "asset-1" };

  it("save_voice=true needs an asset voice and a voice_name", () => {
    expectValid(SpeechCreateRequest, req({ voice: asset, save_voice: true, voice_name: " My voice " }));
    expectValid(SpeechCreateRequest, req({ save_voice: false }));
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ save_voice: true, voice_name: "x" }),
      ["save_voice"],
      'may be true only when voice.source is "asset", got voice.source "preset"',
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ voice: asset, save_voice: true }),
      ["voice_name"],
      "is required when save_voice is true",
    );
  });

  it("voice_name is 1..64 characters after trimming", () => {
    expectValid(
      SpeechCreateRequest,
      req({ voice: asset, save_voice: true, voice_name: ` ${"n".repeat(64)} ` }),
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ voice: asset, save_voice: true, voice_name: "   " }),
      ["voice_name"],
      "expected 1 to 64 characters after trimming, got 0",
    );
    expectOnlyIssue(
      SpeechCreateRequest,
      req({ voice: asset, save_voice: true, voice_name: "n".repeat(65) }),
      ["voice_name"],
      "got 65",
    );
  });

  it("reports cross-field problems alongside type errors elsewhere", () => {
    const issues = issuesOf(
      SpeechCreateRequest,
      req({ language: "zh", emotion_vector: one(0, 0.5), extra: true }),
    );
    expect(issues.map(formatIssue).sort()).toEqual(
      [
        'language: expected one of "ZH", "EN", "JA", "ES", "AR", got "zh"',
        "auto_emotion: must be sent as false when emotion_vector is given, got nothing",
        'unsupported field "extra"',
      ].sort(),
    );
  });

  it("never throws on non-object bodies", () => {
    expectOnlyIssue(SpeechCreateRequest, null, [], "got null");
    expectOnlyIssue(SpeechCreateRequest, [1], [], "expected an object");
  });
});

// ---------------------------------------------------------------------------------------------
// Normalization (task.input)
// ---------------------------------------------------------------------------------------------

describe("normalizeSpeechInput", () => {
  const parse = (body: unknown) => SpeechCreateRequest.parse(body);

  it("applies the effective defaults and leaves unsent fields absent", () => {
    expect(normalizeSpeechInput(parse(base))).toStrictEqual({
      text: "你好，中国 world",
      language: "ZH",
      voice: { source: "preset", voice_id: "voice-1" },
      speed: 1,
      auto_emotion: true,
      emotion_strength: 0.8,
      save_voice: false,
    });
  });

  it("speed 0 means 1.0; other values are kept", () => {
    expect(normalizeSpeechInput(parse(req({ speed: 0 }))).speed).toBe(1);
    expect(normalizeSpeechInput(parse(req({ speed: 1.5 }))).speed).toBe(1.5);
  });

  it("keeps explicit values, including an explicit zero strength and an empty description", () => {
    const input = normalizeSpeechInput(
      parse(req({ language: "EN", auto_emotion: false, emotion_strength: 0, emotion_description: "" })),
    );
    expect(input.language).toBe("EN");
    expect(input.auto_emotion).toBe(false);
    expect(input.emotion_strength).toBe(0);
    expect(input.emotion_description).toBe("");
  });

  it("infers emotion_vector_mode when a vector is present", () => {
    const manual = (extra: Record<string, unknown>) => parse(req({ auto_emotion: false, ...extra }));
    expect(normalizeSpeechInput(manual({ emotion_vector: one(1, 0.3) })).emotion_vector_mode).toBe("single");
    expect(
      normalizeSpeechInput(manual({ emotion_vector: [0.1, 0.2, 0, 0, 0, 0, 0, 0] })).emotion_vector_mode,
    ).toBe("mixed");
    expect(
      normalizeSpeechInput(manual({ emotion_vector: one(1, 0.3), emotion_vector_mode: "mixed" }))
        .emotion_vector_mode,
    ).toBe("mixed");
    expect("emotion_vector_mode" in normalizeSpeechInput(parse(base))).toBe(false);
  });

  it("trims pronunciation words and values and turns kana into katakana", () => {
    const input = normalizeSpeechInput(
      parse(
        withRules(
          "東京の中国料理, tomato",
          rule(" 東京 ", "kana", " とうきょう "),
          rule("中国", "pinyin", " zhong1 guo2 "),
          rule("tomato", "alias", " tomahto "),
        ),
      ),
    );
    expect(input.pronunciations).toStrictEqual([
      { word: "東京", kind: "kana", value: "トウキョウ" },
      { word: "中国", kind: "pinyin", value: "zhong1 guo2" },
      { word: "tomato", kind: "alias", value: "tomahto" },
    ]);
  });

  it("keeps save_voice and voice_name", () => {
    const input = normalizeSpeechInput(
      parse(req({ voice: { source: "asset", asset_id: "a1" }, save_voice: true, voice_name: "Mine" })),
    );
    expect(input.save_voice).toBe(true);
    expect(input.voice_name).toBe("Mine");
    expect(input.voice).toStrictEqual({ source: "asset", asset_id: "a1" });
  });

  it("produces an input the task response schema accepts", () => {
    const input: SpeechInput = normalizeSpeechInput(
      parse(
        req({
          auto_emotion: false,
          emotion_vector: one(0, 0.2),
          pronunciations: [rule("中国", "alias", "x")],
        }),
      ),
    );
    expect(SpeechTaskInput.safeParse(input).success).toBe(true);
  });
});

describe("toKatakana", () => {
  it("converts hiragana, keeps katakana, ー and other text", () => {
    expect(toKatakana("とうきょう")).toBe("トウキョウ");
    expect(toKatakana("ぁゔゝゞ")).toBe("ァヴヽヾ");
    expect(toKatakana("ラーメンとすし")).toBe("ラーメントスシ");
    expect(toKatakana("か\u3099")).toBe("ガ"); // NFD が
  });
});

// ---------------------------------------------------------------------------------------------
// Billing
// ---------------------------------------------------------------------------------------------

describe("billing", () => {
  it("counts letters (incl. Han) and decimal digits only", () => {
    expect(countBillableChars("你好，world 42! 😀")).toBe(9); // 你好 + world + 42
    expect(countBillableChars("Hello, 世界! 123")).toBe(10); // 5 + 2 + 3
    expect(countBillableChars("東京タワー。")).toBe(5); // ー is a letter (Lm), 。 is punctuation
    expect(countBillableChars("مرحبا ٣")).toBe(6); // 5 Arabic letters + Arabic-Indic digit
    expect(countBillableChars("¿Qué tal?")).toBe(6);
    expect(countBillableChars("１２")).toBe(2); // full-width digits are Nd
    expect(countBillableChars("①½² $%^&*+=~ 😀🎉 \n\t")).toBe(0); // other numbers, symbols, emoji
    expect(countBillableChars("")).toBe(0);
  });

  it("counts a letter beyond U+FFFF once, and each call from the start of its text", () => {
    // U+1D4B3 (a script capital X, Lu) is two UTF-16 units and one letter; U+1D7D9 is a digit (Nd).
    expect(countBillableChars("\u{1D4B3}\u{1D7D9}a")).toBe(3);
    expect(countBillableChars("😀\u{1D4B3}😀")).toBe(1);
    // One expression serves every call: a count never starts where the last one stopped.
    const texts = ["abc", "x", "😀", "東京", "a1-b2", "", "Zürich 2024", "\u{1D4B3}"];
    const reference = (t: string) => [...t].filter((c) => /^[\p{L}\p{Nd}]$/u.test(c)).length;
    for (let round = 0; round < 3; round++) {
      for (const t of texts) expect(countBillableChars(t)).toBe(reference(t));
    }
  });

  it("computes points as ceil(count x price / 10) once per request", () => {
    expect(speechPoints("你好，world 42! 😀", 3)).toBe(3); // ceil(27 / 10)
    expect(speechPoints("Hello, 世界! 123", 7)).toBe(7); // 70 / 10
    expect(speechPoints("مرحبا ٣", 5)).toBe(3); // ceil(30 / 10)
    expect(speechPoints("a", 1)).toBe(1); // ceil(0.1)
    expect(speechPoints("abcdefghijk", 1)).toBe(2); // ceil(1.1), not per-unit rounding
    expect(speechPoints("abcdefghijklmno", 3)).toBe(5); // ceil(4.5)
    expect(speechPoints("!!! 😀", 100)).toBe(0);
    expect(speechPoints("一二三四五六七八九十", 10)).toBe(10);
  });
});

// ---------------------------------------------------------------------------------------------
// Upload, asset registration, custom voices
// ---------------------------------------------------------------------------------------------

describe("UploadUrlRequest", () => {
  const upload = (extra: Record<string, unknown>) => ({
    file_name: "voice.wav",
    content_type: "audio/wav",
    file_size: 1024,
    ...extra,
  });

  it("accepts every type of the table for its extension, extension case-insensitive", () => {
    for (const [ext, types] of Object.entries(UPLOAD_CONTENT_TYPES)) {
      for (const type of types) {
        expectValid(UploadUrlRequest, upload({ file_name: `take${ext}`, content_type: type }));
        expectValid(UploadUrlRequest, upload({ file_name: `TAKE${ext.toUpperCase()}`, content_type: type }));
      }
    }
  });

  it("rejects a content type of another extension, listing the accepted ones", () => {
    expectOnlyIssue(
      UploadUrlRequest,
      upload({ content_type: "audio/mpeg" }),
      ["content_type"],
      'expected one of "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave" for a .wav file, got "audio/mpeg"',
    );
    expectOnlyIssue(
      UploadUrlRequest,
      upload({ file_name: "a.m4a", content_type: "audio/mpeg" }),
      ["content_type"],
      '"audio/mp4", "audio/x-m4a"',
    );
    expectOnlyIssue(
      UploadUrlRequest,
      upload({ content_type: "audio/WAV" }),
      ["content_type"],
      'got "audio/WAV"',
    );
  });

  it("file_name is 1..255 characters with a supported extension", () => {
    expectValid(UploadUrlRequest, upload({ file_name: `${"n".repeat(251)}.wav` }));
    expectOnlyIssue(
      UploadUrlRequest,
      upload({ file_name: `${"n".repeat(252)}.wav` }),
      ["file_name"],
      "expected 1 to 255 characters, got 256",
    );
    expectOnlyIssue(UploadUrlRequest, upload({ file_name: "" }), ["file_name"], "got 0");
    expectIssue(
      UploadUrlRequest,
      upload({ file_name: "voice.aac" }),
      ["file_name"],
      'expected a name ending in .wav, .mp3, .flac, .ogg or .m4a, got "voice.aac"',
    );
    expectIssue(UploadUrlRequest, upload({ file_name: "wav" }), ["file_name"], "expected a name ending in");
  });

  it("file_name has no directory separators or control characters", () => {
    expectOnlyIssue(UploadUrlRequest, upload({ file_name: "dir/voice.wav" }), ["file_name"], 'contains "/"');
    expectOnlyIssue(
      UploadUrlRequest,
      upload({ file_name: "dir\\voice.wav" }),
      ["file_name"],
      'contains "\\\\"',
    );
    expectOnlyIssue(
      UploadUrlRequest,
      upload({ file_name: "voi\nce.wav" }),
      ["file_name"],
      "control character U+000A",
    );
  });

  it("file_size is an integer from 1 to 15728640", () => {
    expectValid(UploadUrlRequest, upload({ file_size: 1 }));
    expectValid(UploadUrlRequest, upload({ file_size: 15728640 }));
    expectOnlyIssue(
      UploadUrlRequest,
      upload({ file_size: 0 }),
      ["file_size"],
      "expected an integer from 1 to 15728640, got 0",
    );
    expectOnlyIssue(UploadUrlRequest, upload({ file_size: 15728641 }), ["file_size"], "got 15728641");
    expectOnlyIssue(UploadUrlRequest, upload({ file_size: 10.5 }), ["file_size"], "got 10.5");
  });

  it("is strict and requires every field", () => {
    expectOnlyIssue(UploadUrlRequest, upload({ bucket: "b" }), [], 'unsupported field "bucket"');
    expectOnlyIssue(UploadUrlRequest, { file_name: "a.ogg", file_size: 3 }, ["content_type"], "is required");
  });
});

describe("AssetRegisterRequest", () => {
  const asset = (extra: Record<string, unknown>) => ({
    object_key: "uploads/abc",
    file_name: "voice.flac",
    content_type: "audio/x-flac",
    file_size: 2048,
    duration_ms: 5000,
    ...extra,
  });

  it("accepts a registration with duration 500..15000 ms", () => {
    expectValid(AssetRegisterRequest, asset({}));
    expectValid(AssetRegisterRequest, asset({ duration_ms: 500 }));
    expectValid(AssetRegisterRequest, asset({ duration_ms: 15000 }));
  });

  it("rejects bad durations, keys and file data", () => {
    expectOnlyIssue(
      AssetRegisterRequest,
      asset({ duration_ms: 499 }),
      ["duration_ms"],
      "expected an integer from 500 to 15000, got 499",
    );
    expectOnlyIssue(AssetRegisterRequest, asset({ duration_ms: 15001 }), ["duration_ms"], "got 15001");
    expectOnlyIssue(AssetRegisterRequest, asset({ duration_ms: 1000.5 }), ["duration_ms"], "got 1000.5");
    expectOnlyIssue(AssetRegisterRequest, asset({ object_key: "" }), ["object_key"], "non-empty");
    expectOnlyIssue(
      AssetRegisterRequest,
      asset({ content_type: "audio/ogg" }),
      ["content_type"],
      'for a .flac file, got "audio/ogg"',
    );
    expectOnlyIssue(AssetRegisterRequest, asset({ file_size: 0 }), ["file_size"], "from 1 to 15728640");
    expectOnlyIssue(AssetRegisterRequest, asset({ public_url: "x" }), [], 'unsupported field "public_url"');
  });
});

describe("CustomVoiceCreateRequest", () => {
  it("needs an asset_id and a 1..64 character name after trimming", () => {
    expectValid(CustomVoiceCreateRequest, { asset_id: "a1", name: ` ${"v".repeat(64)} ` });
    expectOnlyIssue(
      CustomVoiceCreateRequest,
      { asset_id: "a1", name: "v".repeat(65) },
      ["name"],
      "expected 1 to 64 characters after trimming, got 65",
    );
    expectOnlyIssue(CustomVoiceCreateRequest, { asset_id: "a1", name: "  " }, ["name"], "got 0");
    expectOnlyIssue(CustomVoiceCreateRequest, { asset_id: "", name: "v" }, ["asset_id"], "non-empty");
    expectOnlyIssue(CustomVoiceCreateRequest, { asset_id: "a1" }, ["name"], "is required");
    expectOnlyIssue(
      CustomVoiceCreateRequest,
      { asset_id: "a1", name: "v", kind: "custom" },
      [],
      'unsupported field "kind"',
    );
  });
});

// ---------------------------------------------------------------------------------------------
// Idempotency-Key
// ---------------------------------------------------------------------------------------------

describe("parseIdempotencyKey", () => {
  it("trims and accepts 1..128 characters", () => {
    expect(parseIdempotencyKey("  key-1 ", true)).toEqual({ ok: true, key: "key-1" });
    expect(parseIdempotencyKey(` ${"k".repeat(128)} `, true)).toEqual({ ok: true, key: "k".repeat(128) });
  });

  it("is required for speech and custom voice creation", () => {
    for (const value of [undefined, "", "   "]) {
      const result = parseIdempotencyKey(value, true);
      expect(result.ok).toBe(false);
      if (!result.ok) {
        expect(result.issue.path).toEqual(["Idempotency-Key"]);
        expect(result.issue.message).toContain("is required");
      }
    }
  });

  it("a missing or blank key counts as absent when not required", () => {
    expect(parseIdempotencyKey(undefined, false)).toEqual({ ok: true, key: undefined });
    expect(parseIdempotencyKey("  ", false)).toEqual({ ok: true, key: undefined });
  });

  it("over 128 characters is an error either way", () => {
    for (const required of [true, false]) {
      const result = parseIdempotencyKey("k".repeat(129), required);
      expect(result).toEqual({
        ok: false,
        issue: { path: ["Idempotency-Key"], message: "expected 1 to 128 characters after trimming, got 129" },
      });
    }
  });
});

// ---------------------------------------------------------------------------------------------
// List query
// ---------------------------------------------------------------------------------------------

describe("parseSpeechListQuery", () => {
  const parse = (query: string) => parseSpeechListQuery(new URLSearchParams(query));
  const expectQueryIssue = (query: string, path: Array<string | number>, part: string) => {
    const result = parse(query);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.issues).toHaveLength(1);
      expect(result.issues[0]?.path).toEqual(path);
      expect(result.issues[0]?.message).toContain(part);
    }
  };

  it("applies defaults", () => {
    expect(parse("")).toStrictEqual({ ok: true, value: { offset: 0, limit: 20, statuses: [] } });
    expect(parse("offset=&limit=&start_time=0&end_time=0")).toStrictEqual({
      ok: true,
      value: { offset: 0, limit: 20, statuses: [] },
    });
  });

  it("reads every parameter; statuses repeat or use commas", () => {
    expect(
      parse(
        "offset=40&limit=100&task_id=t-1&statuses=queued&statuses=failed,cancelled&start_time=100&end_time=200",
      ),
    ).toStrictEqual({
      ok: true,
      value: {
        offset: 40,
        limit: 100,
        task_id: "t-1",
        statuses: ["queued", "failed", "cancelled"],
        start_time: 100,
        end_time: 200,
      },
    });
    expect(parse("limit=1&statuses=succeeded")).toStrictEqual({
      ok: true,
      value: { offset: 0, limit: 1, statuses: ["succeeded"] },
    });
  });

  it("rejects bad paging", () => {
    expectQueryIssue("limit=0", ["limit"], 'expected an integer from 1 to 100, got "0"');
    expectQueryIssue("limit=101", ["limit"], 'got "101"');
    expectQueryIssue("limit=ten", ["limit"], 'got "ten"');
    expectQueryIssue("offset=-1", ["offset"], 'expected an integer >= 0, got "-1"');
    expectQueryIssue("offset=1.5", ["offset"], 'got "1.5"');
    expectQueryIssue("limit=10&limit=20", ["limit"], "expected a single value");
  });

  it("validates each status", () => {
    expectQueryIssue("statuses=done", ["statuses", 0], 'got "done"');
    expectQueryIssue(
      "statuses=queued,Failed",
      ["statuses", 1],
      '"queued", "generating", "succeeded", "failed", "cancelled", got "Failed"',
    );
  });

  it("time bounds: non-negative integers, 0 unbounded, end >= start", () => {
    expect(parse("start_time=200&end_time=200")).toMatchObject({
      ok: true,
      value: { start_time: 200, end_time: 200 },
    });
    expect(parse("start_time=200&end_time=0")).toStrictEqual({
      ok: true,
      value: { offset: 0, limit: 20, statuses: [], start_time: 200 },
    });
    expectQueryIssue(
      "start_time=200&end_time=100",
      ["end_time"],
      "expected a time >= start_time 200, got 100",
    );
    expectQueryIssue("start_time=-5", ["start_time"], 'got "-5"');
    expectQueryIssue("end_time=soon", ["end_time"], 'non-negative integer; 0 means unbounded), got "soon"');
  });
});

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

describe("response schemas", () => {
  const task = {
    task_id: "t-1",
    type: "text_to_speech",
    input: normalizeSpeechInput(SpeechCreateRequest.parse(base)),
    status: "succeeded",
    attempt: 1,
    max_attempts: 3,
    point_cost: 2,
    point_status: "consumed",
    error_message: "",
    output_url: "https://cdn.example/t-1.wav",
    output_size: 48000,
    created_at: 1700000000,
    started_at: 1700000001,
    finished_at: 1700000009,
  };

  it("SpeechTask parses a task, keeps added fields, accepts an empty point_status", () => {
    const parsed = SpeechTask.parse({ ...task, region: "cn", input: { ...task.input, future: 1 } });
    expect(parsed.status).toBe("succeeded");
    expect((parsed as Record<string, unknown>).region).toBe("cn");
    expect((parsed.input as Record<string, unknown>).future).toBe(1);
    expect(SpeechTask.safeParse({ ...task, point_status: "" }).success).toBe(true);
    expect(SpeechTaskResponse.safeParse({ task }).success).toBe(true);
  });

  it("SpeechTask rejects wrong types and unknown enum values", () => {
    expect(SpeechTask.safeParse({ ...task, status: "done" }).success).toBe(false);
    expect(SpeechTask.safeParse({ ...task, point_status: "refunded" }).success).toBe(false);
    expect(SpeechTask.safeParse({ ...task, type: "video" }).success).toBe(false);
    expect(SpeechTask.safeParse({ ...task, output_size: "48000" }).success).toBe(false);
    const { finished_at: _, ...missing } = task;
    expect(SpeechTask.safeParse(missing).success).toBe(false);
  });

  it("SpeechTaskList status_counts may omit statuses", () => {
    expect(
      SpeechTaskList.safeParse({ items: [task], total: 1, status_counts: { succeeded: 1 } }).success,
    ).toBe(true);
    expect(SpeechTaskList.safeParse({ items: [], total: 0, status_counts: {} }).success).toBe(true);
    expect(SpeechTaskList.safeParse({ items: [], total: 0, status_counts: { queued: "2" } }).success).toBe(
      false,
    );
    expect(SpeechTaskList.safeParse({ items: [], total: 0 }).success).toBe(false);
  });

  it("small responses", () => {
    expect(SpeechCreateResponse.safeParse({ task_id: "t-1" }).success).toBe(true);
    expect(SpeechCreateResponse.safeParse({}).success).toBe(false);
    expect(SpeechCancelResponse.safeParse({ task_id: "t-1", status: "cancelled" }).success).toBe(true);
    expect(SpeechCancelResponse.safeParse({ task_id: "t-1", status: "queued" }).success).toBe(false);
    expect(SpeechDeleteResponse.safeParse({ task_id: "t-1", deleted: true }).success).toBe(true);
    expect(SpeechDeleteResponse.safeParse({ task_id: "t-1", deleted: false }).success).toBe(false);
    expect(VoiceDeleteResponse.safeParse({ voice_id: "v", deleted: true }).success).toBe(true);
    expect(VoiceDeleteResponse.safeParse({ voice_id: "v" }).success).toBe(false);
  });

  const voice = {
    voice_id: "v-1",
    kind: "preset",
    name: "Warm",
    style_tags: [],
    audio_url: "https://cdn.example/v-1.wav",
    created_at: 1700000000,
  };

  it("Voice: unset optional fields may be omitted", () => {
    expect(Voice.safeParse(voice).success).toBe(true);
    expect(
      Voice.safeParse({
        ...voice,
        description: "d",
        language: "ZH",
        voice_type: "t",
        sample_text: "s",
        extra: 1,
      }).success,
    ).toBe(true);
    expect(Voice.safeParse({ ...voice, kind: "asset" }).success).toBe(false);
    const { style_tags: _, ...noTags } = voice;
    expect(Voice.safeParse(noTags).success).toBe(false);
    expect(VoiceList.safeParse({ items: [voice], total: 1 }).success).toBe(true);
    expect(VoiceResponse.safeParse({ voice: { ...voice, kind: "custom" } }).success).toBe(true);
  });

  it("UploadTicket, Asset, Pricing", () => {
    const ticket = {
      object_key: "k",
      upload_url: "https://s3.example/k?sig=1",
      public_url: "https://s3.example/k",
      authorization: "",
      bucket: "b",
      region: "r",
      expires_at: 1700000900,
    };
    expect(UploadTicket.safeParse(ticket).success).toBe(true);
    expect(UploadTicket.safeParse({ ...ticket, expires_at: "soon" }).success).toBe(false);

    const asset = {
      asset_id: "a-1",
      purpose: "speech_reference",
      file_name: "v.wav",
      content_type: "audio/wav",
      file_size: 10,
      duration_ms: 3000,
      public_url: "https://s3.example/a-1",
      created_at: 1700000000,
    };
    expect(AssetResponse.safeParse({ asset }).success).toBe(true);
    expect(Asset.safeParse({ ...asset, purpose: "other" }).success).toBe(false);

    const pricing = {
      enabled: true,
      pricing_version: 2,
      unit_characters: 10,
      costs: { text_to_speech: 3 },
      balance: { total_points: 100, reserved_points: 10, available_points: 90 },
    };
    expect(Pricing.parse(pricing).costs.text_to_speech).toBe(3);
    expect(
      Pricing.safeParse({ ...pricing, balance: { total_points: 100, reserved_points: 10 } }).success,
    ).toBe(false);
    expect(Pricing.safeParse({ ...pricing, enabled: "yes" }).success).toBe(false);
  });
});
