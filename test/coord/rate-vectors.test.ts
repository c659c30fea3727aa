// Shared test vectors: the same sequences of sends, answers and 429s (test/coord/rate-vectors.json)
// fed to RateController (src/rate/controller.ts) and to the shared rate's Lua (src/coord/lua/rate*.lua)
// in a real redis-server; after every step both hold the same rate, the same settled flag, the same
// rate to remember (the rate that held, mid-probe) and the same pause. Where they are known to
// differ, the vector says so, with the step and the rate each gives there: the test then checks
// that the first difference is exactly that one.
//
// What the two are given, the same way:
// - A send is a turn asked at its time. The Lua's turn paces sends itself (GCRA: the next free
//   moment, never before now nor in a pause) and counts the rate as binding when the turn had to
//   wait; RateController is paced by its caller (src/rate/limiter.ts), here the same GCRA, which
//   calls busy() in the same case.
// - Times are on a 10 ms grid: the Lua counts answers per 10 ms of server time, each at its
//   bucket's start, so on the grid it sees the times RateController sees. Its scripts are built
//   with a report lag of 0: one process tells each answer as it comes (several processes need the
//   lag, RateController has no use for it), so its estimates end at the 429 as RateController's do.
//
// The vectors are written from scenarios (a token-bucket service, a client with a backlog or an
// offered load, driven by RateController): `CLAPPER_WRITE_RATE_VECTORS=1 npx vitest run
// test/coord/rate-vectors.test.ts` writes them again (then `npx biome check --write` formats the
// file), recording where a scenario that declares a known difference differs; a scenario that
// declares none must agree at every step.
import { readFileSync, writeFileSync } from "node:fs";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildScripts, RATE_RULES } from "../../src/coord/scripts.js";
import { RateController, type RateSettings } from "../../src/rate/controller.js";
import { type RedisServer, redisAvailable, redisSkipReason, startRedis } from "./redis-server.js";

const HAVE_REDIS = redisAvailable();
const FILE = new URL("./rate-vectors.json", import.meta.url);
/** Every time in a vector is after this (the Lua takes 0 for "not yet"). */
const T0 = 1_000_000;

/** A turn asked; answers accepted (how many); a 429 for a request sent at sentAt (Retry-After, or null). */
type Step =
  | [at: number, "send"]
  | [at: number, "accept", count: number]
  | [at: number, "limit", sentAt: number, retryAfterMs: number | null];

interface Vector {
  name: string;
  settings: { ceiling: number; fixed?: boolean; initial?: { rps: number; settled: boolean } };
  /** A known difference: the first step where the two differ, and the rate each gives there. */
  differs?: { why: string; step: number; ts: number; lua: number };
  steps: Step[];
}

/** What each controller says after a step. */
interface View {
  rps: number;
  settled: boolean;
  /** The rate to remember for the next run. */
  remembered: number;
  /** How much longer a pause holds every request (ms). */
  pausedFor: number;
  /** For a turn: how long it waits for its moment. */
  delay?: number;
}

const round = (rps: number) => Math.round(rps * 100) / 100;

/** RateController, paced as the Lua paces its turns. */
class TsSide {
  readonly c: RateController;
  private tat = 0;
  constructor(settings: RateSettings, now: number) {
    this.c = new RateController(settings, now);
  }
  turn(t: number): View {
    const start = Math.max(this.tat, t, this.c.pausedUntil);
    this.tat = start + 1000 / this.c.current;
    this.c.send(t);
    if (start > t) this.c.busy(t);
    return { ...this.view(t), delay: start - t };
  }
  accept(t: number, count: number): View {
    for (let i = 0; i < count; i += 1) this.c.accept(t);
    return this.view(t);
  }
  limit(t: number, sentAt: number, retryAfterMs: number | null): View {
    this.c.limit(t, retryAfterMs ?? undefined, sentAt);
    return this.view(t);
  }
  private view(t: number): View {
    const r = this.c.remember();
    return {
      rps: this.c.current,
      settled: r.settled,
      remembered: r.rps,
      pausedFor: Math.max(0, this.c.pausedUntil - t),
    };
  }
}

