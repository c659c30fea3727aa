// The API key never appears in stdout, stderr, the debug log or thrown errors, including failing
// calls (401, 400, refused connections), and the debug log has one line per attempt.
import { randomUUID } from "node:crypto";
import { Writable } from "node:stream";
import { inspect } from "node:util";
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from "vitest";
import { ClapperApiError, createClients, uploadReferenceAudio } from "../../src/api/index.js";
import { createLogger } from "../../src/cli/logger.js";
import { main } from "../../src/cli/main.js";
import type { Sandbox } from "../../src/sandbox/index.js";
import { type TempDir, tempDir } from "../fixtures/audio.js";
import { call, sandbox } from "../helpers/sandbox.js";

const SECRET = `sk-ml-SECRET${randomUUID().replaceAll("-", "")}`;
const WRONG = `sk-ml-WRONG${randomUUID().replaceAll("-", "")}`;
/** Long enough to be the key, short enough to catch a truncated echo of it. */
const fragments = (key: string) => [key, key.slice(6, 26), key.slice(-16)];

interface Captured {
  code: number;
  out: string;
  err: string;
  log: string;
  lines: Array<Record<string, unknown>>;
  /** Anything written to the real stdout/stderr while the command ran. */
  direct: string;
}

async function run(argv: string[], env: Record<string, string>): Promise<Captured> {
  const logLines: string[] = [];
  const stream = new Writable({
    write(chunk, _enc, done) {
      logLines.push(String(chunk));
      done();
    },
  });
  const out: string[] = [];
  const err: string[] = [];
  const direct: string[] = [];
  const realOut = process.stdout.write.bind(process.stdout);
  const realErr = process.stderr.write.bind(process.stderr);
  const tap =
    (real: typeof realOut) =>
    (chunk: unknown, ...rest: unknown[]): boolean => {
      direct.push(String(chunk));
      return (real as (c: unknown, ...r: unknown[]) => boolean)(chunk, ...rest);
    };
  process.stdout.write = tap(realOut) as typeof process.stdout.write;
  process.stderr.write = tap(realErr) as typeof process.stderr.write;
  let code: number;
  try {
    code = await main([...argv, "--log-level", "debug"], {
      env,
      stdout: (t) => out.push(t),
      stderr: (t) => err.push(t),
      logger: createLogger("debug", stream),
    });
  } finally {
    process.stdout.write = realOut;
    process.stderr.write = realErr;
  }
  const log = logLines.join("");
  const lines = log
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { code, out: out.join("\n"), err: err.join("\n"), log, lines, direct: direct.join("") };
}

function expectNoKey(r: Captured, ...keys: string[]) {
  for (const key of keys) {
    for (const part of fragments(key)) {
      expect(r.out).not.toContain(part);
      expect(r.err).not.toContain(part);
      expect(r.log).not.toContain(part);
      expect(r.direct).not.toContain(part);
    }
  }
}

let s: Sandbox;
let files: TempDir;
let env: Record<string, string>;
beforeAll(async () => {
  s = await sandbox({ keys: [`${SECRET}=acme`] });
  files = await tempDir();
  env = { CLAPPER_BASE_URL: s.url, CLAPPER_API_KEY: SECRET, CLAPPER_RETRY_BASE_MS: "1" };
});
afterAll(async () => {
  await s.close();
  await files.remove();
});

