// Reading manifests: positions in CSV (quoted cells over several lines, CRLF, BOM, blank rows) and
// YAML (syntax errors, nested items), CSV cell coercion, strict templates, problem reporting, and
// the limits of the specs at their exact edges.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatProblem, loadManifest, type SpeechJob, type VideoJob } from "../../src/manifest/index.js";
import { didYouMean, Problems } from "../../src/manifest/problems.js";
import { csvRows } from "../../src/manifest/source.js";
import { renderTemplate, TemplateStore } from "../../src/manifest/templates.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "clapper-source-"));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

let n = 0;
/** Writes files into a fresh folder and loads the first one as the manifest. */
async function load(files: Record<string, string>, speechPrice = 2) {
  const sub = join(dir, `case-${n++}`);
  for (const [name, text] of Object.entries(files)) {
    await mkdir(join(sub, name, ".."), { recursive: true });
    await writeFile(join(sub, name), text);
  }
  const r = await loadManifest(Object.keys(files)[0] as string, { cwd: sub, speechPrice });
  return { ...r, formatted: r.errors.map(formatProblem), warned: r.warnings.map(formatProblem) };
}

describe("CSV positions", () => {
  const lines = (text: string, kind?: "shot" | "line") => {
    const problems = new Problems();
    const rows = csvRows(text, "x.csv", kind, problems);
    return {
      rows: rows.map((r) => [r.fields.get("id")?.value, r.line]),
      problems: problems.errors.map(formatProblem),
    };
  };

  it("numbers each row by the line it starts on, across quoted cells over several lines", () => {
    expect(lines('id,prompt\na,"one\ntwo\nthree"\nb,x\n\nc,"y\n"\nd,z\n', "shot").rows).toEqual([
      ["a", 2],
      ["b", 5],
      ["c", 7],
      ["d", 9],
    ]);
  });

  it("counts CRLF line ends (spreadsheet exports) and a byte-order mark correctly", () => {
    const text = '\ufeffid,prompt\r\na,"one\r\ntwo"\r\n\r\nb,é\r\nc,"x,y"\r\n';
    expect(lines(text, "shot")).toEqual({
      rows: [
        ["a", 2],
        ["b", 5],
        ["c", 6],
      ],
      problems: [],
    });
  });

  it("skips rows whose cells are all empty, as spreadsheets export below the data", () => {
    expect(lines("id,prompt\na,x\n,\n , \nb,y\n,,\n", "shot")).toEqual({
      rows: [
        ["a", 2],
        ["b", 5],
      ],
      problems: [],
    });
  });

  it("reports an unclosed quote at the row that opened it", () => {
    expect(lines('id,prompt\na,x\nb,"never closed\nc,y\n', "shot").problems).toEqual([
      expect.stringMatching(/^x\.csv:3: CSV: a quoted cell opens on this line and is never closed/),
    ]);
  });

  it("reports an empty file, a duplicate column, a cell without a header, and a kind in a kind-specific file", () => {
    expect(lines("", "shot").problems).toEqual(["x.csv: the CSV file is empty (expected a header row)"]);
    expect(lines("id,prompt,prompt,\na,x,y,z\n", "shot").problems).toEqual([
      "x.csv:1: prompt: column appears twice in the header",
      "x.csv:2: column 4: a value in a column without a header",
    ]);
    const kinds = lines("kind,id,text\nline,n1,hi\nshot,n2,hi\n", "line");
    expect(kinds.rows).toEqual([["n1", 2]]);
    expect(kinds.problems).toEqual(['x.csv:3: kind: this file holds lines, got "shot"']);
  });

  it("reads a row with fewer cells than the header: the missing cells are not set", () => {
    expect(lines("id,prompt,duration\na,x\n", "shot")).toEqual({ rows: [["a", 2]], problems: [] });
  });
});