/** The shared rate's scripts in redis-server, called as src/coord/shared-rate.ts calls them. */
class LuaSide {
  private static n = 0;
  private readonly keys: string[];
  constructor(
    private readonly redis: Redis,
    private readonly scripts: ReturnType<typeof buildScripts>,
    private readonly settings: Vector["settings"],
  ) {
    LuaSide.n += 1;
    this.keys = [`vectors:${process.pid}:${LuaSide.n}:rate`, `vectors:${process.pid}:${LuaSide.n}:accepted`];
  }
  async turn(t: number): Promise<View> {
    const a = await this.call(this.scripts.clapperRateTurn, t, "", ["1"]);
    return { ...this.view(a), delay: Number(a[0]) };
  }
  async accept(t: number, count: number): Promise<View> {
    return this.view(await this.call(this.scripts.clapperRateTurn, t, `0:${count}`, ["0"]));
  }
  async limit(t: number, sentAt: number, retryAfterMs: number | null): Promise<View> {
    const retry = retryAfterMs === null ? "" : String(retryAfterMs);
    return this.view(await this.call(this.scripts.clapperRateLimit, t, "", [retry, String(t - sentAt)]));
  }
  private async call(lua: string, t: number, accepts: string, tail: string[]): Promise<string[]> {
    const s = this.settings;
    const args = [
      t,
      s.ceiling,
      s.fixed ? "1" : "0",
      s.initial?.rps ?? "",
      s.initial?.settled ? 1 : 0,
      600_000,
      accepts,
    ];
    return (await this.redis.eval(lua, 2, ...this.keys, ...args.map(String), ...tail)) as string[];
  }
  private view(a: string[]): View {
    const rps = Number(a[1]);
    const settled = Number(a[2]) === 1;
    const held = Number(a[3]);
    return {
      rps,
      settled,
      remembered: round(settled && held > 0 ? Math.min(rps, held) : rps),
      pausedFor: Number(a[4]),
    };
  }
}

/** Both sides through a vector's steps: the index of the first step where they differ, and their views there. */
async function replay(redis: Redis, scripts: ReturnType<typeof buildScripts>, v: Vector) {
  const settings: RateSettings = {
    ceiling: v.settings.ceiling,
    ...(v.settings.fixed ? { fixed: true } : {}),
    ...(v.settings.initial ? { initial: v.settings.initial } : {}),
  };
  const ts = new TsSide(settings, T0 + (v.steps[0]?.[0] ?? 0));
  const lua = new LuaSide(redis, scripts, v.settings);
  const states = new Set<string>();
  for (const [i, step] of v.steps.entries()) {
    const t = T0 + step[0];
    let a: View;
    let b: View;
    if (step[1] === "send") {
      a = ts.turn(t);
      b = await lua.turn(t);
    } else if (step[1] === "accept") {
      a = ts.accept(t, step[2]);
      b = await lua.accept(t, step[2]);
    } else {
      a = ts.limit(t, T0 + step[2], step[3]);
      b = await lua.limit(t, T0 + step[2], step[3]);
    }
    states.add(`${a.rps} ${a.settled} ${a.pausedFor > 0}`);
    if (JSON.stringify(a) !== JSON.stringify(b)) return { at: i, ts: a, lua: b, states: states.size };
  }
  return { at: -1, states: states.size };
}

describe.skipIf(!HAVE_REDIS)(
  `the shared rate's Lua and RateController decide the same (${HAVE_REDIS ? "redis-server" : redisSkipReason})`,
  () => {
    let server: RedisServer;
    let redis: Redis;
    const scripts = buildScripts({ ...RATE_RULES, reportLagMs: 0 });
    const vectors = (JSON.parse(readFileSync(FILE, "utf8")) as { vectors: Vector[] }).vectors;
    beforeAll(async () => {
      server = await startRedis();
      redis = new Redis(server.port, "127.0.0.1");
    });
    afterAll(async () => {
      redis?.disconnect();
      await server?.stop();
    });

    it.runIf(process.env.CLAPPER_WRITE_RATE_VECTORS === "1")("writes the vectors again", async () => {
      const out: Vector[] = [];
      const wrong: string[] = [];
      for (const s of SCENARIOS) {
        const v: Vector = { name: s.name, settings: s.settings, steps: simulate(s) };
        const r = await replay(redis, scripts, v);
        if (s.differs === undefined && r.at >= 0) {
          wrong.push(
            `${s.name}: differs at step ${r.at} ${JSON.stringify(v.steps[r.at])}: ${JSON.stringify(r)}`,
          );
        } else if (s.differs !== undefined && (!r.ts || !r.lua)) {
          wrong.push(`${s.name}: declared to differ, agrees`);
        } else if (s.differs !== undefined && r.ts && r.lua) {
          v.differs = { why: s.differs, step: r.at, ts: r.ts.rps, lua: r.lua.rps };
        }
        out.push(v);
      }
      expect(wrong).toEqual([]);
      writeFileSync(FILE, format(out));
    });

    it("has vectors for every rule", () => {
      expect(vectors.length).toBeGreaterThanOrEqual(8);
    });

    for (const v of vectors) {
      it(`${v.name}${v.differs ? ` (known difference: ${v.differs.why})` : ""}`, async () => {
        const r = await replay(redis, scripts, v);
        if (!v.differs) {
          expect(
            r.at,
            `first difference at step ${r.at} ${JSON.stringify(v.steps[r.at])}: ${JSON.stringify(r)}`,
          ).toBe(-1);
          // The vector reaches a rule: the rate, the settled flag or a pause changes.
          expect(r.states).toBeGreaterThanOrEqual(2);
          return;
        }
        expect(r.at, JSON.stringify(r)).toBe(v.differs.step);
        expect(r.ts?.rps).toBe(v.differs.ts);
        expect(r.lua?.rps).toBe(v.differs.lua);
      });
    }
  },
);

