// Loading a manifest: read (with positions), check the manifest-level fields, expand every row into
// jobs. All problems of all stages come back together; nothing here talks to the services.
import { createHash } from "node:crypto";
import { basename, dirname, extname, resolve } from "node:path";
import { show } from "../api/common.js";
import { type AssembleSettings, checkTakes, readAssemble } from "../episode/settings.js";
import { traceStart } from "../trace.js";
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
import { checkFolder, FILE_LIMITS, FileError, readRegularFile } from "./files.js";
import { MaterialResolver } from "./materials.js";
import { outputKey } from "./outputs.js";
import { didYouMean, type Problem, Problems, quoted } from "./problems.js";
import type { Located, RawRow } from "./rows.js";
import { displayPath, readManifest } from "./source.js";
import { TemplateStore } from "./templates.js";
import { DEFAULT_TIMING, linkAutoShots, type Timing } from "./timing.js";

export type { AssembleSettings, Transition } from "../episode/settings.js";
export type { Job, SkillRef, SpeechJob, VideoJob, VoiceSpec } from "./expand.js";
export type { MaterialRef } from "./materials.js";
export { outputKey } from "./outputs.js";
export { formatProblem, formatProblems, type Problem } from "./problems.js";
export {
  type AutoDuration,
  DEFAULT_TIMING,
  fitSeconds,
  fitShot,
  MAX_SHOT_S,
  overrun,
  type Timing,
  unfitted,
} from "./timing.js";

export interface ManifestInfo {
  name: string;
  path: string;
  display: string;
  dir: string;
  /** As written (a folder relative to the manifest, or s3://...), or undefined for the default. */
  output?: string;
  maxPoints?: number;
  /** `budget.pool`: a budget shared by every run that names it (needs a coordinator). */
  pool?: BudgetPool;
  skills: SkillRef[];
  /** Where narration sits in its shot: fits `duration: auto` shots, and places lines in `assemble`. */
  timing: Timing;
  /** The `assemble:` block (how `clapper assemble` makes the episode), when the manifest has one. */
  assemble?: AssembleSettings;
}

/** More than this between lines is a pause no narration means; likely seconds taken for ms. */
export const MAX_TIMING_S = 10;

export type PoolPeriod = "day" | "week" | "month" | "total";

export interface BudgetPool {
  name: string;
  maxPoints: number;
  period: PoolPeriod;
}

export const POOL_PERIODS: readonly PoolPeriod[] = ["day", "week", "month", "total"];
export const POOL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export interface LoadedManifest {
  manifest: ManifestInfo | undefined;
  jobs: Job[];
  errors: Problem[];
  warnings: Problem[];
  /** Problems found past the kept ones (Problems keeps a bounded number): counted, not listed. */
  omitted?: { errors: number; warnings: number };
}

