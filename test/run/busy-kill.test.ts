// A create the service made but answered "busy" (the spec's creation timeout: retry with the same
// Idempotency-Key), under kills. Every job's first two creates reach the sandbox, which makes and
// charges the task, and are answered with a busy business error instead of the task; clapper sends
// the create again with the same key, and the sandbox answers with the one task it made. Each run is
// a process killed with SIGKILL or SIGTERM at a seeded random moment, then run again until it ends by
// itself. From outside: one task per job, the balance drop equal to what the state says was paid and
// to the points the reports give, every stored file's sha256 as reported, no lock left behind.
//
// Seeded: CLAPPER_CRASH_SEED=N replays a failing sequence (the seed is printed).
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hostileKey, hostileService, type Mutator } from "../fixtures/hostile.js";
import { LINE_IDS, readReport, rng, SHOT_IDS, staleBuild, verifyOutputs, workspace } from "./harness.js";
import { balance, paidByState, run } from "./hostile-runs.js";

const SEED = Number(process.env.CLAPPER_CRASH_SEED ?? Math.floor(Math.random() * 2 ** 31));
const random = rng(SEED);
const between = (lo: number, hi: number) => Math.floor(lo + random() * (hi - lo + 1));
const KEY = hostileKey();
/** Creates of one job answered busy, though the sandbox made (and charged) the task. */
const BUSY_ANSWERS = 2;

beforeAll(() => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
});

const stories: string[] = [];

describe("a create answered busy after the task was made, under kills", () => {
  afterAll(() => {
    console.log(`busy kill iterations: seed ${SEED}\n${stories.join("\n")}`);
  });

  it("resumed after SIGKILL or SIGTERM during the busy retries: one task per job, paid once, every file as reported", {
    timeout: 150_000,
  }, async () => {
    for (let n = 1; n <= 4; n++) {
      const answered = new Map<string, number>();
      const mutator: Mutator = {
        request(ctx) {
          if (ctx.kind !== "create" || ctx.text === undefined) return undefined;
          const seen = answered.get(ctx.text) ?? 0;
          if (seen >= BUSY_ANSWERS) return undefined;
          answered.set(ctx.text, seen + 1);
          return {
            forwardThen: {
              status: 200,
              json: {
                RetCode: 50301,
                Message: "creation timeout, retry with the same Idempotency-Key",
                request_uuid: `busy-${seen}`,
              },
            },
          };
        },
      };
      const svc = await hostileService(KEY, { timeScale: 0.002, mutator });
      const ws = await workspace(`busy-${n}`);
      const story: string[] = [];
      try {
        const before = await balance(svc, KEY);
        const stop = { signal: (n % 2 ? "SIGKILL" : "SIGTERM") as NodeJS.Signals, afterMs: between(0, 300) };
        const first = await run({ svc, ws, key: KEY, retryBaseMs: 20 }, stop);
        story.push(`${stop.signal} after ${stop.afterMs} ms: ${first.signal ?? `exit ${first.code}`}`);
        let last = first;
        for (let i = 0; i < 6 && (last.signal !== null || last.code === 4); i++) {
          last = await run({ svc, ws, key: KEY, retryBaseMs: 20 });
          story.push(last.signal ? `killed ${last.signal}` : `exit ${last.code}`);
        }
        stories.push(story.join("; "));
        const what = `seed ${SEED}, iteration ${n}: ${story.join("; ")}`;
        expect(last.code, `${what}\n${last.messages.join("\n")}`).toBe(0);
        const report = await readReport(ws);
        for (const id of [...SHOT_IDS, ...LINE_IDS]) {
          expect(report.jobs.find((j) => j.id === id)?.status, `${what}: ${id}`).toBe("succeeded");
        }
        // Every job's creates met the busy answers (6 jobs, 2 each), and made no second task: the key
        // brought back the one the sandbox made.
        expect([...answered.values()], what).toEqual(Array(6).fill(BUSY_ANSWERS));
        expect((await svc.stats()).tasks_created, what).toEqual({ video: 3, speech: 3 });
        const paid = await paidByState(ws);
        expect(before - (await balance(svc, KEY)), what).toBe(paid);
        const spentTotal = report.jobs.reduce((sum, j) => sum + (j.spent_total ?? Number.NaN), 0);
        expect(spentTotal, what).toBe(paid);
        expect(await verifyOutputs(report), what).toEqual([]);
        expect(existsSync(`${ws.statePath}.lock`), what).toBe(false);
      } finally {
        await svc.close();
        await ws.remove();
      }
    }
  });
});
