// The live display of `clapper run`: the ETA (a pure function of the progress and the clock), the
// status line (contents, narrow terminals, ASCII), and the display's drawing on a fake terminal
// stream (throttle, clock, logs above the status line, the final line, dumb terminals).
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  estimateEta,
  formatDuration,
  median,
  ProgressDisplay,
  progressLine,
  supportsUnicode,
} from "../../src/cli/progress.js";
import type { Progress } from "../../src/run/run.js";

const ESC = "\u001b";
const EL = `${ESC}[K`;

function prog(o: Partial<Progress> = {}): Progress {
  return {
    phase: "submitting",
    startedAt: 0,
    counts: { pending: 0, submitting: 0, running: 0, collecting: 0, stored: 0, failed: 0, cancelled: 0 },
    reused: 0,
    total: 0,
    reserved: 0,
    spent: 0,
    inFlight: [],
    durations: { video: [], speech: [] },
    queued: { video: 0, speech: 0 },
    inFlightLimit: { video: 4, speech: 4 },
    ...o,
  };
}

const counts = (c: Partial<Progress["counts"]>): Progress["counts"] => ({
  pending: 0,
  submitting: 0,
  running: 0,
  collecting: 0,
  stored: 0,
  failed: 0,
  cancelled: 0,
  ...c,
});

describe("median", () => {
  it("takes the middle value, or the mean of the two middle ones", () => {
    expect(median([])).toBeUndefined();
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(median([5])).toBe(5);
  });
});

describe("estimateEta", () => {
  it("is undefined while there is nothing to estimate from", () => {
    // Planning: no plan yet.
    expect(estimateEta(prog({ phase: "planning" }), 1000)).toBeUndefined();
    // A task in flight without an estimate, none of its kind ended yet.
    expect(estimateEta(prog({ inFlight: [{ kind: "speech", createdAt: 0 }] }), 1000)).toBeUndefined();
    // Jobs queued, none ended, nothing in flight.
    expect(estimateEta(prog({ queued: { video: 3, speech: 0 } }), 1000)).toBeUndefined();
  });

  it("uses the service's estimate minus the time since that look, and counts down", () => {
    const p = prog({ inFlight: [{ kind: "video", createdAt: 0, remaining: { seconds: 40, at: 10_000 } }] });
    expect(estimateEta(p, 10_000)).toBe(40);
    expect(estimateEta(p, 15_000)).toBe(35);
    expect(estimateEta(p, 49_500)).toBe(0.5);
    // Overdue: never negative.
    expect(estimateEta(p, 60_000)).toBe(0);
  });

  it("gives a task without an estimate the median duration of its kind minus its age", () => {
    const p = prog({
      inFlight: [{ kind: "speech", createdAt: 9_500 }],
      durations: { video: [], speech: [1000, 3000, 2000] },
    });
    expect(estimateEta(p, 10_000)).toBe(1.5);
    expect(estimateEta(p, 11_000)).toBe(0.5);
    expect(estimateEta(p, 20_000)).toBe(0);
  });

  it("a huge in-flight limit costs nothing: the slots are bounded by the work there is", () => {
    const p = prog({
      queued: { video: 3, speech: 0 },
      durations: { video: [2000], speech: [] },
      inFlightLimit: { video: 5e9, speech: 5e9 },
    });
    const t0 = performance.now();
    expect(estimateEta(p, 0)).toBe(2);
    expect(performance.now() - t0).toBeLessThan(50);
  });

  it("runs queued jobs in waves of the in-flight limit at the median duration", () => {
    const p = prog({
      queued: { video: 5, speech: 0 },
      inFlightLimit: { video: 2, speech: 4 },
      durations: { video: [10_000], speech: [] },
    });
    // Three waves: 2 + 2 + 1.
    expect(estimateEta(p, 0)).toBe(30);
    // Exactly full waves.
    expect(estimateEta({ ...p, queued: { video: 4, speech: 0 } }, 0)).toBe(20);
  });

  it("starts queued jobs in the slots that tasks in flight free", () => {
    const p = prog({
      inFlight: [
        { kind: "video", createdAt: 0, remaining: { seconds: 4, at: 0 } },
        { kind: "video", createdAt: 0, remaining: { seconds: 8, at: 0 } },
      ],
      queued: { video: 3, speech: 0 },
      inFlightLimit: { video: 2, speech: 4 },
      durations: { video: [10_000], speech: [] },
    });
    // Slots free at 4 and 8: jobs run 4-14, 8-18, 14-24.
    expect(estimateEta(p, 0)).toBe(24);
    // A free slot (limit 3) starts one at once: 0-10, 4-14, 8-18.
    expect(estimateEta({ ...p, inFlightLimit: { video: 3, speech: 4 } }, 0)).toBe(18);
    // More in flight than the limit (it was lowered): a slot frees only once enough ended.
    expect(
      estimateEta({ ...p, queued: { video: 1, speech: 0 }, inFlightLimit: { video: 1, speech: 4 } }, 0),
    ).toBe(18);
  });

  it("before any task ended, takes the typical duration from the service's estimates", () => {
    const p = prog({
      // 10 s old at the look, 50 s left: a video takes about 60 s.
      inFlight: [{ kind: "video", createdAt: 0, remaining: { seconds: 50, at: 10_000 } }],
      queued: { video: 1, speech: 0 },
      inFlightLimit: { video: 1, speech: 4 },
    });
    expect(estimateEta(p, 10_000)).toBe(110);
  });

  it("takes the later of the services, and needs a basis for each", () => {
    const video = { kind: "video" as const, createdAt: 0, remaining: { seconds: 30, at: 0 } };
    const p = prog({
      inFlight: [video, { kind: "speech", createdAt: 0 }],
      durations: { video: [], speech: [5000] },
    });
    expect(estimateEta(p, 0)).toBe(30);
    expect(estimateEta({ ...p, durations: { video: [], speech: [50_000] } }, 0)).toBe(50);
    // No basis for speech yet: no ETA rather than a wrong one.
    expect(estimateEta({ ...p, durations: { video: [], speech: [] } }, 0)).toBeUndefined();
  });

  it("counts reused jobs for nothing", () => {
    const work = {
      inFlight: [{ kind: "speech" as const, createdAt: 0 }],
      queued: { video: 0, speech: 2 },
      inFlightLimit: { video: 4, speech: 1 },
      durations: { video: [], speech: [4000] },
    };
    const fresh = prog({ total: 3, counts: counts({ running: 1, pending: 2 }), ...work });
    const resumed = prog({
      total: 13,
      reused: 10,
      counts: counts({ stored: 10, running: 1, pending: 2 }),
      ...work,
    });
    expect(estimateEta(fresh, 1000)).toBe(11);
    expect(estimateEta(resumed, 1000)).toBe(11);
    // Everything reused: no work, no ETA.
    expect(
      estimateEta(prog({ total: 10, reused: 10, counts: counts({ stored: 10 }) }), 1000),
    ).toBeUndefined();
  });

  it("is 0 when only downloads are left", () => {
    const p = prog({ phase: "collecting", total: 2, counts: counts({ stored: 1, collecting: 1 }) });
    expect(estimateEta(p, 0)).toBe(0);
  });

  it("stays cheap with many queued jobs", () => {
    const p = prog({
      queued: { video: 0, speech: 100_000 },
      inFlightLimit: { video: 4, speech: 7 },
      durations: { video: [], speech: [1000] },
    });
    const t0 = performance.now();
    expect(estimateEta(p, 0)).toBe(Math.ceil(100_000 / 7));
    expect(performance.now() - t0).toBeLessThan(200);
  });
});

