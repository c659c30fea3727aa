// Loading a manifest: read (with positions), check the manifest-level fields, expand every row into
// jobs. All problems of all stages come back together; nothing here talks to the services.
import { readFile } from "node:fs/promises";
import { basename, dirname, extname, resolve } from "node:path";
import { show } from "../api/common.js";
import {
  type DefaultsRead,
  type ExpandContext,
  expandLine,
  expandShot,
  type Job,
  type SkillRef,
  VoiceResolver,
} from "./expand.js";
import { readFields } from "./fields.js";
import { MaterialResolver, sha256File } from "./materials.js";
import { type Problem, Problems } from "./problems.js";
import { displayPath, type Located, type RawRow, readManifest } from "./source.js";
import { TemplateStore } from "./templates.js";

export type { Job, SkillRef, SpeechJob, VideoJob, VoiceSpec } from "./expand.js";
export type { MaterialRef } from "./materials.js";
export { formatProblem, type Problem } from "./problems.js";

export interface ManifestInfo {
  name: string;
  path: string;
  display: string;
  dir: string;
  /** As written (a folder relative to the manifest, or s3://...), or undefined for the default. */
  output?: string;
  maxPoints?: number;
  skills: SkillRef[];
}

export interface LoadedManifest {
  manifest: ManifestInfo | undefined;
  jobs: Job[];
  errors: Problem[];
  warnings: Problem[];
}

export interface LoadOptions {
  cwd?: string;
  /** Points per 10 counted characters, when known. */
  speechPrice?: number;
}

const SKILL_BODY_LIMIT = 64 * 1024;
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$/;