interface Scenario {
  name: string;
  settings: Vector["settings"];
  /** Why the two are expected to differ (the first difference is then recorded in the vector). */
  differs?: string;
  ms: number;
  /** The service: its rate, its bucket (a second's worth unless said), and when it changes. */
  service: {
    rps: number;
    burst?: number;
    drop?: [atMs: number, rps: number];
    quota?: [fromMs: number, toMs: number, retryAfterMs: number];
  };
  /** Requests offered from each time on: every so many ms, or 0 for a backlog that never empties. */
  offer?: Array<[fromMs: number, everyMs: number]>;
  /** The Retry-After of an ordinary 429 (null: none given). */
  retryAfterMs?: number | null;
}

/** Answers come this long after their request leaves. */
const LATENCY_MS = 20;

const SCENARIOS: Scenario[] = [
  {
    name: "slow start from the safe rate against 30/s: doublings, then the accepted rate settles it",
    settings: { ceiling: 200 },
    ms: 8000,
    service: { rps: 30, burst: 10 },
  },
  {
    name: "slow start with a deep bucket: the burst hides the rate, then what was accepted settles it",
    settings: { ceiling: 200 },
    ms: 6000,
    service: { rps: 30, burst: 60 },
  },
  {
    name: "slow start against a service that takes 3 at once and 1/s: the first 429 comes before 4 answers",
    settings: { ceiling: 200 },
    differs:
      "a 429 of slow start with too few answers to measure: RateController goes back to the rate before the last doubling (or halves), the Lua cuts plainly (x0.7)",
    ms: 4000,
    service: { rps: 1, burst: 3 },
  },
  {
    name: "a remembered rate over 40/s: a cut, a recut and a settle",
    settings: { ceiling: 200, initial: { rps: 60, settled: true } },
    ms: 8000,
    service: { rps: 40 },
  },
  {
    name: "a remembered rate over 20/s: a cut, a recut and a settle",
    settings: { ceiling: 200, initial: { rps: 35, settled: true } },
    ms: 8000,
    service: { rps: 20 },
  },
  {
    name: "a settled rate, then the service takes a quarter less",
    settings: { ceiling: 200, initial: { rps: 60, settled: true } },
    ms: 14_000,
    service: { rps: 40, drop: [6000, 30] },
  },
  {
    name: "settled under the limit: holds, probes up, confirms, and a failed probe returns to the rate that held",
    settings: { ceiling: 200, initial: { rps: 36, settled: true } },
    ms: 75_000,
    service: { rps: 40, burst: 8 },
  },
  {
    name: "a remembered rate not set by a 429: slow start from it, growing only while requests wait",
    settings: { ceiling: 200, initial: { rps: 12, settled: false } },
    ms: 6000,
    service: { rps: 25, burst: 5 },
    offer: [
      [0, 200],
      [2000, 0],
    ],
  },
  {
    name: "a quota: a long Retry-After pauses every request",
    settings: { ceiling: 200, initial: { rps: 20, settled: true } },
    ms: 12_000,
    service: { rps: 30, quota: [3000, 3100, 4000] },
    retryAfterMs: null,
  },
  {
    // The 429s of the first second are the echo of the remembered limit; so is the quota's, which
    // pauses all the same: the cut after the pause measures across it.
    name: "a quota just after a cut: the pause is left out of the rate the next 429 measures",
    settings: { ceiling: 200, initial: { rps: 40, settled: true } },
    ms: 8000,
    service: { rps: 30, burst: 3, quota: [600, 630, 2500], drop: [3000, 8] },
  },
  {
    name: "a fixed rate over the limit: 429s never move it, a quota still pauses it",
    settings: { ceiling: 30, fixed: true },
    ms: 6000,
    service: { rps: 20, quota: [3000, 3050, 2500] },
  },
  {
    name: "a remembered rate over the ceiling: clamped to it",
    settings: { ceiling: 15, initial: { rps: 60, settled: true } },
    ms: 5000,
    service: { rps: 12 },
  },
];