describe("formatDuration", () => {
  it("writes seconds, minutes and hours", () => {
    expect(formatDuration(0)).toBe("0s");
    expect(formatDuration(59.9)).toBe("59s");
    expect(formatDuration(65)).toBe("1m05s");
    expect(formatDuration(3599)).toBe("59m59s");
    expect(formatDuration(3720)).toBe("1h02m");
    expect(formatDuration(-3)).toBe("0s");
  });
});

describe("progressLine", () => {
  const busy = prog({
    phase: "waiting",
    startedAt: 0,
    total: 40,
    reused: 8,
    counts: counts({
      stored: 12,
      running: 2,
      submitting: 1,
      collecting: 2,
      pending: 20,
      failed: 1,
      cancelled: 2,
    }),
    spent: 120,
    reserved: 40,
    cap: 500,
    inFlight: [{ kind: "video", createdAt: 0, remaining: { seconds: 190, at: 65_000 } }],
  });

  it("shows the phase alone with the clock while planning", () => {
    expect(progressLine(prog({ phase: "planning", startedAt: 1000 }), 4500)).toBe("planning · elapsed 3s");
    expect(progressLine(prog({ phase: "pre-flight" }), 61_000)).toBe("pre-flight · elapsed 1m01s");
  });

  it("shows jobs by state, new work apart from reused, points and the ETA", () => {
    expect(progressLine(busy, 65_000)).toBe(
      "waiting · elapsed 1m05s · 4/32 generated · 3 running · 2 downloading · 20 queued · 1 failed · " +
        "2 cancelled · 8 reused · points 120 spent, 40 reserved, cap 500 · ETA 3m10s",
    );
    // The ETA counts down with the clock alone.
    expect(progressLine(busy, 75_000)).toContain("ETA 3m00s");
    expect(progressLine({ ...busy, cap: undefined }, 65_000)).toContain("points 120 spent, 40 reserved ·");
  });

  it("leaves the ETA out before a basis, outside the working phases, and on the final line", () => {
    expect(progressLine({ ...busy, inFlight: [{ kind: "video", createdAt: 0 }] }, 65_000)).not.toContain(
      "ETA",
    );
    expect(progressLine({ ...busy, phase: "reporting" }, 65_000)).not.toContain("ETA");
    expect(progressLine(busy, 65_000, { final: true })).not.toContain("ETA");
    const overdue = progressLine(busy, 400_000);
    expect(overdue).toContain("ETA soon");
  });

  it("says nothing of new work when all of it was reused", () => {
    const line = progressLine(
      prog({ phase: "reporting", total: 5, reused: 5, counts: counts({ stored: 5 }) }),
      2000,
    );
    expect(line).toBe("reporting · elapsed 2s · 5 reused · points 0 spent, 0 reserved");
  });

  it("fits narrow terminals: short forms first, then the least useful parts go, the ETA stays", () => {
    for (const columns of [20, 30, 40, 60, 80, 100, 200]) {
      const line = progressLine(busy, 65_000, { columns });
      expect(line.length, `${columns}: ${line}`).toBeLessThanOrEqual(columns - 1);
      expect(line.startsWith("waiting"), line).toBe(true);
    }
    const mid = progressLine(busy, 65_000, { columns: 60 });
    expect(mid).toContain("ETA 3m10s");
    expect(mid).toContain("4/32 generated");
    expect(mid).not.toContain("reused");
    expect(progressLine(busy, 65_000, { columns: 100 })).toContain("120+40/500 pts");
    // Narrower than the phase itself: cut with an ellipsis.
    expect(progressLine(busy, 65_000, { columns: 6 })).toBe("wait…");
    expect(progressLine(busy, 65_000, { columns: 6, unicode: false })).toBe("wa...");
  });

  it("uses plain ASCII when the terminal has no Unicode", () => {
    const line = progressLine(busy, 65_000, { unicode: false });
    expect(line).toMatch(/^[ -~]+$/);
    expect(line).toContain("waiting | elapsed 1m05s | 4/32 generated");
  });
});

