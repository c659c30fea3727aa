// Fingerprints decide reuse: a hash of the fully resolved request, local materials by content.
// Stable across runs and across YAML and CSV; changed by anything that changes the request;
// unchanged by where a material or the manifest lives; different for each take.
import { mkdir, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadManifest } from "../../src/manifest/index.js";
import { makeWav } from "../../src/sandbox/media.js";
import { type Staged, stageFixtures } from "../fixtures/manifests/stage.js";

const BASE_MANIFEST = `name: fp
vars:
  show: The Lighthouse
defaults:
  shot: { resolution: 768P, ratio: "16:9" }
  line: { language: EN, voice: "preset:en_male_deep" }
shots:
  - id: s01
    prompt: A lighthouse at dusk
    duration: 5
    first_frame: materials/frame.png
  - id: s02
    template: shot
    vars: { subject: the keeper }
    takes: 2
lines:
  - id: n01
    text: Every night the light came on at seven.
  - id: n02
    text: Old Maren climbed the stairs.
    voice: materials/voice.wav
`;

const BASE_FILES: Record<string, string | Buffer> = {
  "fp.yaml": BASE_MANIFEST,
  "templates/shot.txt": "{{show}}: {{subject}}\n",
  "materials/frame.png": Buffer.from("\x89PNG frame one"),
  "materials/voice.wav": makeWav(800),
};

let root: string;
let n = 0;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "clapper-fp-"));
});
afterAll(() => rm(root, { recursive: true, force: true }));

/** A fresh folder with the base files, changed by `edit`; returns job id -> fingerprint. */
async function fingerprints(
  edit: (files: Record<string, string | Buffer>) => void = () => {},
  after?: (dir: string) => Promise<void>,
  manifest = "fp.yaml",
): Promise<Record<string, string>> {
  const dir = join(root, `case-${n++}`);
  const files = { ...BASE_FILES };
  edit(files);
  for (const [name, data] of Object.entries(files)) {
    await mkdir(dirname(join(dir, name)), { recursive: true });
    await writeFile(join(dir, name), data);
  }
  await after?.(dir);
  const r = await loadManifest(join(dir, manifest), { cwd: dir });
  expect(r.errors).toEqual([]);
  return Object.fromEntries(r.jobs.map((j) => [j.id, j.fingerprint]));
}

const replace = (from: string, to: string) => (files: Record<string, string | Buffer>) => {
  const text = String(files["fp.yaml"]);
  expect(text).toContain(from);
  files["fp.yaml"] = text.replace(from, to);
};

/** The ids whose fingerprint differs from the base. */
function changed(base: Record<string, string>, other: Record<string, string>): string[] {
  expect(Object.keys(other)).toEqual(Object.keys(base));
  return Object.keys(base).filter((id) => base[id] !== other[id]);
}

let base: Record<string, string>;
beforeAll(async () => {
  base = await fingerprints();
});