export async function loadManifest(path: string, options: LoadOptions = {}): Promise<LoadedManifest> {
  const cwd = options.cwd ?? process.cwd();
  const problems = new Problems();
  const raw = await readManifest(path, cwd, problems);
  if (!raw) return { manifest: undefined, jobs: [], errors: problems.errors, warnings: problems.warnings };

  const top = (key: string): Located | undefined => raw.top.get(key);
  /** The line of a top-level field, or of a key inside it (`budget.max_points`, `skills.noir`). */
  const lineOf = (key: string): number => {
    const root = key.replace(/[.[].*$/, "");
    const located = top(root);
    return located?.paths?.[key.slice(root.length)] ?? located?.line ?? 0;
  };
  const fail = (key: string, message: string) => problems.error(raw.display, lineOf(key), key, message);

  const nameField = top("name");
  const name = nameField ? String(nameField.value ?? "") : basename(raw.path, extname(raw.path));
  if (!NAME.test(name)) {
    (nameField ? fail : (k: string, m: string) => problems.error(raw.display, 0, k, m))(
      "name",
      `expected letters, digits, ".", "_" or "-" (it names folders and idempotency keys), got ${JSON.stringify(name)}`,
    );
  }
  const outputField = top("output");
  if (outputField && typeof outputField.value !== "string")
    fail("output", `expected a folder or s3:// URI, got ${show(outputField.value)}`);
  let maxPoints: number | undefined;
  const budget = top("budget")?.value;
  if (budget !== undefined && budget !== null) {
    const b = budget as Record<string, unknown>;
    if (typeof b !== "object" || Array.isArray(b))
      fail("budget", `expected {max_points: N}, got ${show(budget)}`);
    else {
      for (const k of Object.keys(b))
        if (k !== "max_points") fail(`budget.${k}`, "unknown field (known: max_points)");
      if (b.max_points !== undefined) {
        if (typeof b.max_points === "number" && Number.isInteger(b.max_points) && b.max_points >= 0)
          maxPoints = b.max_points;
        else fail("budget.max_points", `expected a whole number of points >= 0, got ${show(b.max_points)}`);
      }
    }
  }
  const vars: Record<string, string> = {};
  const varsValue = top("vars")?.value;
  if (varsValue !== undefined && varsValue !== null) {
    if (typeof varsValue !== "object" || Array.isArray(varsValue))
      fail("vars", `expected a mapping of name: value, got ${show(varsValue)}`);
    else {
      for (const [k, v] of Object.entries(varsValue)) {
        if (v !== null && typeof v === "object") fail(`vars.${k}`, `expected text, got ${show(v)}`);
        else vars[k] = String(v ?? "");
      }
    }
  }
  const skills = new Map<string, SkillRef>();
  const skillsValue = top("skills")?.value;
  if (skillsValue !== undefined && skillsValue !== null) {
    if (typeof skillsValue !== "object" || Array.isArray(skillsValue))
      fail("skills", `expected a mapping of name: file.md, got ${show(skillsValue)}`);
    else {
      for (const [skillName, file] of Object.entries(skillsValue)) {
        if (typeof file !== "string") {
          fail(`skills.${skillName}`, `expected a Markdown file path, got ${show(file)}`);
          continue;
        }
        const abs = resolve(raw.dir, file);
        try {
          const text = await readFile(abs, "utf8");
          if (text.trim() === "") fail(`skills.${skillName}`, `${displayPath(abs, cwd)} is empty`);
          // Synced as a custom skill: the create/update request body is at most 64 KiB.
          const body = Buffer.byteLength(JSON.stringify({ name: skillName, content: text }));
          if (body > SKILL_BODY_LIMIT) {
            fail(
              `skills.${skillName}`,
              `${file} makes a request body of ${body} bytes, over the ${SKILL_BODY_LIMIT} bytes (64 KiB) the service accepts`,
            );
          }
          skills.set(skillName, { name: skillName, file: abs, sha256: await sha256File(abs) });
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code;
          fail(
            `skills.${skillName}`,
            code === "ENOENT"
              ? `file not found: ${file}`
              : `cannot read ${displayPath(abs, cwd)} (${code ?? error})`,
          );
        }
      }
    }
  }
  const templatesValue = top("templates")?.value;
  if (templatesValue !== undefined && typeof templatesValue !== "string")
    fail("templates", `expected a folder, got ${show(templatesValue)}`);
  const templateDirs =
    typeof templatesValue === "string"
      ? [resolve(raw.dir, templatesValue)]
      : [resolve(raw.dir, "templates"), resolve(dirname(raw.dir), "templates")];

  const ctx: ExpandContext = {
    manifest: raw,
    problems,
    templates: new TemplateStore(templateDirs),
    vars,
    skills,
    speechPrice: options.speechPrice,
  };
  const readDefaults = (kind: "shot" | "line"): DefaultsRead => {
    const before = problems.errorCount;
    const read = readFields(kind, raw.defaults[kind], raw.display, problems, { allowId: false });
    return { ...read, broken: problems.errorCount > before };
  };
  const shotDefaults = readDefaults("shot");
  const lineDefaults = readDefaults("line");
  const materials = new MaterialResolver(raw.dir);
  const voices = new VoiceResolver(raw.dir);

  const jobs: Job[] = [];
  /** The row's id as its job id will spell it (YAML may type `id: 12` as a number); undefined when unusable. */
  const idOf = (row: RawRow): { id: string; line: number } | undefined => {
    const located = row.fields.get("id");
    const id = located?.value;
    return typeof id === "string" || typeof id === "number"
      ? { id: String(id), line: located?.line ?? row.line }
      : undefined;
  };
  /** True when the id was seen before (reported here); the row is still checked, but makes no job. */
  const duplicate = (seen: Map<string, string>, row: RawRow, kind: string): boolean => {
    const found = idOf(row);
    if (!found) return false;
    const first = seen.get(found.id);
    if (first) {
      problems.error(
        row.file,
        found.line,
        "id",
        `duplicate ${kind} id ${JSON.stringify(found.id)} (first at ${first})`,
      );
      return true;
    }
    seen.set(found.id, `${row.file}:${found.line}`);
    return false;
  };
  const shotIds = new Map<string, string>();
  const shotRows: Array<{ row: RawRow; duplicate: boolean }> = raw.shots.map((row) => ({
    row,
    duplicate: duplicate(shotIds, row, "shot"),
  }));
  for (const { row, duplicate } of shotRows) {
    const expanded = await expandShot(row, ctx, materials, shotDefaults);
    if (!duplicate) jobs.push(...expanded);
  }
  const lineIds = new Map<string, string>();
  const shotSet = new Set(shotIds.keys());
  for (const row of raw.lines) {
    const isDuplicate = duplicate(lineIds, row, "line");
    const expanded = await expandLine(row, ctx, voices, shotSet, lineDefaults);
    if (!isDuplicate) jobs.push(...expanded);
  }
  if (raw.shots.length === 0 && raw.lines.length === 0 && problems.errorCount === 0) {
    problems.warn(raw.display, 0, "", "the manifest has no shots and no lines");
  }

  return {
    manifest: {
      name,
      path: raw.path,
      display: raw.display,
      dir: raw.dir,
      ...(typeof outputField?.value === "string" ? { output: outputField.value } : {}),
      ...(maxPoints !== undefined ? { maxPoints } : {}),
      skills: [...skills.values()],
    },
    jobs,
    errors: problems.errors,
    warnings: problems.warnings,
  };
}
