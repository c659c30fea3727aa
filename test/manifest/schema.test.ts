// The manifest's JSON Schema (src/manifest/schema.ts), judged by a real validator (ajv, draft-07,
// strict) and against clapper's own reader: the shipped file is what the generator makes now; it
// accepts every manifest clapper accepts (the examples, the starter of `clapper init`, the good
// fixtures, and one-field variations that the reader accepts); it refuses what clapper refuses
// where a schema can judge, and the cases it cannot judge are listed and shown to pass it.
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { starterManifest } from "../../src/cli/commands/init/index.js";
import { manifestSchema, manifestSchemaText } from "../../src/manifest/schema.js";
import { type Workspace, workspace } from "./workspace.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SCHEMA_FILE = join(ROOT, "schema/manifest.schema.json");
const FIXTURES = join(ROOT, "test/fixtures/manifests");

let validate: ValidateFunction;
let ws: Workspace;
beforeAll(async () => {
  // Strict: a keyword draft-07 does not know, or one that cannot apply, is an error, not a no-op.
  const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
  validate = ajv.compile(JSON.parse(await readFile(SCHEMA_FILE, "utf8")));
  ws = await workspace("clapper-schema-");
});
afterAll(() => ws?.remove());

/** A YAML manifest as clapper reads it (merge keys merged), checked against the schema. */
function check(yamlText: string): ErrorObject[] {
  const value = merged(parse(yamlText, { maxAliasCount: 1000 }));
  return validate(value) ? [] : [...(validate.errors ?? [])];
}

/**
 * `<<: *anchor` merged under a mapping's own keys, as clapper reads rows. A merge of something
 * other than a mapping stays a `<<` key (clapper refuses it; yaml's own merge would throw).
 */
function merged(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(merged);
  if (value === null || typeof value !== "object") return value;
  const { "<<": merge, ...own } = value as Record<string, unknown>;
  const sources = (Array.isArray(merge) ? merge : [merge]).filter(
    (s): s is object => s !== null && typeof s === "object" && !Array.isArray(s),
  );
  const out: Record<string, unknown> = {};
  if (merge !== undefined && sources.length === 0) out["<<"] = merge;
  for (const source of sources.reverse()) Object.assign(out, merged(source));
  for (const [k, v] of Object.entries(own)) out[k] = merged(v);
  return out;
}

const paths = (errors: ErrorObject[]) => errors.map((e) => `${e.instancePath} ${e.message}`);

describe("the shipped schema", () => {
  it("is what the generator makes now (run `npm run schema` after changing a field)", async () => {
    expect(await readFile(SCHEMA_FILE, "utf8")).toBe(manifestSchemaText());
  });

  it("is draft-07, and describes every field of shots and lines, with defaults where there are some", () => {
    const schema = manifestSchema() as any;
    expect(schema.$schema).toBe("http://json-schema.org/draft-07/schema#");
    for (const kind of ["shot", "line"]) {
      const fields = schema.definitions[kind].properties as Record<string, { description?: string }>;
      for (const [name, field] of Object.entries(fields)) expect(field.description, name).toMatch(/\S/);
    }
    expect(schema.definitions.shot.properties.duration.default).toBe(5);
    expect(schema.definitions.shot.properties.resolution.default).toBe("768P");
    expect(schema.definitions.line.properties.language.enum).toEqual(["ZH", "EN", "JA", "ES", "AR"]);
    expect(schema.properties.timing.properties.gap.default).toBe(0.25);
  });
});

describe("manifests clapper accepts pass it", () => {
  it("every example manifest in jobs/ names the schema on its first line and passes", async () => {
    const files = (await readdir(join(ROOT, "jobs"))).filter((f) => /\.ya?ml$/.test(f));
    expect(files.length).toBeGreaterThan(0);
    for (const file of files) {
      const text = await readFile(join(ROOT, "jobs", file), "utf8");
      expect(text.split("\n")[0], file).toBe(
        "# yaml-language-server: $schema=../schema/manifest.schema.json",
      );
      expect(paths(check(text)), file).toEqual([]);
    }
  });

  it("the starter that clapper init writes passes", () => {
    expect(paths(check(starterManifest("my-film")))).toEqual([]);
  });

  it("every YAML manifest of test/fixtures/manifests/good passes", async () => {
    const files = (await readdir(join(FIXTURES, "good"))).filter((f) => f.endsWith(".yaml"));
    expect(files.length).toBeGreaterThan(3);
    for (const file of files) {
      expect(paths(check(await readFile(join(FIXTURES, "good", file), "utf8"))), file).toEqual([]);
    }
  });
});

