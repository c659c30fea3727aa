// The bad half of the fixture corpus: every rule of both specs that the manifest checker enforces,
// one fixture per rule (or group), each with the exact list of `file:line: field` it must report,
// a recognisable part of each message, and the jobs the rows without errors still make.
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { main } from "../../src/cli/main.js";
import { loadManifest, type Problem } from "../../src/manifest/index.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { type Staged, stageFixtures } from "../fixtures/manifests/stage.js";
import { call, KEY, sandbox } from "../helpers/sandbox.js";

/** `[file:line: field, part of the message]`; a problem without a field is `file:line`. */
type Expected = readonly [string, string];

interface Case {
  file: string;
  rule: string;
  errors: readonly Expected[];
  warnings?: readonly Expected[];
  /** Jobs of the rows that are right (a row with an error makes none). */
  jobs: readonly string[];
}

const CASES: readonly Case[] = [
  {
    file: "bad/duration.yaml",
    rule: "duration is an integer from 4 to 30",
    errors: [
      ["bad/duration.yaml:6: duration", "expected an integer from 4 to 30, got 31"],
      ["bad/duration.yaml:9: duration", "expected an integer from 4 to 30, got 3"],
      ["bad/duration.yaml:12: duration", "expected an integer or auto, got 5.5"],
    ],
    jobs: ["shot/s04", "shot/s05"],
  },
  {
    file: "bad/resolution.yaml",
    rule: "resolution is case-sensitive; 1080p suggests 1080P",
    errors: [
      [
        "bad/resolution.yaml:7: resolution",
        'got "1080p" (did you mean "1080P"? the service would silently render "1080p" as 768P)',
      ],
      ["bad/resolution.yaml:10: resolution", 'got "4k" (did you mean "4K"?'],
      [
        "bad/resolution.yaml:13: resolution",
        'expected one of 480P, 768P, 1080P, 2K, 4K (case-sensitive), got "720P"',
      ],
    ],
    jobs: ["shot/s04"],
  },
  {
    file: "bad/ratio-model.yaml",
    rule: "ratio and model are one of the service's values",
    errors: [
      ["bad/ratio-model.yaml:6: ratio", 'got "16/9" (did you mean "16:9"?)'],
      ["bad/ratio-model.yaml:9: ratio", 'got "16:10"'],
      [
        "bad/ratio-model.yaml:12: model",
        'expected one of "Vid-H3", "vid-h3-lite", got "vid-h3" (did you mean "Vid-H3"?)',
      ],
      ["bad/ratio-model.yaml:15: model", 'got "Vid-H4"'],
    ],
    jobs: [],
  },
  {
    file: "bad/prompt-length.yaml",
    rule: "video text is at most 7000 characters, joined with line feeds",
    errors: [
      [
        "bad/prompt-length.yaml:5: prompt",
        "expected at most 7000 characters in all text elements joined with line feeds, got 7001",
      ],
    ],
    jobs: ["shot/s02"],
  },
  {
    file: "bad/content.yaml",
    rule: "content rules: reference counts and total, audio not alone, frames not mixed, one frame each, text",
    errors: [
      ["bad/content.yaml:18: reference_images[9]", "expected at most 9 reference images, got 10"],
      ["bad/content.yaml:21: reference_videos[3]", "expected at most 3 reference videos, got 4"],
      ["bad/content.yaml:25: reference_audios[3]", "expected at most 3 reference audios, got 4"],
      ["bad/content.yaml:39: reference_audios[0]", "expected at most 12 reference items in total, got 13"],
      ["bad/content.yaml:42: reference_audios[0]", "a reference audio cannot be used alone"],
      [
        "bad/content.yaml:45: first_frame",
        "a first frame cannot be mixed with reference images, videos or audios (reference_images[0] is a reference image)",
      ],
      [
        "bad/content.yaml:49: last_frame",
        "a last frame cannot be mixed with reference images, videos or audios (reference_videos[0] is a reference video)",
      ],
      [
        "bad/content.yaml:53: first_frame",
        "expected one image (at most 1 frame of each kind per request), got 2",
      ],
      [
        "bad/content.yaml:54: prompt",
        "is required: a prompt or a template, unless frames or reference materials are given",
      ],
      ["bad/content.yaml:57: prompt", "expected a non-empty text for text-to-video"],
    ],
    jobs: [],
  },
  {
    file: "bad/skill.yaml",
    rule: "skill requires use_context_ir: true",
    errors: [
      ["bad/skill.yaml:8: skill", "requires use_context_ir: true"],
      ["bad/skill.yaml:11: skill", "requires use_context_ir: true"],
    ],
    jobs: ["shot/s03"],
  },
  {
    file: "bad/speech-text.yaml",
    rule: "speech text: at most 2000 characters, not only punctuation, required",
    errors: [
      ["bad/speech-text.yaml:7: text", "expected at most 2000 characters, got 2001"],
      ["bad/speech-text.yaml:9: text", 'got "..." (only whitespace, punctuation or symbols)'],
      ["bad/speech-text.yaml:11: text", "(only whitespace, punctuation or symbols)"],
      ["bad/speech-text.yaml:12: text", "is required"],
      ["bad/speech-text.yaml:13: shot", 'no shot "s01"'],
    ],
    jobs: ["line/n05"],
  },
  {
    file: "bad/speech-options.yaml",
    rule: "language (case-sensitive), speed, emotion_strength, emotion_description",
    errors: [
      ["bad/speech-options.yaml:9: language", 'got "en" (did you mean "EN"?)'],
      ["bad/speech-options.yaml:12: language", 'expected one of "ZH", "EN", "JA", "ES", "AR", got "FR"'],
      ["bad/speech-options.yaml:15: speed", "expected 0 (meaning 1.0) or a number from 0.5 to 2.0, got 0.4"],
      ["bad/speech-options.yaml:18: speed", "got 2.5"],
      ["bad/speech-options.yaml:21: emotion_strength", "expected a number from 0 to 1, got 1.5"],
      ["bad/speech-options.yaml:24: emotion_description", "expected at most 200 characters, got 201"],
    ],
    jobs: ["line/n07"],
  },
  {
    file: "bad/emotion.yaml",
    rule: "emotion vector rules and emotion_vector_mode",
    errors: [
      ["bad/emotion.yaml:11: emotion_vector", "expected exactly 8 elements"],
      ["bad/emotion.yaml:15: emotion_vector[0]", "expected a number from 0 to 0.8, got 0.9"],
      [
        "bad/emotion.yaml:19: emotion_vector",
        "expected the elements to sum to more than 0 and at most 0.8, got 0.9",
      ],
      ["bad/emotion.yaml:23: emotion_vector", "sum to more than 0 and at most 0.8, got 0"],
      ["bad/emotion.yaml:24: auto_emotion", "must be sent as false when emotion_vector is given"],
      ["bad/emotion.yaml:30: emotion_description", "must be omitted or empty when emotion_vector is given"],
      ["bad/emotion.yaml:34: emotion_vector_mode", "is only allowed together with emotion_vector"],
      [
        "bad/emotion.yaml:39: emotion_vector_mode",
        '"single" requires exactly one non-zero element in emotion_vector, got 2',
      ],
      ["bad/emotion.yaml:44: emotion_vector_mode", 'got "Single" (did you mean "single"?)'],
    ],
    jobs: ["line/n10"],
  },
  {
    file: "bad/pronunciations.yaml",
    rule: "pronunciation rules: pinyin syllables and tones, cmu, kana, forbidden characters, unique, in text",
    errors: [
      [
        "bad/pronunciations.yaml:11: pronunciations[0].value",
        'expected 2 pinyin syllables separated by spaces (one per Han character of "灯塔"), found 1',
      ],
      [
        "bad/pronunciations.yaml:12: pronunciations[1].value",
        'expected every syllable to carry a tone (a digit 1-5 like "zhong1" or a tone mark like "zhōng"), got "liang", "le"',
      ],
      [
        "bad/pronunciations.yaml:13: pronunciations[2].word",
        'expected only Han characters for kind "pinyin", got "Maren"',
      ],
      [
        "bad/pronunciations.yaml:18: pronunciations[0].value",
        'expected CMU/ARPAbet phonemes separated by spaces (e.g. "T AH0 M EY1 T OW2"), got unknown "XX"',
      ],
      [
        "bad/pronunciations.yaml:19: pronunciations[1].value",
        'must not contain control characters or "<", ">", "|"',
      ],
      ["bad/pronunciations.yaml:20: pronunciations[2].value", "(contains control character U+0007)"],
      [
        "bad/pronunciations.yaml:21: pronunciations[3].word",
        'must be unique within the request, got "Tomato" again',
      ],
      ["bad/pronunciations.yaml:22: pronunciations[4].word", 'must occur in text, got "lighthouse"'],
      ["bad/pronunciations.yaml:23: pronunciations[5].kind", 'got "Alias" (did you mean "alias"?)'],
      [
        "bad/pronunciations.yaml:28: pronunciations[0].value",
        'expected only hiragana or katakana, got "tokyo"',
      ],
      ["bad/pronunciations.yaml:31: pronunciations[1].value", '(contains "|")'],
      ["bad/pronunciations.yaml:31: pronunciations[1].value", '"|" is not kana'],
    ],
    jobs: [],
  },
  {
    file: "bad/voice.yaml",
    rule: "voices and save_voice_as",
    errors: [
      [
        "bad/voice.yaml:10: save_voice_as",
        "only a reference audio file voice can be saved as a custom voice",
      ],
      ["bad/voice.yaml:14: save_voice_as", "expected 1 to 64 characters after trimming, got 0"],
      ["bad/voice.yaml:17: voice", '(did you mean "preset:en_male_deep"?)'],
      ["bad/voice.yaml:20: voice", 'got "Preset:en_male_deep" (did you mean "preset:en_male_deep"?)'],
      ["bad/voice.yaml:23: voice", "../materials/nobody.wav: file not found"],
      [
        "bad/voice.yaml:26: voice",
        "../materials/short.wav: expected a duration from 0.5 to 15 s, got 0.20 s",
      ],
      [
        "bad/voice.yaml:29: voice",
        "../materials/big.wav: expected a size from 1 to 15728640 bytes (15 MiB), got 15728641",
      ],
      [
        "bad/voice.yaml:32: voice",
        '../materials/frame.png: expected a .wav, .mp3, .flac, .ogg, .m4a file, got "frame.png"',
      ],
      ["bad/voice.yaml:33: voice", "is required: preset:ID, custom:ID or a reference audio file"],
      ["bad/voice.yaml:37: voice", 'expected custom:VOICE_ID, got "custom:"'],
    ],
    jobs: [],
  },
  {
    file: "bad/materials.yaml",
    rule: "materials exist locally, are not empty, are under the limits; URLs public; s3 URIs well-formed",
    errors: [
      ["bad/materials.yaml:7: first_frame", "file not found: ../materials/nowhere.png"],
      ["bad/materials.yaml:10: last_frame", "../materials/empty.png is empty"],
      [
        "bad/materials.yaml:13: reference_images[0]",
        "../materials/big.png is 31457281 bytes, over the image limit of 30 MiB",
      ],
      [
        "bad/materials.yaml:14: reference_videos[0]",
        "../materials/big.mp4 is 52428801 bytes, over the video limit of 50 MiB",
      ],
      [
        "bad/materials.yaml:15: reference_audios[0]",
        "../materials/big.wav is 15728641 bytes, over the audio limit of 15 MiB",
      ],
      [
        "bad/materials.yaml:19: reference_images[0]",
        'expected a local path, an https URL or an s3:// URI, got "ftp://example.com/a.png"',
      ],
      [
        "bad/materials.yaml:20: reference_images[1]",
        "expected a public host, got 127.0.0.1, which is a loopback address",
      ],
      ["bad/materials.yaml:21: reference_images[2]", "expected a public host, got localhost"],
      ["bad/materials.yaml:22: reference_images[3]", "must not contain user information"],
      [
        "bad/materials.yaml:23: reference_images[4]",
        'expected s3://bucket/key (a bucket name of 3 to 63 lowercase letters, digits, "." or "-"), got "s3://Not_A_Bucket/e.png"',
      ],
      ["bad/materials.yaml:24: reference_images[5]", "../materials is not a file"],
    ],
    // Labels are checked only on rows whose materials are all right.
    warnings: [
      ["bad/materials.yaml:26: prompt", "<Picture 1> refers to reference image 1, but the request sends 0"],
    ],
    jobs: ["shot/s05"],
  },
  {
    file: "bad/labels.yaml",
    rule: "<Picture N>/<Video N>/<Audio N> past the materials sent, and adaptive with no image, are warnings",
    errors: [],
    warnings: [
      [
        "bad/labels.yaml:6: prompt",
        "<Picture 2> refers to reference image 2, but the request sends 1 reference images",
      ],
      [
        "bad/labels.yaml:9: prompt",
        "<Video 1> refers to video 1, but the request sends 0 video_url elements",
      ],
      [
        "bad/labels.yaml:9: prompt",
        "<Audio 2> refers to audio 2, but the request sends 1 audio_url elements",
      ],
      [
        "bad/labels.yaml:13: prompt",
        "<Picture 1> refers to reference image 1, but the request sends 0 reference images",
      ],
      [
        "bad/labels.yaml:16: prompt",
        '"<picture 1>" is not converted to a label: expected exactly "<Picture 1>"',
      ],
      ["bad/labels.yaml:20: ratio", "with no image the video is 16:9"],
    ],
    jobs: ["shot/s01", "shot/s02", "shot/s03", "shot/s04", "shot/s05"],
  },
  {
    file: "bad/duplicates.yaml",
    rule: "ids are unique among shots and among lines (numbers included); the duplicate row is still checked",
    errors: [
      ["bad/duplicates.yaml:8: id", 'duplicate shot id "s01" (first at bad/duplicates.yaml:6)'],
      ["bad/duplicates.yaml:12: id", 'duplicate shot id "7" (first at bad/duplicates.yaml:10)'],
      ["bad/duplicates.yaml:19: id", 'duplicate line id "n01" (first at bad/duplicates.yaml:17)'],
      ["bad/duplicates.yaml:21: language", 'got "english"'],
    ],
    jobs: ["shot/s01", "shot/7", "line/s01", "line/n01"],
  },
  {
    file: "bad/ids.yaml",
    rule: "ids are required and well-formed (they name jobs, folders and keys)",
    errors: [
      ["bad/ids.yaml:6: id", 'expected letters, digits, ".", "_" or "-" (at most 64), got "s/01"'],
      ["bad/ids.yaml:8: id", 'got "shot one"'],
      ["bad/ids.yaml:10: id", "is required"],
      ["bad/ids.yaml:11: id", "(at most 64)"],
      ["bad/ids.yaml:16: id", "is required"],
    ],
    jobs: ["shot/s.02_final-v2"],
  },
  {
    file: "bad/unknown.yaml",
    rule: "unknown fields anywhere, with a did-you-mean",
    errors: [
      ["bad/unknown.yaml:3: budjet", 'unknown field (did you mean "budget"?)'],
      ["bad/unknown.yaml:4: budget.max_point", "unknown field (known: max_points, pool)"],
      ["bad/unknown.yaml:6: defaults.shots", 'unknown field (did you mean "shot"?)'],
      ["bad/unknown.yaml:7: resolutoin", 'unknown shot field (did you mean "resolution"?)'],
      ["bad/unknown.yaml:7: id", "an id cannot be a default"],
      ["bad/unknown.yaml:10: promt", 'unknown shot field (did you mean "prompt"?)'],
      ["bad/unknown.yaml:14: voice", "unknown shot field (voice is a line field)"],
      ["bad/unknown.yaml:19: emotion_vectr", 'unknown line field (did you mean "emotion_vector"?)'],
      ["bad/unknown.yaml:20: zzzz", "unknown line field; known fields: id, text, template"],
    ],
    jobs: [],
  },
  {
    file: "bad/unknown-columns.csv",
    rule: "unknown CSV columns are reported at the header, with a did-you-mean",
    errors: [
      ["bad/unknown-columns.csv:1: promt", 'unknown column: no such field (did you mean "prompt"?)'],
      ["bad/unknown-columns.csv:1: durration", 'unknown column: no such field (did you mean "duration"?)'],
      ["bad/unknown-columns.csv:1: xyzzy", "unknown column: no such field"],
      ["bad/unknown-columns.csv:2: prompt", "is required"],
    ],
    jobs: ["line/n01"],
  },
  {
    file: "bad/missing-shot.yaml",
    rule: "a line's shot names a shot of the manifest",
    errors: [
      ["bad/missing-shot.yaml:10: shot", 'no shot "harbor" (did you mean "harbour"?)'],
      ["bad/missing-shot.yaml:13: shot", 'no shot "s99"'],
    ],
    jobs: ["shot/harbour"],
  },
  {
    file: "bad/templates.yaml",
    rule: "templates: a missing variable, an unknown template, prompt and template both",
    errors: [
      ["bad/templates.yaml:10: template", 'template "establishing" uses "camera", which is not defined'],
      ["bad/templates.yaml:13: template", 'no template "no-such-template" in the templates folder'],
      ["bad/templates.yaml:15: template", "set either prompt or template, not both"],
      ["bad/templates.yaml:20: template", 'template "narration" uses "memory", which is not defined'],
      // The rest of a row whose template failed is still checked.
      ["bad/templates.yaml:22: language", 'got "english"'],
    ],
    jobs: [],
  },
  {
    file: "bad/syntax.yaml",
    rule: "a YAML syntax error is reported with its line",
    errors: [["bad/syntax.yaml:5", 'YAML: Missing closing "quote opened on this line']],
    jobs: [],
  },
  {
    file: "bad/syntax2.yaml",
    rule: "a duplicate YAML key is a syntax error",
    errors: [["bad/syntax2.yaml:6", "YAML: Map keys must be unique"]],
    jobs: [],
  },
  {
    file: "bad/columns.yaml",
    rule: "CSV rows with too many cells; a CSV file that does not exist",
    errors: [
      ["bad/csv/columns.csv:2", "expected 3 columns, got 4"],
      ["bad/csv/columns.csv:4: duration", 'expected an integer or auto, got "not quoted"'],
      ["bad/csv/columns.csv:7: duration", "expected an integer from 4 to 30, got 31"],
      ["bad/columns.yaml:6: lines", "csv/nowhere.csv: file not found"],
    ],
    jobs: ["shot/s02", "shot/s04"],
  },
  {
    file: "bad/csv-lines.yaml",
    rule: "lines from CSV: errors name the CSV file and the line where the row starts",
    errors: [
      ["bad/csv/lines.csv:4: id", 'duplicate line id "n01" (first at bad/csv/lines.csv:2)'],
      ["bad/csv/lines.csv:5: shot", 'no shot "s02"'],
      ["bad/csv/lines.csv:6: template", 'template "narration" uses "memory", which is not defined'],
      ["bad/csv/lines.csv:7: voice", "../materials/nobody.wav: file not found"],
      ["bad/csv/lines.csv:8: emotion_vector", "expected exactly 8 elements"],
      ["bad/csv/lines.csv:9: pronunciations[0].kind", 'got "kind"'],
      ["bad/csv/lines.csv:9: pronunciations[1].kind", 'got "Alias" (did you mean "alias"?)'],
      ["bad/csv/lines.csv:10: pronunciations[0].value", "expected 2 pinyin syllables"],
    ],
    jobs: ["shot/s01", "line/n01"],
  },
  {
    file: "bad/bare-kind.csv",
    rule: "a bare CSV manifest needs kind shot or line on every row",
    errors: [
      ["bad/bare-kind.csv:3: kind", 'is required in a bare CSV manifest ("shot" or "line")'],
      ["bad/bare-kind.csv:4: kind", 'expected "shot" or "line", got "scene"'],
      ["bad/bare-kind.csv:5: kind", 'expected "shot" or "line", got "Shot"'],
    ],
    jobs: ["shot/s01", "line/n01"],
  },
  {
    file: "bad/takes.yaml",
    rule: "takes is an integer from 1 to 20",
    errors: [
      ["bad/takes.yaml:6: takes", "expected an integer from 1 to 20, got 0"],
      ["bad/takes.yaml:9: takes", "expected an integer from 1 to 20, got 21"],
      ["bad/takes.yaml:12: takes", 'expected an integer, got "two"'],
    ],
    jobs: [],
  },
  {
    file: "bad/types.csv",
    rule: "CSV cells that cannot be read as their field's type",
    errors: [
      ["bad/types.csv:2: duration", 'expected an integer or auto, got "5s"'],
      ["bad/types.csv:2: use_context_ir", 'expected true or false, got "maybe"'],
      ["bad/types.csv:3: speed", 'expected a number, got "fast"'],
      ["bad/types.csv:3: emotion_vector", "expected a list of numbers separated by |"],
      ["bad/types.csv:3: pronunciations", "expected word=kind:value items separated by |"],
    ],
    jobs: [],
  },
  {
    file: "bad/top.yaml",
    rule: "manifest-level fields",
    errors: [
      ["bad/top.yaml:2: name", 'got "my run!"'],
      ["bad/top.yaml:3: output", "expected a folder or s3:// URI, got 5"],
      ["bad/top.yaml:4: budget.max_points", "expected a whole number of points >= 0, got -1"],
      ["bad/top.yaml:5: vars", "expected a mapping of name: value"],
      ["bad/top.yaml:7: skills.noir", "file not found: ../skills/nowhere.md"],
      ["bad/top.yaml:8: templates", 'expected a folder, got ["a"]'],
    ],
    jobs: ["shot/s01"],
  },
  {
    file: "bad/anchors.yaml",
    rule: "a value shared through a YAML anchor is reported once, at the anchor; a merge key names a mapping",
    errors: [
      ["bad/anchors.yaml:5: resolution", '(did you mean "1080P"?'],
      ["bad/anchors.yaml:15: <<", "expected an alias of a mapping (<<: *name)"],
    ],
    jobs: [],
  },
  {
    file: "bad/defaults.yaml",
    rule: "a wrong default is reported once, at the defaults, and no row that inherits it makes a job",
    errors: [
      ["bad/defaults.yaml:4: resolution", '(did you mean "1080P"?'],
      ["bad/defaults.yaml:4: duration", "expected an integer from 4 to 30, got 31"],
      ["bad/defaults.yaml:5: language", '(did you mean "EN"?)'],
    ],
    jobs: ["shot/s03"],
  },
  {
    file: "bad/outputs.yaml",
    rule: "each job writes its own output file, also on case-insensitive file systems",
    errors: [
      [
        "bad/outputs.yaml:7: id",
        "shot/s01-take-2 would write shots/s01-take-2.mp4, as shot/s01/take-2 (bad/outputs.yaml:4) does",
      ],
      [
        "bad/outputs.yaml:11: id",
        "which differs only by case from shots/Harbour.mp4 of shot/Harbour (bad/outputs.yaml:9)",
      ],
    ],
    jobs: ["shot/s01/take-1", "shot/s01/take-2", "shot/Harbour", "shot/s02"],
  },
  {
    file: "bad/inline.yaml",
    rule: "inline prompt and text are filled strictly from vars; a skill name is not blank",
    errors: [
      ["bad/inline.yaml:8: prompt", 'uses "hour", which is not defined'],
      ["bad/inline.yaml:10: prompt", '"{{ not a name }}" is not a placeholder'],
      ["bad/inline.yaml:14: skill", 'expected the name of a skill, got " "'],
      ["bad/inline.yaml:19: text", 'uses "speaker", which is not defined'],
    ],
    jobs: ["shot/s04", "line/n02"],
  },
];

