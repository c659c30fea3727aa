// Kill test of shots timed to their narration: a shot's create comes late in the run (after its
// lines are stored, fitted and declared), a new path to a paid task. Each iteration SIGKILLs the
// runner (a separate process) at a chosen moment of that path, or stops it with SIGTERM (exit 4),
// or kills it after a random delay, then runs it again until it ends with 0; one iteration edits a
// line between kills. After each: the tasks the sandbox created, the points the report says were
// spent and the balance's drop agree, every stored file has the size and sha256 the report gives,
// and every shot on disk is as long as its stored narration says.
//
// Seeded: CLAPPER_KILL_SEED=N replays a failing sequence (the seed is in every failure's message).
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fitSeconds } from "../../src/manifest/index.js";
import { wavSeconds } from "../../src/media/wav.js";
import { mediaCheckFile } from "../../src/results/stream-check.js";
import {
  cli,
  cliEnv,
  journalRecords,
  type LogEvent,
  readReport,
  replay,
  rng,
  type SandboxProcess,
  settledBalance,
  staleBuild,
  startSandbox,
  statsDelta,
  verifyOutputs,
  workspace,
} from "./harness.js";

const SEED = Number(process.env.CLAPPER_KILL_SEED ?? Math.floor(Math.random() * 2 ** 31));
const random = rng(SEED);
const FLAGS = ["--log-format", "json", "--poll-interval", "0.05"];
const TIMING = { lead: 0.5, gap: 0.25, tail: 0.5 };

function manifest(name: string, n02 = "And every night, someone was watching from the cliffs."): string {
  return `${[
    `name: ${name}`,
    "output: ./output",
    "timing: { lead: 0.5, gap: 0.25, tail: 0.5 }",
    "defaults:",
    '  shot: { model: Vid-H3, resolution: 480P, ratio: "16:9" }',
    '  line: { language: EN, voice: "preset:en_female_bright" }',
    "shots:",
    "  - { id: s01, prompt: A lighthouse at dusk, duration: auto }",
    "  - { id: s02, prompt: The lamp room, duration: auto, takes: 2 }",
    "  - { id: s03, prompt: The sea, duration: 4 }",
    "lines:",
    '  - { id: n01, shot: s01, text: "Every night, the light came on at seven." }',
    `  - { id: n02, shot: s02, text: "${n02}" }`,
    '  - { id: n03, shot: s02, text: "Nobody knew who." }',
  ].join("\n")}\n`;
}
const JOBS = 7;

type When = (e: LogEvent, events: readonly LogEvent[]) => boolean;
const on =
  (event: string, jobPrefix: string, k = 1): When =>
  (e, events) =>
    e.event === event &&
    String(e.job ?? "").startsWith(jobPrefix) &&
    events.filter((x) => x.event === event && String(x.job ?? "").startsWith(jobPrefix)).length === k;

interface Kill {
  what: string;
  when?: When;
  /** The signal sent at `when`: SIGKILL (default), or SIGTERM (a graceful stop: exit 4). */
  signal?: "SIGKILL" | "SIGTERM";
  afterMs?: number;
  /** Edit line n02 before the run after this kill. */
  editAfter?: boolean;
}

let sb: SandboxProcess;
let counter = 0;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  sb = await startSandbox(0.002);
});

afterAll(async () => {
  await sb?.close();
});

