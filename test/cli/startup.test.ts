// What a command loads before it does its work: the first create of a run waits for every module the
// process loads first. The AWS SDK (a quarter of a second of CPU, 25 MB) is loaded only by a run
// that talks to S3, never by a run to a local folder. Every case is the built CLI as its own
// process, with a preload that lists every module it loads: ES modules through a loader hook,
// CommonJS ones (the SDK, undici) from require's cache at exit.
//
// Both ways bin/load.js loads the CLI are checked: the bundle (dist/cli/clapper.cjs), where the
// packages it holds (undici, zod) are no files of their own and only the ones left outside (the SDK,
// ioredis, pino-pretty) can be seen, and the ES modules (CLAPPER_NO_BUNDLE=1), where every file is
// seen. The S3 case is what proves the check sees the truth with the bundle: were the SDK bundled,
// or loaded another way than by require, it would not be listed there.
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { KEY, sandbox } from "../helpers/sandbox.js";
import { staleBuild } from "../run/harness.js";
import { clapper, type Folder, folder, type Ran, smallManifest } from "./cli-process.js";

let dir: Folder;
let preload: string;
let good: string;
let listed = 0;

const HOOKS = `import { appendFileSync } from "node:fs";
export async function load(url, context, next) {
  appendFileSync(process.env.CLAPPER_TEST_LOADED, url + "\\n");
  return next(url, context);
}
`;

const PRELOAD = `import { appendFileSync } from "node:fs";
import { createRequire, register } from "node:module";
register("./hooks.mjs", import.meta.url);
const cache = createRequire(import.meta.url).cache;
process.on("exit", () => {
  appendFileSync(process.env.CLAPPER_TEST_LOADED, Object.keys(cache).map((p) => p + "\\n").join(""));
});
`;

beforeAll(async () => {
  expect(staleBuild(), "dist/ is older than src/: run `npm run build` first").toEqual([]);
  dir = await folder("clapper-startup-");
  await dir.file("hooks.mjs", HOOKS);
  preload = await dir.file("preload.mjs", PRELOAD);
  good = await dir.file("good.yaml", smallManifest("good"));
});
afterAll(() => dir?.remove());

/** `clapper ARGS`, and the packages (node_modules names) and files of clapper's own it loaded. */
async function loading(
  args: string[],
  way: Way,
): Promise<{ ran: Ran; packages: Set<string>; own: string[] }> {
  const list = join(dir.path, `loaded-${listed++}.txt`);
  const ran = await clapper(args, {
    cwd: dir.path,
    env: {
      NODE_OPTIONS: `--import=${pathToFileURL(preload).href}`,
      CLAPPER_TEST_LOADED: list,
      CLAPPER_LOADER_REPORT: "1",
      ...(way === "modules" ? { CLAPPER_NO_BUNDLE: "1" } : {}),
    },
    timeoutMs: 30_000,
  });
  // The loader's one line says which way it took (with the preload, V8 takes the cache as well).
  expect(ran.stderr).toContain(
    way === "bundle"
      ? "clapper loader: bundle, cache accepted\n"
      : "clapper loader: modules (CLAPPER_NO_BUNDLE)\n",
  );
  const loaded = (await readFile(list, "utf8").catch(() => "")).split("\n").filter(Boolean);
  const packages = new Set(loaded.flatMap((u) => /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(u)?.[1] ?? []));
  const own = loaded.flatMap((u) => /\/dist\/(.+\.js)$/.exec(u)?.[1] ?? []);
  return { ran, packages, own };
}

type Way = "bundle" | "modules";

