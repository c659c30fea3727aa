// The good half of the fixture corpus: YAML inline, YAML + CSV, bare CSV; templates with vars;
// takes; the three kinds of voice and of material; and the `plan --json` contract of the brief.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { main } from "../../src/cli/main.js";
import { type Job, loadManifest, type SpeechJob, type VideoJob } from "../../src/manifest/index.js";
import { type Staged, stageFixtures } from "../fixtures/manifests/stage.js";

let staged: Staged;
beforeAll(async () => {
  staged = await stageFixtures();
});
afterAll(() => staged?.remove());

const load = (file: string, speechPrice?: number) =>
  loadManifest(file, { cwd: staged.root, ...(speechPrice !== undefined ? { speechPrice } : {}) });
const video = (jobs: Job[], id: string) => jobs.find((j) => j.id === id) as VideoJob;
const speech = (jobs: Job[], id: string) => jobs.find((j) => j.id === id) as SpeechJob;
const sha256 = async (file: string) =>
  createHash("sha256")
    .update(await readFile(staged.path(file)))
    .digest("hex");
const textOf = (job: VideoJob) => job.request.content.find((c) => c.type === "text")?.text;

describe("good/inline.yaml: everything inline", () => {
  it("has no errors or warnings and expands takes into jobs in order", async () => {
    const r = await load("good/inline.yaml", 2);
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual([]);
    expect(r.manifest).toMatchObject({ name: "good-inline", output: "./out", maxPoints: 5000 });
    expect(r.jobs.map((j) => j.id)).toEqual([
      "shot/s01",
      "shot/s02/take-1",
      "shot/s02/take-2",
      "shot/s02/take-3",
      "shot/s03",
      "shot/s04",
      "shot/s05",
      "line/n01",
      "line/n02",
      "line/n03",
      "line/n04",
      "line/n05",
    ]);
    // Each job knows where it was written.
    expect(r.jobs.map((j) => `${j.file}:${j.line}`).slice(0, 5)).toEqual([
      "good/inline.yaml:16",
      "good/inline.yaml:18",
      "good/inline.yaml:18",
      "good/inline.yaml:18",
      "good/inline.yaml:24",
    ]);
    expect(video(r.jobs, "shot/s02/take-2").take).toBe(2);
  });

  it("merges defaults under each row and keeps every video option", async () => {
    const { jobs } = await load("good/inline.yaml");
    expect(video(jobs, "shot/s01").request).toEqual({
      model: "Vid-H3",
      content: [{ type: "text", text: "Wide shot: a lighthouse on a cliff at dusk" }],
      resolution: "768P",
      duration: 5,
      ratio: "16:9",
    });
    const s04 = video(jobs, "shot/s04");
    expect(s04.request).toMatchObject({
      resolution: "480P",
      duration: 10,
      ratio: "adaptive",
      use_context_ir: true,
      skill_id: "noir",
      mute_audio: true,
      aigc_watermark: true,
    });
    expect(s04.skill).toEqual({
      name: "noir",
      file: staged.path("skills/noir.md"),
      sha256: await sha256("skills/noir.md"),
    });
    expect(video(jobs, "shot/s05").request.model).toBe("vid-h3-lite");
  });

  it("fills a template from global vars, the row's vars and its own fields", async () => {
    const { jobs } = await load("good/inline.yaml");
    // templates/establishing.txt: "{{show}}, shot {{id}}: {{subject}}. Camera: {{camera}}."
    for (const take of [1, 2, 3]) {
      expect(textOf(video(jobs, `shot/s02/take-${take}`))).toBe(
        "The Lighthouse, shot s02: the keeper on the stairs. Camera: handheld from below.",
      );
    }
  });

  it("resolves materials: local files by content, https URLs and s3 URIs as written, roles by field", async () => {
    const { jobs } = await load("good/inline.yaml");
    const frame = await sha256("materials/frame.png");
    const s03 = video(jobs, "shot/s03");
    expect(s03.materials.map((m) => m.ref)).toEqual([
      { source: "local", kind: "image", path: staged.path("materials/frame.png"), bytes: 391, sha256: frame },
      { source: "url", kind: "image", url: "https://example.com/boat.png" },
      {
        source: "s3",
        kind: "video",
        uri: "s3://clapper-fixtures/clips/sea.mp4",
        bucket: "clapper-fixtures",
        key: "clips/sea.mp4",
      },
    ]);
    expect(s03.request.content.map((c) => [c.type, c.role])).toEqual([
      ["text", undefined],
      ["image_url", "reference_image"],
      ["image_url", "reference_image"],
      ["video_url", "reference_video"],
    ]);
    // Each material fills the content element it was placed at.
    expect(s03.materials.map((m) => m.contentIndex)).toEqual([1, 2, 3]);
    const s04 = video(jobs, "shot/s04");
    expect(s04.request.content.map((c) => c.role)).toEqual([undefined, "first_frame", "last_frame"]);
    const s05 = video(jobs, "shot/s05");
    expect(s05.materials.map((m) => [m.ref.source, m.ref.kind])).toEqual([
      ["local", "video"],
      ["local", "audio"],
    ]);
  });

  it("resolves voices: preset (from the defaults), custom, and a reference file saved as a custom voice", async () => {
    const { jobs } = await load("good/inline.yaml");
    expect(speech(jobs, "line/n01").voice).toEqual({ source: "preset", voiceId: "en_female_bright" });
    expect(speech(jobs, "line/n01").shot).toBe("s01");
    expect(speech(jobs, "line/n02").voice).toEqual({ source: "custom", voiceId: "voice_maren" });
    expect(speech(jobs, "line/n04").voice).toEqual({ source: "preset", voiceId: "ja_female_soft" });
    const n03 = speech(jobs, "line/n03");
    expect(n03.voice).toEqual({
      source: "file",
      path: staged.path("materials/voice.wav"),
      sha256: await sha256("materials/voice.wav"),
      saveAs: "maren",
      fileName: "voice.wav",
      contentType: "audio/wav",
      fileSize: (await readFile(staged.path("materials/voice.wav"))).length,
      durationMs: 1200,
    });
    expect(n03.request).toEqual({
      text: "Old Maren climbed the stairs.",
      language: "EN",
      speed: 0.9,
      auto_emotion: false,
      emotion_strength: 0.5,
      emotion_vector: [0, 0, 0.3, 0, 0, 0, 0, 0],
      emotion_vector_mode: "single",
      pronunciations: [{ word: "Maren", kind: "alias", value: "MAH-ren" }],
      save_voice: true,
      voice_name: "maren",
    });
    expect(speech(jobs, "line/n02").request.pronunciations).toEqual([
      { word: "灯塔", kind: "pinyin", value: "deng1 ta3" },
    ]);
  });

  it("estimates every job's points (hand-computed)", async () => {
    const { jobs } = await load("good/inline.yaml", 2);
    expect(Object.fromEntries(jobs.map((j) => [j.id, j.points]))).toEqual({
      "shot/s01": 50, // 768P x 5 s x 10
      "shot/s02/take-1": 114, // 1080P x 6 s x 19
      "shot/s02/take-2": 114,
      "shot/s02/take-3": 114,
      "shot/s03": 88, // 4K x 4 s x 22
      "shot/s04": 50, // 480P x 10 s x 5
      "shot/s05": 100, // 2K x 5 s (default duration) x 20
      "line/n01": 7, // 31 letters x 2 / 10 = 6.2 -> 7
      "line/n02": 1, // 灯塔亮了 = 4 x 2 / 10 = 0.8 -> 1
      "line/n03": 5, // 24 letters -> 4.8 -> 5
      "line/n04": 2, // 東京タワーが見える = 9 (ー is a letter) -> 1.8 -> 2
      "line/n05": 3, // 15 letters -> 3
    });
  });
});

