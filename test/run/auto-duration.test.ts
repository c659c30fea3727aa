// `duration: auto`: shots timed to their narration. Against the sandbox over loopback: the lines are
// generated first, each shot's real length (read back from the MP4 on disk) is its lines' WAV lengths
// plus lead, gaps and tail rounded up; an edited line re-times and regenerates its own shot only;
// the budget admits auto shots at their longest; a failed line fails its shot before it costs
// anything; and every point reported is the balance's drop.
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseDocument } from "yaml";
import { fitSeconds, loadManifest } from "../../src/manifest/index.js";
import { wavSeconds } from "../../src/media/wav.js";
import { mediaCheckFile } from "../../src/results/stream-check.js";
import { cli, created, job, runIn, setup } from "./helpers.js";

const TIMING = { lead: 0.5, gap: 0.25, tail: 0.5 };

function manifest(lines: Array<{ id: string; shot?: string; text: string; speed?: number }>, extra = {}) {
  return {
    name: "ep01",
    output: "./out",
    timing: TIMING,
    defaults: {
      shot: { model: "Vid-H3", resolution: "480P", ratio: "16:9" },
      line: { language: "EN", voice: "preset:en_female_bright" },
    },
    shots: [
      { id: "s01", prompt: "A lighthouse at dusk", duration: "auto" },
      { id: "s02", prompt: "The lamp room", duration: "auto", takes: 2 },
      { id: "s03", prompt: "The sea", duration: 4 },
    ],
    lines,
    ...extra,
  };
}

const LINES = [
  { id: "n01", shot: "s01", text: "Every night, the light came on at seven." },
  { id: "n02", shot: "s01", text: "And every night, someone was watching from the cliffs above the bay." },
  { id: "n03", shot: "s02", text: "Nobody knew who." },
  { id: "n04", text: "A line of no shot." },
];

const yaml = (value: unknown) => parseDocument(JSON.stringify(value)).toString();

async function seconds(path: string, kind: "video" | "speech"): Promise<number> {
  if (kind === "speech") return wavSeconds(await readFile(path)) as number;
  return (await mediaCheckFile(path, { kind, maxBytes: 64 * 1024 * 1024 })).seconds;
}