describe("the key stays secret", () => {
  it("in successful commands with debug logging", async () => {
    const skill = await files.file("quiet.md", "Keep it quiet.");
    const wav = await files.wav("me.wav", 1200);
    const keyFile = await files.file("key.txt", `${SECRET}\n`);
    for (const argv of [
      ["balance"],
      ["balance", "--json"],
      ["skills", "list", "--json"],
      ["skills", "create", skill],
      ["voices", "create", "Me", wav],
      ["voices", "list", "--custom", "--json"],
      ["tasks", "list", "--json"],
    ]) {
      const r = await run(argv, env);
      expect({ argv, code: r.code, err: r.err }).toEqual({ argv, code: 0, err: "" });
      expect(r.lines.length, argv.join(" ")).toBeGreaterThan(0);
      expectNoKey(r, SECRET);
    }
    const viaFile = await run(["balance", "--api-key-file", keyFile], { CLAPPER_BASE_URL: s.url });
    expect(viaFile.code).toBe(0);
    expectNoKey(viaFile, SECRET);
  });

  it("when the key is refused (401)", async () => {
    const r = await run(["balance"], { ...env, CLAPPER_API_KEY: WRONG });
    // A refused key is a usage error (exit 2: check the key), not a failed job.
    expect(r.code).toBe(2);
    expect(r.err).toContain("the API key was refused");
    expect(r.lines.some((l) => l.status === 401)).toBe(true);
    expectNoKey(r, WRONG, SECRET);
  });

  it("when the service refuses the request (400)", async () => {
    // 70 KiB of skill: the service's 64 KiB body limit refuses it.
    const big = await files.file("big.md", `${"x".repeat(70 * 1024)}\n`);
    const r = await run(["skills", "create", big], env);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/refused.*exceeds the limit of 64 KiB/);
    expect(r.lines.some((l) => l.status === 400)).toBe(true);
    expectNoKey(r, SECRET);
  });

  it("when nothing answers (connection refused)", async () => {
    const down = await sandbox({ keys: [`${SECRET}=acme`] });
    const url = down.url;
    await down.close();
    const r = await run(["tasks", "list"], { ...env, CLAPPER_BASE_URL: url });
    // Unreachable: exit 6 (run again later).
    expect(r.code).toBe(6);
    expect(r.err).toContain("ECONNREFUSED");
    expect(r.lines.filter((l) => l.error === "ECONNREFUSED").length).toBeGreaterThan(1);
    expectNoKey(r, SECRET);
  });

  it("when a business error or a missing task is reported", async () => {
    const r = await run(["tasks", "get", "vid_missing"], env);
    expect(r.code).toBe(1);
    expect(r.lines.filter((l) => l.status === 404)).toHaveLength(2);
    expectNoKey(r, SECRET);
  });

  it("in every error the clients throw, their causes and stacks included", async () => {
    const down = await sandbox();
    const downUrl = down.url;
    await down.close();
    const fast = { maxRetries: 1, baseDelayMs: 1, maxDelayMs: 2 };
    const policies = { read: fast, create: fast, write: fast };
    const badFile = await files.file("bad.txt", "x");
    const attempts: Array<Promise<unknown>> = [];
    const clients = [
      createClients({ baseUrl: s.url, apiKey: WRONG, policies }),
      createClients({ baseUrl: s.url, apiKey: SECRET, policies }),
      createClients({ baseUrl: downUrl, apiKey: SECRET, policies }),
      createClients({ baseUrl: s.url, apiKey: SECRET, policies, timeoutMs: 1 }),
    ];
    for (const c of clients) onTestFinished(() => c.close());
    const [wrong, good, refused, impatient] = clients as [
      (typeof clients)[0],
      (typeof clients)[0],
      (typeof clients)[0],
      (typeof clients)[0],
    ];
    attempts.push(
      wrong.video.pointsSummary(),
      good.video.getTask("vid_missing"),
      good.video.createTask({
        model: "Vid-H3",
        content: [{ type: "image_url", image_url: { url: "http://127.0.0.1:9/x.png" } }],
      }),
      good.video.createTask({ model: "Vid-H3", content: [] }),
      good.video.deleteSkill("skill_official_prompt_polish"),
      uploadReferenceAudio(good.http, good.speech, badFile),
      refused.speech.pricing(),
      impatient.speech.listVoices(),
    );
    const errors = await Promise.all(
      attempts.map((p) =>
        p.then(
          () => undefined,
          (e: unknown) => e,
        ),
      ),
    );
    expect(errors.every((e) => e instanceof ClapperApiError)).toBe(true);
    for (const e of errors) {
      const text = `${(e as Error).message}\n${(e as Error).stack}\n${inspect(e, { depth: 10 })}\n${JSON.stringify(e)}`;
      for (const key of [SECRET, WRONG]) {
        for (const part of fragments(key)) expect(text).not.toContain(part);
      }
    }
  });

  it("the logger redacts key-shaped fields as a second line of defence", async () => {
    const chunks: string[] = [];
    const logger = createLogger(
      "debug",
      new Writable({
        write(chunk, _e, done) {
          chunks.push(String(chunk));
          done();
        },
      }),
    );
    logger.debug({
      apiKey: SECRET,
      api_key: SECRET,
      authorization: `Bearer ${SECRET}`,
      headers: { authorization: `Bearer ${SECRET}` },
    });
    logger.debug({ request: { authorization: `Bearer ${SECRET}`, apiKey: SECRET } });
    const text = chunks.join("");
    expect(text).toContain("[redacted]");
    expect(text).not.toContain(SECRET);
  });
});

describe("the debug log", () => {
  it("has one line per attempt with method, path, status, durationMs, attempt and requestId", async () => {
    const r = await run(["balance"], env);
    expect(r.code).toBe(0);
    const attempts = r.lines.filter((l) => l.msg === "http attempt");
    expect(attempts.map((l) => l.path).sort()).toEqual([
      "/audio/v1/pricing",
      "/vid/v2/query/point_packages",
      "/vid/v2/query/point_usage_summary",
    ]);
    for (const line of attempts) {
      expect(line).toMatchObject({ level: 20, method: "GET", status: 200, attempt: 1 });
      expect(typeof line.durationMs).toBe("number");
      expect(line.requestId).toMatch(/^req_[0-9a-f]+$/);
    }
  });

  it("logs every retried attempt, numbered, under faults", async () => {
    await call(s.url, "POST", "/_sandbox/faults", { key: null, body: { error_rate: 0.3 } });
    onTestFinished(async () => {
      await call(s.url, "POST", "/_sandbox/faults", { key: null, body: { error_rate: 0 } });
    });
    let retried = 0;
    for (let i = 0; i < 10; i++) {
      const r = await run(["balance"], env);
      expect(r.code).toBe(0);
      const attempts = r.lines.filter((l) => l.msg === "http attempt");
      for (const path of [
        "/audio/v1/pricing",
        "/vid/v2/query/point_packages",
        "/vid/v2/query/point_usage_summary",
      ]) {
        const mine = attempts.filter((l) => l.path === path);
        expect(mine.map((l) => l.attempt)).toEqual(mine.map((_, n) => n + 1));
        expect(mine.at(-1)?.status).toBe(200);
        for (const l of mine.slice(0, -1)) expect(l.status).toBe(503);
        for (const l of mine) expect(l.requestId).toMatch(/^req_/);
        retried += mine.length - 1;
      }
      expectNoKey(r, SECRET);
    }
    expect(retried).toBeGreaterThan(0);
  });
});