describe("what it refuses", () => {
  const demo = async () => parse(await readFile(join(ROOT, "jobs/demo.yaml"), "utf8")) as any;
  const refused = async (change: (m: any) => void) => {
    const m = await demo();
    change(m);
    return paths(check(stringify(m)));
  };

  it("an unknown shot field", async () => {
    expect(await refused((m) => (m.shots[0].promt = "typo"))).toContain(
      "/shots/0 must NOT have additional properties",
    );
  });

  it("duration: 31 (and 3, 5.5, a quoted 5), but not 30, 4 or auto", async () => {
    for (const d of [31, 3, 5.5, "5"]) {
      expect(await refused((m) => (m.shots[1].duration = d)), String(d)).toContain(
        "/shots/1/duration must match a schema in anyOf",
      );
    }
    for (const d of [30, 4, "auto", " Auto "])
      expect(await refused((m) => (m.shots[1].duration = d))).toEqual([]);
  });

  it('ratio: "5:4"', async () => {
    expect(await refused((m) => (m.defaults.shot.ratio = "5:4"))).toContain(
      "/defaults/shot/ratio must be equal to one of the allowed values",
    );
  });

  it("a resolution that is not one of the five, case-sensitive", async () => {
    for (const r of ["1080p", "720P", "4k"]) {
      expect(await refused((m) => (m.shots[1].resolution = r)), r).toContain(
        "/shots/1/resolution must be equal to one of the allowed values",
      );
    }
  });
});

// One field changed in a small manifest, judged by clapper's reader and by the schema. They agree,
// except where the schema cannot judge (`schema: "cannot judge"`): then clapper refuses and the
// schema lets it pass. Never the other way: a schema that refuses what clapper accepts is a bug.
type Verdict = "accepts" | "refuses";
interface Case {
  what: string;
  change: (m: any) => void;
  clapper: Verdict;
  schema?: "cannot judge";
}

