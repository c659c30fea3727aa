// The "what it must show": with the sandbox answering 30% of API requests with 503 and
// dropping 10% of connections (half of them after the work was done), every read succeeds, through
// the clients and through the CLI, and no create is duplicated.
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { type Clients, createClients } from "../../src/api/index.js";
import { createLogger } from "../../src/cli/logger.js";
import { main } from "../../src/cli/main.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { call, KEY, sandbox, until } from "../helpers/sandbox.js";

const POLICY = { baseDelayMs: 5, maxDelayMs: 50, maxRetries: 12 };
const POLICIES = { read: POLICY, create: POLICY, write: POLICY };
const SPEECH = {
  text: "Waves on the rocks.",
  language: "EN" as const,
  voice: { source: "preset" as const, voice_id: "en_male_deep" },
};
const VIDEO = {
  model: "vid-h3-lite" as const,
  content: [{ type: "text" as const, text: "gulls over a harbour" }],
};

interface Stats {
  requests: Record<string, number>;
  tasks_created: { video: number; speech: number };
  idempotent_replays: number;
}

const stats = async (s: Sandbox): Promise<Stats> =>
  (await call(s.url, "GET", "/_sandbox/stats", { key: null })).body;

async function faults(s: Sandbox, body: Record<string, unknown>): Promise<void> {
  const res = await call(s.url, "POST", "/_sandbox/faults", { key: null, body });
  expect(res.status).toBe(200);
}

/** Clients whose every attempt is counted by outcome, to prove the faults really happened. */
function counted(url: string) {
  const outcomes = { ok: 0, status503: 0, dropped: 0, other: 0 };
  const logger = {
    debug(obj: object, msg?: string) {
      if (msg !== "http attempt") return;
      const o = obj as { status?: number; error?: string };
      if (o.status === 503) outcomes.status503++;
      else if (o.status !== undefined && o.status < 300) outcomes.ok++;
      else if (o.error) outcomes.dropped++;
      else outcomes.other++;
    },
    warn() {},
  };
  const clients = createClients({ baseUrl: url, apiKey: KEY, policies: POLICIES, logger });
  onTestFinished(() => clients.close());
  return { clients, outcomes };
}

async function drain<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

