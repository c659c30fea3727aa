// What a run will cost, against hand-computed figures: video by resolution and duration, speech by
// counted characters (letters and decimal digits of any script) and the price, rounded up once per
// request; the price from the service, from --speech-price, or unknown; the balance and the budget;
// and the checks only the service can answer (voices and skills that exist).
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { renderPlan } from "../../src/cli/commands/plan/index.js";
import { main } from "../../src/cli/main.js";
import { loadManifest, type SpeechJob } from "../../src/manifest/index.js";
import { plan } from "../../src/run/plan.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { type Staged, stageFixtures } from "../fixtures/manifests/stage.js";
import { call, KEY, sandbox } from "../helpers/sandbox.js";

let dir: string;
let staged: Staged;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "clapper-cost-"));
  staged = await stageFixtures();
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await staged?.remove();
});

let n = 0;
async function manifest(yaml: string): Promise<string> {
  const file = join(dir, `m${n++}.yaml`);
  await writeFile(file, yaml);
  return file;
}

/** YAML for lines with these texts, one per line, each `t<i>`. */
const linesYaml = (texts: readonly string[]) =>
  `name: speech\ndefaults:\n  line: { voice: "preset:zh_female_warm" }\nlines:\n${texts
    .map((t, i) => `  - id: t${i}\n    text: ${JSON.stringify(t)}\n`)
    .join("")}`;

describe("video points: per second of output, by resolution", () => {
  it("matches the price table for each tier and duration, and counts every take", async () => {
    const file = await manifest(`name: video
shots:
  - { id: a, prompt: x, resolution: 480P, duration: 4 }
  - { id: b, prompt: x, resolution: 768P, duration: 30 }
  - { id: c, prompt: x, resolution: 1080P, duration: 7 }
  - { id: d, prompt: x, resolution: 2K, duration: 12 }
  - { id: e, prompt: x, resolution: 4K, duration: 30 }
  - { id: f, prompt: x }
  - { id: g, prompt: x, resolution: 1080P, duration: 4, takes: 3 }
`);
    const r = await plan({ manifest: file });
    expect(r.errors).toEqual([]);
    expect(Object.fromEntries(r.jobs.map((j) => [j.id, j.points]))).toEqual({
      "shot/a": 20, // 5 x 4
      "shot/b": 300, // 10 x 30
      "shot/c": 133, // 19 x 7
      "shot/d": 240, // 20 x 12
      "shot/e": 660, // 22 x 30
      "shot/f": 50, // 768P and 5 s when not given
      "shot/g/take-1": 76, // 19 x 4, per take
      "shot/g/take-2": 76,
      "shot/g/take-3": 76,
    });
    expect(r.points).toEqual({ video: 1631, speech: 0, total: 1631 });
    expect(r.byResolution).toEqual({
      "480P": { jobs: 1, points: 20 },
      "768P": { jobs: 2, points: 350 },
      "1080P": { jobs: 4, points: 361 },
      "2K": { jobs: 1, points: 240 },
      "4K": { jobs: 1, points: 660 },
    });
    expect(r.counts).toEqual({ video: 9, speech: 0, total: 9 });
  });
});