describe("supportsUnicode", () => {
  it("reads the terminal and the locale", () => {
    expect(supportsUnicode({ TERM: "xterm-256color", LANG: "en_US.UTF-8" }, "linux")).toBe(true);
    expect(supportsUnicode({ TERM: "xterm", LC_ALL: "C.utf8" }, "linux")).toBe(true);
    expect(supportsUnicode({ TERM: "xterm", LANG: "C" }, "linux")).toBe(false);
    expect(supportsUnicode({ TERM: "xterm", LC_ALL: "POSIX", LANG: "en_US.UTF-8" }, "linux")).toBe(false);
    expect(supportsUnicode({ TERM: "xterm", LANG: "de_DE.ISO-8859-1" }, "darwin")).toBe(false);
    expect(supportsUnicode({ TERM: "dumb", LANG: "en_US.UTF-8" }, "linux")).toBe(false);
    expect(supportsUnicode({ TERM: "linux", LANG: "en_US.UTF-8" }, "linux")).toBe(false);
    expect(supportsUnicode({ TERM: "xterm-256color" }, "darwin")).toBe(true);
    expect(supportsUnicode({}, "win32")).toBe(false);
    expect(supportsUnicode({ WT_SESSION: "1" }, "win32")).toBe(true);
  });
});

/** A terminal stream that keeps what is written. */
class FakeTerminal {
  isTTY = true;
  chunks: string[] = [];
  constructor(public columns = 100) {}
  write(chunk: string): boolean {
    this.chunks.push(chunk);
    return true;
  }
  get text(): string {
    return this.chunks.join("");
  }
  take(): string[] {
    return this.chunks.splice(0);
  }
}

const UTF8 = { TERM: "xterm-256color", LANG: "en_US.UTF-8" };

function display(term: FakeTerminal, env: NodeJS.ProcessEnv = UTF8): ProgressDisplay {
  return new ProgressDisplay(term as unknown as NodeJS.WriteStream, { env });
}

