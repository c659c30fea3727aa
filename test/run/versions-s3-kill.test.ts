// A regenerated line's replacement in S3 (s3rver on loopback), killed at every step of it. The store
// itself holds the runner's requests (test/s3/helpers.ts, StoreHooks) and kills it at the exact
// moment: before the old object is copied to its version's key (the copy never happens), after
// that copy is done but before the runner hears, before and after the new object, uploaded aside,
// is copied to its key, and before the aside object is deleted; SIGTERM at two of those moments;
// and SIGKILL while the task runs. Then run again to the end. After each: the old object is never
// lost (under its key or its version's), one task was created for the edit, the points reported
// equal the balance drop, every stored object's sha256 is as reported (the kept version's is the
// first run's), and no upload is left open; an object left aside by the killed writer is removed
// by a later run once it is old enough to be no live writer's.
import { readdir, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Report, ReportJob } from "../../src/report/model.js";
import { BUCKET, type HeldRequest, S3_ENV, type Store, startStore } from "../s3/helpers.js";
import {
  type CliProcess,
  cli,
  cliEnv,
  type LogEvent,
  type SandboxProcess,
  settledBalance,
  staleBuild,
  startSandbox,
  statsDelta,
  twoLines,
  type Workspace,
  workspace,
} from "./harness.js";

const FLAGS = ["--log-format", "json", "--poll-interval", "0.05"];

let sb: SandboxProcess;
let store: Store;
const spaces: Workspace[] = [];

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  sb = await startSandbox(0.002);
  store = await startStore();
});

afterAll(async () => {
  await store?.close();
  await sb?.close();
  for (const ws of spaces) await ws.remove();
});

const manifest = twoLines;

/** Where in the store the runner is stopped, and how. */
interface Cut {
  what: string;
  /** Which request, for the run's prefix. */
  request?: (r: HeldRequest, prefix: string) => boolean;
  when?: "before" | "after";
  signal: NodeJS.Signals;
  /** A signal from outside on a log line instead. */
  on?: (e: LogEvent) => boolean;
  /** What the store holds once the runner is dead: proof that it died at that moment. */
  left?: { kept: "old" | "absent"; output: "old" | "new" };
}

const isCopyTo = (r: HeldRequest, key: string) =>
  r.method === "PUT" && r.copySource !== undefined && r.path === `/${BUCKET}/${key}`;
const versionCopy = (r: HeldRequest, prefix: string) => isCopyTo(r, `${prefix}/ep/lines/n02.v1.wav`);
// The new object takes its key by a copy from aside (the old one is kept by then).
const takesKey = (r: HeldRequest, prefix: string) =>
  isCopyTo(r, `${prefix}/ep/lines/n02.wav`) && (r.copySource ?? "").includes("/.partial/");
const asideDelete = (r: HeldRequest, prefix: string) =>
  r.method === "DELETE" && r.path.startsWith(`/${BUCKET}/${prefix}/ep/.partial/lines/n02.wav.`);

const CUTS: Cut[] = [
  {
    what: "SIGKILL while its task runs",
    signal: "SIGKILL",
    on: (e) => e.event === "created" && e.job === "line/n02",
  },
  {
    what: "SIGKILL before the old object is copied to its version",
    request: versionCopy,
    when: "before",
    signal: "SIGKILL",
    left: { kept: "absent", output: "old" },
  },
  {
    what: "SIGKILL once the version's copy is made, before the runner hears",
    request: versionCopy,
    when: "after",
    signal: "SIGKILL",
    left: { kept: "old", output: "old" },
  },
  {
    what: "SIGKILL before the new object takes its key",
    request: takesKey,
    when: "before",
    signal: "SIGKILL",
    left: { kept: "old", output: "old" },
  },
  {
    what: "SIGKILL once the new object took its key, before it is recorded",
    request: takesKey,
    when: "after",
    signal: "SIGKILL",
    left: { kept: "old", output: "new" },
  },
  {
    what: "SIGKILL before the object uploaded aside is deleted",
    request: asideDelete,
    when: "before",
    signal: "SIGKILL",
    left: { kept: "old", output: "new" },
  },
  { what: "SIGTERM just before the version's copy", request: versionCopy, when: "before", signal: "SIGTERM" },
  {
    what: "SIGTERM just before the new object takes its key",
    request: takesKey,
    when: "before",
    signal: "SIGTERM",
  },
];

/** Makes objects an hour old in s3rver's folder (their files' times are their LastModified). */
async function age(keys: readonly string[]): Promise<void> {
  if (keys.length === 0) return;
  const files = await readdir(store.directory, { recursive: true });
  const hourAgo = new Date(Date.now() - 3_600_000);
  for (const key of keys) {
    const suffix = key.slice(key.lastIndexOf(".") + 1);
    const found = files.filter((f) => f.includes(suffix));
    expect(found.length, `${key} in ${store.directory}`).toBeGreaterThan(0);
    for (const f of found) await utimes(join(store.directory, f), hourAgo, hourAgo);
  }
}

/** Signals the run at the cut's request; a SIGKILL before it also drops the request. */
function hold(cut: Cut, prefix: string, runner: () => CliProcess | undefined): void {
  let done = false;
  const fire = (r: HeldRequest, when: "before" | "after"): boolean => {
    if (done || cut.when !== when || !cut.request?.(r, prefix)) return false;
    const child = runner()?.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return false;
    done = true;
    child.kill(cut.signal);
    return true;
  };
  store.hooks = {
    before: (r) => (fire(r, "before") && cut.signal === "SIGKILL" ? "drop" : undefined),
    after: (r) => {
      fire(r, "after");
    },
  };
}