async function iteration(label: string, kills: Kill[]) {
  const name = `auto-${++counter}-${label}`;
  const ws = await workspace(name, { text: manifest(name) });
  const context = `${name} (seed ${SEED})`;
  try {
    const before = await sb.stats();
    const balanceBefore = await settledBalance(sb);
    let edited = false;
    let code: number | null = null;
    let finishedReport: Awaited<ReturnType<typeof readReport>> | undefined;
    for (let i = 0; i < kills.length + 3; i++) {
      const kill = kills[i];
      const when = kill?.when;
      const r = await cli(["run", ws.manifest, ...FLAGS], {
        cwd: ws.dir,
        env: cliEnv(sb),
        ...(when ? { on: (e, events) => (when(e, events) ? (kill.signal ?? "SIGKILL") : undefined) } : {}),
        ...(kill?.afterMs !== undefined ? { killAfterMs: kill.afterMs } : {}),
      }).done;
      code = r.code;
      // A kill on a moment of the path must land there: a run that ended first tested nothing.
      if (when && kill.signal === "SIGTERM") expect(r.code, `${context}: stopped ${kill.what}`).toBe(4);
      else if (when) expect(r.signal, `${context}: killed ${kill.what}`).toBe("SIGKILL");
      if (kill?.editAfter && !edited) {
        edited = true;
        await writeFile(
          ws.manifest,
          manifest(name, "And every night, someone watched the light turn, and turn, and turn."),
        );
      }
      // A kill that landed after the run recorded its end (a random one, on a loaded machine) found
      // the campaign over: that run's report is the campaign's, and the run after it a new one.
      if (
        r.signal === "SIGKILL" &&
        replay(await journalRecords(ws.statePath)).run?.finished_at !== undefined
      ) {
        finishedReport ??= await readReport(ws);
      }
      // A run that ended 0 finished the campaign: a run after it would start a new one (its report
      // would show none of what was paid), so a kill not reached yet is left unused.
      if (r.code === 0) break;
    }
    expect(code, context).toBe(0);
    const last = await readReport(ws);
    const report = finishedReport ?? last;
    if (finishedReport) {
      // The campaign had ended before the kill: the run after it reuses every output, pays nothing.
      expect(last.counts, context).toMatchObject({ total: JOBS, skipped: JOBS, succeeded: 0 });
      expect(last.points.spent, context).toBe(0);
    }
    const after = await settledBalance(sb);
    const delta = statsDelta(before, await sb.stats());
    // Money: every point the sandbox took is in the report, and nothing was paid twice.
    expect(report.points.spent, context).toBe(balanceBefore.total_points - after.total_points);
    if (!edited) expect(delta.tasks, context).toBe(JOBS);
    else expect(delta.tasks, context).toBeLessThanOrEqual(JOBS + 3);
    expect(report.counts.succeeded + report.counts.skipped, context).toBe(JOBS);
    // Every stored file is the one the report names: its size and sha256.
    expect(await verifyOutputs(report), context).toEqual([]);
    // Every auto shot is as long as its stored narration says.
    const out = ws.outputDir;
    const wav = async (id: string) => wavSeconds(await readFile(join(out, `lines/${id}.wav`))) as number;
    const mp4 = async (key: string) =>
      (await mediaCheckFile(join(out, `shots/${key}.mp4`), { kind: "video", maxBytes: 1 << 26 })).seconds;
    expect(await mp4("s01"), context).toBeCloseTo(fitSeconds([await wav("n01")], TIMING).duration, 1);
    const s02 = fitSeconds([await wav("n02"), await wav("n03")], TIMING).duration;
    expect(await mp4("s02-take-1"), context).toBeCloseTo(s02, 1);
    expect(await mp4("s02-take-2"), context).toBeCloseTo(s02, 1);
  } finally {
    await ws.remove();
  }
}

describe("duration: auto under SIGKILL", () => {
  const plans: Array<[string, Kill[]]> = [
    ["at-fit", [{ what: "as the shot is timed", when: on("timed", "shot/s02") }]],
    ["at-submit", [{ what: "as an auto shot is submitted", when: on("submitting", "shot/s02") }]],
    ["at-create", [{ what: "as an auto shot's task is created", when: on("created", "shot/s01") }]],
    [
      "sigterm-at-fit",
      [{ what: "as the shot is timed (SIGTERM)", when: on("timed", "shot/s02"), signal: "SIGTERM" }],
    ],
    [
      "sigterm-at-submit",
      [
        {
          what: "as an auto shot is submitted (SIGTERM)",
          when: on("submitting", "shot/s01"),
          signal: "SIGTERM",
        },
      ],
    ],
    [
      "twice",
      [
        { what: "as a line is stored", when: on("stored", "line/n0") },
        { what: "as the second take is created", when: on("created", "shot/s02/take-2") },
      ],
    ],
    [
      "edited",
      [
        {
          what: "as an auto shot's task is created, then edit its line",
          when: on("created", "shot/s02"),
          editAfter: true,
        },
        { what: "random", afterMs: 150 + Math.floor(random() * 600) },
      ],
    ],
    [
      "random",
      [
        { what: "random", afterMs: 100 + Math.floor(random() * 900) },
        { what: "random", afterMs: 100 + Math.floor(random() * 900) },
      ],
    ],
  ];
  for (const [label, kills] of plans) {
    it(`keeps every promise when killed ${label}`, { timeout: 60_000 }, async () => {
      await iteration(label, kills);
    });
  }
});
