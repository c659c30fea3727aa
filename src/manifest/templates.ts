// Prompt templates: `{{ name }}` filled from the manifest's vars, the row's vars and the row's own
// fields. Strict: a missing variable is an error, never an empty string, and braces that are no
// placeholder are an error too (they would reach the service as text, and be paid for). A few
// lines of code do this exactly; a general template engine would bring logic, partials and HTML
// escaping we do not want.
import { dirname, join, resolve } from "node:path";
import { show } from "../api/common.js";
import { checkFolder, FILE_LIMITS, FileError, readTextFile } from "./files.js";
import { snippet } from "./problems.js";

const PLACEHOLDER = /\{\{\s*([A-Za-z_][\w.-]*)\s*\}\}/g;
/** What is left of `{{ ... }}` once the placeholders are taken out: a typo, never text to send. */
const STRAY = /\{\{[^{}]{0,40}\}?\}?|\}\}/;

export function renderTemplate(
  template: string,
  vars: Readonly<Record<string, string>>,
): { text: string } | { missing: string[] } | { malformed: string } {
  const stray = STRAY.exec(template.replace(PLACEHOLDER, ""));
  if (stray) return { malformed: snippet(stray[0]) };
  const missing = new Set<string>();
  const text = template.replace(PLACEHOLDER, (_, name: string) => {
    const value = vars[name];
    if (value === undefined) {
      missing.add(name);
      return "";
    }
    return value;
  });
  if (missing.size > 0) return { missing: [...missing] };
  return { text };
}

/** The message for a `malformed` result of renderTemplate. */
export function malformedMessage(found: string): string {
  return `${JSON.stringify(found)} is not a placeholder: write {{ name }} with a name of letters, digits, "_", "." or "-" (a template sends no braces)`;
}

type TemplateResult = { text: string; file: string } | { error: string; file: string } | undefined;

/** Loads templates by name from the templates folder, once each; `shot` finds `shot`, `shot.txt` or `shot.md`. */
export class TemplateStore {
  private readonly cache = new Map<string, Promise<TemplateResult>>();

  constructor(private readonly dirs: readonly string[]) {}

  /** The template, an error about the file found for it (a FIFO, too big), or undefined when there is none. */
  get(name: string): Promise<TemplateResult> {
    let entry = this.cache.get(name);
    if (!entry) {
      entry = this.load(name);
      this.cache.set(name, entry);
    }
    return entry;
  }

  private async load(name: string): Promise<TemplateResult> {
    if (name.includes("..")) return undefined;
    for (const dir of this.dirs) {
      for (const candidate of [name, `${name}.txt`, `${name}.md`]) {
        const file = join(dir, candidate);
        try {
          const text = await readTextFile(file, { maxBytes: FILE_LIMITS.template, what: "a template" });
          return { text: text.replace(/\r?\n$/, ""), file };
        } catch (error) {
          // A candidate that is not there (or a folder of that name) leaves the next one to try; a
          // file that is there but refused is reported, not skipped in silence.
          const problem = error instanceof FileError ? error.problem : "unreadable";
          if (problem === "missing" || problem === "folder") continue;
          return { error: error instanceof FileError ? error.message : String(error), file };
        }
      }
    }
    return undefined;
  }
}

/**
 * The folders templates are looked up in: the one `templates:` names, else `templates/` beside the
 * manifest and beside its folder, those that are there.
 */
export async function templateFolders(
  value: unknown,
  manifestDir: string,
  fail: (key: string, message: string) => void,
): Promise<string[]> {
  if (value !== undefined && typeof value !== "string")
    fail("templates", `expected a folder, got ${show(value)}`);
  const dirs: string[] = [];
  const candidates =
    typeof value === "string"
      ? [resolve(manifestDir, value)]
      : [resolve(manifestDir, "templates"), resolve(dirname(manifestDir), "templates")];
  for (const dir of candidates) {
    try {
      await checkFolder(dir);
      dirs.push(dir);
    } catch (error) {
      // A default folder that is not there is no error; a folder the manifest names and that is
      // no folder, or a special one (`templates: /proc/self`), is.
      if (typeof value !== "string") continue;
      if (error instanceof FileError && error.problem === "missing") dirs.push(dir);
      else fail("templates", `${value} is ${error instanceof FileError ? error.message : error}`);
    }
  }
  return dirs;
}
