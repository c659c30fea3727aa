// Loads the compiled CLI for bin/clapper.js: the bundle (dist/cli/clapper.cjs, every module of
// dist/cli/main.js and of the packages it loads in one CommonJS file, written by `npm run build`)
// compiled from V8's code cache beside it (clapper.cjs.cache), else dist/cli/main.js as ES modules.
// `run` loaded 381 files one by one, about 0.4 s of its start on a slow machine; the bundle with its
// cache loads in about 40 ms there (docs/development.md, "How the CLI starts").
//
// The bundle is used only when it was built from the dist/ beside it (not older than
// dist/cli/main.js: a `tsc` alone after a change of src/ runs the new ES modules, never the old
// bundle), and only when it is written as its module's function (scripts/bundle.mjs): one of an
// older build is not (bin/ updated, dist/ not rebuilt). The cache is used only when its first line
// names the bundle's own build and its bytes match the checksum written with them (V8 itself
// checks its version, its flags and the length, but not the bytes); V8 may still reject it
// (another Node, other V8 flags): the bundle then compiles from its source, a little slower, and a
// new cache is written as the process exits, when the folder can be written (a file beside it,
// renamed over the old one).
//
// CLAPPER_NO_BUNDLE=1 loads the ES modules; CLAPPER_LOADER_REPORT=1 writes one line to stderr
// saying which way was taken. CLAPPER_WRITE_CODE_CACHE=1 writes the cache as the process exits
// whatever V8 said (the build's warm-up run, scripts/bundle.mjs).
import { readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";
import vm from "node:vm";
import { crc32 } from "node:zlib";

const BUNDLE = fileURLToPath(new URL("../dist/cli/clapper.cjs", import.meta.url));
const CACHE = `${BUNDLE}.cache`;
const MAIN = new URL("../dist/cli/main.js", import.meta.url);
/**
 * What the bundle's code is written between (scripts/bundle.mjs, on the line after its name): the
 * function Node wraps a CommonJS module in, compiled here as read.
 */
export const BUNDLE_WRAPPER = ["(function (exports, require, module, __filename, __dirname) { ", "\n});\n"];

const on = (value) => ["1", "true", "yes", "on"].includes((value ?? "").trim().toLowerCase());

/** The exports of dist/cli/main.js (a promise: the ES modules load asynchronously). */
export async function loadCli() {
  const env = process.env;
  const bundle = on(env.CLAPPER_NO_BUNDLE) ? { how: "modules (CLAPPER_NO_BUNDLE)" } : loadBundle();
  if (on(env.CLAPPER_LOADER_REPORT)) process.stderr.write(`clapper loader: ${bundle.how}\n`);
  return bundle.exports ?? import("../dist/cli/main.js");
}

function loadBundle() {
  let source;
  try {
    if (statSync(BUNDLE).mtimeMs < statSync(MAIN).mtimeMs) {
      return { how: "modules (the bundle is older than dist/cli/main.js)" };
    }
    source = readFileSync(BUNDLE, "latin1"); // ASCII only (scripts/bundle.mjs)
  } catch {
    return { how: "modules (no bundle)" };
  }
  // "// clapper bundle <id>": the cache's first line repeats it, with the checksum of its bytes.
  const head = source.slice(0, source.indexOf("\n"));
  // A bundle built before it was written as a function (a checkout updated without a build).
  if (!source.startsWith(BUNDLE_WRAPPER[0], head.length + 1)) {
    return { how: "modules (a bundle of an older build)" };
  }
  let cachedData;
  let cache = "no cache";
  try {
    const file = readFileSync(CACHE);
    const nl = file.indexOf(10);
    const data = file.subarray(nl + 1);
    if (nl > 0 && file.toString("latin1", 0, nl) === `${head} ${crc32(data).toString(16)}`) cachedData = data;
    else cache = "cache of another build or damaged";
  } catch {}
  // The file is the module's function already (scripts/bundle.mjs): compiled from the string as read
  // (outside V8's heap), not from a joined copy of it.
  const script = new vm.Script(source, {
    filename: BUNDLE,
    // No import() is left in it (scripts/bundle.mjs checks): esbuild made each a require().
    ...(cachedData ? { cachedData } : {}),
  });
  if (cachedData) cache = script.cachedDataRejected ? "cache rejected" : "cache accepted";
  if (cache !== "cache accepted" || on(process.env.CLAPPER_WRITE_CODE_CACHE)) {
    // At exit the cache also holds the functions this run compiled (they are compiled on first call).
    process.once("exit", () => writeCache(script, head));
  }
  const module = { exports: {}, filename: BUNDLE, id: BUNDLE, loaded: false, children: [], paths: [] };
  const wrapper = script.runInThisContext();
  if (typeof wrapper !== "function") throw new Error(`${BUNDLE} is damaged (not one function)`);
  wrapper.call(module.exports, module.exports, createRequire(BUNDLE), module, BUNDLE, dirname(BUNDLE));
  module.loaded = true;
  return { how: `bundle, ${cache}`, exports: module.exports };
}

function writeCache(script, head) {
  const tmp = `${CACHE}.${process.pid}.tmp`;
  try {
    const data = script.createCachedData();
    writeFileSync(tmp, Buffer.concat([Buffer.from(`${head} ${crc32(data).toString(16)}\n`, "latin1"), data]));
    renameSync(tmp, CACHE);
  } catch {
    // A folder this user cannot write (an image's /app): the next start compiles again. Nothing may
    // throw from here: this runs as the process exits, and must not change its exit code.
    try {
      rmSync(tmp, { force: true });
    } catch {}
  }
}
