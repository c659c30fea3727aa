// The manifest-level fields (name, output, budget, timing, assemble, vars, skills, templates), each
// checked and reported at its line, or at the line of the key inside it that is wrong.
import { createHash } from "node:crypto";
import { basename, extname, resolve } from "node:path";
import { show } from "../api/common.js";
import { type AssembleSettings, readAssemble } from "../episode/settings.js";
import { type BudgetPool, readBudget } from "./budget.js";
import { FILE_LIMITS, FileError, readRegularFile } from "./files.js";
import type { SkillRef } from "./job.js";
import { displayPath, type Problems, quoted } from "./problems.js";
import type { RawManifest } from "./rows.js";
import { templateFolders } from "./templates.js";
import { readTiming, type Timing } from "./timing.js";

type Fail = (key: string, message: string) => void;

/** The manifest-level fields as read; a wrong one is reported and left out (or at its default). */
export interface Settings {
  name: string;
  /** As written, when it is text. */
  output?: string;
  maxPoints?: number;
  pool?: BudgetPool;
  timing: Timing;
  assemble?: AssembleSettings;
  vars: Record<string, string>;
  skills: Map<string, SkillRef>;
  /** Where templates are looked up, in order. */
  templateDirs: string[];
  /** Reports a problem at a top-level field, or at a key inside it (`budget.max_points`). */
  fail: Fail;
}

const SKILL_BODY_LIMIT = 64 * 1024;
export const NAME_CHARS = 100;
export const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/**
 * What is wrong with a run name, or undefined. The name becomes folder names and idempotency keys,
 * so it is a slug: no separators, no "..", no control characters, a bounded length. Nothing here
 * builds a path from it; the callers that do rely on this check.
 */
export function nameProblem(name: string): string | undefined {
  if (/\p{Cc}/u.test(name)) return `must not contain control characters, got ${quoted(name)}`;
  const chars = [...name].length;
  if (chars > NAME_CHARS) return `expected at most ${NAME_CHARS} characters, got ${chars}`;
  if (!NAME.test(name))
    return `expected letters, digits, ".", "_" or "-", starting with a letter or digit, got ${quoted(name)}`;
  return undefined;
}

/** Reads the manifest-level fields in the order their problems are reported. */
export async function readSettings(raw: RawManifest, cwd: string, problems: Problems): Promise<Settings> {
  const top = (key: string) => raw.top.get(key);
  /** The line of a top-level field, or of a key inside it (`budget.max_points`, `skills.noir`). */
  const lineOf = (key: string): number => {
    const root = key.replace(/[.[].*$/, "");
    const located = top(root);
    return located?.paths?.[key.slice(root.length)] ?? located?.line ?? 0;
  };
  const fail = (key: string, message: string) => problems.error(raw.display, lineOf(key), key, message);

  const name = readName(raw, problems, fail);
  const outputField = top("output");
  if (outputField && typeof outputField.value !== "string")
    fail("output", `expected a folder or s3:// URI, got ${show(outputField.value)}`);
  const budget = readBudget(top("budget")?.value, fail);
  const timing = readTiming(top("timing")?.value, fail);
  const assemble = await readAssemble(top("assemble")?.value, raw.dir, fail);
  const vars = readVars(top("vars")?.value, fail);
  const blankSkill = (skillName: string) =>
    // Synced by name before the run: the service would refuse a blank one at create.
    problems.error(
      raw.display,
      lineOf(`skills.${skillName}`),
      "skills",
      `expected a skill name, got ${quoted(skillName)}`,
    );
  const skills = await readSkills(top("skills")?.value, raw.dir, cwd, fail, blankSkill);
  const templateDirs = await templateFolders(top("templates")?.value, raw.dir, fail);
  return {
    name,
    ...(typeof outputField?.value === "string" ? { output: outputField.value } : {}),
    ...budget,
    timing,
    ...(assemble ? { assemble } : {}),
    vars,
    skills,
    templateDirs,
    fail,
  };
}

/** `name:`, or the file's name when there is none; either must make a slug. */
function readName(raw: RawManifest, problems: Problems, fail: Fail): string {
  const nameField = raw.top.get("name");
  const stem = basename(raw.path, extname(raw.path));
  if (nameField) {
    const value = nameField.value;
    if (typeof value === "string" || typeof value === "number") {
      const name = String(value);
      const problem = nameProblem(name);
      if (problem) fail("name", `${problem} (it names folders and idempotency keys)`);
      return name;
    }
    fail("name", `expected a name (letters, digits, ".", "_" or "-"), got ${show(value)}`);
    return "";
  }
  const problem = nameProblem(stem);
  const csv = extname(raw.path).toLowerCase() === ".csv";
  if (problem) {
    problems.error(
      raw.display,
      0,
      "name",
      `the run is named after the file, and its name ${quoted(stem)} will not do: ${problem}; ${csv ? "rename the file (a CSV manifest has no name: field)" : "add a name: field, or rename the file"}`,
    );
  }
  return stem;
}

/** `vars: {name: value}`: text each, for templates. */
function readVars(value: unknown, fail: Fail): Record<string, string> {
  const vars: Record<string, string> = {};
  if (value === undefined || value === null) return vars;
  if (typeof value !== "object" || Array.isArray(value)) {
    fail("vars", `expected a mapping of name: value, got ${show(value)}`);
    return vars;
  }
  for (const [k, v] of Object.entries(value)) {
    if (v !== null && typeof v === "object") fail(`vars.${k}`, `expected text, got ${show(v)}`);
    else vars[k] = String(v ?? "");
  }
  return vars;
}

/** `skills: {name: file.md}`: each file read and hashed, so the content synced is the content checked. */
async function readSkills(
  value: unknown,
  dir: string,
  cwd: string,
  fail: Fail,
  blank: (skillName: string) => void,
): Promise<Map<string, SkillRef>> {
  const skills = new Map<string, SkillRef>();
  if (value === undefined || value === null) return skills;
  if (typeof value !== "object" || Array.isArray(value)) {
    fail("skills", `expected a mapping of name: file.md, got ${show(value)}`);
    return skills;
  }
  for (const [skillName, file] of Object.entries(value)) {
    if (skillName.trim() === "") {
      blank(skillName);
      continue;
    }
    if (typeof file !== "string") {
      fail(`skills.${skillName}`, `expected a Markdown file path, got ${show(file)}`);
      continue;
    }
    const abs = resolve(dir, file);
    let data: Buffer;
    try {
      data = (await readRegularFile(abs, { maxBytes: FILE_LIMITS.skill, what: "a skill" })).data;
    } catch (error) {
      const reason = error instanceof FileError ? error.message : String(error);
      fail(
        `skills.${skillName}`,
        error instanceof FileError && error.problem === "missing"
          ? `file not found: ${file}`
          : `${file}: ${reason}`,
      );
      continue;
    }
    const text = data.toString("utf8");
    if (text.trim() === "") fail(`skills.${skillName}`, `${displayPath(abs, cwd)} is empty`);
    // Synced as a custom skill: the create/update request body is at most 64 KiB.
    const body = Buffer.byteLength(JSON.stringify({ name: skillName, content: text }));
    if (body > SKILL_BODY_LIMIT) {
      fail(
        `skills.${skillName}`,
        `${file} makes a request body of ${body} bytes, over the ${SKILL_BODY_LIMIT} bytes (64 KiB) the service accepts`,
      );
    }
    // The hash of the bytes read, so the content synced is the content checked here.
    const sha256 = createHash("sha256").update(data).digest("hex");
    skills.set(skillName, { name: skillName, file: abs, sha256 });
  }
  return skills;
}