describe("YAML positions", () => {
  it("reports a syntax error at its line, and nothing else from that file", async () => {
    const r = await load({ "m.yaml": "name: x\nshots:\n  - id: a\n    prompt: [unclosed\n  - id: b\n" });
    expect(r.formatted).toHaveLength(1);
    expect(r.formatted[0]).toMatch(/^m\.yaml:\d+: YAML: /);
    expect(r.errors[0]?.line).toBeGreaterThanOrEqual(4);
  });

  it("points at the list item or key inside a field, in block and flow style", async () => {
    const r = await load({
      "m.yaml": [
        "name: x",
        "lines:",
        "  - id: n1",
        "    text: 灯塔 and tomato",
        "    voice: preset:zh_female_warm",
        "    auto_emotion: false",
        "    emotion_vector:",
        "      - 0",
        "      - 0.9",
        "      - 0",
        "    pronunciations:",
        "      - word: 灯塔",
        "        kind: pinyin",
        "        value: deng1 ta3",
        "      - word: tomato",
        "        kind: cmu",
        "        value: T AH0 M QQ",
        "      - { word: x, kind: kana, value: y }",
        "",
      ].join("\n"),
    });
    // A field is at its key's line; an item of it at the item's own line.
    expect(r.formatted).toEqual([
      "m.yaml:7: emotion_vector: expected exactly 8 elements (happy, angry, sad, afraid, disgusted, low, surprised, calm), got 3",
      "m.yaml:9: emotion_vector[1]: expected a number from 0 to 0.8, got 0.9",
      'm.yaml:17: pronunciations[1].value: expected CMU/ARPAbet phonemes separated by spaces (e.g. "T AH0 M EY1 T OW2"), got unknown "QQ"',
      'm.yaml:18: pronunciations[2].value: expected only hiragana or katakana, got "y" ("y" is not kana)',
      'm.yaml:18: pronunciations[2].word: must occur in text, got "x" which text does not contain',
    ]);
  });

  it("reports a manifest that is not a mapping, and a file that does not exist", async () => {
    expect((await load({ "m.yaml": "- a\n- b\n" })).formatted).toEqual([
      "m.yaml:1: expected a mapping with name, shots, lines, ...",
    ]);
    const missing = await loadManifest(join(dir, "nowhere.yaml"), { cwd: dir });
    expect(missing.errors.map(formatProblem)).toEqual(["nowhere.yaml: file not found"]);
    expect(missing.manifest).toBeUndefined();
  });

  it("reports shots and lines that are neither a CSV path nor a list of mappings", async () => {
    const r = await load({
      "m.yaml": [
        "name: x",
        "defaults: [shot]",
        "shots:",
        "  - s01",
        "  - { id: s02, prompt: fine }",
        "lines: 5",
        "",
      ].join("\n"),
    });
    expect(r.formatted).toEqual([
      "m.yaml:2: defaults: expected a mapping with shot and line",
      "m.yaml:4: shots: expected each shot to be a mapping",
      "m.yaml:6: lines: expected a CSV file path or a list of lines",
    ]);
    expect(r.jobs.map((j) => j.id)).toEqual(["shot/s02"]);
  });

  it("refuses a YAML alias bomb instead of expanding it", async () => {
    const anchors = ["x-a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"];
    const names = "abcdefghi";
    for (let i = 1; i < names.length; i++) {
      anchors.push(
        `x-${names[i]}: &${names[i]} [${Array(10)
          .fill(`*${names[i - 1]}`)
          .join(", ")}]`,
      );
    }
    const r = await load({ "m.yaml": ["name: bomb", ...anchors, "vars: { v: *i }", ""].join("\n") });
    expect(r.formatted).toEqual([expect.stringMatching(/^m\.yaml:11: YAML: Excessive alias count/)]);
  });

  it("warns about a manifest with no shots and no lines", async () => {
    const r = await load({ "m.yaml": "name: empty\n" });
    expect(r.formatted).toEqual([]);
    expect(r.warned).toEqual(["m.yaml: the manifest has no shots and no lines"]);
  });
});

