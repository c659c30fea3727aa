// `npm run build`, after tsc: dist/cli/main.js and every module it loads, ours and the packages',
// in one CommonJS file (dist/cli/clapper.cjs), then V8's code cache for it (clapper.cjs.cache),
// written by a warm-up run of the built CLI. bin/load.js loads them (and says when it cannot).
//
// - Packages loaded on demand stay outside, loaded from node_modules when a command needs them: the
//   AWS SDK (an S3 output), ioredis (--coordinator), pino-pretty (pretty logs). Our own modules
//   loaded by import() stay lazy inside: esbuild evaluates them on the first import().
// - import.meta.url is each module's own original file (dist/cli/main.js, node_modules/yargs/...),
//   computed from the bundle's folder at run time: package.json, createRequire and yargs' locales
//   are found where they were.
// - The first line names this build ("// clapper bundle <sha256 of the rest>"); the cache repeats it.
//   The rest is the module's function, as Node would wrap a CommonJS module (bin/load.js compiles it
//   as it reads it, and checks that the second line starts so).
// - Files the modules read beside them are copied next to their compiled modules first: the
//   coordinator's Lua scripts (src/coord/lua/*.lua to dist/coord/lua/, read by src/coord/scripts.ts).
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { BUNDLE_WRAPPER } from "../bin/load.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const OUT = join(ROOT, "dist/cli/clapper.cjs");
const CACHE = `${OUT}.cache`;
const started = performance.now();
const WARM_KEY = "sk-ml-warm-up";
const WARM_MANIFEST = [
  "name: warm",
  "output: ./output",
  "defaults:",
  '  shot: { model: Vid-H3, resolution: 480P, duration: 4, ratio: "16:9" }',
  '  line: { language: EN, voice: "preset:en_female_bright" }',
  "shots:",
  '  - { id: s01, prompt: "A lighthouse at dusk" }',
  "lines:",
  '  - { id: n01, text: "Every night, the light came on." }',
  "",
].join("\n");

// A removed script's file must not linger in dist/: the folder is made anew.
const LUA_FROM = join(ROOT, "src/coord/lua");
const LUA_TO = join(ROOT, "dist/coord/lua");
rmSync(LUA_TO, { recursive: true, force: true });
mkdirSync(LUA_TO, { recursive: true });
for (const name of readdirSync(LUA_FROM)) {
  if (name.endsWith(".lua")) copyFileSync(join(LUA_FROM, name), join(LUA_TO, name));
}

/** `var __clapperImportMetaUrl = <the file's own URL>;` before the code of a module that reads it. */
const importMetaUrl = {
  name: "import-meta-url",
  setup(b) {
    b.onLoad({ filter: /\.m?js$/ }, (args) => {
      const text = readFileSync(args.path, "utf8");
      if (!text.includes("import.meta")) return undefined;
      const from = relative(dirname(OUT), args.path).split(sep).join("/");
      const line = `var __clapperImportMetaUrl = __clapperUrl(${JSON.stringify(from)});`;
      // On the first line, so that line numbers stay the file's; after a #! line, which must be first.
      const at = text.startsWith("#!") ? text.indexOf("\n") + 1 : 0;
      return { contents: `${text.slice(0, at)}${line}${text.slice(at)}`, loader: "js" };
    });
  },
};

/**
 * A module that loads on its first call instead of as its importer loads: each import of it that
 * `filter` matches (from a folder `from` matches, when given) resolves to a stand-in, `stub(path)`'s
 * code, which requires the real module (`path`) when it is first called. `stub` may return
 * `{ errors }` to fail the build (the module is not what the stand-in was written for).
 */
function lazyModule({ name, filter, from, stub }) {
  return {
    name,
    setup(b) {
      b.onResolve({ filter }, async (args) => {
        if (args.pluginData?.real || (from && !from.test(args.resolveDir))) return undefined;
        const real = await b.resolve(args.path, {
          importer: args.importer,
          resolveDir: args.resolveDir,
          kind: args.kind,
          pluginData: { real: true },
        });
        if (real.errors.length > 0) return { errors: real.errors };
        return { path: real.path, namespace: name };
      });
      b.onLoad({ filter: /.*/, namespace: name }, (args) => {
        const contents = stub(args.path);
        if (typeof contents !== "string") return contents;
        return { contents, resolveDir: dirname(args.path), loader: "js" };
      });
    },
  };
}

/**
 * string-width (three copies: cliui's, wrap-ansi's, yargs') builds an Intl.Segmenter and Unicode
 * property regular expressions as it loads, 30-50 ms of ICU set-up at every start, for the width of
 * help and usage text that a run never prints. Each import of it gets a stand-in whose default
 * export loads the real module on its first call. (A named import of it would fail the build.)
 */
const lazyStringWidth = lazyModule({
  name: "lazy-string-width",
  filter: /^string-width$/,
  stub: (path) =>
    `let real;\nexport default function stringWidth(string, options) {\n  real ??= require(${JSON.stringify(path)}).default;\n  return real(string, options);\n}\n`,
});

