// The package as a user gets it: `npm pack` of this checkout (its built dist/), installed from the
// tarball into an empty ES module project, then imported by name from TypeScript (checked by the
// project's tsc, moduleResolution nodenext) and from plain JavaScript (a sandbox run). Installing
// the dependencies needs the npm registry (or npm's cache): about 45 s here; the whole file ~70 s.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const ROOT = join(import.meta.dirname, "../..");
const NAME = "@clapperhq/clapper";

let work: string;
let app: string;
let files: string[];
let installed: string;

/** npm and tsc with only the environment they need (no npm_* of an `npm test` around this one). */
function env(): NodeJS.ProcessEnv {
  const keep = ["PATH", "HOME", "TMPDIR", "npm_config_cache", "npm_config_registry", "npm_config_userconfig"];
  return Object.fromEntries(keep.flatMap((k) => (process.env[k] ? [[k, process.env[k]]] : [])));
}

async function sh(file: string, args: string[], cwd: string, timeout: number) {
  return run(file, args, { cwd, env: env(), timeout, maxBuffer: 16 * 1024 * 1024, encoding: "utf8" });
}

beforeAll(async () => {
  if (!existsSync(join(ROOT, "dist/index.js")) || !existsSync(join(ROOT, "dist/index.d.ts"))) {
    throw new Error("dist/index.js or dist/index.d.ts is missing: run npm run build first");
  }
  work = await mkdtemp(join(tmpdir(), "clapper-packed-"));
  app = join(work, "app");
  await mkdir(app);
  // --ignore-scripts: `prepare` would build again; the tests run on the build they are given.
  const packed = await sh(
    "npm",
    ["pack", "--ignore-scripts", "--json", "--pack-destination", work],
    ROOT,
    60_000,
  );
  const [info] = JSON.parse(packed.stdout) as Array<{
    name: string;
    filename: string;
    files: { path: string }[];
  }>;
  if (!info) throw new Error(`npm pack said nothing: ${packed.stderr}`);
  expect(info.name).toBe(NAME);
  files = info.files.map((f) => f.path).sort();
  await writeFile(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  const tgz = join(work, info.filename);
  await sh("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", tgz], app, 240_000);
  installed = join(app, "node_modules", NAME);
}, 300_000);

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