export interface LoadOptions {
  cwd?: string;
  /** Points per 10 counted characters, when known. */
  speechPrice?: number;
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

function result(manifest: ManifestInfo | undefined, jobs: Job[], problems: Problems): LoadedManifest {
  const { errors, warnings } = problems.omitted;
  return {
    manifest,
    jobs,
    errors: problems.errors,
    warnings: problems.warnings,
    ...(errors + warnings > 0 ? { omitted: { errors, warnings } } : {}),
  };
}

export async function loadManifest(path: string, options: LoadOptions = {}): Promise<LoadedManifest> {
  const cwd = options.cwd ?? process.cwd();
  const problems = new Problems();
  const raw = await readManifest(path, cwd, problems);
  if (!raw) return result(undefined, [], problems);

  const top = (key: string): Located | undefined => raw.top.get(key);
  /** The line of a top-level field, or of a key inside it (`budget.max_points`, `skills.noir`). */
  const lineOf = (key: string): number => {
    const root = key.replace(/[.[].*$/, "");
    const located = top(root);
    return located?.paths?.[key.slice(root.length)] ?? located?.line ?? 0;
  };
  const fail = (key: string, message: string) => problems.error(raw.display, lineOf(key), key, message);

  const nameField = top("name");
  const stem = basename(raw.path, extname(raw.path));
  let name = stem;
  if (nameField) {
    const value = nameField.value;
    if (typeof value === "string" || typeof value === "number") {
      name = String(value);
      const problem = nameProblem(name);
      if (problem) fail("name", `${problem} (it names folders and idempotency keys)`);
    } else {
      name = "";
      fail("name", `expected a name (letters, digits, ".", "_" or "-"), got ${show(value)}`);
    }
  } else {
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
  }
  const outputField = top("output");
  if (outputField && typeof outputField.value !== "string")
    fail("output", `expected a folder or s3:// URI, got ${show(outputField.value)}`);
  let maxPoints: number | undefined;
  let pool: BudgetPool | undefined;
  const budget = top("budget")?.value;
  if (budget !== undefined && budget !== null) {
    const b = budget as Record<string, unknown>;
    if (typeof b !== "object" || Array.isArray(b))
      fail("budget", `expected {max_points: N}, got ${show(budget)}`);
    else {
      for (const k of Object.keys(b))
        if (k !== "max_points" && k !== "pool")
          fail(`budget.${k}`, "unknown field (known: max_points, pool)");
      if (b.max_points !== undefined) {
        if (typeof b.max_points === "number" && Number.isInteger(b.max_points) && b.max_points >= 0)
          maxPoints = b.max_points;
        else fail("budget.max_points", `expected a whole number of points >= 0, got ${show(b.max_points)}`);
      }
      if (b.pool !== undefined) pool = budgetPool(b.pool, fail);
    }
  }
  const timing = readTiming(top("timing")?.value, fail);
  const assemble = await readAssemble(top("assemble")?.value, raw.dir, fail);
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
        if (skillName.trim() === "") {
          // Synced by name before the run: the service would refuse a blank one at create.
          problems.error(
            raw.display,
            lineOf(`skills.${skillName}`),
            "skills",
            `expected a skill name, got ${quoted(skillName)}`,
          );
          continue;
        }
        if (typeof file !== "string") {
          fail(`skills.${skillName}`, `expected a Markdown file path, got ${show(file)}`);
          continue;
        }
        const abs = resolve(raw.dir, file);
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
    }
  }
  const templatesValue = top("templates")?.value;
  if (templatesValue !== undefined && typeof templatesValue !== "string")
    fail("templates", `expected a folder, got ${show(templatesValue)}`);
  const templateDirs: string[] = [];
  const candidates =
    typeof templatesValue === "string"
      ? [resolve(raw.dir, templatesValue)]
      : [resolve(raw.dir, "templates"), resolve(dirname(raw.dir), "templates")];
  for (const dir of candidates) {
    try {
      await checkFolder(dir);
      templateDirs.push(dir);
    } catch (error) {
      // A default folder that is not there is no error; a folder the manifest names and that is
      // no folder, or a special one (`templates: /proc/self`), is.
      if (typeof templatesValue !== "string") continue;
      if (error instanceof FileError && error.problem === "missing") templateDirs.push(dir);
      else fail("templates", `${templatesValue} is ${error instanceof FileError ? error.message : error}`);
    }
  }

  const ctx: ExpandContext = {
    manifest: raw,
    cwd,
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
  const jobs: Job[] = [];
  const outputs = new OutputCheck(jobs, problems);
  const keep = (row: RawRow, expanded: Job[]) => {
    if (expanded.length > 0) outputs.add(expanded, row.file, () => idOf(row)?.line ?? row.line);
  };
  const shotIds = new Map<string, string>();
  const shotRows: Array<{ row: RawRow; duplicate: boolean }> = raw.shots.map((row) => ({
    row,
    duplicate: duplicate(shotIds, row, "shot"),
  }));
  for (const { row, duplicate } of shotRows) {
    const expanded = await expandShot(row, ctx, materials, shotDefaults);
    if (!duplicate) keep(row, expanded);
  }
  const lineIds = new Map<string, string>();
  const shotSet = new Set(shotIds.keys());
  for (const row of raw.lines) {
    const isDuplicate = duplicate(lineIds, row, "line");
    const expanded = await expandLine(row, ctx, voices, shotSet, lineDefaults);
    if (!isDuplicate) keep(row, expanded);
  }
  linkAutoShots(jobs, timing, problems);
  checkTakes(assemble, jobs, fail);
  if (raw.shots.length === 0 && raw.lines.length === 0 && problems.errorCount === 0) {
    problems.warn(raw.display, 0, "", "the manifest has no shots and no lines");
  }
  traceStart("jobs expanded");
  return result(
    {
      name,
      path: raw.path,
      display: raw.display,
      dir: raw.dir,
      ...(typeof outputField?.value === "string" ? { output: outputField.value } : {}),
      ...(maxPoints !== undefined ? { maxPoints } : {}),
      ...(pool ? { pool } : {}),
      skills: [...skills.values()],
      timing,
      ...(assemble ? { assemble } : {}),
    },
    jobs,
    problems,
  );
}

/**
 * Takes the jobs of rows whose output files are their own. Two jobs writing one file would
 * overwrite each other and be paid for again on every run; two names that differ only by case are
 * one file on macOS and Windows (and on stores synced there), so they are refused everywhere and
 * manifests stay portable. The later row is reported at its id, naming the job that writes the file
 * first, and makes no job.
 */
class OutputCheck {
  /** Lowercased output key -> index in `jobs` of the job that writes it. */
  private readonly writers = new Map<string, number>();
  /** The line of the id of each job's row, by index in `jobs`. */
  private readonly idLines: number[] = [];