/**
 * undici's cookie helpers read globalThis.Headers as they load, to accept Node's own Headers as well
 * as undici's: in Node 20 that getter loads Node's internal copy of undici, 30-60 ms of every start.
 * clapper calls none of them; they accept undici's Headers only. The build fails if the line changed.
 */
const undiciCookies = {
  name: "undici-cookies",
  setup(b) {
    b.onLoad(
      { filter: /[\\/]node_modules[\\/]undici[\\/]lib[\\/]web[\\/]cookies[\\/]index\.js$/ },
      (args) => {
        const text = readFileSync(args.path, "utf8");
        const line = "webidl.brandCheckMultiple([Headers, globalThis.Headers].filter(Boolean))";
        if (!text.includes(line)) return { errors: [{ text: `${args.path}: expected ${line}` }] };
        return { contents: text.replace(line, "webidl.brandCheckMultiple([Headers])"), loader: "js" };
      },
    );
  },
};

/**
 * undici's HTTP/1.1 client requires its HTTP/2 one as it loads, and that requires node:http2 and
 * node:tls: 10-14 ms of every start. clapper never sets allowH2, so the HTTP/2 client is only ever
 * called for a server that chose h2 in a TLS handshake undici offered it in. It gets a stand-in
 * that loads the real one on its first call. The build fails if its export changed.
 */
const lazyHttp2Client = lazyModule({
  name: "lazy-undici-h2",
  filter: /^\.\/client-h2\.js$/,
  from: /[\\/]node_modules[\\/]undici[\\/]lib[\\/]dispatcher$/,
  stub: (path) =>
    readFileSync(path, "utf8").includes("module.exports = connectH2")
      ? `let real;\nmodule.exports = function connectH2(client, socket) {\n  real ??= require(${JSON.stringify(path)});\n  return real(client, socket);\n};\n`
      : { errors: [{ text: `${path}: expected module.exports = connectH2` }] },
});

/**
 * Node's own modules that a run needs late or never, loaded on first use of one of their exports:
 * node:child_process (and node:dgram with it, 4-5 ms) only spawns ffmpeg for stills and episodes,
 * after results are stored. esbuild reads an import's names at each call (`(0, m.spawn)(...)`), so
 * a stand-in with a getter per name is enough; the names are this Node's (the image builds with its
 * own Node).
 */
const LAZY_BUILTINS = /^node:child_process$/;
const lazyBuiltins = {
  name: "lazy-builtins",
  setup(b) {
    b.onResolve({ filter: LAZY_BUILTINS }, (args) =>
      args.namespace === "lazy-builtin"
        ? { path: args.path, external: true }
        : { path: args.path, namespace: "lazy-builtin" },
    );
    b.onLoad({ filter: /.*/, namespace: "lazy-builtin" }, (args) => {
      const names = Object.keys(createRequire(import.meta.url)(args.path)).filter((n) => n !== "default");
      const load = `let real;\nconst load = () => (real ??= require(${JSON.stringify(args.path)}));\n`;
      const getters = names.map(
        (n) =>
          `Object.defineProperty(exports, ${JSON.stringify(n)}, { enumerable: true, get: () => load()[${JSON.stringify(n)}] });`,
      );
      return { contents: `${load}${getters.join("\n")}\n`, loader: "js" };
    });
  },
};

const result = await build({
  entryPoints: [join(ROOT, "dist/cli/main.js")],
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20.19",
  // Node 20 has the RegExp v flag; lowered, each such regex became a new RegExp() parsed at load.
  supported: { "regexp-set-notation": true },
  // No comments and no indentation: 30% less to read and to hash; names are kept for stack traces.
  minifyWhitespace: true,
  write: false,
  outfile: OUT,
  external: ["@aws-sdk/*", "ioredis", "pino-pretty"],
  define: { "import.meta.url": "__clapperImportMetaUrl" },
  banner: {
    js: [
      // The modules were ES modules: strict, as they were (esbuild's own "use strict" comes after this).
      '"use strict";',
      'var __clapperUrl = (from) => require("node:url").pathToFileURL(require("node:path").join(__dirname, from)).href;',
    ].join("\n"),
  },
  plugins: [lazyStringWidth, lazyHttp2Client, lazyBuiltins, undiciCookies, importMetaUrl],
  metafile: true,
  logLevel: "silent",
});
// A warning here is a module the bundle would run differently (import.meta left empty, a require
// esbuild cannot follow): fail the build rather than ship it.
for (const m of [...result.errors, ...result.warnings]) {
  console.error(`bundle: ${m.location ? `${m.location.file}:${m.location.line}: ` : ""}${m.text}`);
}
// An import() esbuild left as it is (a Node built-in) would need a loader for dynamic imports that
// a script compiled by vm has only as an experimental option: src/ imports built-ins statically.
for (const i of Object.values(result.metafile.outputs).flatMap((o) => o.imports)) {
  if (i.kind === "dynamic-import") {
    console.error(`bundle: import("${i.path}") left in the bundle: import it statically`);
    result.warnings.push(i);
  }
}
if (result.errors.length + result.warnings.length > 0) process.exit(1);

