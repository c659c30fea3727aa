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
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const OUT = join(ROOT, "dist/cli/clapper.cjs");
const CACHE = `${OUT}.cache`;
const started = performance.now();
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
  plugins: [importMetaUrl],
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
const id = createHash("sha256").update(code).digest("hex").slice(0, 20);
const tmp = `${OUT}.${process.pid}.tmp`;
writeFileSync(tmp, `// clapper bundle ${id}\n${code}`);
renameSync(tmp, OUT);
rmSync(CACHE, { force: true });

// The code cache, from a run of the built CLI through bin/load.js (CLAPPER_WRITE_CODE_CACHE): V8
// compiles a function on its first call, and a cache written as a run exits holds every function
// that run compiled. A cache of the script as compiled (its top level only: 0.6 MB) or written after
// `--version` (0.8 MB) left the first create of a run 100-300 ms later than this one (2.4 MB), whose
// warm-up plans, runs and reports two jobs against the in-process sandbox in a temporary folder.
const work = mkdtempSync(join(tmpdir(), "clapper-bundle-"));
try {
  writeFileSync(join(work, "warm.yaml"), WARM_MANIFEST);
  const warm = spawnSync(
    process.execPath,
    [join(ROOT, "bin/clapper.js"), "run", "warm.yaml", "--sandbox", "--log-level", "silent"],
    {
      cwd: work,
      env: {
        ...process.env,
        CLAPPER_WRITE_CODE_CACHE: "1",
        CLAPPER_LOADER_REPORT: "1",
        CLAPPER_NO_BUNDLE: "",
      },
      encoding: "utf8",
    },
  );
  if (warm.status !== 0 || !warm.stderr.includes("clapper loader: bundle")) {
    console.error(`bundle: the warm-up run failed (exit ${warm.status}):\n${warm.stdout}${warm.stderr}`);
    process.exit(1);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
const size = (file) => `${(statSync(file).size / 1e6).toFixed(1)} MB`;
console.log(
  `bundle: ${relative(ROOT, OUT)} (${size(OUT)}) and its code cache (${size(CACHE)}) in ${Math.round(performance.now() - started)} ms`,
);