describe("ProgressDisplay", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  const working = (o: Partial<Progress> = {}) =>
    prog({
      total: 4,
      counts: counts({ running: 1, pending: 3 }),
      inFlight: [{ kind: "video", createdAt: 0, remaining: { seconds: 40, at: 0 } }],
      ...o,
    });

  it("draws the first state at once, in place, and later ones at most ten times a second", () => {
    vi.useFakeTimers({ now: 0 });
    const term = new FakeTerminal();
    const d = display(term);
    d.update(working());
    expect(term.take()).toEqual([`\r${progressLine(working(), 0, { columns: 100 })}${EL}`]);
    vi.setSystemTime(20);
    for (let i = 1; i <= 5; i++) d.update(working({ spent: i }));
    expect(term.take()).toEqual([]);
    vi.advanceTimersByTime(80);
    const drawn = term.take();
    expect(drawn).toHaveLength(1);
    // The newest state (spent 5), drawn at 100 ms.
    expect(drawn[0]).toBe(`\r${progressLine(working({ spent: 5 }), 100, { columns: 100 })}${EL}`);
    expect(progressLine(working({ spent: 5 }), 100)).toContain("points 5 spent");
    expect(drawn[0]?.startsWith("\r")).toBe(true);
    expect(drawn[0]?.endsWith(EL)).toBe(true);
    d.done();
  });

  it("ticks every second without events: the clock runs and the ETA counts down", () => {
    vi.useFakeTimers({ now: 0 });
    const term = new FakeTerminal();
    const d = display(term);
    d.update(working());
    term.take();
    vi.advanceTimersByTime(3010);
    const drawn = term.take();
    expect(drawn.map((x) => /elapsed (\d+s)/.exec(x)?.[1])).toEqual(["1s", "2s", "3s"]);
    expect(drawn.map((x) => /ETA (\d+s)/.exec(x)?.[1])).toEqual(["39s", "38s", "37s"]);
    d.done();
  });

  it("prints log lines above the status line and draws it again below them", async () => {
    vi.useFakeTimers({ now: 0 });
    const term = new FakeTerminal();
    const d = display(term);
    d.update(working());
    term.take();
    vi.setSystemTime(1500);
    d.log("WARN task failed shot/s02");
    await Promise.resolve();
    const status = progressLine(working(), 1500, { columns: 100 });
    expect(term.take().join("")).toBe(`\r${EL}WARN task failed shot/s02\n${status}${EL}`);
    d.done();
  });

  it("draws the status line once after the log lines of one turn (a multi-line entry)", async () => {
    vi.useFakeTimers({ now: 0 });
    const term = new FakeTerminal();
    const d = display(term);
    d.update(working());
    term.take();
    vi.setSystemTime(1500);
    d.log("ERROR job failed");
    d.update(working({ spent: 7 }));
    d.log("    error: {");
    d.log('      "code": "generation_failed"\n    }\n');
    expect(term.take()).toEqual([
      `\r${EL}ERROR job failed\n`,
      "    error: {\n",
      '      "code": "generation_failed"\n    }\n',
    ]);
    await Promise.resolve();
    // The newest state, once.
    expect(term.take()).toEqual([`${progressLine(working({ spent: 7 }), 1500, { columns: 100 })}${EL}`]);
    // done() in the same turn as a log line: the final line, and nothing after it.
    d.log("last words");
    d.done();
    await Promise.resolve();
    expect(term.take()).toEqual([
      `\r${EL}last words\n`,
      `\r${progressLine(working({ spent: 7 }), 1500, { columns: 100, final: true })}${EL}\n`,
    ]);
  });

  it("logs plainly before the first state and after done()", () => {
    vi.useFakeTimers({ now: 0 });
    const term = new FakeTerminal();
    const d = display(term);
    d.log("early");
    d.update(working());
    d.done();
    term.take();
    d.log("late\n");
    d.update(working({ spent: 9 }));
    vi.advanceTimersByTime(5000);
    expect(term.take()).toEqual(["late\n"]);
  });

  it("done() draws the last state without an ETA, ends the line, stops the clock; twice is once", () => {
    vi.useFakeTimers({ now: 0 });
    const term = new FakeTerminal();
    const d = display(term);
    d.update(working());
    vi.setSystemTime(50);
    d.update(working({ phase: "reporting", counts: counts({ stored: 4 }), inFlight: [] }));
    term.take();
    vi.setSystemTime(70);
    d.done();
    const final = term.take();
    expect(final).toEqual([
      `\r${progressLine(working({ phase: "reporting", counts: counts({ stored: 4 }), inFlight: [] }), 70, { final: true, columns: 100 })}${EL}\n`,
    ]);
    // The final line counts as the summary under it does.
    expect(final[0]).toContain("4 generated · 0 reused");
    expect(vi.getTimerCount()).toBe(0);
    d.done();
    vi.advanceTimersByTime(5000);
    expect(term.take()).toEqual([]);
  });

  it("done() before any state writes nothing", () => {
    const term = new FakeTerminal();
    const d = display(term);
    d.done();
    expect(term.text).toBe("");
  });

  it("cuts the status line to the terminal's width", () => {
    vi.useFakeTimers({ now: 0 });
    const term = new FakeTerminal(30);
    const d = display(term);
    d.update(working({ spent: 12345, reserved: 678, cap: 99999, reused: 3, total: 7 }));
    d.log("a log line longer than the terminal is wide is left to wrap");
    vi.advanceTimersByTime(2000);
    d.done();
    for (const chunk of term.chunks) {
      const status = chunk.split("\n").pop()?.replace(`${ESC}[K`, "").replace(/^\r/, "") ?? "";
      expect(status.length, JSON.stringify(chunk)).toBeLessThanOrEqual(29);
    }
  });

  it("takes the width from COLUMNS when the terminal does not tell it", () => {
    vi.useFakeTimers({ now: 0 });
    const term = new FakeTerminal(0);
    const d = display(term, { ...UTF8, COLUMNS: "25" });
    d.update(working({ spent: 12345, reserved: 678 }));
    d.done();
    for (const chunk of term.chunks)
      expect(chunk.replaceAll(EL, "").replace(/[\r\n]/g, "").length).toBeLessThanOrEqual(24);
  });

  it("uses ASCII on a terminal without UTF-8", () => {
    vi.useFakeTimers({ now: 0 });
    const term = new FakeTerminal();
    const d = display(term, { TERM: "xterm", LANG: "C" });
    d.update(working());
    d.done();
    expect(term.text.replaceAll(EL, "").replace(/[\r\n]/g, "")).toMatch(/^[ -~]+$/);
    expect(term.text).toContain(" | ");
  });

  it("prints plain lines on a dumb terminal: the status on a new phase or every half minute, logs as they come", () => {
    vi.useFakeTimers({ now: 0 });
    const term = new FakeTerminal();
    const d = display(term, { TERM: "dumb", LANG: "en_US.UTF-8" });
    d.update(working({ phase: "planning", total: 0, counts: counts({}), inFlight: [] }));
    vi.advanceTimersByTime(1000);
    d.update(working());
    vi.advanceTimersByTime(1000);
    d.update(working({ spent: 1 }));
    d.log("a warning");
    vi.advanceTimersByTime(30_000);
    d.done();
    const text = term.text;
    expect(text).not.toContain(ESC);
    expect(text).not.toContain("\r");
    const lines = text.split("\n");
    expect(lines.at(-1)).toBe("");
    expect(lines.slice(0, -1).map((l) => l.split(" | ")[0])).toEqual([
      "planning",
      "submitting",
      "a warning",
      "submitting",
      "submitting",
    ]);
    expect(lines[4]).not.toContain("ETA");
  });

  it("prints a new phase on a dumb terminal at most once a second", () => {
    vi.useFakeTimers({ now: 0 });
    const term = new FakeTerminal();
    const d = display(term, { TERM: "dumb" });
    d.update(working({ phase: "planning" }));
    vi.advanceTimersByTime(200);
    d.update(working({ phase: "submitting" }));
    expect(term.take().map((l) => l.split(" | ")[0])).toEqual(["planning"]);
    // Printed once a second has passed since the last line.
    vi.advanceTimersByTime(900);
    expect(term.take().map((l) => l.split(" | ")[0])).toEqual(["submitting"]);
    // Back and forth within a second: nothing new to say.
    d.update(working({ phase: "waiting" }));
    vi.advanceTimersByTime(200);
    d.update(working({ phase: "submitting" }));
    vi.advanceTimersByTime(5000);
    expect(term.take()).toEqual([]);
    d.done();
  });

  it("prints plain lines on a stream that is not a terminal", () => {
    const term = new FakeTerminal();
    term.isTTY = false;
    const d = display(term);
    d.update(working());
    d.log("a line");
    d.done();
    expect(term.text).not.toContain(ESC);
    expect(term.text.split("\n")).toHaveLength(4);
  });

  it("never keeps the process alive: its timers are unref'd", () => {
    const term = new FakeTerminal();
    const d = display(term);
    const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
    const before = timeouts();
    d.update(working());
    d.update(working({ spent: 1 }));
    expect(timeouts()).toBe(before);
    d.done();
  });
});
