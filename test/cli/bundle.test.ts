// How bin/clapper.js loads the CLI (bin/load.js): the bundle that `npm run build` writes
// (dist/cli/clapper.cjs) with its V8 code cache when they are current, else the ES modules of dist/.
// CLAPPER_LOADER_REPORT=1 makes the loader say which way it took, in one line on stderr. The cases
// that damage or remove a file work on a copy of the build (bin/, dist/, package.json, with a link
// to node_modules), never on the build the other tests run.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { chmod, cp, readFile, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ROOT, staleBuild } from "../run/harness.js";
import { clapper, type Folder, folder, oneJson, type Ran, smallManifest } from "./cli-process.js";

const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const ACCEPTED = "clapper loader: bundle, cache accepted\n";

let dir: Folder;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  dir = await folder("clapper-bundle-");
});

/** `run NAME.yaml --sandbox --json`: a manifest of its own for each run (a run keeps state beside it). */
async function runArgs(name: string): Promise<string[]> {
  return [
    "run",
    await dir.file(`${name}.yaml`, smallManifest(name)),
    "--sandbox",
    "--json",
    "--log-level",
    "silent",
  ];
}
afterAll(() => dir?.remove());

/** A copy of the build in its own folder: its bin/clapper.js, its bundle and its cache. */
async function copyOfBuild(name: string) {
  const root = join(dir.path, name);
  // Times kept: the loader compares the bundle's with dist/cli/main.js's.
  for (const part of ["bin", "dist", "package.json"]) {
    await cp(join(ROOT, part), join(root, part), { recursive: true, preserveTimestamps: true });
  }
  await symlink(join(ROOT, "node_modules"), join(root, "node_modules"));
  await chmod(root, 0o755);
  const bundle = join(root, "dist", "cli", "clapper.cjs");
  return {
    root,
    bundle,
    cache: `${bundle}.cache`,
    /** `node [NODE_FLAGS] bin/clapper.js ARGS` of this copy, the loader's report on. */
    run(args: string[], o: { nodeFlags?: string[]; env?: Record<string, string>; uid?: number } = {}): Ran {
      const r = spawnSync(
        process.execPath,
        [...(o.nodeFlags ?? []), join(root, "bin", "clapper.js"), ...args],
        {
          cwd: dir.path,
          encoding: "utf8",
          env: { PATH: process.env.PATH, HOME: process.env.HOME, CLAPPER_LOADER_REPORT: "1", ...o.env },
          timeout: 30_000,
          ...(o.uid !== undefined ? { uid: o.uid, gid: o.uid } : {}),
        },
      );
      return { code: r.status, signal: r.signal, stdout: r.stdout, stderr: r.stderr };
    },
  };
}