const shot = (m: any) => m.shots[0];
const line = (m: any) => m.lines[0];
const CASES: Case[] = [
  // accepted by both
  { what: "the base manifest", change: () => {}, clapper: "accepts" },
  {
    what: "a number as id",
    change: (m) => {
      shot(m).id = 7;
      line(m).shot = 7;
    },
    clapper: "accepts",
  },
  { what: "a number as prompt", change: (m) => (shot(m).prompt = 42), clapper: "accepts" },
  { what: "duration auto", change: (m) => (shot(m).duration = "auto"), clapper: "accepts" },
  { what: "takes 20", change: (m) => (shot(m).takes = 20), clapper: "accepts" },
  {
    what: "a first frame as a list of one",
    change: (m) => (shot(m).first_frame = ["https://example.com/a.png"]),
    clapper: "accepts",
  },
  {
    what: "one reference image without a list",
    change: (m) => (shot(m).reference_images = "https://example.com/a.png"),
    clapper: "accepts",
  },
  { what: "a row's vars.NAME key", change: (m) => (shot(m)["vars.mood"] = "calm"), clapper: "accepts" },
  {
    what: "a prompt of 7000 characters",
    change: (m) => (shot(m).prompt = "a".repeat(7000)),
    clapper: "accepts",
  },
  {
    what: "a long prompt with {{ }} to fill",
    change: (m) => (shot(m).prompt = `${"a".repeat(7000)}{{ x }}`),
    clapper: "refuses",
    schema: "cannot judge",
  },
  { what: "speed 0 (meaning 1.0)", change: (m) => (line(m).speed = 0), clapper: "accepts" },
  { what: "speed 2", change: (m) => (line(m).speed = 2), clapper: "accepts" },
  { what: "a text of 2000 characters", change: (m) => (line(m).text = "b".repeat(2000)), clapper: "accepts" },
  {
    what: "an emotion vector",
    change: (m) =>
      Object.assign(line(m), { auto_emotion: false, emotion_vector: [0, 0, 0.3, 0, 0, 0, 0, 0] }),
    clapper: "accepts",
  },
  {
    what: "x- anchors and empty sections",
    change: (m) =>
      Object.assign(m, {
        "x-base": { a: 1 },
        budget: null,
        vars: null,
        skills: null,
        timing: null,
        assemble: null,
      }),
    clapper: "accepts",
  },
  {
    what: "a pool",
    change: (m) => (m.budget = { max_points: 10, pool: { name: "team", max_points: 100, period: "week" } }),
    clapper: "accepts",
  },
  {
    what: "timing and assemble at their limits",
    change: (m) =>
      Object.assign(m, {
        timing: { lead: 0, gap: 10 },
        assemble: { music_db: -60, transition: "fade", transition_seconds: 5, takes: { s01: 1 } },
      }),
    clapper: "accepts",
  },
  { what: "a name that is a number", change: (m) => (m.name = 12), clapper: "accepts" },
  // refused by both
  { what: "duration 31", change: (m) => (shot(m).duration = 31), clapper: "refuses" },
  { what: "duration '5' as text", change: (m) => (shot(m).duration = "5"), clapper: "refuses" },
  { what: 'ratio "5:4"', change: (m) => (shot(m).ratio = "5:4"), clapper: "refuses" },
  { what: "resolution 1080p", change: (m) => (shot(m).resolution = "1080p"), clapper: "refuses" },
  { what: "model vid-h3", change: (m) => (shot(m).model = "vid-h3"), clapper: "refuses" },
  { what: "takes 21", change: (m) => (shot(m).takes = 21), clapper: "refuses" },
  { what: "takes two", change: (m) => (shot(m).takes = "two"), clapper: "refuses" },
  { what: "an unknown shot field", change: (m) => (shot(m).promt = "x"), clapper: "refuses" },
  {
    what: "a line field on a shot",
    change: (m) => (shot(m).voice = "preset:en_male_deep"),
    clapper: "refuses",
  },
  { what: "no id", change: (m) => delete shot(m).id, clapper: "refuses" },
  { what: "an id with a slash", change: (m) => (shot(m).id = "s/01"), clapper: "refuses" },
  { what: "two first frames", change: (m) => (shot(m).first_frame = ["a.png", "b.png"]), clapper: "refuses" },
  {
    what: "ten reference images",
    change: (m) =>
      (shot(m).reference_images = Array.from({ length: 10 }, (_, i) => `https://example.com/${i}.png`)),
    clapper: "refuses",
  },
  {
    what: "a prompt of 7001 characters",
    change: (m) => (shot(m).prompt = "a".repeat(7001)),
    clapper: "refuses",
  },
  {
    what: "a blank skill",
    change: (m) => Object.assign(shot(m), { skill: " ", use_context_ir: true }),
    clapper: "refuses",
  },
  { what: "mute_audio as text", change: (m) => (shot(m).mute_audio = "yes"), clapper: "refuses" },
  { what: "language en", change: (m) => (line(m).language = "en"), clapper: "refuses" },
  { what: "speed 2.5", change: (m) => (line(m).speed = 2.5), clapper: "refuses" },
  { what: "speed 0.4", change: (m) => (line(m).speed = 0.4), clapper: "refuses" },
  { what: "emotion_strength 1.5", change: (m) => (line(m).emotion_strength = 1.5), clapper: "refuses" },
  {
    what: "an emotion vector of 7",
    change: (m) => Object.assign(line(m), { auto_emotion: false, emotion_vector: [0.1, 0, 0, 0, 0, 0, 0] }),
    clapper: "refuses",
  },
  {
    what: "emotion_vector_mode Single",
    change: (m) =>
      Object.assign(line(m), {
        auto_emotion: false,
        emotion_vector: [0.3, 0, 0, 0, 0, 0, 0, 0],
        emotion_vector_mode: "Single",
      }),
    clapper: "refuses",
  },
  {
    what: "a description of 201 characters",
    change: (m) => (line(m).emotion_description = "c".repeat(201)),
    clapper: "refuses",
  },
  { what: "a text of 2001 characters", change: (m) => (line(m).text = "b".repeat(2001)), clapper: "refuses" },
  { what: "voice Preset:", change: (m) => (line(m).voice = "Preset:en_male_deep"), clapper: "refuses" },
  { what: "voice custom: with no id", change: (m) => (line(m).voice = "custom: "), clapper: "refuses" },
  { what: "a voice URL", change: (m) => (line(m).voice = "https://example.com/v.wav"), clapper: "refuses" },
  {
    what: "a pronunciation kind Alias",
    change: (m) => (line(m).pronunciations = [{ word: "Hello", kind: "Alias", value: "hullo" }]),
    clapper: "refuses",
  },
  {
    what: "a pronunciation with an extra key",
    change: (m) => (line(m).pronunciations = [{ word: "Hello", kind: "alias", value: "hullo", note: 1 }]),
    clapper: "refuses",
  },
  {
    what: "a row's vars holding a mapping",
    change: (m) => (line(m).vars = { a: { b: 1 } }),
    clapper: "refuses",
  },
  { what: "an id in the defaults", change: (m) => (m.defaults = { shot: { id: "x" } }), clapper: "refuses" },
  { what: "defaults.shots", change: (m) => (m.defaults = { shots: { duration: 5 } }), clapper: "refuses" },
  { what: "an unknown top-level field", change: (m) => (m.budjet = { max_points: 1 }), clapper: "refuses" },
  { what: "a name with a space", change: (m) => (m.name = "my run"), clapper: "refuses" },
  { what: "output 5", change: (m) => (m.output = 5), clapper: "refuses" },
  { what: "budget max_points -1", change: (m) => (m.budget = { max_points: -1 }), clapper: "refuses" },
  { what: "budget max_point", change: (m) => (m.budget = { max_point: 1 }), clapper: "refuses" },
  {
    what: "a pool without a name",
    change: (m) => (m.budget = { pool: { max_points: 1 } }),
    clapper: "refuses",
  },
  {
    what: "a pool period year",
    change: (m) => (m.budget = { pool: { name: "p", max_points: 1, period: "year" } }),
    clapper: "refuses",
  },
  { what: "vars as a list", change: (m) => (m.vars = ["a", "b"]), clapper: "refuses" },
  { what: "templates as a list", change: (m) => (m.templates = ["a"]), clapper: "refuses" },
  { what: "timing lead 11", change: (m) => (m.timing = { lead: 11 }), clapper: "refuses" },
  { what: "timing tempo", change: (m) => (m.timing = { tempo: 1 }), clapper: "refuses" },
  {
    what: "assemble transition wipe",
    change: (m) => (m.assemble = { transition: "wipe" }),
    clapper: "refuses",
  },
  {
    what: "assemble transition_seconds 0",
    change: (m) => (m.assemble = { transition_seconds: 0 }),
    clapper: "refuses",
  },
  { what: "assemble music_db 1", change: (m) => (m.assemble = { music_db: 1 }), clapper: "refuses" },
  { what: "assemble takes 0", change: (m) => (m.assemble = { takes: { s01: 0 } }), clapper: "refuses" },
  // The reader's own checks let an empty value pass (`node !== null`), but an empty YAML value is a
  // node (a null scalar), so it is refused; the schema says what clapper does.
  { what: "empty defaults", change: (m) => (m.defaults = null), clapper: "refuses" },
  { what: "empty shot defaults", change: (m) => (m.defaults = { shot: null }), clapper: "refuses" },
  { what: "empty lines", change: (m) => (m.lines = null), clapper: "refuses" },
  { what: "shots from a .txt file", change: (m) => (m.shots = "shots.txt"), clapper: "refuses" },
  // refused by clapper only: rules between fields, files, ids, text content
  {
    what: "a skill without use_context_ir",
    change: (m) => (shot(m).skill = "noir"),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "a first frame with a reference image",
    change: (m) =>
      Object.assign(shot(m), {
        first_frame: "https://example.com/a.png",
        reference_images: ["https://example.com/b.png"],
      }),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "a reference audio alone",
    change: (m) => (shot(m).reference_audios = ["https://example.com/a.wav"]),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "a blank prompt",
    change: (m) => (shot(m).prompt = "   "),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "prompt and template",
    change: (m) => (shot(m).template = "establishing"),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "a missing material file",
    change: (m) => (shot(m).first_frame = "nowhere.png"),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "a line of a shot that is not there",
    change: (m) => (line(m).shot = "s99"),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "two shots with one id",
    change: (m) => m.shots.push({ ...shot(m) }),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "a text of punctuation only",
    change: (m) => (line(m).text = "..."),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "no voice at all",
    change: (m) => delete line(m).voice,
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "a voice file that is not there",
    change: (m) => (line(m).voice = "voices/nobody.wav"),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "save_voice_as with a preset",
    change: (m) => (line(m).save_voice_as = "maren"),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "an emotion vector summing over 0.8",
    change: (m) =>
      Object.assign(line(m), { auto_emotion: false, emotion_vector: [0.5, 0.4, 0, 0, 0, 0, 0, 0] }),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "an emotion vector with auto_emotion on",
    change: (m) => (line(m).emotion_vector = [0.3, 0, 0, 0, 0, 0, 0, 0]),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "a pronounced word not in the text",
    change: (m) => (line(m).pronunciations = [{ word: "lighthouse", kind: "alias", value: "light house" }]),
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "duration auto with no line for the shot",
    change: (m) => {
      shot(m).duration = "auto";
      delete line(m).shot;
    },
    clapper: "refuses",
    schema: "cannot judge",
  },
  {
    what: "assemble takes of a shot that is not there",
    change: (m) => (m.assemble = { takes: { s99: 1 } }),
    clapper: "refuses",
    schema: "cannot judge",
  },
];

