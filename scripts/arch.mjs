#!/usr/bin/env node
// The architecture's measures (docs/architecture.md, "Measures"): long functions, long files, the
// service kind told apart by branching outside its adapters, and exports no other file imports.
// Reads src/ with oxc-parser (a regex miscounts functions; TypeScript 7 has no JavaScript API).
// `node scripts/arch.mjs` prints them; `--check` exits 1 when a limit is passed.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { parseSync } from "oxc-parser";

const LIMITS = { functionLines: 120, fileLines: 600, filesOverLimit: 4, kindBranches: 10 };
// Where the two services may be told apart by their kind: their clients, their emulator, and the
// adapter that gives the rest of clapper one shape for both.
const KIND_HOMES = ["src/api/", "src/sandbox/", "src/services/"];
// `--root DIR` measures another tree (the test gives it one with a known answer).
const rootArg = process.argv.indexOf("--root");
const root =
  rootArg > 0
    ? resolve(process.argv[rootArg + 1] ?? ".")
    : resolve(dirname(new URL(import.meta.url).pathname), "..");

function walk(dir) {
  const out = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...walk(p));
    else if (/\.(ts|mts|js|mjs)$/.test(e.name) && !e.name.endsWith(".d.ts")) out.push(p);
  }
  return out;
}

const srcFiles = walk(join(root, "src")).filter((f) => f.endsWith(".ts"));
const users = ["test", "bench", "scripts", "bin"].flatMap((d) => {
  try {
    return walk(join(root, d));
  } catch {
    return [];
  }
});
const parsed = new Map();
for (const f of [...srcFiles, ...users]) {
  const text = readFileSync(f, "utf8");
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text.charCodeAt(i) === 10) starts.push(i + 1);
  parsed.set(f, { text, starts, program: parseSync(f, text).program });
}
const rel = (f) => relative(root, f);
const lineOf = ({ starts }, pos) => {
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (starts[mid] <= pos) lo = mid;
    else hi = mid - 1;
  }
  return lo + 1;
};
function visit(node, fn, parent) {
  if (Array.isArray(node)) {
    for (const n of node) visit(n, fn, parent);
    return;
  }
  if (!node || typeof node !== "object" || typeof node.type !== "string") return;
  fn(node, parent);
  for (const [k, v] of Object.entries(node))
    if (k !== "parent" && v && typeof v === "object") visit(v, fn, node);
}
const FUNCTIONS = new Set(["FunctionDeclaration", "FunctionExpression", "ArrowFunctionExpression"]);

// Long functions (a nested function counts inside its parent too: the reader reads both).
const longFunctions = [];
for (const f of srcFiles) {
  const file = parsed.get(f);
  visit(file.program, (node, parent) => {
    if (!FUNCTIONS.has(node.type) || !node.body) return;
    const lines = lineOf(file, node.end) - lineOf(file, node.start) + 1;
    if (lines <= LIMITS.functionLines) return;
    const name =
      node.id?.name ??
      (parent?.type === "VariableDeclarator" ? parent.id?.name : undefined) ??
      (parent?.type === "MethodDefinition" ||
      parent?.type === "Property" ||
      parent?.type === "PropertyDefinition"
        ? (parent.key?.name ?? parent.key?.value)
        : undefined) ??
      "(anonymous)";
    longFunctions.push({ where: `${rel(f)}:${lineOf(file, node.start)}`, name, lines });
  });
}

const longFiles = srcFiles
  .map((f) => ({ file: rel(f), lines: parsed.get(f).starts.length - 1 }))
  .filter((x) => x.lines > LIMITS.fileLines)
  .sort((a, b) => b.lines - a.lines);

// `x === "video"`, `"speech" !== x`, `case "video":` outside the kind's homes.
const KIND = /(?:[!=]==\s*"(?:video|speech)"|"(?:video|speech)"\s*[!=]==|case\s+"(?:video|speech)"\s*:)/g;
const kindBranches = [];
for (const f of srcFiles) {
  const r = rel(f);
  if (KIND_HOMES.some((h) => r.startsWith(h))) continue;
  const file = parsed.get(f);
  for (const m of file.text.matchAll(KIND)) kindBranches.push(`${r}:${lineOf(file, m.index)}`);
}

