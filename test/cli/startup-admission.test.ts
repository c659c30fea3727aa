// The way from a run's start to its first create, in process: the plan asks the services for the
// price and balance (one answer: the speech pricing carries the account's balance, so the video
// summary is not asked), the voices and the skills at once (one round trip, not three), its failure
// is the one it was when they were asked one after another; and a local output answers what it
// holds for thousands of jobs with a listing per folder instead of a failed stat per job.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Clients } from "../../src/api/index.js";
import { plan } from "../../src/run/plan.js";
import { LocalSink } from "../../src/sinks/local.js";

let root: string;
let manifest: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "clapper-startup-admission-"));
  manifest = join(root, "m.yaml");
  await writeFile(
    manifest,
    [
      "name: m",
      "shots:",
      "  - { id: s1, prompt: x, skill: noir, use_context_ir: true }",
      "lines:",
      '  - { id: n1, text: hello, voice: "preset:p1", language: EN }',
      '  - { id: n2, text: hello, voice: "custom:c1", language: EN }',
      "",
    ].join("\n"),
  );
});
afterAll(() => rm(root, { recursive: true, force: true }));

type Answer = { resolve: (value: unknown) => void; reject: (error: unknown) => void };

/** Clients whose every call waits until the test answers it; `asked` lists the calls made so far. */
function heldClients() {
  const asked: string[] = [];
  const answers = new Map<string, Answer>();
  const held = (name: string) =>
    new Promise((resolve, reject) => {
      asked.push(name);
      answers.set(name, { resolve, reject });
    });
  const clients = {
    speech: {
      pricing: () => held("pricing"),
      // The clients' list shapes: voices whole in one answer, skills a walk that says how it ended.
      listVoices: async (kind: string) => {
        const items = (await held(`voices ${kind}`)) as unknown[];
        return { items, total: items.length, complete: true };
      },
    },
    video: {
      pointsSummary: () => held("balance"),
      async *listSkills() {
        const skills = (await held("skills")) as Array<{ id: string; name: string }>;
        yield* skills;
        return { total: skills.length, seen: skills.length, complete: true };
      },
    },
  } as unknown as Pick<Clients, "video" | "speech">;
  const answer = (name: string) => answers.get(name) as Answer;
  return { clients, asked, answer };
}

const BALANCE = { total_points: 1000, reserved_points: 0, available_points: 1000 };
const PRICING = { enabled: true, costs: { text_to_speech: 2 }, pricing_version: "v1", balance: BALANCE };

/** Lets every pending callback run (the manifest is read from disk between the questions). */
const settle = async (asked: string[], count: number) => {
  for (let i = 0; i < 200 && asked.length < count; i++) await new Promise((r) => setTimeout(r, 5));
};

describe("the plan's questions to the services", () => {
  it("are all asked before any is answered", async () => {
    const { clients, asked, answer } = heldClients();
    const planned = plan({ manifest, clients });
    await settle(asked, 4);
    // The balance comes with the price: no second read for it.
    expect([...asked].sort()).toEqual(["pricing", "skills", "voices custom", "voices preset"]);
    answer("pricing").resolve(PRICING);
    answer("voices preset").resolve([{ voice_id: "p1" }]);
    answer("voices custom").resolve([{ voice_id: "c1" }]);
    answer("skills").resolve([{ id: "sk-1", name: "noir" }]);
    const r = await planned;
    expect(r.errors).toEqual([]);
    expect(r.balance?.available_points).toBe(1000);
    // Priced as a plan given the same price offline prices it.
    const offline = await plan({ manifest, speechPrice: 2 });
    expect(r.points).toEqual(offline.points);
    expect(r.jobs).toEqual(offline.jobs);
  });

  it("fail with the price's or the balance's error first, as when the voices were asked after them", async () => {
    const { clients, asked, answer } = heldClients();
    const planned = plan({ manifest, clients });
    await settle(asked, 4);
    // The voices fail first in time; the price's failure is still the one reported.
    answer("voices preset").reject(new Error("voices down"));
    answer("voices custom").resolve([]);
    answer("skills").resolve([]);
    answer("pricing").reject(new Error("pricing down"));
    await expect(planned).rejects.toThrow("pricing down");
  });

  it("fail with the voices' error when the price and the balance came", async () => {
    const { clients, asked, answer } = heldClients();
    const planned = plan({ manifest, clients });
    await settle(asked, 4);
    answer("pricing").resolve(PRICING);
    answer("voices preset").reject(new Error("voices down"));
    answer("voices custom").resolve([]);
    answer("skills").resolve([]);
    await expect(planned).rejects.toThrow("voices down");
  });
});

describe("a local output's statMany", () => {
  it("answers as stat does for each key, without a stat for the names a folder does not hold", async () => {
    const out = join(root, "out");
    const sink = new LocalSink(out);
    const keys = ["shots/a.mp4", "shots/b.mp4", "shots/dir.mp4", "lines/a.wav", "nowhere/x.wav", "../up.mp4"];
    // Nothing written yet: not even the folder.
    expect(await sink.statMany(keys)).toEqual(keys.map(() => undefined));
    await mkdir(join(out, "shots", "dir.mp4"), { recursive: true });
    await writeFile(join(out, "shots", "a.mp4"), "12345");
    await mkdir(join(out, "lines"), { recursive: true });
    await writeFile(join(out, "lines", "a.wav"), "123");
    const many = await sink.statMany(keys);
    const one = await Promise.all(keys.map((k) => sink.stat(k)));
    expect(many).toEqual(one);
    expect(many).toEqual([{ bytes: 5 }, undefined, undefined, { bytes: 3 }, undefined, undefined]);
  });

  it("asks the file system about a name the folder holds in another case (one file on macOS)", async () => {
    const out = join(root, "cased");
    const sink = new LocalSink(out);
    await mkdir(join(out, "shots"), { recursive: true });
    await writeFile(join(out, "shots", "S1.mp4"), "1");
    const keys = ["shots/s1.mp4", "shots/S1.mp4"];
    expect(await sink.statMany(keys)).toEqual(await Promise.all(keys.map((k) => sink.stat(k))));
  });
});