describe("bin/clapper.js loads the bundle", () => {
  it("the built CLI runs the bundle from its code cache", async () => {
    const r = await clapper(["--version"], { env: { CLAPPER_LOADER_REPORT: "1" } });
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(VERSION);
    expect(r.stderr).toBe(ACCEPTED);
    // A whole run through it, its answer and its report as the modules' would be.
    const run = await clapper(await runArgs("built"), {
      cwd: dir.path,
      env: { CLAPPER_LOADER_REPORT: "1" },
    });
    expect(run.stderr).toBe(ACCEPTED);
    expect(run.code, run.stdout).toBe(0);
    expect(oneJson(run).counts).toMatchObject({ total: 2, succeeded: 2 });
  });

  it("compiles the bundle from the string read, without a copy of it in V8's heap", () => {
    // The bundle is its module's function already: a loader that joined a wrapper to it made V8
    // copy the whole joined string (3.5 MB) into its heap at every start. Loaded here in a
    // process of its own, before anything else has a large object in the heap; then, as the
    // measure's own control, the same file compiled as that loader did.
    const bundle = join(ROOT, "dist", "cli", "clapper.cjs");
    const size = readFileSync(bundle).length;
    const r = spawnSync(
      process.execPath,
      [
        "--input-type=module",
        "-e",
        `import v8 from "node:v8";
         import { readFileSync } from "node:fs";
         import vm from "node:vm";
         const large = () => v8.getHeapSpaceStatistics().filter((s) => /large_object/.test(s.space_name));
         const { loadCli } = await import(${JSON.stringify(join(ROOT, "bin", "load.js"))});
         await loadCli();
         const loaded = large().reduce((n, s) => n + s.space_used_size, 0);
         const joined = new vm.Script(readFileSync(${JSON.stringify(bundle)}, "latin1") + "\\n");
         const withCopy = large().reduce((n, s) => n + s.space_used_size, 0);
         console.log(JSON.stringify({ spaces: large().length, loaded, withCopy, kept: typeof joined }));`,
      ],
      {
        encoding: "utf8",
        env: { PATH: process.env.PATH, HOME: process.env.HOME, CLAPPER_LOADER_REPORT: "1" },
      },
    );
    expect(r.stderr).toBe(ACCEPTED);
    const seen = JSON.parse(r.stdout) as { spaces: number; loaded: number; withCopy: number };
    expect(seen.spaces).toBeGreaterThan(0);
    expect(size).toBeGreaterThan(2_000_000);
    // The control: a joined copy is seen, whole.
    expect(seen.withCopy - seen.loaded).toBeGreaterThanOrEqual(size);
    expect(seen.loaded).toBeLessThan(size / 2);
  });

  it("a damaged cache, or another build's, is not used: the bundle still runs, and the next start has a good one", async () => {
    const copy = await copyOfBuild("damaged");
    const bytes = await readFile(copy.cache);
    // Bytes in the middle of V8's data changed, its first line (build and checksum) kept: V8 alone
    // would not notice (it checks versions, flags and length, not the bytes).
    const middle = Math.floor(bytes.length / 2);
    for (let at = middle; at < middle + 64; at++) bytes.writeUInt8(bytes.readUInt8(at) ^ 0x5a, at);
    await writeFile(copy.cache, bytes);
    const damaged = copy.run(await runArgs("damaged"));
    expect(damaged.stderr).toBe("clapper loader: bundle, cache of another build or damaged\n");
    expect(damaged.code, damaged.stdout).toBe(0);
    expect(oneJson(damaged).counts).toMatchObject({ total: 2, succeeded: 2 });
    // Written anew as that run exited, beside the bundle (no file left behind but the cache).
    expect(copy.run(["--version"]).stderr).toBe(ACCEPTED);
    expect(readdirSync(join(copy.root, "dist", "cli")).filter((f) => f.startsWith("clapper.cjs"))).toEqual([
      "clapper.cjs",
      "clapper.cjs.cache",
    ]);

    // The cache of another build: its first line names another bundle.
    const other = await readFile(copy.cache);
    const at = "// clapper bundle ".length;
    // Another character than the one there (a build whose name starts with "0" kept its own).
    other.write(other.toString("latin1", at, at + 1) === "0" ? "1" : "0", at, "latin1");
    await writeFile(copy.cache, other);
    const r = copy.run(["--version"]);
    expect(r.stderr).toBe("clapper loader: bundle, cache of another build or damaged\n");
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(VERSION);
  }, 60_000);

  it("a cache V8 rejects (other V8 flags, another Node) still runs, and is replaced", async () => {
    const copy = await copyOfBuild("rejected");
    const flagged = copy.run(await runArgs("rejected"), {
      nodeFlags: ["--max-lazy"],
    });
    expect(flagged.stderr).toBe("clapper loader: bundle, cache rejected\n");
    expect(flagged.code, flagged.stdout).toBe(0);
    expect(oneJson(flagged).counts).toMatchObject({ total: 2, succeeded: 2 });
    // Rewritten for those flags: taken with them, rejected without them (and rewritten again).
    expect(copy.run(["--version"], { nodeFlags: ["--max-lazy"] }).stderr).toBe(ACCEPTED);
    const plain = copy.run(["--version"]);
    expect(plain.stderr).toBe("clapper loader: bundle, cache rejected\n");
    expect(plain.stdout.trim()).toBe(VERSION);
    expect(copy.run(["--version"]).stderr).toBe(ACCEPTED);
  }, 60_000);

  it("without a cache, or in a folder it cannot write, the bundle runs and nothing is left behind", async () => {
    const copy = await copyOfBuild("no-cache");
    await rm(copy.cache);
    const listing = () =>
      readdirSync(join(copy.root, "dist", "cli")).filter((f) => f.startsWith("clapper.cjs"));
    if (process.getuid?.() === 0) {
      // As another user (nobody): the build's folders are root's; the cache cannot be written.
      const r = copy.run(["--version"], { uid: 65534 });
      expect(r.stderr).toBe("clapper loader: bundle, no cache\n");
      expect(r.code).toBe(0);
      expect(r.stdout.trim()).toBe(VERSION);
      expect(listing()).toEqual(["clapper.cjs"]);
      // The failed write at exit changes no exit code (a usage error stays 2).
      const usage = copy.run(["plan"], { uid: 65534 });
      expect(usage.code).toBe(2);
      expect(usage.stderr).toMatch(/^clapper loader: bundle, no cache\n/);
      expect(listing()).toEqual(["clapper.cjs"]);
    }
    const r = copy.run(["--version"]);
    expect(r.stderr).toBe("clapper loader: bundle, no cache\n");
    expect(r.stdout.trim()).toBe(VERSION);
    expect(listing()).toEqual(["clapper.cjs", "clapper.cjs.cache"]);
    expect(copy.run(["--version"]).stderr).toBe(ACCEPTED);
  }, 60_000);

  it("falls back to the ES modules without a bundle, with one older than dist/cli/main.js, or when told to", async () => {
    const copy = await copyOfBuild("modules");
    const told = copy.run(["--version"], { env: { CLAPPER_NO_BUNDLE: "1" } });
    expect(told.stderr).toBe("clapper loader: modules (CLAPPER_NO_BUNDLE)\n");
    expect(told.stdout.trim()).toBe(VERSION);

    // A `tsc` after a change of src/, without the bundle step: the new modules run, not the old bundle.
    const later = new Date(Date.now() + 60_000);
    await utimes(join(copy.root, "dist", "cli", "main.js"), later, later);
    const stale = copy.run(["--version"]);
    expect(stale.stderr).toBe("clapper loader: modules (the bundle is older than dist/cli/main.js)\n");
    expect(stale.stdout.trim()).toBe(VERSION);

    // A bundle of a build from before it was written as a function (bin/ updated, dist/ not rebuilt).
    const fresh = new Date(Date.now() + 120_000);
    const text = await readFile(copy.bundle, "latin1");
    const nl = text.indexOf("\n");
    const body = text.slice(nl + 1);
    const [start, end] = ["(function (exports, require, module, __filename, __dirname) { ", "\n});\n"];
    expect(body.startsWith(start) && body.endsWith(end)).toBe(true);
    const unwrapped = body.slice(start.length, -end.length);
    await writeFile(copy.bundle, `${text.slice(0, nl + 1)}${unwrapped}`, "latin1");
    await utimes(copy.bundle, fresh, fresh);
    const older = copy.run(["--version"]);
    expect(older.stderr).toBe("clapper loader: modules (a bundle of an older build)\n");
    expect(older.stdout.trim()).toBe(VERSION);

    await rm(copy.bundle);
    await rm(copy.cache);
    const none = copy.run(await runArgs("modules"));
    expect(none.stderr).toBe("clapper loader: modules (no bundle)\n");
    expect(none.code, none.stdout).toBe(0);
    expect(oneJson(none).counts).toMatchObject({ total: 2, succeeded: 2 });
    expect(existsSync(copy.cache)).toBe(false);
  }, 60_000);
});