describe("fingerprints are stable", () => {
  it("are sha256 hex, one per job, and the same on every run", async () => {
    expect(Object.keys(base)).toEqual([
      "shot/s01",
      "shot/s02/take-1",
      "shot/s02/take-2",
      "line/n01",
      "line/n02",
    ]);
    for (const fp of Object.values(base)) expect(fp).toMatch(/^[0-9a-f]{64}$/);
    expect(await fingerprints()).toEqual(base);
  });

  it("do not depend on the working directory the plan runs from", async () => {
    const dir = join(root, "cwd-check");
    for (const [name, data] of Object.entries(BASE_FILES)) {
      await mkdir(dirname(join(dir, name)), { recursive: true });
      await writeFile(join(dir, name), data);
    }
    const a = await loadManifest(join(dir, "fp.yaml"), { cwd: dir });
    const b = await loadManifest(join(dir, "fp.yaml"), { cwd: tmpdir() });
    expect(a.jobs.map((j) => j.fingerprint)).toEqual(b.jobs.map((j) => j.fingerprint));
    expect(a.jobs[0]?.file).not.toBe(b.jobs[0]?.file);
  });

  it("differ between the takes of one shot", () => {
    expect(base["shot/s02/take-1"]).not.toBe(base["shot/s02/take-2"]);
  });

  it("are the same for a shot and a line written in YAML and in CSV", async () => {
    const staged: Staged = await stageFixtures();
    try {
      const yaml = await loadManifest("good/same.yaml", { cwd: staged.root });
      const csv = await loadManifest("good/same.csv", { cwd: staged.root });
      expect(yaml.errors).toEqual([]);
      expect(csv.errors).toEqual([]);
      expect(yaml.jobs.map((j) => j.id)).toEqual(["shot/s01/take-1", "shot/s01/take-2", "line/n01"]);
      expect(csv.jobs.map((j) => [j.id, j.fingerprint])).toEqual(yaml.jobs.map((j) => [j.id, j.fingerprint]));
    } finally {
      await staged.remove();
    }
  });

  it("do not change when a local material or voice file moves or is renamed with the same content", async () => {
    const moved = await fingerprints((files) => {
      files["elsewhere/still.png"] = files["materials/frame.png"] as Buffer;
      files["voices/maren-take-2.wav"] = files["materials/voice.wav"] as Buffer;
      delete files["materials/frame.png"];
      delete files["materials/voice.wav"];
      replace("first_frame: materials/frame.png", "first_frame: elsewhere/still.png")(files);
      replace("voice: materials/voice.wav", "voice: voices/maren-take-2.wav")(files);
    });
    expect(moved).toEqual(base);
  });

  it("do not change when the manifest is renamed, re-commented or reordered", async () => {
    const renamed = await fingerprints(
      (files) => {
        replace("name: fp", "# the same jobs\nname: fp-renamed")(files);
        files["fp.yaml"] = String(files["fp.yaml"]).replace(
          "    prompt: A lighthouse at dusk\n    duration: 5\n",
          "    duration: 5\n    prompt: A lighthouse at dusk\n",
        );
      },
      (dir) => rename(join(dir, "fp.yaml"), join(dir, "other.yaml")),
      "other.yaml",
    );
    expect(renamed).toEqual(base);
  });
});

describe("fingerprints change with the request", () => {
  const cases: Array<[string, (files: Record<string, string | Buffer>) => void, string[]]> = [
    ["a prompt", replace("A lighthouse at dusk", "A lighthouse at dawn"), ["shot/s01"]],
    ["a duration", replace("duration: 5", "duration: 6"), ["shot/s01"]],
    [
      "a shot default",
      replace('shot: { resolution: 768P, ratio: "16:9" }', 'shot: { resolution: 768P, ratio: "9:16" }'),
      ["shot/s01", "shot/s02/take-1", "shot/s02/take-2"],
    ],
    [
      "a line default",
      replace(
        'line: { language: EN, voice: "preset:en_male_deep" }',
        'line: { language: EN, voice: "preset:en_female_bright" }',
      ),
      ["line/n01"], // n02 has its own voice
    ],
    [
      "a template",
      (files) => {
        files["templates/shot.txt"] = "{{show}} - {{subject}}\n";
      },
      ["shot/s02/take-1", "shot/s02/take-2"],
    ],
    [
      "a global var",
      replace("show: The Lighthouse", "show: The Beacon"),
      ["shot/s02/take-1", "shot/s02/take-2"],
    ],
    [
      "a row var",
      replace("subject: the keeper", "subject: the keeper's wife"),
      ["shot/s02/take-1", "shot/s02/take-2"],
    ],
    [
      "a local material's content",
      (files) => {
        files["materials/frame.png"] = Buffer.from("\x89PNG frame two");
      },
      ["shot/s01"],
    ],
    [
      "a reference voice file's content",
      (files) => {
        files["materials/voice.wav"] = makeWav(900);
      },
      ["line/n02"],
    ],
    ["a line's text", replace("came on at seven", "came on at eight"), ["line/n01"]],
    [
      "saving the voice file as a custom voice",
      replace("voice: materials/voice.wav", "voice: materials/voice.wav\n    save_voice_as: maren"),
      ["line/n02"],
    ],
    [
      "a shot's own resolution",
      replace("takes: 2", "takes: 2\n    resolution: 1080P"),
      ["shot/s02/take-1", "shot/s02/take-2"],
    ],
  ];

  it.each(cases)("%s", async (_, edit, expected) => {
    expect(changed(base, await fingerprints(edit))).toEqual(expected);
  });
});