describe("speech points: ceil(counted characters x price / 10), once per request", () => {
  const cases: Array<[string, number, number, number]> = [
    // text, counted characters, price per 10, points
    ["Hello, world!", 10, 3, 3], // 30 / 10 = 3 exactly: no rounding
    ["Hello, world!", 10, 2, 2],
    ["灯塔在2024年亮了！🌊🌊", 10, 7, 7], // 灯塔在 2024 年亮了: Han and digits count; punctuation, emoji do not
    ["第3夜：风，雨……", 5, 3, 2], // 第 3 夜 风 雨 = 5; 15 / 10 = 1.5 -> 2
    ["カタカナ、ひらがな。漢字！", 10, 1, 1], // kana and kanji are letters
    ["タワー", 3, 1, 1], // the prolonged sound mark ー is a letter (Lm)
    ["２０２４年", 5, 2, 1], // full-width digits are decimal digits: 10 / 10 = 1
    ["مرحبا ١٢٣", 8, 2, 2], // Arabic letters and Arabic-Indic digits: 16 / 10 -> 2
    ["¡Hola! ¿Qué tal?", 10, 5, 5], // Hola Qué tal = 4 + 3 + 3 (é is a letter); 50 / 10 = 5
    ["🚀 launch at 9:30 🚀", 11, 3, 4], // launch at 9 30 = 6 + 2 + 3; 33 / 10 = 3.3 -> 4
    ["a", 1, 1, 1], // 0.1 -> 1: never free
    ["Lighthouse keeper Maren, 1 9 2 4.", 25, 10, 25], // 10 + 6 + 5 + 4 digits
  ];

  it.each(cases)(
    "%j: %i counted characters at %i per 10 = %i points",
    async (text, counted, price, points) => {
      const r = await loadManifest(await manifest(linesYaml([text])), { speechPrice: price });
      expect(r.errors).toEqual([]);
      const job = r.jobs[0] as SpeechJob;
      expect(job.countedChars).toBe(counted);
      expect(job.points).toBe(points);
    },
  );

  it("rounds up once per request, not once per run", async () => {
    // Three lines of 5 counted characters at 1 per 10: 0.5 -> 1 each = 3, where ceil(1.5) would be 2.
    const r = await plan({
      manifest: await manifest(linesYaml(["abcde", "fghij", "klmno"])),
      speechPrice: 1,
    });
    expect(r.jobs.map((j) => j.points)).toEqual([1, 1, 1]);
    expect(r.points).toEqual({ video: 0, speech: 3, total: 3 });
    expect(r.speechPrice).toEqual({ value: 1, source: "option", countedChars: 15 });
  });

  it("does not count the emotion description or the pronunciation rules", async () => {
    const file = await manifest(`name: extras
lines:
  - id: t0
    text: 灯塔亮了
    voice: preset:zh_female_warm
    emotion_description: a long and wistful description of how the line should sound
    pronunciations:
      - { word: 灯塔, kind: pinyin, value: deng1 ta3 }
`);
    const r = await loadManifest(file, { speechPrice: 10 });
    expect(r.jobs.map((j) => [j.points, (j as SpeechJob).countedChars])).toEqual([[4, 4]]);
  });
});

describe("speech price unknown, or given offline", () => {
  const run = async (args: string[]) => {
    const out: string[] = [];
    const code = await main(args, { env: { CLAPPER_LOG_LEVEL: "silent" }, stdout: (t) => out.push(t) });
    return { code, text: out.join("\n") };
  };

  it("without a service or --speech-price: speech points are null and the plan says so", async () => {
    const file = staged.path("good/inline.yaml");
    const r = await plan({ manifest: file });
    expect(r.errors).toEqual([]);
    expect(r.jobs.filter((j) => j.kind === "speech").map((j) => j.points)).toEqual([
      null,
      null,
      null,
      null,
      null,
    ]);
    expect(r.points).toEqual({ video: 630, speech: null, total: null });
    expect(r.speechPrice).toEqual({ value: null, source: "unknown", countedChars: 83 });

    const human = await run(["plan", file]);
    expect(human.code).toBe(0);
    expect(human.text).toContain("speech cost unknown");
    expect(human.text).toMatch(/speech\s+5 jobs\s+\? points/);
    expect(human.text).toMatch(/total\s+12 jobs\s+\? points/);
    expect(human.text).toContain("budget:  max_points 5000: unknown");

    const json = JSON.parse((await run(["plan", file, "--json"])).text);
    expect(json.points).toEqual({ video: 630, speech: null, total: null });
    expect(json.jobs.find((j: { id: string }) => j.id === "line/n01").points).toBeNull();
  });

  it("with --speech-price N offline: that price, said to come from the option", async () => {
    const file = staged.path("good/inline.yaml");
    const json = JSON.parse((await run(["plan", file, "--json", "--speech-price", "5"])).text);
    // 31, 4, 24, 9, 15 counted characters at 5 per 10: 15.5, 2, 12, 4.5, 7.5 -> 16 + 2 + 12 + 5 + 8
    expect(
      json.jobs.filter((j: { kind: string }) => j.kind === "speech").map((j: { points: number }) => j.points),
    ).toEqual([16, 2, 12, 5, 8]);
    expect(json.points).toEqual({ video: 630, speech: 43, total: 673 });
    expect(json.speech_price).toEqual({ value: 5, source: "option", counted_characters: 83 });
    const human = (await run(["plan", file, "--speech-price", "5"])).text;
    expect(human).toContain("83 counted characters at 5 points per 10 (--speech-price)");
    expect(human).toContain("budget:  max_points 5000: fits");
  });
});