/** The steps one process meets, RateController deciding (paced as the Lua paces its turns). */
function simulate(s: Scenario): Step[] {
  const steps: Step[] = [];
  const side = new TsSide(
    {
      ceiling: s.settings.ceiling,
      ...(s.settings.fixed ? { fixed: true } : {}),
      ...(s.settings.initial ? { initial: s.settings.initial } : {}),
    },
    T0,
  );
  const sv = s.service;
  let tokens = sv.burst ?? sv.rps;
  let filledAt = 0;
  /** The service takes a request arriving at t (ms since the start), or refuses it with a Retry-After. */
  const take = (t: number): { ok: true } | { ok: false; retryAfterMs: number | null } => {
    if (sv.quota && t >= sv.quota[0] && t < sv.quota[1]) return { ok: false, retryAfterMs: sv.quota[2] };
    const rps = sv.drop && t >= sv.drop[0] ? sv.drop[1] : sv.rps;
    tokens = Math.min(sv.burst ?? sv.rps, tokens + ((t - filledAt) / 1000) * rps);
    filledAt = t;
    if (tokens < 1) return { ok: false, retryAfterMs: s.retryAfterMs === undefined ? 1000 : s.retryAfterMs };
    tokens -= 1;
    return { ok: true };
  };
  const offer = s.offer ?? [[0, 0]];
  const answers: Array<{ at: number; sentAt: number; ok: boolean; retryAfterMs: number | null }> = [];
  let queue = 0;
  let leaveAt: number | undefined;
  for (let t = 0; t < s.ms; t += 10) {
    const phase = offer.filter(([from]) => from <= t).at(-1) as [number, number];
    if (phase[1] === 0) queue = Number.POSITIVE_INFINITY;
    else if ((t - phase[0]) % phase[1] === 0) queue += 1;
    let accepted = 0;
    for (const a of answers.filter((x) => x.at === t)) {
      if (a.ok) accepted += 1;
      else {
        side.limit(T0 + t, T0 + a.sentAt, a.retryAfterMs);
        steps.push([t, "limit", a.sentAt, a.retryAfterMs]);
      }
    }
    if (accepted > 0) {
      side.accept(T0 + t, accepted);
      steps.push([t, "accept", accepted]);
    }
    for (;;) {
      if (leaveAt === t) {
        const r = take(t);
        answers.push({ at: t + LATENCY_MS, sentAt: t, ok: r.ok, retryAfterMs: r.ok ? null : r.retryAfterMs });
        queue -= 1;
        leaveAt = undefined;
      }
      if (leaveAt !== undefined || queue <= 0) break;
      const delay = side.turn(T0 + t).delay ?? 0;
      steps.push([t, "send"]);
      // The request leaves at its moment, on the grid.
      leaveAt = t + Math.ceil(delay / 10) * 10;
    }
  }
  return steps;
}

/** One step a line: the file is read by people as well as by this test. */
function format(vectors: Vector[]): string {
  const about =
    "Shared test vectors of RateController (src/rate/controller.ts) and the shared rate's Lua (src/coord/lua/rate*.lua): see test/coord/rate-vectors.test.ts. Steps: [ms, 'send'] a turn asked, [ms, 'accept', n] answers that were not 429s, [ms, 'limit', sentAtMs, retryAfterMs or null] a 429.";
  const parts = vectors.map((v) => {
    const head = JSON.stringify({
      name: v.name,
      settings: v.settings,
      ...(v.differs ? { differs: v.differs } : {}),
    });
    const steps = v.steps.map((s) => `      ${JSON.stringify(s)}`).join(",\n");
    return `    ${head.slice(0, -1)},\n      "steps": [\n${steps}\n    ]}`;
  });
  return `{\n  "about": ${JSON.stringify(about)},\n  "vectors": [\n${parts.join(",\n")}\n  ]\n}\n`;
}