describe("relative paths resolve against the manifest, not the working directory", () => {
  it("finds CSV files, materials, voices and templates next to the manifest", async () => {
    const sub = join(dir, "relative");
    await mkdir(join(sub, "ep01", "templates"), { recursive: true });
    await mkdir(join(sub, "ep01", "materials"), { recursive: true });
    await writeFile(join(sub, "ep01", "m.yaml"), "name: rel\nshots: shots.csv\n");
    await writeFile(
      join(sub, "ep01", "shots.csv"),
      "id,template,first_frame,vars.what\ns1,t,materials/f.png,fog\n",
    );
    await writeFile(join(sub, "ep01", "templates", "t.txt"), "{{what}} at {{id}}\n");
    await writeFile(join(sub, "ep01", "materials", "f.png"), "png");
    const r = await loadManifest("ep01/m.yaml", { cwd: sub });
    expect(r.errors).toEqual([]);
    const job = r.jobs[0] as VideoJob;
    expect(job.request.content[0]).toEqual({ type: "text", text: "fog at s1" });
    expect(job.materials[0]?.ref).toMatchObject({
      source: "local",
      path: join(sub, "ep01", "materials", "f.png"),
    });
    expect(job.file).toBe("ep01/shots.csv");
  });
});

describe("CSV cells", () => {
  it("reads booleans as true/false/yes/no/1/0 in any case, and refuses anything else", async () => {
    const r = await load({
      "m.csv": [
        "kind,id,prompt,mute_audio",
        "shot,a,x,TRUE",
        "shot,b,x,No",
        "shot,c,x,1",
        "shot,d,x,0",
        "shot,e,x,yes",
        "shot,f,x,on",
        "",
      ].join("\n"),
    });
    expect(r.jobs.map((j) => [j.id, (j as VideoJob).request.mute_audio])).toEqual([
      ["shot/a", true],
      ["shot/b", false],
      ["shot/c", true],
      ["shot/d", false],
      ["shot/e", true],
    ]);
    expect(r.formatted).toEqual(['m.csv:7: mute_audio: expected true or false, got "on"']);
  });

  it("splits list cells on |, trimming the items", async () => {
    const r = await load({
      "m.csv": "kind,id,prompt,reference_images\nshot,a,x, https://e.com/1.png |https://e.com/2.png| \n",
    });
    expect((r.jobs[0] as VideoJob).materials.map((m) => m.ref)).toEqual([
      { source: "url", kind: "image", url: "https://e.com/1.png" },
      { source: "url", kind: "image", url: "https://e.com/2.png" },
    ]);
  });

  it("reads pronunciations as word=kind:value items and emotion vectors as numbers", async () => {
    const r = await load({
      "m.csv":
        "kind,id,text,voice,pronunciations,emotion_vector,auto_emotion\n" +
        "line,a,灯塔 and Maren,preset:zh_female_warm,灯塔=pinyin:deng1 ta3 | Maren=alias:MAH-ren,.1|0|0|0|0|0|0|0.2,no\n",
    });
    expect(r.formatted).toEqual([]);
    expect((r.jobs[0] as SpeechJob).request).toMatchObject({
      pronunciations: [
        { word: "灯塔", kind: "pinyin", value: "deng1 ta3" },
        { word: "Maren", kind: "alias", value: "MAH-ren" },
      ],
      emotion_vector: [0.1, 0, 0, 0, 0, 0, 0, 0.2],
      auto_emotion: false,
    });
  });
});

