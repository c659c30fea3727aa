// The live display as a person sees it: the real CLI (`node bin/clapper.js run --sandbox`) under a
// pseudo-terminal made by util-linux `script`, its whole output captured and played back on a small
// terminal emulator. Checked: the status line is redrawn in place, goes through the phases, the
// clock ticks every second, an ETA appears, a warning lands on its own line above the status line,
// every status fits the terminal's width, and the screen at the end is clean. A dumb terminal gets
// plain lines instead.
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BIN, staleBuild, type Workspace, workspace } from "../run/harness.js";

const ESC = String.fromCharCode(27);
const EL = `${ESC}[K`;
const COLUMNS = 60;
const PHASES = ["planning", "pre-flight", "submitting", "waiting", "collecting", "reporting"];
const HAVE_SCRIPT = process.platform === "linux" && existsSync("/usr/bin/script");

/** Two shots and two lines; the first shot fails at the service (a warning is logged for it). */
const MANIFEST = (name: string) => `name: ${name}
output: ./output
budget: { max_points: 500 }
defaults:
  shot: { model: Vid-H3, resolution: 768P, duration: 5, ratio: "16:9" }
  line: { language: EN, voice: "preset:en_female_bright" }
shots:
  - id: s01
    prompt: "Wide shot: a lighthouse on a cliff at dusk [sandbox:fail]"
  - id: s02
    prompt: "Close-up: the lamp room, the great lens starts to turn"
    duration: 4
    resolution: 480P
lines:
  - { id: n01, shot: s01, text: "Every night, the light came on at seven." }
  - { id: n02, shot: s02, text: "And every night, someone was watching.", speed: 0.9 }
`;

const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

interface Captured {
  code: number | null;
  /** Everything the terminal received, escape sequences included. */
  raw: string;
}

/** Runs `clapper run` in a pseudo-terminal of COLUMNS x 24 and captures what it shows. */
function runInPty(ws: Workspace, env: Record<string, string>): Promise<Captured> {
  const command = [
    `stty cols ${COLUMNS} rows 24;`,
    "exec",
    quote(process.execPath),
    quote(BIN),
    "run",
    quote(ws.manifest),
    "--sandbox",
    // A video takes about three seconds, long enough for the clock to tick.
    "--sandbox-time-scale 0.05",
    "--max-attempts 1",
  ].join(" ");
  const child = spawn("/usr/bin/script", ["-qfec", command, "/dev/null"], {
    cwd: ws.dir,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      COLUMNS: String(COLUMNS),
      LINES: "24",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let raw = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => {
    raw += d;
  });
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    raw += d;
  });
  const timer = setTimeout(() => child.kill("SIGKILL"), 40_000);
  return new Promise((resolve) => {
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, raw });
    });
  });
}

/**
 * The screen after playing `raw` on a terminal `columns` wide with unlimited scrollback: printable
 * characters (wrapping at the edge), CR, LF, and the CSI sequences a line display uses (erase in
 * line, erase below, cursor moves); others are ignored.
 */
function screen(raw: string, columns: number): string[] {
  const lines: string[][] = [[]];
  let row = 0;
  let col = 0;
  const line = () => {
    while (lines.length <= row) lines.push([]);
    return lines[row] as string[];
  };
  const chars = [...raw];
  for (let i = 0; i < chars.length; i++) {
    const ch = chars[i] as string;
    if (ch === "\r") col = 0;
    else if (ch === "\n") row++;
    else if (ch === "\b") col = Math.max(0, col - 1);
    else if (ch === ESC) {
      if (chars[i + 1] !== "[") {
        i++;
        continue;
      }
      let params = "";
      let j = i + 2;
      while (j < chars.length && !/[@-~]/.test(chars[j] as string)) params += chars[j++];
      const final = chars[j];
      i = j;
      const n = Number.parseInt(params, 10);
      if (params.startsWith("?")) continue;
      if (final === "K") {
        const l = line();
        if (params === "" || params === "0") l.length = Math.min(l.length, col);
        else if (params === "2") l.length = 0;
        else if (params === "1") for (let k = 0; k <= col && k < l.length; k++) l[k] = " ";
      } else if (final === "J") {
        line().length = Math.min(line().length, col);
        lines.length = row + 1;
      } else if (final === "A") row = Math.max(0, row - (n || 1));
      else if (final === "B") row += n || 1;
      else if (final === "C") col += n || 1;
      else if (final === "D") col = Math.max(0, col - (n || 1));
      else if (final === "G") col = (n || 1) - 1;
    } else if (ch >= " ") {
      if (col >= columns) {
        row++;
        col = 0;
      }
      const l = line();
      while (l.length < col) l.push(" ");
      l[col++] = ch;
    }
  }
  return lines.map((l) => l.join("").trimEnd());
}

