// Loading a manifest: read (with positions), check the manifest-level fields, expand every row into
// jobs. All problems of all stages come back together; nothing here talks to the services.

import { type AssembleSettings, checkTakes } from "../episode/settings.js";
import { startStep } from "../trace.js";
import type { BudgetPool } from "./budget.js";
import { expandRows } from "./expand-rows.js";
import type { Job, SkillRef } from "./job.js";
import { type Problem, Problems } from "./problems.js";
import { readSettings, type Settings } from "./settings.js";
import { readManifest } from "./source.js";
import { TemplateStore } from "./templates.js";
import { linkAutoShots, type Timing } from "./timing.js";

export type { BudgetPool } from "./budget.js";
export type { Job, SpeechJob, VideoJob } from "./job.js";
export type { MaterialRef } from "./materials.js";
export { outputKey } from "./outputs.js";
export { formatProblem, formatProblems, type Problem } from "./problems.js";
export { nameProblem } from "./settings.js";
export {
  type AutoDuration,
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

export interface LoadedManifest {
  manifest: ManifestInfo | undefined;
  jobs: Job[];
  errors: Problem[];
  warnings: Problem[];
  /** Problems found past the kept ones (Problems keeps a bounded number): counted, not listed. */
  omitted?: { errors: number; warnings: number };
}

interface LoadOptions {
  cwd?: string;
  /** Points per 10 counted characters, when known. */
  speechPrice?: number;
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
  const settings = await readSettings(raw, cwd, problems);
  const jobs = await expandRows({
    manifest: raw,
    cwd,
    problems,
    templates: new TemplateStore(settings.templateDirs),
    vars: settings.vars,
    skills: settings.skills,
    speechPrice: options.speechPrice,
  });
  linkAutoShots(jobs, settings.timing, problems);
  checkTakes(settings.assemble, jobs, settings.fail);
  if (raw.shots.length === 0 && raw.lines.length === 0 && problems.errorCount === 0) {
    problems.warn(raw.display, 0, "", "the manifest has no shots and no lines");
  }
  startStep("jobs expanded");
  return result(manifestInfo(raw, settings), jobs, problems);
}

function manifestInfo(raw: { path: string; display: string; dir: string }, settings: Settings): ManifestInfo {
  const { name, output, maxPoints, pool, skills, timing, assemble } = settings;
  return {
    name,
    path: raw.path,
    display: raw.display,
    dir: raw.dir,
    ...(output !== undefined ? { output } : {}),
    ...(maxPoints !== undefined ? { maxPoints } : {}),
    ...(pool ? { pool } : {}),
    skills: [...skills.values()],
    timing,
    ...(assemble ? { assemble } : {}),
  };
}