const prefix = (p: Problem) => `${p.file}${p.line > 0 ? `:${p.line}` : ""}${p.field ? `: ${p.field}` : ""}`;

let staged: Staged;
beforeAll(async () => {
  staged = await stageFixtures();
});
afterAll(() => staged?.remove());

describe("bad manifests: each rule names file, line and field", () => {
  it.each(CASES.map((c) => [c.file, c] as const))("%s", async (_, c) => {
    const result = await loadManifest(c.file, { cwd: staged.root, speechPrice: 2 });
    expect(result.errors.map(prefix), c.rule).toEqual(c.errors.map(([where]) => where));
    result.errors.forEach((p, i) => {
      expect(p.severity).toBe("error");
      expect(p.message).toContain(c.errors[i]?.[1]);
    });
    const warnings = c.warnings ?? [];
    expect(result.warnings.map(prefix)).toEqual(warnings.map(([where]) => where));
    result.warnings.forEach((p, i) => {
      expect(p.severity).toBe("warning");
      expect(p.message).toContain(warnings[i]?.[1]);
    });
    expect(result.jobs.map((j) => j.id)).toEqual(c.jobs);
  });

  it("covers every bad fixture in the corpus", async () => {
    const { readdir } = await import("node:fs/promises");
    const files = (await readdir(staged.path("bad")))
      .filter((f) => /\.(ya?ml|csv)$/.test(f))
      .map((f) => `bad/${f}`);
    expect(files.sort()).toEqual(CASES.map((c) => c.file).sort());
  });
});