/** Each status line drawn in place: the text before an "erase to end of line", after the last CR or LF. */
function frames(raw: string): string[] {
  return raw
    .split(EL)
    .slice(0, -1)
    .map((chunk) => chunk.slice(Math.max(chunk.lastIndexOf("\r"), chunk.lastIndexOf("\n")) + 1))
    .filter((f) => f.trim() !== "");
}

const isStatus = (line: string) =>
  PHASES.some((p) => line === p || line.startsWith(`${p} · `) || line.startsWith(`${p} | `));
const seconds = (text: string) => {
  const m = /(?:^| )(?:(\d+)m)?(\d+)s(?: |$)/.exec(text);
  return m ? Number(m[1] ?? 0) * 60 + Number(m[2]) : undefined;
};

describe.skipIf(!HAVE_SCRIPT)("the live display in a pseudo-terminal", () => {
  let ws: Workspace;
  let tty: Captured;
  let shown: string[];

  beforeAll(async () => {
    expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
    ws = await workspace("pty", { text: MANIFEST("pty") });
    tty = await runInPty(ws, { TERM: "xterm-256color", LANG: "C.UTF-8" });
    shown = screen(tty.raw, COLUMNS);
  }, 60_000);

  afterAll(async () => {
    await ws?.remove();
  });

  const context = () => `raw: ${JSON.stringify(tty.raw)}\nscreen:\n${shown.join("\n")}`;

  it("runs to its end (one job failed: partial, exit 1)", () => {
    expect(tty.code, context()).toBe(1);
    expect(shown, context()).toContain("run pty: partial");
  });

  it("redraws the status line in place, within the terminal's width", () => {
    const drawn = frames(tty.raw).filter(isStatus);
    expect(drawn.length, context()).toBeGreaterThanOrEqual(5);
    for (const f of drawn) expect(f.length, f).toBeLessThanOrEqual(COLUMNS - 1);
    // In place: carriage return and erase, no newline between two draws of the status.
    expect(tty.raw).toContain(EL);
    const between = tty.raw.split(EL).slice(1, -2);
    expect(between.filter((chunk) => chunk.startsWith("\r") && !chunk.includes("\n")).length).toBeGreaterThan(
      3,
    );
  });

  // Waits on run.ts emitting its phases (planning, and pre-flight when it lasts, before the plan is known).
  it("goes through the phases, from planning to reporting", () => {
    const phases = frames(tty.raw)
      .filter(isStatus)
      .map((f) => f.split(" ")[0]);
    const order = phases.filter((p, i) => p !== phases[i - 1]);
    expect(order[0], context()).toBe("planning");
    // A phase shorter than a frame may not be drawn at all (pre-flight with nothing to upload takes
    // milliseconds, its questions asked together); drawn, it comes before the jobs' phases.
    const preflight = order.indexOf("pre-flight");
    const jobs = order.findIndex((p) => p === "submitting" || p === "waiting" || p === "collecting");
    expect(preflight === -1 || preflight < jobs, context()).toBe(true);
    expect(
      order.some((p) => p === "submitting" || p === "waiting"),
      context(),
    ).toBe(true);
    expect(order.at(-1), context()).toBe("reporting");
  });

  it("ticks the clock every second", () => {
    const clock = frames(tty.raw)
      .filter(isStatus)
      .map((f) => seconds(f.split(/ [·|] /)[1] ?? ""))
      .filter((s) => s !== undefined);
    expect(clock.length, context()).toBeGreaterThan(0);
    const first = clock[0] as number;
    const last = clock.at(-1) as number;
    expect(last - first, context()).toBeGreaterThanOrEqual(2);
    // Never back, never a second skipped.
    for (let s = first; s <= last; s++) expect(clock, context()).toContain(s);
    for (let i = 1; i < clock.length; i++) expect(clock[i]).toBeGreaterThanOrEqual(clock[i - 1] as number);
  });

  // Waits on run.ts filling inFlight (with the video service's estimates) and durations.
  it("shows an ETA once there is a basis for it", () => {
    const withEta = frames(tty.raw).filter((f) => isStatus(f) && / ETA (\d|soon)/.test(f));
    expect(withEta.length, context()).toBeGreaterThan(0);
    // Not before the plan.
    for (const f of withEta) expect(f.startsWith("planning") || f.startsWith("pre-flight")).toBe(false);
  });

  // Waits on the CLI handing its pretty log lines to ProgressDisplay.log().
  it("prints the warning on its own line above the status line, not into it", () => {
    const warning = shown.findIndex((l) => l.includes("task failed"));
    expect(warning, context()).toBeGreaterThanOrEqual(0);
    const line = shown[warning] as string;
    expect(line.trimStart().startsWith("{"), `a JSON line: ${line}`).toBe(false);
    expect(isStatus(line) || line.includes(" ETA ") || line.includes("elapsed"), line).toBe(false);
    for (const f of frames(tty.raw)) expect(f, "a log line inside the status").not.toContain("task failed");
    // The status line was drawn again below it.
    const status = shown.findIndex(isStatus);
    expect(status, context()).toBeGreaterThan(warning);
  });

  it("leaves a clean screen: one final status line, then the summary", () => {
    const statuses = shown.filter(isStatus);
    expect(statuses, context()).toHaveLength(1);
    const final = statuses[0] as string;
    expect(final.startsWith("reporting"), final).toBe(true);
    expect(final, "no ETA once done").not.toContain("ETA");
    expect(final).toContain("1 failed");
    const at = shown.indexOf(final);
    expect(shown[at + 1], context()).toBe("run pty: partial");
    // The final line counts as the summary under it does, in its words.
    const counts = /^ {2}\d+ jobs: (\d+) generated, (\d+) reused, (\d+) failed,/.exec(shown[at + 2] ?? "");
    expect(counts, context()).not.toBeNull();
    expect(final).toContain(`${counts?.[1]} generated · ${counts?.[2]} reused · ${counts?.[3]} failed`);
    for (const l of shown) {
      expect(l).not.toContain(ESC);
      expect(l.length).toBeLessThanOrEqual(COLUMNS);
    }
    // The final line ends with a newline: nothing is written after the summary on its line.
    expect(tty.raw.endsWith("\n")).toBe(true);
  });
});