describe("templates", () => {
  it("substitutes {{ name }} with or without spaces, every occurrence, without re-expanding values", () => {
    expect(renderTemplate("{{a}} {{ a }} {{  b  }}", { a: "1", b: "{{a}}" })).toEqual({ text: "1 1 {{a}}" });
  });

  it("reports every missing variable once, and never fills in an empty string", () => {
    expect(renderTemplate("{{a}} {{b}} {{a}} {{c}}", { c: "" })).toEqual({ missing: ["a", "b"] });
    expect(renderTemplate("{{c}}!", { c: "" })).toEqual({ text: "!" });
  });

  it("finds name, name.txt and name.md in the template folders in order, and refuses ..", async () => {
    const a = join(dir, "tpl-a");
    const b = join(dir, "tpl-b");
    await mkdir(a, { recursive: true });
    await mkdir(b, { recursive: true });
    await writeFile(join(a, "one.txt"), "A one\n");
    await writeFile(join(b, "one.txt"), "B one\n");
    await writeFile(join(b, "two.md"), "B two\r\n");
    await writeFile(join(dir, "secret.txt"), "no");
    const store = new TemplateStore([a, b]);
    expect(await store.get("one")).toEqual({ text: "A one", file: join(a, "one.txt") });
    expect(await store.get("two")).toEqual({ text: "B two", file: join(b, "two.md") });
    expect(await store.get("three")).toBeUndefined();
    expect(await store.get("../secret")).toBeUndefined();
  });

  it("takes the row's vars over global vars, and the row's fields when no var has the name", async () => {
    const r = await load({
      "m.yaml": [
        "name: t",
        "vars: { place: the cliff, who: everyone }",
        "defaults:",
        "  shot: { duration: 6 }",
        "shots:",
        "  - id: s1",
        "    template: t",
        "    vars: { who: the keeper }",
        "",
      ].join("\n"),
      "templates/t.txt": "{{who}} at {{place}}, shot {{id}}, {{duration}} s, {{template}}",
    });
    expect(r.formatted).toEqual([]);
    expect((r.jobs[0] as VideoJob).request.content[0]).toEqual({
      type: "text",
      text: "the keeper at the cliff, shot s1, 6 s, t",
    });
  });

  it("fills line templates from defaults' vars merged key by key with the row's", async () => {
    const r = await load({
      "m.yaml": [
        "name: t",
        "defaults:",
        "  line: { voice: preset:en_male_deep, language: EN, vars: { speaker: Maren, mood: calm } }",
        "lines:",
        "  - { id: n1, template: l, vars: { mood: tired } }",
        "",
      ].join("\n"),
      "templates/l.txt": "{{speaker}} ({{mood}}): the light is on.",
    });
    expect(r.formatted).toEqual([]);
    expect((r.jobs[0] as SpeechJob).request.text).toBe("Maren (tired): the light is on.");
  });
});