describe("with a service (sandbox): price, balance, budget, voices and skills", () => {
  let sb: Sandbox;
  const env = () => ({ CLAPPER_BASE_URL: sb.url, CLAPPER_API_KEY: KEY, CLAPPER_LOG_LEVEL: "silent" });
  const run = async (args: string[]) => {
    const out: string[] = [];
    const code = await main(args, { env: env(), stdout: (t) => out.push(t) });
    return { code, text: out.join("\n") };
  };

  beforeAll(async () => {
    sb = await sandbox({ points: 1000 });
  });
  afterAll(() => sb?.close());

  it("takes the price from the service (over --speech-price) and shows the balance it fits", async () => {
    await call(sb.url, "POST", "/_sandbox/pricing", { body: { text_to_speech: 3 } });
    const { code, text } = await run(["plan", staged.path("good/bare.csv"), "--speech-price", "9"]);
    expect(code).toBe(0);
    // 25 + 80 video; 17 and 4 counted characters at 3 per 10: 5.1 -> 6, 1.2 -> 2
    expect(text).toMatch(/video\s+2 jobs\s+105 points/);
    expect(text).toMatch(
      /speech\s+2 jobs\s+8 points\s+\(21 counted characters at 3 points per 10 \(service price\)\)/,
    );
    expect(text).toMatch(/total\s+4 jobs\s+113 points/);
    expect(text).toContain("balance: 1000 points available: fits");
    await call(sb.url, "POST", "/_sandbox/pricing", { body: { text_to_speech: 2 } });
  });

  it("says when the total does not fit the balance", async () => {
    // good/inline.yaml: 630 video + 18 speech at 2 per 10 = 648 of 1000 fits; 4 x that does not.
    const fits = JSON.parse((await run(["plan", staged.path("good/inline.yaml"), "--json"])).text);
    expect(fits.points).toEqual({ video: 630, speech: 18, total: 648 });
    expect(fits.balance).toMatchObject({ available_points: 1000 });
    expect(fits.fits).toBe(true);

    const file = await manifest(`name: big
shots:
  - { id: a, prompt: x, resolution: 4K, duration: 30, takes: 2 }
`);
    const { code, text } = await run(["plan", file]);
    expect(code).toBe(0); // plan reports; the run refuses
    expect(text).toMatch(/total\s+2 jobs\s+1320 points/);
    expect(text).toContain("balance: 1000 points available: DOES NOT FIT");
    const json = JSON.parse((await run(["plan", file, "--json"])).text);
    expect(json.fits).toBe(false);
  });

  it("says when the total does not fit the manifest's budget, though it fits the balance", async () => {
    const { text } = await run(["plan", staged.path("service/budget.yaml")]);
    // 19 x 10 = 190 video + ceil(31 x 2 / 10) = 7 speech = 197 > 150
    expect(text).toMatch(/total\s+2 jobs\s+197 points/);
    expect(text).toContain("balance: 1000 points available: fits");
    expect(text).toContain("budget:  max_points 150: DOES NOT FIT");
    const json = JSON.parse((await run(["plan", staged.path("service/budget.yaml"), "--json"])).text);
    expect(json).toMatchObject({ fits: false, budget: { max_points: 150 }, points: { total: 197 } });
  });

  it("reports unknown preset and custom voices and unknown skills at their rows", async () => {
    const offline = await plan({ manifest: "service/checks.yaml", cwd: staged.root });
    expect(offline.errors).toEqual([]);

    const { code, text } = await run(["plan", staged.path("service/checks.yaml"), "--json"]);
    expect(code).toBe(2);
    const errors = (JSON.parse(text.replaceAll(`${staged.root}/`, "")) as { errors: string[] }).errors;
    expect(errors).toEqual([
      'service/checks.yaml:9: skill: no skill "film-noir-2" in the manifest\'s skills or on the service (see clapper skills list)',
      'service/checks.yaml:21: skill: no skill "film-noir-2" in the manifest\'s skills or on the service (see clapper skills list)',
      'service/checks.yaml:30: voice: the service has no preset voice "en_male_deeep" (see clapper voices list)',
      'service/checks.yaml:33: voice: the service has no custom voice "voice_nobody" (see clapper voices list --custom)',
    ]);
  });

  it("accepts a custom voice the organization has", async () => {
    const wav = staged.path("materials/voice.wav");
    const created = await run(["voices", "create", "maren", wav, "--json"]);
    expect(created.code).toBe(0);
    const voiceId = JSON.parse(created.text).voice_id as string;
    const file = await manifest(`name: custom
lines:
  - { id: n01, text: hello, voice: "custom:${voiceId}", language: EN }
  - { id: n02, text: hello, voice: "custom:${voiceId}x", language: EN }
`);
    const { code, text } = await run(["plan", file, "--json"]);
    expect(code).toBe(2);
    const errors = JSON.parse(text).errors as string[];
    expect(errors).toHaveLength(1);
    expect(errors[0]).toContain(`:4: voice: the service has no custom voice "${voiceId}x"`);
  });

  it("refuses speech when the service has speech billing disabled", async () => {
    await call(sb.url, "POST", "/_sandbox/pricing", { body: { enabled: false } });
    try {
      const { code, text } = await run(["plan", staged.path("service/budget.yaml"), "--json"]);
      expect(code).toBe(2);
      expect(JSON.parse(text).errors.join("\n")).toContain("speech billing is disabled on the service");
      // Without lines, disabled speech billing does not matter.
      const videoOnly = await manifest("name: v\nshots:\n  - { id: a, prompt: x }\n");
      expect((await run(["plan", videoOnly])).code).toBe(0);
    } finally {
      await call(sb.url, "POST", "/_sandbox/pricing", { body: { enabled: true } });
    }
  });
});