  constructor(
    private readonly jobs: Job[],
    private readonly problems: Problems,
  ) {}

  add(rowJobs: readonly Job[], file: string, idLine: () => number): void {
    const keys: string[] = [];
    for (const job of rowJobs) {
      const key = outputKey(job);
      const lower = key.toLowerCase();
      const index = this.writers.get(lower);
      if (index === undefined) {
        keys.push(lower);
        continue;
      }
      const first = this.jobs[index] as Job;
      const firstKey = outputKey(first);
      const where = `${first.file}:${this.idLines[index]}`;
      this.problems.error(
        file,
        idLine(),
        "id",
        firstKey === key
          ? `${job.id} would write ${key}, as ${first.id} (${where}) does: each job needs its own output file`
          : `${job.id} would write ${key}, which differs only by case from ${firstKey} of ${first.id} (${where}): they are one file on case-insensitive file systems (macOS, Windows)`,
      );
      return;
    }
    const line = idLine();
    rowJobs.forEach((job, i) => {
      this.writers.set(keys[i] as string, this.jobs.length);
      this.idLines.push(line);
      this.jobs.push(job);
    });
  }
}

/** `timing: {lead, gap, tail}` in seconds, each optional; the defaults fill what is left out. */
function readTiming(value: unknown, fail: (key: string, message: string) => void): Timing {
  const timing = { ...DEFAULT_TIMING };
  if (value === undefined || value === null) return timing;
  if (typeof value !== "object" || Array.isArray(value)) {
    fail("timing", `expected {lead, gap, tail} in seconds, got ${show(value)}`);
    return timing;
  }
  for (const [k, v] of Object.entries(value)) {
    if (k !== "lead" && k !== "gap" && k !== "tail") {
      fail(
        `timing.${k}`,
        `unknown field${didYouMean(k, ["lead", "gap", "tail"]) || " (known: lead, gap, tail)"}`,
      );
      continue;
    }
    if (typeof v !== "number" || !Number.isFinite(v) || v < 0 || v > MAX_TIMING_S) {
      fail(`timing.${k}`, `expected seconds from 0 to ${MAX_TIMING_S}, got ${show(v)}`);
      continue;
    }
    timing[k] = v;
  }
  return timing;
}

/** `budget.pool: {name, max_points, period}`, every field checked; undefined when any is wrong. */
function budgetPool(value: unknown, fail: (field: string, message: string) => void): BudgetPool | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail("budget.pool", `expected {name, max_points, period}, got ${show(value)}`);
    return undefined;
  }
  const p = value as Record<string, unknown>;
  let ok = true;
  const bad = (field: string, message: string) => {
    ok = false;
    fail(`budget.pool.${field}`, message);
  };
  for (const k of Object.keys(p))
    if (k !== "name" && k !== "max_points" && k !== "period")
      bad(k, "unknown field (known: name, max_points, period)");
  if (typeof p.name !== "string" || !POOL_NAME.test(p.name))
    bad("name", `expected 1 to 64 letters, digits, dots, dashes or underscores, got ${show(p.name)}`);
  if (typeof p.max_points !== "number" || !Number.isInteger(p.max_points) || p.max_points < 0)
    bad("max_points", `expected a whole number of points >= 0, got ${show(p.max_points)}`);
  const period = p.period ?? "total";
  if (typeof period !== "string" || !POOL_PERIODS.includes(period as PoolPeriod))
    bad("period", `expected one of ${POOL_PERIODS.join(", ")}, got ${show(p.period)}`);
  if (!ok) return undefined;
  return { name: p.name as string, maxPoints: p.max_points as number, period: period as PoolPeriod };
}