const BASE = {
  name: "agree",
  shots: [{ id: "s01", prompt: "A lighthouse at dusk" }],
  lines: [{ id: "n01", shot: "s01", text: "Hello there, keeper.", voice: "preset:en_male_deep" }],
};

describe("the schema and clapper agree on one-field changes", () => {
  it.each(CASES.map((c) => [c.what, c] as const))("%s", async (_what, c) => {
    const m = structuredClone(BASE) as any;
    c.change(m);
    const text = stringify(m);
    const loaded = await ws.load({ "agree.yaml": text });
    expect(loaded.errors.length === 0 ? "accepts" : "refuses", loaded.formatted.join("\n")).toBe(c.clapper);
    const schemaVerdict = check(text).length === 0 ? "accepts" : "refuses";
    expect(schemaVerdict).toBe(c.schema === "cannot judge" ? "accepts" : c.clapper);
  });
});

// The bad fixtures (test/manifest/bad.test.ts lists what clapper says of each). The schema refuses
// each field it can judge, at that field; the rest of each file breaks rules it cannot see.
const BAD_REFUSED: Record<string, string[]> = {
  // resolution 1080p, through the anchor (the merge of a scalar in s03 is clapper's to refuse)
  "anchors.yaml": ["/shots/0/resolution", "/shots/1/resolution"],
  // 10 reference images, 4 videos, 4 audios, two first frames (not: frames with references,
  // audio alone, 13 items in all, no text)
  "content.yaml": [
    "/shots/0/reference_images",
    "/shots/1/reference_videos",
    "/shots/2/reference_audios",
    "/shots/7/first_frame",
  ],
  "defaults.yaml": ["/defaults/shot/resolution", "/defaults/shot/duration", "/defaults/line/language"],
  // language english (not: the duplicate ids)
  "duplicates.yaml": ["/lines/2/language"],
  "duration.yaml": ["/shots/0/duration", "/shots/1/duration", "/shots/2/duration"],
  // 7 elements, an element of 0.9, mode Single (not: the sum, auto_emotion, the description, a
  // mode without a vector, single with two emotions)
  "emotion.yaml": ["/lines/0/emotion_vector", "/lines/1/emotion_vector/0", "/lines/8/emotion_vector_mode"],
  "ids.yaml": ["/shots/0/id", "/shots/1/id", "/shots/2", "/shots/3/id", "/lines/0"],
  // a blank skill (not: {{ }} names that are not defined)
  "inline.yaml": ["/shots/2/skill"],
  "prompt-length.yaml": ["/shots/0/prompt"],
  // kind Alias (not: pinyin syllables, cmu phonemes, kana, "<", "|", words not in the text or twice)
  "pronunciations.yaml": ["/lines/1/pronunciations/5/kind"],
  "ratio-model.yaml": ["/shots/0/ratio", "/shots/1/ratio", "/shots/2/model", "/shots/3/model"],
  "resolution.yaml": ["/shots/0/resolution", "/shots/1/resolution", "/shots/2/resolution"],
  "speech-options.yaml": [
    "/lines/0/language",
    "/lines/1/language",
    "/lines/2/speed",
    "/lines/3/speed",
    "/lines/4/emotion_strength",
    "/lines/5/emotion_description",
  ],
  // 2001 characters (not: text of punctuation only, a missing text)
  "speech-text.yaml": ["/lines/0/text"],
  "takes.yaml": ["/shots/0/takes", "/shots/1/takes", "/shots/2/takes"],
  // language english (not: the template files and their variables)
  "templates.yaml": ["/lines/0/language"],
  // (not: the skill file that is not there)
  "top.yaml": ["/name", "/output", "/budget/max_points", "/vars", "/templates"],
  // budjet, max_point, defaults.shots, resolutoin and an id in the defaults, promt, a voice on a
  // shot, emotion_vectr and zzzz
  "unknown.yaml": ["", "/budget", "/defaults", "/defaults/shot", "/shots/0", "/shots/1", "/lines/0"],
  // a blank save_voice_as, Preset:, custom: with no id (not: files, a bare word, a preset saved)
  "voice.yaml": ["/lines/1/save_voice_as", "/lines/3/voice", "/lines/9/voice"],
};
const BAD_UNJUDGED: Record<string, string> = {
  "columns.yaml": "CSV files: their rows and whether they exist",
  "csv-lines.yaml": "CSV files: their rows",
  "labels.yaml": "prompt labels against the materials sent (warnings only)",
  "materials.yaml": "material files and addresses: existence, size, public host, bucket names",
  "missing-shot.yaml": "a line's shot must name a shot of the manifest",
  "outputs.yaml": "two jobs writing one output file",
  "skill.yaml": "skill needs use_context_ir: true (a rule between fields, possibly from the defaults)",
  "syntax.yaml": "not YAML: the editor's parser says so before any schema",
  "syntax2.yaml": "a duplicate key: the editor's parser says so before any schema",
};

describe("the bad fixtures", () => {
  it("are refused at each field that breaks a rule the schema can say, and each is listed", async () => {
    const files = (await readdir(join(FIXTURES, "bad"))).filter((f) => f.endsWith(".yaml")).sort();
    expect(files).toEqual([...Object.keys(BAD_REFUSED), ...Object.keys(BAD_UNJUDGED)].sort());
    for (const [file, at] of Object.entries(BAD_REFUSED)) {
      const errors = check(await readFile(join(FIXTURES, "bad", file), "utf8"));
      expect([...new Set(errors.map((e) => e.instancePath))].sort(), file).toEqual([...at].sort());
    }
    for (const file of Object.keys(BAD_UNJUDGED)) {
      const text = await readFile(join(FIXTURES, "bad", file), "utf8");
      if (file.startsWith("syntax")) expect(() => parse(text)).toThrow();
      else expect(paths(check(text)), file).toEqual([]);
    }
  });
});
