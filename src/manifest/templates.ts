// Prompt templates: `{{ name }}` filled from the manifest's vars, the row's vars and the row's own
// fields. Strict: a missing variable is an error, never an empty string. A few lines of code do
// this exactly; a general template engine would bring logic, partials and HTML escaping we do not want.
import { readFile } from "node:fs/promises";
import { join } from "node:path";

const PLACEHOLDER = /\{\{\s*([A-Za-z_][\w.-]*)\s*\}\}/g;

export function renderTemplate(
  template: string,
  vars: Readonly<Record<string, string>>,
): { text: string } | { missing: string[] } {
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

/** Loads templates by name from the templates folder, once each; `shot` finds `shot`, `shot.txt` or `shot.md`. */
export class TemplateStore {
  private readonly cache = new Map<string, Promise<{ text: string; file: string } | undefined>>();

  constructor(private readonly dirs: readonly string[]) {}

  get(name: string): Promise<{ text: string; file: string } | undefined> {
    let entry = this.cache.get(name);
    if (!entry) {
      entry = this.load(name);
      this.cache.set(name, entry);
    }
    return entry;
  }

  private async load(name: string): Promise<{ text: string; file: string } | undefined> {
    if (name.includes("..")) return undefined;
    for (const dir of this.dirs) {
      for (const candidate of [name, `${name}.txt`, `${name}.md`]) {
        const file = join(dir, candidate);
        try {
          return { text: (await readFile(file, "utf8")).replace(/\r?\n$/, ""), file };
        } catch {
          // try the next candidate
        }
      }
    }
    return undefined;
  }
}
