// `npm run schema` (and `npm run build`, after tsc): writes schema/manifest.schema.json from the
// built generator (dist/manifest/schema.js), so the shipped file is always the one the code makes.
// `--check` writes nothing and exits 1 when the file differs (test/manifest/schema.test.ts checks
// the same from the sources).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { fileURLToPath } from "node:url";

const FILE = fileURLToPath(new URL("../schema/manifest.schema.json", import.meta.url));
const { manifestSchemaText } = await import("../dist/manifest/schema.js");
const text = manifestSchemaText();
let current;
try {
  current = readFileSync(FILE, "utf8");
} catch {
  current = undefined;
}
if (process.argv.includes("--check")) {
  if (current !== text) {
    process.stderr.write("schema/manifest.schema.json is not what the code makes: run `npm run schema`\n");
    process.exit(1);
  }
} else if (current !== text) {
  // Only when it changed: an unchanged file keeps its time, and a read-only install is not written to.
  mkdirSync(dirname(FILE), { recursive: true });
  writeFileSync(FILE, text);
  process.stdout.write("wrote schema/manifest.schema.json\n");
}