// Exports that no other file imports (src, tests, benches, scripts, bin; dist/ read as src/).
const resolveFrom = (from, spec) => {
  if (!spec.startsWith(".")) return undefined;
  const p = resolve(dirname(from), spec).replace(`${root}/dist/`, `${root}/src/`);
  for (const c of [p.replace(/\.js$/, ".ts"), p, `${p}.ts`, join(p, "index.ts")]) if (parsed.has(c)) return c;
  return undefined;
};
const used = new Map(); // file -> Set(name) | "*"
const use = (file, name) => {
  if (!file) return;
  const s = used.get(file);
  if (s === "*") return;
  if (name === "*") used.set(file, "*");
  else used.set(file, (s ?? new Set()).add(name));
};
const nameOf = (n) => n?.name ?? n?.value;
for (const [f, file] of parsed) {
  visit(file.program, (node) => {
    if (node.type === "ImportDeclaration") {
      const target = resolveFrom(f, node.source.value);
      for (const s of node.specifiers) {
        if (s.type === "ImportDefaultSpecifier") use(target, "default");
        else if (s.type === "ImportNamespaceSpecifier") use(target, "*");
        else use(target, nameOf(s.imported));
      }
    } else if (
      (node.type === "ExportNamedDeclaration" || node.type === "ExportAllDeclaration") &&
      node.source
    ) {
      const target = resolveFrom(f, node.source.value);
      if (node.type === "ExportAllDeclaration") use(target, "*");
      else for (const s of node.specifiers) use(target, nameOf(s.local));
    } else if (node.type === "ImportExpression" && node.source.type === "Literal") {
      use(resolveFrom(f, node.source.value), "*");
    }
  });
}
const ENTRIES = new Set(["src/cli/main.ts", "src/index.ts"]);
const deadExports = [];
let exportCount = 0;
for (const f of srcFiles) {
  const names = [];
  for (const st of parsed.get(f).program.body) {
    if (st.type !== "ExportNamedDeclaration") continue;
    const d = st.declaration;
    if (d?.type === "VariableDeclaration") for (const v of d.declarations) names.push(v.id.name);
    else if (d?.id) names.push(d.id.name);
    else for (const s of st.specifiers) names.push(nameOf(s.exported));
  }
  exportCount += names.length;
  if (ENTRIES.has(rel(f))) continue;
  const u = used.get(f);
  if (u === "*") continue;
  for (const n of names) if (!u?.has(n)) deadExports.push(`${rel(f)}: ${n}`);
}

const report = {
  functionsOver: longFunctions.sort((a, b) => b.lines - a.lines),
  filesOver: longFiles,
  kindBranches,
  deadExports,
};
const lines = [
  `functions over ${LIMITS.functionLines} lines: ${longFunctions.length}`,
  ...longFunctions.map((x) => `  ${x.lines}  ${x.name}  ${x.where}`),
  `files over ${LIMITS.fileLines} lines: ${longFiles.length} (limit ${LIMITS.filesOverLimit})`,
  ...longFiles.map((x) => `  ${x.lines}  ${x.file}`),
  `kind branches outside ${KIND_HOMES.join(", ")}: ${kindBranches.length} (limit ${LIMITS.kindBranches})`,
  ...kindBranches.map((x) => `  ${x}`),
  `exports imported by no other file: ${deadExports.length} of ${exportCount}`,
  ...deadExports.map((x) => `  ${x}`),
];
if (process.argv.includes("--json")) console.log(JSON.stringify(report, null, 2));
else console.log(lines.join("\n"));
if (process.argv.includes("--check")) {
  const over =
    longFunctions.length > 0 ||
    longFiles.length > LIMITS.filesOverLimit ||
    kindBranches.length > LIMITS.kindBranches ||
    deadExports.length > 0;
  process.exitCode = over ? 1 : 0;
}