describe("a replacement in S3 killed at every step", () => {
  for (const [i, cut] of CUTS.entries()) {
    it(cut.what, async () => {
      // Texts of their own: one sandbox serves every case, and a request it has seen is a replay.
      const ws = await workspace("ep", { text: manifest(`The sea was calm (s3 ${i}).`) });
      spaces.push(ws);
      const prefix = `vk${i}`;
      const flags = [...FLAGS, "--output", `s3://${BUCKET}/${prefix}`, "--s3-endpoint", store.endpoint];
      const env = { ...cliEnv(sb), ...S3_ENV };
      const report = async () =>
        JSON.parse((await store.object(`${prefix}/ep/reports/report.json`))?.text ?? "{}") as Report;
      const n02Of = (r: Report) => r.jobs.find((j) => j.id === "line/n02") as ReportJob;
      const keyOf = (uri: string) => uri.replace(`s3://${BUCKET}/`, "");

      const first = await cli(["run", ws.manifest, ...flags], { cwd: ws.dir, env }).done;
      expect(first.code, first.messages.join("\n")).toBe(0);
      const old = n02Of(await report()).output as NonNullable<ReportJob["output"]>;
      const output = `${prefix}/ep/lines/n02.wav`;
      const kept = `${prefix}/ep/lines/n02.v1.wav`;
      const stats = await sb.stats();
      const balance = (await settledBalance(sb)).total_points;

      await writeFile(ws.manifest, manifest(`The sea was calm and grey that long night (s3 ${i}).`));
      let killed: CliProcess | undefined;
      if (cut.request) hold(cut, prefix, () => killed);
      killed = cli(["run", ws.manifest, ...flags], {
        cwd: ws.dir,
        env,
        ...(cut.on ? { on: (e: LogEvent) => (cut.on?.(e) ? cut.signal : undefined) } : {}),
      });
      const stopped = await killed.done;
      store.hooks = {};
      // Stopped where asked: by SIGKILL, or by SIGTERM (exit 4).
      if (cut.signal === "SIGTERM") expect(stopped.code, stopped.messages.join("\n")).toBe(4);
      else expect(stopped.signal, stopped.messages.join("\n")).toBe("SIGKILL");

      // The old object is whole under one of its two keys.
      const shas = [(await store.object(output))?.sha256, (await store.object(kept))?.sha256];
      expect(shas).toContain(old.sha256);
      if (cut.left) {
        const [now, keptNow] = shas;
        expect({
          kept: keptNow === undefined ? "absent" : keptNow === old.sha256 ? "old" : keptNow,
          output: now === old.sha256 ? "old" : now !== undefined ? "new" : "absent",
        }).toEqual(cut.left);
      }

      let last = stopped;
      for (let n = 0; n < 3 && last.code !== 0; n++)
        last = await cli(["run", ws.manifest, ...flags], { cwd: ws.dir, env }).done;
      expect(last.code, last.messages.join("\n")).toBe(0);

      const final = await report();
      const n02 = n02Of(final);
      expect(statsDelta(stats, await sb.stats()).tasks).toBe(1);
      expect(final.points.spent).toBe(balance - (await settledBalance(sb)).total_points);
      expect(n02.versions).toEqual([
        { uri: `s3://${BUCKET}/${kept}`, sha256: old.sha256, bytes: old.bytes, at: expect.any(String) },
      ]);
      expect((await store.object(kept))?.sha256).toBe(old.sha256);
      expect(n02.output?.sha256).not.toBe(old.sha256);
      for (const j of final.jobs) {
        const found = j.output ? await store.object(keyOf(j.output.uri)) : undefined;
        expect({ id: j.id, sha256: found?.sha256, bytes: found?.bytes }).toEqual({
          id: j.id,
          sha256: j.output?.sha256,
          bytes: j.output?.bytes,
        });
      }
      const keys = (await store.list(`${prefix}/ep/`)).map((o) => o.key);
      expect(keys).not.toContain(`${prefix}/ep/lines/n02.v2.wav`);
      expect(await store.uploads(`${prefix}/`)).toEqual([]);
      // A writer killed before it deleted its aside object leaves that one object, and only that: no
      // live writer's object is that old, so a run removes it once ten minutes have passed. Aged here.
      const aside = keys.filter((k) => k.includes("/.partial/"));
      expect(aside.length).toBeLessThanOrEqual(1);
      for (const k of aside) expect(k.startsWith(`${prefix}/ep/.partial/lines/n02.wav.`), k).toBe(true);
      await age(aside);

      // Once more: nothing created, nothing kept again, nothing left aside.
      const again = await cli(["run", ws.manifest, ...flags, "--json"], { cwd: ws.dir, env }).done;
      expect(again.code).toBe(0);
      expect(statsDelta(stats, await sb.stats()).tasks).toBe(1);
      expect(n02Of(JSON.parse(again.stdout) as Report).versions).toEqual(n02.versions);
      expect((await store.list(`${prefix}/ep/.partial/`)).map((o) => o.key)).toEqual([]);
    });
  }
});