describe("the published package", () => {
  it("holds what runs and nothing else: no tests, benches, state, output or source maps", async () => {
    expect(files).toEqual(
      expect.arrayContaining([
        "package.json",
        "bin/clapper.js",
        "bin/load.js",
        "dist/index.js",
        "dist/index.d.ts",
        "dist/cli/main.js",
        "dist/cli/clapper.cjs",
        "schema/manifest.schema.json",
        "jobs/demo.yaml",
      ]),
    );
    // The coordinator's Lua scripts, read beside their compiled module.
    expect(files.filter((f) => /^dist\/coord\/lua\/[^/]+\.lua$/.test(f)).length).toBeGreaterThan(0);
    const stray = files.filter(
      (f) =>
        /^(test|bench|output|src|scripts|\.clapper)\//.test(f) ||
        f.includes("/.clapper/") ||
        f.endsWith(".map"),
    );
    expect(stray).toEqual([]);
    // Every module the package's modules and declarations name is in the package.
    const missing: string[] = [];
    let seen = 0;
    for (const f of files.filter((x) => /^dist\/.*\.(js|d\.ts)$/.test(x))) {
      const text = await readFile(join(installed, f), "utf8");
      for (const m of text.matchAll(/(?:from|import\()\s*["'](\.{1,2}\/[^"']+)["']/g)) {
        seen += 1;
        const target = relative(installed, resolve(dirname(join(installed, f)), m[1] ?? ""));
        if (!files.includes(target)) missing.push(`${f} -> ${m[1]}`);
      }
    }
    expect(missing).toEqual([]);
    expect(seen).toBeGreaterThan(500);
    const pkg = JSON.parse(await readFile(join(installed, "package.json"), "utf8"));
    expect(pkg.exports["."]).toEqual({ types: "./dist/index.d.ts", import: "./dist/index.js" });
    expect(pkg.bin).toEqual({ clapper: "bin/clapper.js" });
    // The bin is installed under its own name.
    expect(await readdir(join(app, "node_modules/.bin"))).toContain("clapper");
  });

  it("types: a TypeScript file importing run, startSandbox and Report by the package's name typechecks", async () => {
    await writeFile(
      join(app, "check.ts"),
      [
        'import { ClapperError, plan, type Report, type RunEvent, run, startSandbox, status } from "@clapperhq/clapper";',
        "const sandbox = await startSandbox({ timeScale: 0.01 });",
        'const report: Report = await run({ manifest: "m.yaml", baseUrl: sandbox.url, apiKey: "sk-ml-sandbox",',
        "  onEvent: (e: RunEvent) => e.progress.counts.running });",
        "const total: number = report.counts.total;",
        "const first: string | undefined = report.jobs[0]?.id;",
        'const planned: number = (await plan({ manifest: "m.yaml" })).counts.total;',
        'const now: string = (await status({ manifest: "m.yaml" })).run.status;',
        "const line = (e: ClapperError): number | undefined => e.problems[0]?.line;",
        "// @ts-expect-error a report's status is one of its words, not any string",
        'const wrong: Report["run"]["status"] = "done";',
        "// @ts-expect-error run() needs a manifest",
        "await run({ sandbox: true });",
        "console.log(total, first, planned, now, line, wrong);",
        "await sandbox.close();",
        "",
      ].join("\n"),
    );
    await writeFile(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2023",
          module: "nodenext",
          moduleResolution: "nodenext",
          strict: true,
          noEmit: true,
          // The package's own declarations are checked too, not only their use.
          skipLibCheck: false,
          types: ["node"],
          typeRoots: [join(ROOT, "node_modules/@types")],
        },
        files: ["check.ts"],
      }),
    );
    const tsc = join(ROOT, "node_modules/.bin/tsc");
    const checked = await sh(tsc, ["-p", "tsconfig.json"], app, 90_000).catch((e: { stdout?: string }) => e);
    expect("stdout" in checked ? checked.stdout : "").toBe("");
  }, 100_000);

  it("runs: a .mjs imports it by name and runs a manifest on its sandbox", async () => {
    await writeFile(
      join(app, "m.yaml"),
      [
        "name: packed",
        "output: ./out",
        "defaults:",
        '  shot: { model: Vid-H3, resolution: 480P, duration: 5, ratio: "16:9" }',
        '  line: { language: EN, voice: "preset:en_female_bright" }',
        "shots:",
        '  - { id: s01, prompt: "A lighthouse at dusk" }',
        "lines:",
        '  - { id: n01, text: "Every night, the light came on." }',
        "",
      ].join("\n"),
    );
    await writeFile(
      join(app, "run.mjs"),
      [
        'import { run, startSandbox } from "@clapperhq/clapper";',
        "const sandbox = await startSandbox({ timeScale: 0.002 });",
        "try {",
        '  const report = await run({ manifest: "m.yaml", baseUrl: sandbox.url, apiKey: "sk-ml-sandbox", pollInterval: 0.05 });',
        "  console.log(JSON.stringify(report.counts));",
        "} finally {",
        "  await sandbox.close();",
        "}",
        "",
      ].join("\n"),
    );
    const ran = await sh(process.execPath, ["run.mjs"], app, 60_000);
    // The counts, and nothing else: the library prints nothing of its own.
    expect(ran.stdout).toBe(
      `${JSON.stringify({ total: 2, succeeded: 2, failed: 0, cancelled: 0, skipped: 0, pending: 0 })}\n`,
    );
    expect(ran.stderr).toBe("");
    expect(existsSync(join(app, "out/packed/reports/report.json"))).toBe(true);
  }, 70_000);
});