describe("renderPlan", () => {
  it("says nothing about the speech price when there are no lines", async () => {
    const r = await plan({ manifest: await manifest("name: v\nshots:\n  - { id: a, prompt: x }\n") });
    expect(renderPlan(r).split("\n").slice(1)).toEqual([
      "  video       1 job          50 points   (768P: 1 job, 50 points)",
      "  speech      0 jobs          0 points",
      "  total       1 job          50 points",
    ]);
  });

  it("refuses a --speech-price that is not a number of points", async () => {
    const r = await plan({ manifest: "good/bare.csv", cwd: staged.root, speechPrice: Number.NaN });
    expect(r.errors.map((p) => `${p.file}: ${p.message}`)).toEqual([
      "--speech-price: expected points per 10 counted characters (a number >= 0), got NaN",
    ]);
    const negative = await plan({ manifest: "good/bare.csv", cwd: staged.root, speechPrice: -1 });
    expect(negative.errors).toHaveLength(1);
  });

  it("lists jobs and points per kind and resolution, and the total", async () => {
    const r = await plan({ manifest: "good/inline.yaml", cwd: staged.root, speechPrice: 2 });
    const text = renderPlan(r);
    expect(text.split("\n")).toEqual([
      "plan for good-inline (good/inline.yaml)",
      "  video       7 jobs        630 points   (480P: 1 job, 50 points; 768P: 1 job, 50 points; 1080P: 3 jobs, 342 points; 2K: 1 job, 100 points; 4K: 1 job, 88 points)",
      "  speech      5 jobs         18 points   (83 counted characters at 2 points per 10 (--speech-price))",
      "  total      12 jobs        648 points",
      "budget:  max_points 5000: fits",
    ]);
  });
});