describe.skipIf(!HAVE_SCRIPT)("on a dumb terminal without UTF-8", () => {
  let ws: Workspace;
  let tty: Captured;

  beforeAll(async () => {
    ws = await workspace("dumb", { text: MANIFEST("dumb") });
    tty = await runInPty(ws, { TERM: "dumb", LANG: "C" });
  }, 60_000);

  afterAll(async () => {
    await ws?.remove();
  });

  it("prints the status as plain ASCII lines, never redrawn", () => {
    const context = `raw: ${JSON.stringify(tty.raw)}`;
    expect(tty.code, context).toBe(1);
    // No redraws: no erasing, no cursor moves (colours in the log lines are the logger's matter);
    // the terminal turns each LF into CR LF, and no lone CR goes back over a line.
    expect(tty.raw, context).not.toContain(EL);
    expect(tty.raw, context).not.toMatch(/\[\d*[ABCDGHJ]/);
    expect(tty.raw.replaceAll("\r\n", "\n"), context).not.toContain("\r");
    const lines = tty.raw.replaceAll("\r\n", "\n").split("\n");
    const statuses = lines.filter(isStatus);
    // The display's own lines: plain ASCII, each on its own line.
    for (const s of statuses) expect(s, s).not.toContain(ESC);
    expect(statuses.length, context).toBeGreaterThanOrEqual(2);
    for (const s of statuses) {
      expect(s, s).toMatch(/^[ -~]*$/);
      expect(s.length, s).toBeLessThanOrEqual(COLUMNS - 1);
    }
    expect(statuses.at(-1)?.startsWith("reporting | "), context).toBe(true);
    expect(lines, context).toContain("run dumb: partial");
  });
});