describe("with a 30% error rate and a 10% drop rate", () => {
  let s: Sandbox;
  const seeded = { video: [] as string[], speech: [] as string[], skill: "", voice: "" };

  beforeAll(async () => {
    s = await sandbox();
    const c: Clients = createClients({ baseUrl: s.url, apiKey: KEY });
    for (let i = 0; i < 3; i++) {
      seeded.video.push(await c.video.createTask(VIDEO));
      seeded.speech.push(await c.speech.createTask(SPEECH));
    }
    seeded.skill = (await c.video.createSkill({ name: "harbour", content: "Wide shots only." })).id;
    const last = seeded.speech.at(-1) as string;
    await until(
      () => c.speech.getTask(last),
      (t) => t.status === "succeeded",
    );
    await c.close();
    await faults(s, { error_rate: 0.3, drop_rate: 0.1 });
  });
  afterAll(() => s.close());

  it("every read method succeeds, call after call", async () => {
    const { clients: c, outcomes } = counted(s.url);
    const reads = () => [
      c.video.getTask(seeded.video[0] as string),
      c.video.listPage(1, { pageSize: 2 }),
      drain(c.video.listTasks({ pageSize: 2 })).then((all) => expect(all).toHaveLength(3)),
      c.video.listPackages(),
      c.video.pointsSummary(),
      drain(c.video.listSkills()).then((all) => expect(all.map((k) => k.id)).toContain(seeded.skill)),
      c.speech.getTask(seeded.speech[0] as string),
      c.speech.listPage(0, { limit: 2 }),
      drain(c.speech.listTasks({ limit: 2 })).then((all) => expect(all).toHaveLength(3)),
      c.speech.listVoices("preset").then((v) => expect(v.items).toHaveLength(7)),
      c.speech.listVoices("custom"),
      c.speech.pricing(),
    ];
    for (let round = 0; round < 15; round++) await Promise.all(reads());
    // The faults were real: many attempts failed and were retried.
    expect(outcomes.status503).toBeGreaterThan(20);
    expect(outcomes.dropped).toBeGreaterThan(5);
    expect(outcomes.other).toBe(0);
  });

  it("N creates with stable idempotency keys make exactly N tasks", async () => {
    const { clients: c, outcomes } = counted(s.url);
    const before = await stats(s);
    const N = 60;
    const ids = await Promise.all(
      Array.from({ length: N }, (_, i) =>
        Promise.all([
          c.video.createTask(VIDEO, { idempotencyKey: `resilience-video-${i}` }),
          c.speech.createTask(SPEECH, { idempotencyKey: `resilience-speech-${i}` }),
        ]),
      ),
    );
    const after = await stats(s);
    expect(new Set(ids.map(([v]) => v)).size).toBe(N);
    expect(new Set(ids.map(([, sp]) => sp)).size).toBe(N);
    expect(after.tasks_created.video - before.tasks_created.video).toBe(N);
    expect(after.tasks_created.speech - before.tasks_created.speech).toBe(N);
    // Some answers were lost after the task was created: the retry was answered with the same task.
    expect(after.idempotent_replays - before.idempotent_replays).toBeGreaterThan(0);
    expect(outcomes.status503 + outcomes.dropped).toBeGreaterThan(20);

    // A resumed run repeating the same keys creates nothing new and gets the same tasks back.
    const again = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        c.video.createTask(VIDEO, { idempotencyKey: `resilience-video-${i}` }),
      ),
    );
    expect(again).toEqual(ids.slice(0, 10).map(([v]) => v));
    expect((await stats(s)).tasks_created.video).toBe(after.tasks_created.video);
  });

  it("creates without a caller's key are not duplicated either: retries reuse the layer's key", async () => {
    const { clients: c } = counted(s.url);
    const before = await stats(s);
    const N = 40;
    const ids = await Promise.all(Array.from({ length: N }, () => c.speech.createTask(SPEECH)));
    const after = await stats(s);
    expect(new Set(ids).size).toBe(N);
    expect(after.tasks_created.speech - before.tasks_created.speech).toBe(N);
  });

  it("every read command of the CLI succeeds", async () => {
    // Random faults can fail nine attempts in a row (0.4^9 per request: a flaky test over a hundred
    // requests); every third request failing is as harsh and never beyond the retries.
    await faults(s, { error_rate: 0, drop_rate: 0, error_every: 3 });
    onTestFinished(() => faults(s, { error_rate: 0.3, drop_rate: 0.1, error_every: 0 }));
    const env = {
      CLAPPER_BASE_URL: s.url,
      CLAPPER_API_KEY: KEY,
      // The CLI's own backoff starts at 250 ms; a fast one keeps the test short.
      CLAPPER_RETRY_BASE_MS: "5",
    };
    const commands = [
      ["balance"],
      ["balance", "--json"],
      ["skills", "list"],
      ["skills", "show", "harbour"],
      ["voices", "list"],
      ["voices", "list", "--custom"],
      ["tasks", "list"],
      ["tasks", "list", "--kind", "speech", "--json"],
      ["tasks", "get", seeded.video[1] as string],
      ["tasks", "get", seeded.speech[1] as string],
    ];
    const before = await stats(s);
    for (let round = 0; round < 3; round++) {
      for (const argv of commands) {
        const out: string[] = [];
        const err: string[] = [];
        const code = await main(argv, {
          env,
          stdout: (t) => out.push(t),
          stderr: (t) => err.push(t),
          logger: createLogger("silent"),
        });
        expect({ argv, code, err }).toEqual({ argv, code: 0, err: [] });
        expect(out.join("\n")).toMatch(/\S/);
      }
    }
    const after = await stats(s);
    expect(after.tasks_created).toEqual(before.tasks_created);
  });
});

describe("under a rate limit", () => {
  it("a burst of reads waits out the 429s and all succeed", async () => {
    const s = await sandbox({ rateLimit: 20 });
    onTestFinished(() => s.close());
    const attempts: number[] = [];
    const logger = {
      debug(obj: object, msg?: string) {
        if (msg === "http attempt") attempts.push((obj as { status?: number }).status ?? 0);
      },
      warn() {},
    };
    const limited = createClients({ baseUrl: s.url, apiKey: KEY, logger, policies: POLICIES });
    onTestFinished(() => limited.close());
    const started = Date.now();
    const results = await Promise.all(Array.from({ length: 30 }, () => limited.video.pointsSummary()));
    expect(results).toHaveLength(30);
    expect(attempts.filter((x) => x === 429).length).toBeGreaterThan(0);
    expect(attempts.filter((x) => x === 200)).toHaveLength(30);
    // The sandbox says Retry-After: 1, and the layer waited for it.
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
  });
});