// ASCII only (esbuild escapes strings, not regular expressions): bin/load.js reads the file as
// latin1, a third of the time of decoding UTF-8, and V8 keeps it as one byte per character. An escape
// is the same character in a regular expression (with or without u or v), a string or a comment; a
// character beyond U+FFFF becomes its two surrogates, which a u or v regular expression pairs again.
// (After a backslash the escape would change the meaning: that fails the build.)
const code = result.outputFiles[0].text.replace(/(\\*)([^\0-\x7f])/gu, (_, slashes, c) => {
  if (slashes.length % 2 === 1) throw new Error(`bundle: a backslash before ${JSON.stringify(c)}`);
  return (
    slashes +
    Array.from({ length: c.length }, (_, i) => `\\u${c.charCodeAt(i).toString(16).padStart(4, "0")}`).join("")
  );
});
// bin/load.js reads the start of the second line to tell this bundle from one of an older build.
const [WRAP_START, WRAP_END] = BUNDLE_WRAPPER;
const body = `${WRAP_START}${code}${WRAP_END}`;
const id = createHash("sha256").update(body).digest("hex").slice(0, 20);
const tmp = `${OUT}.${process.pid}.tmp`;
// Written as the function Node would wrap a CommonJS module in, so that bin/load.js compiles the
// file's own string: wrapped there, the 3.5 MB joined string was copied whole into V8's heap at every
// start, and the garbage collector came sooner.
writeFileSync(tmp, `// clapper bundle ${id}\n${body}`);
renameSync(tmp, OUT);
rmSync(CACHE, { force: true });

// The code cache, from a run of the built CLI through bin/load.js (CLAPPER_WRITE_CODE_CACHE): V8
// compiles a function on its first call, and a cache written as a run exits holds every function
// that run compiled. The warm-up plans, runs and reports two jobs in a temporary folder against a
// sandbox of its own process (the ES modules, which write no cache), so that the cache holds the
// client's code and not the emulator's. A cache of the script as compiled (its top level only) or
// written after `--version` left the first create of a run later: 0.71 s and 0.97 s against 0.49 s
// (medians of 4, alternated, at load 3). Neither process sees this environment's CLAPPER_* or
// NODE_OPTIONS: V8 rejects a cache made under other flags.
const work = mkdtempSync(join(tmpdir(), "clapper-bundle-"));
const env = { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: tmpdir() };
const sandbox = spawn(
  process.execPath,
  [join(ROOT, "bin/clapper.js"), "sandbox", "--port", "0", "--time-scale", "0.001", "--key", WARM_KEY],
  { cwd: work, env: { ...env, CLAPPER_NO_BUNDLE: "1" }, stdio: ["ignore", "pipe", "pipe"] },
);
try {
  const url = await new Promise((resolve, reject) => {
    let seen = "";
    const look = (chunk) => {
      seen += chunk;
      const m = /listening on (http:\/\/\S+)/.exec(seen);
      if (m) resolve(m[1]);
    };
    sandbox.stdout.setEncoding("utf8").on("data", look);
    sandbox.stderr.setEncoding("utf8").on("data", look);
    sandbox.once("exit", (code) => reject(new Error(`the warm-up's sandbox exited (${code}):\n${seen}`)));
  });
  writeFileSync(join(work, "warm.yaml"), WARM_MANIFEST);
  const warm = spawnSync(
    process.execPath,
    [join(ROOT, "bin/clapper.js"), "run", "warm.yaml", "--log-level", "silent"],
    {
      cwd: work,
      env: {
        ...env,
        CLAPPER_BASE_URL: url,
        CLAPPER_API_KEY: WARM_KEY,
        CLAPPER_WRITE_CODE_CACHE: "1",
        CLAPPER_LOADER_REPORT: "1",
      },
      encoding: "utf8",
    },
  );
  if (warm.status !== 0 || !warm.stderr.includes("clapper loader: bundle")) {
    throw new Error(`the warm-up run failed (exit ${warm.status}):\n${warm.stdout}${warm.stderr}`);
  }
} catch (error) {
  console.error(`bundle: ${error.message}`);
  process.exitCode = 1;
} finally {
  sandbox.kill("SIGKILL");
  rmSync(work, { recursive: true, force: true });
}
if (process.exitCode) process.exit();
const size = (file) => `${(statSync(file).size / 1e6).toFixed(1)} MB`;
console.log(
  `bundle: ${relative(ROOT, OUT)} (${size(OUT)}) and its code cache (${size(CACHE)}) in ${Math.round(performance.now() - started)} ms`,
);