describe("good/csv.yaml: rows from CSV files", () => {
  it("reads every option from CSV cells: lists, booleans, vars.* columns, pronunciations, vectors", async () => {
    const r = await load("good/csv.yaml", 2);
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual([]);
    expect(r.jobs.map((j) => `${j.id} ${j.file}:${j.line}`)).toEqual([
      "shot/c01 good/csv/shots.csv:2",
      // c02's prompt is quoted over two lines: the row starts on line 3, c03 on line 5.
      "shot/c02/take-1 good/csv/shots.csv:3",
      "shot/c02/take-2 good/csv/shots.csv:3",
      "shot/c03 good/csv/shots.csv:5",
      "line/l01 good/csv/lines.csv:2",
      "line/l02 good/csv/lines.csv:3",
      "line/l03 good/csv/lines.csv:4",
    ]);
    expect(textOf(video(r.jobs, "shot/c01"))).toBe(
      "The Lighthouse, shot c01: the lighthouse at dusk. Camera: slow aerial push-in.",
    );
    expect(video(r.jobs, "shot/c01").request).toMatchObject({ resolution: "1080P", duration: 6 });
    const c02 = video(r.jobs, "shot/c02/take-1");
    expect(textOf(c02)).toBe("The keeper climbs;\nthe stairs spiral up");
    expect(c02.request).toMatchObject({
      ratio: "9:16",
      use_context_ir: true,
      mute_audio: false,
      aigc_watermark: false,
    });
    expect(c02.request.content.map((c) => c.role)).toEqual([undefined, "first_frame", "last_frame"]);
    const c03 = video(r.jobs, "shot/c03");
    expect(c03.request).toMatchObject({
      model: "vid-h3-lite",
      resolution: "2K",
      ratio: "21:9",
      mute_audio: true,
    });
    expect(c03.materials.map((m) => m.ref.source)).toEqual(["local", "url", "s3", "local"]);
    expect(c03.request.content.map((c) => c.role)).toEqual([
      undefined,
      "reference_image",
      "reference_image",
      "reference_video",
      "reference_audio",
    ]);

    const l02 = speech(r.jobs, "line/l02");
    expect(l02.voice).toMatchObject({ source: "file", saveAs: "maren" });
    expect(l02.request).toMatchObject({
      speed: 0.95,
      pronunciations: [{ word: "Maren", kind: "alias", value: "MAH-ren" }],
    });
    expect(speech(r.jobs, "line/l03").request).toEqual({
      text: "灯塔亮了。",
      language: "ZH",
      auto_emotion: false,
      emotion_strength: 0,
      emotion_vector: [0.2, 0, 0, 0.1, 0, 0, 0, 0],
      emotion_vector_mode: "mixed",
      pronunciations: [{ word: "灯塔", kind: "pinyin", value: "dēng tǎ" }],
    });
    expect(speech(r.jobs, "line/l01").voice).toEqual({ source: "preset", voiceId: "en_male_deep" });
  });
});