describe("duration: auto", () => {
  it("generates the lines first, then each shot as long as its narration with lead, gaps and tail", async () => {
    const { s, w } = await setup();
    const path = await w.write("manifest.yaml", yaml(manifest(LINES)));
    const { outcome, logs } = await runIn(s, path);
    expect(outcome.exitCode).toBe(0);
    const out = w.out();
    // Every shot's length follows from its stored lines, read back from the files on disk.
    const n01 = await seconds(join(out, "lines/n01.wav"), "speech");
    const n02 = await seconds(join(out, "lines/n02.wav"), "speech");
    const n03 = await seconds(join(out, "lines/n03.wav"), "speech");
    const s01 = fitSeconds([n01, n02], TIMING).duration;
    const s02 = fitSeconds([n03], TIMING).duration;
    expect(s01).toBe(Math.ceil(0.5 + n01 + 0.25 + n02 + 0.5 - 1e-3));
    expect(s01).toBeGreaterThan(4);
    expect(await seconds(join(out, "shots/s01.mp4"), "video")).toBeCloseTo(s01, 1);
    expect(await seconds(join(out, "shots/s02-take-1.mp4"), "video")).toBeCloseTo(s02, 1);
    expect(await seconds(join(out, "shots/s02-take-2.mp4"), "video")).toBeCloseTo(s02, 1);
    expect(await seconds(join(out, "shots/s03.mp4"), "video")).toBeCloseTo(4, 1);
    // Lines first: no auto shot is created before every line of its own is stored.
    const events = logs.lines();
    const at = (jobId: string, event: string) =>
      events.findIndex((e) => e.job === jobId && e.event === event);
    for (const [shot, lines] of [
      ["shot/s01", ["line/n01", "line/n02"]],
      ["shot/s02/take-1", ["line/n03"]],
      ["shot/s02/take-2", ["line/n03"]],
    ] as const) {
      for (const line of lines) {
        expect(at(line, "stored")).toBeGreaterThanOrEqual(0);
        expect(at(line, "stored")).toBeLessThan(at(shot, "submitting"));
      }
    }
    // The review page says what the shot was timed to.
    const page = await readFile(join(out, "reports/report.html"), "utf8");
    expect(page).toContain(`${s01} (auto: ${Math.round((n01 + 0.25 + n02) * 1000) / 1000} s of narration)`);
    // The fitted shot is priced at its fitted length, and the points reported are the balance's drop.
    expect(job(outcome, "shot/s01").points).toBe(5 * s01);
    const report = outcome.report;
    expect(report?.points.spent).toBe((report?.points.balance_before ?? 0) - (await s.settledTotal()));
    // The fitted request is the very request an explicit duration makes: the same fingerprint.
    const explicit = await w.write(
      "explicit.yaml",
      yaml(manifest(LINES, { shots: [{ id: "s01", prompt: "A lighthouse at dusk", duration: s01 }] })),
    );
    const loaded = await loadManifest(explicit);
    expect(loaded.jobs.find((j) => j.id === "shot/s01")?.fingerprint).toBe(
      job(outcome, "shot/s01").fingerprint,
    );
  });

  it("re-times and regenerates only the shot whose line was edited, and reuses everything else", async () => {
    const { s, w } = await setup();
    const path = await w.write("manifest.yaml", yaml(manifest(LINES)));
    expect((await runIn(s, path)).outcome.exitCode).toBe(0);
    const before = await s.stats();
    const balance = await s.settledTotal();
    // Much longer narration for s02: its two takes get a longer duration; s01 is untouched.
    const edited = LINES.map((l) =>
      l.id === "n03"
        ? { ...l, text: "Nobody knew who it was, or why they watched, night after night, from the cliff." }
        : l,
    );
    await writeFile(path, yaml(manifest(edited)));
    const { outcome } = await runIn(s, path);
    expect(outcome.exitCode).toBe(0);
    const statuses = Object.fromEntries(outcome.report?.jobs.map((j) => [j.id, j.status]) ?? []);
    expect(statuses).toEqual({
      "shot/s01": "skipped",
      "shot/s02/take-1": "succeeded",
      "shot/s02/take-2": "succeeded",
      "shot/s03": "skipped",
      "line/n01": "skipped",
      "line/n02": "skipped",
      "line/n03": "succeeded",
      "line/n04": "skipped",
    });
    const after = await s.stats();
    expect(created(after) - created(before)).toBe(3);
    const n03 = await seconds(join(w.out(), "lines/n03.wav"), "speech");
    const fitted = fitSeconds([n03], TIMING).duration;
    expect(fitted).toBeGreaterThan(4);
    expect(await seconds(join(w.out(), "shots/s02-take-1.mp4"), "video")).toBeCloseTo(fitted, 1);
    expect(outcome.report?.points.spent).toBe(balance - (await s.settledTotal()));
    // And once more, nothing changed: nothing is created.
    const again = await runIn(s, path);
    expect(again.outcome.report?.counts.skipped).toBe(8);
    expect(created(await s.stats())).toBe(created(after));
  });

  it("with --fresh, waits for the lines made again (a new take of a line may be longer) before timing the shot", async () => {
    const { s, w } = await setup();
    const path = await w.write("manifest.yaml", yaml(manifest(LINES)));
    expect((await runIn(s, path)).outcome.exitCode).toBe(0);
    const before = created(await s.stats());
    const { outcome, logs } = await runIn(s, path, { fresh: true });
    expect(outcome.exitCode).toBe(0);
    expect(created(await s.stats()) - before).toBe(8);
    const events = logs.lines();
    const at = (jobId: string, event: string) =>
      events.findIndex((e) => e.job === jobId && e.event === event);
    for (const line of ["line/n01", "line/n02"]) {
      expect(at(line, "stored")).toBeGreaterThanOrEqual(0);
      expect(at(line, "stored")).toBeLessThan(at("shot/s01", "timed"));
      expect(at(line, "stored")).toBeLessThan(at("shot/s01", "submitting"));
    }
  });

  it("keeps a shot whose edited line has the same fitted length: re-timed, not regenerated", async () => {
    const { s, w } = await setup();
    const path = await w.write("manifest.yaml", yaml(manifest(LINES)));
    expect((await runIn(s, path)).outcome.exitCode).toBe(0);
    const before = created(await s.stats());
    // Same counted characters (the sandbox's length follows them): a new line, the same length.
    const edited = LINES.map((l) => (l.id === "n03" ? { ...l, text: "Nobody knew why." } : l));
    await writeFile(path, yaml(manifest(edited)));
    const { outcome } = await runIn(s, path);
    expect(outcome.exitCode).toBe(0);
    expect(job(outcome, "line/n03").status).toBe("succeeded");
    expect(job(outcome, "shot/s02/take-1").status).toBe("skipped");
    expect(job(outcome, "shot/s02/take-2").status).toBe("skipped");
    expect(created(await s.stats()) - before).toBe(1);
  });

  it("admits auto shots at the longest they could be: a budget that fits only the estimate refuses before any create", async () => {
    const { s, w } = await setup();
    const path = await w.write("manifest.yaml", yaml(manifest(LINES)));
    const planned = await cli(s, ["plan", path, "--json"]);
    const plan = JSON.parse(planned.out);
    const estimate = plan.points.total as number;
    const atMost = plan.auto.at_most as number;
    // Three auto shots at 480P (5 points a second): each may cost up to 30 s, 150 points.
    expect(plan.auto.shots).toBe(3);
    expect(atMost - estimate).toBe(
      plan.jobs
        .filter((j: any) => j.auto)
        .reduce((sum: number, j: any) => sum + (j.auto.max_points - j.points), 0),
    );
    const text = (await cli(s, ["plan", path])).out;
    const durations = plan.jobs.filter((j: any) => j.auto).map((j: any) => j.duration);
    expect(text).toContain(`estimated: s01 ~${durations[0]} s, s02 ~${durations[1]} s\n`);
    expect(text).toContain(`at most ${atMost} points`);
    for (const j of plan.jobs.filter((x: any) => x.auto)) {
      expect(j.auto.estimated).toBe(true);
      expect(j.auto.max_points).toBe(150);
    }
    await writeFile(path, yaml(manifest(LINES, { budget: { max_points: estimate + 10 } })));
    const refused = await runIn(s, path);
    expect(refused.outcome.exitCode).toBe(3);
    expect(created(await s.stats())).toBe(0);
    await writeFile(path, yaml(manifest(LINES, { budget: { max_points: atMost } })));
    const admitted = await runIn(s, path);
    expect(admitted.outcome.exitCode).toBe(0);
    // What was held was the longest; what was spent is the fitted price.
    expect(admitted.outcome.report?.points.spent).toBeLessThan(atMost);
  });

  it("makes a shot whose narration is longer than any shot the longest (30 s), with a warning in the report", async () => {
    const { s, w } = await setup();
    const long = "The keeper climbed the stairs again tonight ".repeat(12).trim();
    const path = await w.write(
      "manifest.yaml",
      yaml({
        ...manifest([{ id: "n01", shot: "s01", text: long }]),
        shots: [{ id: "s01", prompt: "Stairs", duration: "auto" }],
      }),
    );
    const { outcome } = await runIn(s, path);
    expect(outcome.exitCode).toBe(0);
    const n01 = await seconds(join(w.out(), "lines/n01.wav"), "speech");
    expect(n01 + 1).toBeGreaterThan(30);
    expect(await seconds(join(w.out(), "shots/s01.mp4"), "video")).toBeCloseTo(30, 1);
    expect(job(outcome, "shot/s01").warnings).toEqual([
      expect.stringMatching(
        /^its narration takes [\d.]+ s with lead and tail, longer than the longest shot \(30 s\)/,
      ),
    ]);
  });

  it("fails a shot whose line failed, without creating it, and says why", async () => {
    const { s, w } = await setup();
    const lines = LINES.map((l) => (l.id === "n03" ? { ...l, text: "Nobody knew who. [sandbox:fail]" } : l));
    const path = await w.write("manifest.yaml", yaml(manifest(lines)));
    const { outcome } = await runIn(s, path, { maxAttempts: 1 });
    expect(outcome.exitCode).toBe(1);
    for (const id of ["shot/s02/take-1", "shot/s02/take-2"]) {
      const shot = job(outcome, id);
      expect(shot.status).toBe("failed");
      expect(shot.task_id).toBeNull();
      expect(shot.error?.code).toBe("narration_missing");
      expect(shot.error?.message).toMatch(/line\/n03 failed/);
    }
    expect(job(outcome, "shot/s01").status).toBe("succeeded");
    const st = await s.stats();
    // s01, s03 and four lines: the failed line's shot was never created.
    expect(st.tasks_created.video).toBe(2);
    expect(outcome.report?.points.spent).toBe(
      (outcome.report?.points.balance_before ?? 0) - (await s.settledTotal()),
    );
  });
});