describe("clapper plan on bad manifests, against a sandbox", () => {
  let sb: Sandbox;
  const env = () => ({ CLAPPER_BASE_URL: sb.url, CLAPPER_API_KEY: KEY, CLAPPER_LOG_LEVEL: "silent" });

  beforeAll(async () => {
    sb = await sandbox();
  });
  afterAll(() => sb?.close());

  it.each(CASES.filter((c) => c.errors.length > 0).map((c) => [c.file, c] as const))(
    "%s: exit code 2, all errors at once",
    async (_, c) => {
      const out: string[] = [];
      const code = await main(["plan", staged.path(c.file), "--json"], {
        env: env(),
        stdout: (t) => out.push(t),
      });
      expect(code).toBe(2);
      // Paths print relative to the working directory (the repository), so the staged copy is absolute.
      const printed = JSON.parse(out.join("\n").replaceAll(`${staged.root}/`, "")) as { errors: string[] };
      expect(printed.errors).toHaveLength(c.errors.length);
      printed.errors.forEach((line, i) => {
        const [where, part] = c.errors[i] ?? ["", ""];
        expect(line.startsWith(`${where}: `)).toBe(true);
        expect(line).toContain(part);
      });
    },
  );

  it("prints errors and warnings separately on stderr, and no plan, in human mode", async () => {
    const err: string[] = [];
    // Whatever reaches the process's stderr (a logger, say) is kept out of the test output too.
    const spy = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const out: string[] = [];
    try {
      const code = await main(["plan", staged.path("bad/materials.yaml")], {
        env: env(),
        stdout: (t) => out.push(t),
        stderr: (t) => err.push(`${t}\n`),
      });
      expect(code).toBe(2);
    } finally {
      spy.mockRestore();
    }
    const text = err.join("");
    expect(out.join("\n")).not.toContain("plan for");
    expect(text).toMatch(/^11 errors:\n/m);
    expect(text).toMatch(/^1 warning:\n/m);
    expect(text.indexOf("11 errors:")).toBeLessThan(text.indexOf("1 warning:"));
    expect(text).toContain("materials.yaml:7: first_frame: file not found: ../materials/nowhere.png");
  });

  it("exits 0 with warnings only", async () => {
    const out: string[] = [];
    const code = await main(["plan", staged.path("bad/labels.yaml"), "--json"], {
      env: env(),
      stdout: (t) => out.push(t),
    });
    expect(code).toBe(0);
    const printed = JSON.parse(out.join("\n"));
    expect(printed.errors).toEqual([]);
    expect(printed.warnings).toHaveLength(6);
    expect(printed.jobs).toHaveLength(5);
  });

  // Last in this block: every plan above talked to this sandbox.
  it("created no task and sent no POST request at all", async () => {
    const stats = (await call(sb.url, "GET", "/_sandbox/stats")).body as {
      requests: Record<string, number>;
      tasks_created: { video: number; speech: number };
    };
    expect(stats.tasks_created).toEqual({ video: 0, speech: 0 });
    const routes = Object.keys(stats.requests);
    // The plans did ask the service (pricing, balance, voices), so an empty list would prove nothing.
    expect(routes.some((r) => r.includes("/audio/v1/pricing"))).toBe(true);
    expect(routes.filter((r) => !r.startsWith("GET"))).toEqual([]);
  });
});