describe("good/bare.csv: a bare CSV manifest with a kind column", () => {
  it("mixes shots and lines, fills templates from vars.* columns and row fields", async () => {
    const r = await load("good/bare.csv", 3);
    expect(r.errors).toEqual([]);
    expect(r.manifest?.name).toBe("bare");
    expect(r.jobs.map((j) => [j.id, j.kind, j.points])).toEqual([
      ["shot/b01", "video", 25], // 480P x 5 s
      ["shot/b02", "video", 80], // 768P x 8 s
      ["line/m01", "speech", 6], // "Far away a gull cried." = 17 letters x 3 / 10 = 5.1 -> 6
      ["line/m02", "speech", 2], // 雾里的光 = 4 x 3 / 10 = 1.2 -> 2
    ]);
    expect(textOf(video(r.jobs, "shot/b02"))).toBe(
      "The Lighthouse, shot b02: the beam in fog. Camera: locked-off wide.",
    );
    expect(speech(r.jobs, "line/m02").request.language).toBeUndefined();
  });
});

describe("good/anchors.yaml: YAML anchors, aliases and merge keys", () => {
  it("merges shared settings under each row, the row's own keys winning", async () => {
    const r = await load("good/anchors.yaml");
    expect(r.errors).toEqual([]);
    expect(r.warnings).toEqual([]);
    expect(r.jobs.map((j) => [j.id, j.points])).toEqual([
      ["shot/s01", 114], // 1080P x 6 s, from the anchor
      ["shot/s02", 152], // 1080P x 8 s, its own duration
    ]);
    for (const job of r.jobs as VideoJob[]) {
      expect(textOf(job)).toBe("The keeper of <Picture 1> at the lamp");
      expect(job.materials).toHaveLength(1);
    }
  });
});

describe("clapper plan --json: the contract shape of the brief", () => {
  const run = async (args: string[]) => {
    const out: string[] = [];
    const code = await main(args, { env: { CLAPPER_LOG_LEVEL: "silent" }, stdout: (t) => out.push(t) });
    return { code, text: out.join("\n") };
  };

  it.each([
    "good/inline.yaml",
    "good/csv.yaml",
    "good/bare.csv",
    "good/same.yaml",
    "good/same.csv",
    "good/anchors.yaml",
  ])("%s", async (file) => {
    const { code, text } = await run(["plan", staged.path(file), "--json", "--speech-price", "2"]);
    expect(code).toBe(0);
    const plan = JSON.parse(text);
    expect(plan.jobs.length).toBeGreaterThan(0);
    for (const job of plan.jobs) {
      expect(job).toEqual(
        expect.objectContaining({
          id: expect.stringMatching(/^(shot\/[^/]+(\/take-\d+)?|line\/[^/]+)$/),
          kind: expect.stringMatching(/^(video|speech)$/),
          points: expect.any(Number),
          fingerprint: expect.stringMatching(/^[0-9a-f]{64}$/),
        }),
      );
      expect(job.kind).toBe(job.id.startsWith("shot/") ? "video" : "speech");
    }
    const sum = (kind: string) =>
      plan.jobs
        .filter((j: { kind: string }) => j.kind === kind)
        .reduce((a: number, j: { points: number }) => a + j.points, 0);
    expect(plan.points).toEqual({
      video: sum("video"),
      speech: sum("speech"),
      total: sum("video") + sum("speech"),
    });
    expect(plan.errors).toEqual([]);
  });

  it("good/inline.yaml totals, hand-computed", async () => {
    const { text } = await run(["plan", staged.path("good/inline.yaml"), "--json", "--speech-price", "2"]);
    const plan = JSON.parse(text);
    expect(plan.points).toEqual({ video: 630, speech: 18, total: 648 });
    expect(plan.speech_price).toEqual({
      value: 2,
      source: "option",
      counted_characters: 31 + 4 + 24 + 9 + 15,
    });
  });
});