describe("duration: auto in the manifest", () => {
  it("is refused on a shot no line names, at its file and line", async () => {
    const { w } = await setup();
    const path = await w.write("manifest.yaml", yaml(manifest(LINES.filter((l) => l.shot !== "s02"))));
    const loaded = await loadManifest(path);
    const error = loaded.errors.find((e) => e.field === "duration");
    expect(error?.message).toMatch(/no line names this shot \(add lines with shot: s02/);
    expect(error?.line).toBeGreaterThan(1);
  });

  it("is read from CSV cells, and warns at plan time when the narration is longer than any shot", async () => {
    const { w } = await setup();
    const long = "word ".repeat(120);
    await w.write("shots.csv", "id,prompt,duration\ns01,A lighthouse,auto\ns02,The sea,AUTO\n");
    await w.write("lines.csv", `id,shot,text\nn01,s01,Hello there.\nn02,s02,${long}\n`);
    const path = await w.write(
      "manifest.yaml",
      yaml({
        name: "ep01",
        defaults: { line: { voice: "preset:en_female_bright" } },
        shots: "shots.csv",
        lines: "lines.csv",
      }),
    );
    const loaded = await loadManifest(path);
    expect(loaded.errors).toEqual([]);
    const warning = loaded.warnings.find((p) => p.field === "duration");
    expect(warning?.file).toMatch(/shots\.csv$/);
    expect(warning?.line).toBe(3);
    expect(warning?.message).toMatch(/longer than the longest shot \(30 s\)/);
    const s02 = loaded.jobs.find((j) => j.id === "shot/s02");
    expect(s02?.kind === "video" && s02.duration).toBe(30);
    const bad = await w.write("bad.csv", "kind,id,prompt,duration\nshot,s01,x,soon\n");
    const refused = await loadManifest(bad);
    expect(refused.errors[0]?.message).toBe('expected an integer or auto, got "soon"');
  });

  it("refuses timing values out of range, naming the field", async () => {
    const { w } = await setup();
    const path = await w.write(
      "manifest.yaml",
      yaml(manifest(LINES, { timing: { lead: -1, gap: 0.2, tial: 1 } })),
    );
    const loaded = await loadManifest(path);
    const messages = loaded.errors.map((e) => `${e.field}: ${e.message}`);
    expect(messages).toContain("timing.lead: expected seconds from 0 to 10, got -1");
    expect(messages.some((m) => m.startsWith("timing.tial: unknown field") && m.includes("tail"))).toBe(true);
  });
});