const aws = (packages: Set<string>) => [...packages].filter((p) => /^@(aws-sdk|smithy)\//.test(p));

// Node's own modules, listed at a run's first create and as it exits: a preload required before the
// CLI (NODE_OPTIONS), watching undici's creates (the one request with an idempotency key).
const BUILTINS = `const { appendFileSync } = require("node:fs");
const dc = require("node:diagnostics_channel");
const list = (when) => appendFileSync(process.env.CLAPPER_TEST_LOADED, process.moduleLoadList
  .filter((m) => m.startsWith("NativeModule ")).map((m) => when + " " + m.slice(13) + "\\n").join(""));
let first = true;
dc.subscribe("undici:request:create", ({ request }) => {
  const h = request.headers;
  const create = Array.isArray(h) ? h.some((x, i) => i % 2 === 0 && String(x).toLowerCase() === "idempotency-key")
    : String(h).toLowerCase().includes("idempotency-key:");
  if (create && first) { first = false; list("create"); }
});
process.on("exit", () => list("exit"));
`;

describe("Node's modules a run loads late (bundle)", () => {
  // scripts/bundle.mjs: undici's HTTP/2 client (node:http2 and node:tls, 10-14 ms of a start) and
  // node:child_process (ffmpeg for stills) load on their first use, not before the first create.
  it("node:http2 is never loaded; node:child_process only once a still is made, after the first create", async () => {
    const preload = await dir.file("builtins.cjs", BUILTINS);
    const list = join(dir.path, "builtins.txt");
    // A sandbox of this process: `--sandbox` starts one in a child process of the run's.
    const s = await sandbox();
    let ran: Ran;
    try {
      ran = await clapper(["run", good, "--json", "--log-level", "silent"], {
        cwd: dir.path,
        env: {
          NODE_OPTIONS: `--require=${preload}`,
          CLAPPER_TEST_LOADED: list,
          CLAPPER_LOADER_REPORT: "1",
          CLAPPER_BASE_URL: s.url,
          CLAPPER_API_KEY: KEY,
        },
        timeoutMs: 30_000,
      });
    } finally {
      await s.close();
    }
    expect(ran.code, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    expect(ran.stderr).toContain("clapper loader: bundle, cache accepted\n");
    const lines = (await readFile(list, "utf8")).split("\n").filter(Boolean);
    const at = (when: string) =>
      new Set(lines.filter((l) => l.startsWith(`${when} `)).map((l) => l.slice(when.length + 1)));
    const create = at("create");
    const exit = at("exit");
    // The preload saw the create (undici itself is loaded by then), and the run's end.
    expect(create).toContain("_http_client");
    expect(exit.size).toBeGreaterThan(create.size);
    for (const late of ["http2", "tls", "child_process"]) expect(create, late).not.toContain(late);
    expect(exit).not.toContain("http2");
    // The stand-in loads the real module when a still is made: the run stored one.
    expect(exit).toContain("child_process");
    expect((await stat(join(dir.path, "output/good/stills/s01.jpg"))).size).toBeGreaterThan(0);
  }, 60_000);
});

describe.each(["bundle", "modules"] as const)("what a command loads (%s)", (way) => {
  it("a run to a local folder never loads the AWS SDK", async () => {
    const { ran, packages } = await loading(
      ["run", good, "--sandbox", "--json", "--log-level", "silent"],
      way,
    );
    expect(ran.code, `${ran.stdout}\n${ran.stderr}`).toBe(0);
    if (way === "modules") {
      // The list holds CommonJS packages loaded through an import, as the SDK was: the HTTP client.
      expect(packages).toContain("undici");
      expect(packages).toContain("zod");
    } else {
      // In the bundle: not one file of node_modules is read for a run to a local folder.
      expect([...packages]).toEqual([]);
    }
    expect(aws(packages)).toEqual([]);
  }, 60_000);

  it("a run to S3 loads it (the check above would see it)", async () => {
    const { ran, packages } = await loading(
      [
        "run",
        good,
        "--sandbox",
        "--json",
        "--log-level",
        "silent",
        "--output",
        "s3://clapper-startup/out",
        "--s3-endpoint",
        "http://127.0.0.1:1",
      ],
      way,
    );
    // Nothing listens there: the output's probe fails before anything is submitted.
    expect(ran.code, `${ran.stdout}\n${ran.stderr}`).toBe(6);
    expect(aws(packages)).toContain("@aws-sdk/client-s3");
  }, 60_000);

  it("--version loads the command line's own modules: no service client, manifest reader or pipeline", async () => {
    const { ran, packages, own } = await loading(["--version"], way);
    expect(ran.code).toBe(0);
    for (const heavy of ["undici", "zod", "yaml", "csv-parse", "music-metadata", "@aws-sdk/client-s3"]) {
      expect(packages, heavy).not.toContain(heavy);
    }
    if (way === "bundle") return; // the bundle's modules are evaluated where the modules' would be
    // Its constants may come from light modules (run/types.js); not the modules that do the work.
    const work =
      /^(pipeline\/(run|plan|jobs|stages\/.+)|manifest\/index|api\/(index|http)|engine\/(journal|limiter|tracker))\.js$/;
    expect(own.filter((f) => work.test(f))).toEqual([]);
  });
});