describe("skills of the manifest", () => {
  it("are read and hashed, and refused when empty or over the 64 KiB request body of the service", async () => {
    const r = await load({
      "m.yaml": [
        "name: s",
        "skills:",
        "  ok: skills/ok.md",
        "  empty: skills/empty.md",
        "  huge: skills/huge.md",
        "shots:",
        "  - { id: a, prompt: x, use_context_ir: true, skill: ok }",
        "",
      ].join("\n"),
      "skills/ok.md": "# Rules\n- one\n",
      "skills/empty.md": " \n",
      "skills/huge.md": "x".repeat(64 * 1024),
    });
    expect(r.formatted).toEqual([
      "m.yaml:4: skills.empty: skills/empty.md is empty",
      expect.stringMatching(
        /^m\.yaml:5: skills\.huge: skills\/huge\.md makes a request body of 655\d\d bytes, over the 65536 bytes/,
      ),
    ]);
    expect(r.manifest?.skills.map((s) => s.name)).toEqual(["ok", "empty", "huge"]);
    expect((r.jobs[0] as VideoJob).skill).toMatchObject({
      name: "ok",
      sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
  });
});

describe("limits at their edges", () => {
  it("video text: 7000 characters pass, 7001 do not, counted in code points (emoji are one each)", async () => {
    const emoji = "🌊".repeat(7000);
    const r = await load({
      "m.csv": `kind,id,prompt\nshot,ok,${emoji}\nshot,over,${emoji}a\nshot,ascii,${"a".repeat(7000)}\n`,
    });
    expect(r.jobs.map((j) => j.id)).toEqual(["shot/ok", "shot/ascii"]);
    expect(r.formatted).toEqual([
      "m.csv:3: prompt: expected at most 7000 characters in all text elements joined with line feeds, got 7001",
    ]);
  });

  it("video text from a template is checked after filling, at the template field", async () => {
    const r = await load({
      "m.yaml": `name: t\nvars: { long: ${"x".repeat(6990)} }\nshots:\n  - { id: s1, template: t }\n`,
      "templates/t.txt": "{{long}} and more",
    });
    // 6990 + " and more" = 6999
    expect(r.formatted).toEqual([]);
    expect(r.jobs).toHaveLength(1);
    const over = await load({
      "m.yaml": `name: t\nvars: { long: ${"x".repeat(6991)} }\nshots:\n  - { id: s1, template: t }\n`,
      "templates/t.txt": "{{long}} and more.",
    });
    // 6991 + " and more." = 7001
    expect(over.formatted).toEqual([
      "m.yaml:4: template: expected at most 7000 characters in all text elements joined with line feeds, got 7001",
    ]);
  });

  it("speech text: 2000 characters pass, 2001 do not, Han characters one each", async () => {
    const r = await load({
      "m.csv": `kind,id,text,voice\nline,ok,${"灯".repeat(2000)},preset:zh_female_warm\nline,over,${"灯".repeat(2001)},preset:zh_female_warm\n`,
    });
    expect(r.jobs.map((j) => [j.id, j.points])).toEqual([["line/ok", 400]]);
    expect(r.formatted).toEqual(["m.csv:3: text: expected at most 2000 characters, got 2001"]);
  });

  it("pronunciations: 100 rules pass, 101 do not", async () => {
    const words = Array.from({ length: 101 }, (_, i) => `w${i}x`);
    const rules = (k: number) =>
      words
        .slice(0, k)
        .map((w) => `${w}=alias:${w}`)
        .join("|");
    const text = words.join(" ");
    const r = await load({
      "m.csv": `kind,id,text,voice,language,pronunciations\nline,ok,${text},preset:en_male_deep,EN,${rules(100)}\nline,over,${text},preset:en_male_deep,EN,${rules(101)}\n`,
    });
    expect(r.jobs.map((j) => j.id)).toEqual(["line/ok"]);
    expect(r.formatted).toEqual([expect.stringMatching(/^m\.csv:3: pronunciations: .*100/)]);
  });

  it("duration 4 and 30, takes 20, speed 0.5, 2 and 0, an emotion vector summing to exactly 0.8 all pass", async () => {
    const r = await load({
      "m.yaml": [
        "name: edges",
        "shots:",
        "  - { id: a, prompt: x, duration: 4, takes: 20 }",
        "  - { id: b, prompt: x, duration: 30 }",
        "lines:",
        "  - { id: n1, text: x, voice: preset:en_male_deep, speed: 0.5 }",
        "  - { id: n2, text: x, voice: preset:en_male_deep, speed: 2 }",
        "  - { id: n3, text: x, voice: preset:en_male_deep, speed: 0 }",
        "  - { id: n4, text: x, voice: preset:en_male_deep, auto_emotion: false, emotion_vector: [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1] }",
        "",
      ].join("\n"),
    });
    expect(r.formatted).toEqual([]);
    expect(r.jobs.map((j) => j.id)).toEqual([
      ...Array.from({ length: 20 }, (_, i) => `shot/a/take-${i + 1}`),
      "shot/b",
      "line/n1",
      "line/n2",
      "line/n3",
      "line/n4",
    ]);
  });
});

describe("problems", () => {
  it("formats file:line: field: message, without the parts that are unknown", () => {
    const base = { severity: "error" as const, message: "m" };
    expect(formatProblem({ ...base, file: "a.csv", line: 14, field: "duration" })).toBe(
      "a.csv:14: duration: m",
    );
    expect(formatProblem({ ...base, file: "a.csv", line: 14, field: "" })).toBe("a.csv:14: m");
    expect(formatProblem({ ...base, file: "a.csv", line: 0, field: "" })).toBe("a.csv: m");
  });

  it("lists each problem once, errors and warnings apart, by file in order of appearance then line", () => {
    const p = new Problems();
    p.error("b.csv", 9, "x", "late");
    p.warn("a.yaml", 1, "w", "warning");
    p.error("a.yaml", 7, "y", "seven");
    p.error("b.csv", 2, "z", "early");
    p.error("b.csv", 2, "z", "early");
    p.error("a.yaml", 3, "y", "three");
    expect(p.errors.map(formatProblem)).toEqual([
      "b.csv:2: z: early",
      "b.csv:9: x: late",
      "a.yaml:3: y: three",
      "a.yaml:7: y: seven",
    ]);
    expect(p.warnings.map(formatProblem)).toEqual(["a.yaml:1: w: warning"]);
    // Repeats are listed once but counted, so every row that inherits a wrong default is refused.
    expect(p.errorCount).toBe(5);
  });

  it("suggests a close known name, whatever its case, and nothing when none is close", () => {
    expect(didYouMean("durration", ["duration", "prompt"])).toBe(' (did you mean "duration"?)');
    expect(didYouMean("PROMPT", ["duration", "prompt"])).toBe(' (did you mean "prompt"?)');
    expect(didYouMean("zzzz", ["duration", "prompt"])).toBe("");
    expect(didYouMean("x", [])).toBe("");
  });
});
