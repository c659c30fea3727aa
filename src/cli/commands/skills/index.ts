// `clapper skills ...`: list, show, create, update, delete, and push (sync a folder of .md files).
import { readdir, readFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { parse as parseYaml } from "yaml";
import {
  type Clients,
  collectList,
  incompleteWarning,
  type ListResult,
  NotFoundError,
} from "../../../api/index.js";
import type { Skill } from "../../../api/video.js";
import type { Listed } from "../../command.js";
import { ExitError, fsExit } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";
import { date, table } from "../../output.js";

export interface SkillsOptions {
  clients: Pick<Clients, "video">;
  signal?: AbortSignal;
}

/** Every skill the service serves, each once, and whether that is all it lists. */
function skillList(o: SkillsOptions & { keyword?: string }): Promise<ListResult<Skill>> {
  return collectList(
    o.clients.video.listSkills(o.keyword ? { keyword: o.keyword } : {}, o.signal ? { signal: o.signal } : {}),
  );
}

export async function listSkills(o: SkillsOptions & { keyword?: string }): Promise<Listed<Skill>> {
  const list = await skillList(o);
  return { items: list.items, warnings: list.complete ? [] : [incompleteWarning("skills", list)] };
}

/** By id, or by exact name when no id matches; `list` is what the match was looked for in. */
async function lookUp(o: SkillsOptions, idOrName: string) {
  const list = await skillList(o);
  const match = list.items.find((s) => s.id === idOrName) ?? list.items.find((s) => s.name === idOrName);
  return { match, list };
}

/** Exit 1: no such skill, or none among what an incomplete list served (and it says so). */
function noSkill(idOrName: string, list: ListResult<Skill>): ExitError {
  const missing = `no skill with id or name ${JSON.stringify(idOrName)}`;
  if (list.complete) return new ExitError(ExitCode.Failed, missing);
  return new ExitError(
    ExitCode.Failed,
    `${missing} among the ${list.items.length} served; ${incompleteWarning("skills", list)}`,
  );
}

/** By id, or by exact name when no id matches. */
export async function findSkill(o: SkillsOptions, idOrName: string): Promise<Skill> {
  const { match, list } = await lookUp(o, idOrName);
  if (!match) throw noSkill(idOrName, list);
  return match;
}

/**
 * Deletes a skill found by id or name. One the list did not show, when the list is incomplete, may
 * be on a page the service did not serve: taken as an id, the service is asked to delete it.
 */
export async function deleteSkill(
  o: SkillsOptions,
  idOrName: string,
): Promise<{ skill_id: string; deleted: true }> {
  const { match, list } = await lookUp(o, idOrName);
  if (!match && list.complete) throw noSkill(idOrName, list);
  try {
    const id = await o.clients.video.deleteSkill(match?.id ?? idOrName, o.signal ? { signal: o.signal } : {});
    return { skill_id: id, deleted: true };
  } catch (error) {
    if (!match && error instanceof NotFoundError) throw noSkill(idOrName, list);
    throw error;
  }
}

export interface SkillFile {
  name: string;
  description?: string;
  content: string;
  path: string;
}

/**
 * A skill file is Markdown named after the skill (`noir.md` is the skill `noir`). Optional YAML
 * front matter may set `name` and `description`; the rest of the file is the content.
 */
export async function readSkillFile(path: string): Promise<SkillFile> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    throw fsExit(error, { action: "read the skill file", path });
  }
  let name = basename(path).replace(/\.md$/i, "");
  let description: string | undefined;
  const front = text.match(/^---\r?\n([\s\S]*?)\r?\n---\r?\n?/);
  if (front) {
    let meta: unknown;
    try {
      meta = parseYaml(front[1] ?? "");
    } catch (error) {
      throw new ExitError(
        ExitCode.Usage,
        `${path}: front matter is not valid YAML: ${(error as Error).message}`,
      );
    }
    if (meta && typeof meta === "object") {
      const m = meta as { name?: unknown; description?: unknown };
      if (typeof m.name === "string" && m.name.trim()) name = m.name.trim();
      if (typeof m.description === "string") description = m.description;
    }
    text = text.slice(front[0].length);
  }
  if (text.trim() === "") throw new ExitError(ExitCode.Usage, `${path}: the skill has no content`);
  return { name, content: text, path, ...(description !== undefined ? { description } : {}) };
}

export interface PushResult {
  created: Array<{ name: string; id: string }>;
  updated: Array<{ name: string; id: string }>;
  unchanged: Array<{ name: string; id: string }>;
  /** Not created: the service listed its skills incompletely, so one of that name may exist. */
  refused: Array<{ name: string; file: string }>;
  warnings: string[];
}

export interface Pushed {
  result: PushResult;
  /** Why skills were refused, when some were: the command then exits 2. */
  refusal: string | undefined;
}

/**
 * Creates missing skills, updates changed ones, leaves the rest (including skills not in DIR).
 * While the service lists its skills incompletely, creates none: the missing ones are refused.
 */
export async function pushSkills(o: SkillsOptions & { dir: string; dryRun?: boolean }): Promise<Pushed> {
  let entries: string[];
  try {
    entries = (await readdir(o.dir)).filter((f) => f.toLowerCase().endsWith(".md")).sort();
  } catch (error) {
    throw fsExit(error, { action: "read the skills folder", path: o.dir });
  }
  const files = await Promise.all(entries.map((f) => readSkillFile(join(o.dir, f))));
  const list = await skillList(o);
  const custom = list.items.filter((s) => !s.official);
  const result: PushResult = { created: [], updated: [], unchanged: [], refused: [], warnings: [] };
  const seen = new Set<string>();
  const opts = o.signal ? { signal: o.signal } : {};
  for (const file of files) {
    if (seen.has(file.name)) {
      result.warnings.push(`${file.path}: a second file for skill ${JSON.stringify(file.name)}; skipped`);
      continue;
    }
    seen.add(file.name);
    const same = custom.filter((s) => s.name === file.name);
    if (same.length > 1) {
      result.warnings.push(
        `${same.length} custom skills are named ${JSON.stringify(file.name)}; updating ${same[0]?.id} only`,
      );
    }
    const existing = same[0];
    const body = {
      name: file.name,
      content: file.content,
      ...(file.description ? { description: file.description } : {}),
    };
    if (!existing && !list.complete) {
      // A skill of this name may be on a page the service did not serve: a create could make a twin.
      result.refused.push({ name: file.name, file: file.path });
    } else if (!existing) {
      const id = o.dryRun ? "(dry run)" : (await o.clients.video.createSkill(body, opts)).id;
      result.created.push({ name: file.name, id });
    } else if (
      existing.content !== file.content ||
      (existing.description ?? "") !== (file.description ?? "")
    ) {
      if (!o.dryRun) await o.clients.video.updateSkill(existing.id, body, opts);
      result.updated.push({ name: file.name, id: existing.id });
    } else {
      result.unchanged.push({ name: file.name, id: existing.id });
    }
  }
  return { result, refusal: result.refused.length > 0 ? refusal(result.refused, list) : undefined };
}

function refusal(refused: PushResult["refused"], list: ListResult<Skill>): string {
  const n = refused.length;
  const names = refused.map((r) => r.name).join(", ");
  return `refused to create ${n} skill${n === 1 ? "" : "s"} (${names}): ${incompleteWarning("skills", list)}, so a skill of ${n === 1 ? "that name" : "those names"} may exist on a page it did not serve and a create could make a twin; check with clapper skills list and create ${n === 1 ? "it" : "them"} with clapper skills create FILE, or push again once the service lists every skill`;
}

export function renderSkills(skills: readonly Skill[]): string {
  return table(skills, [
    { header: "ID", value: (s) => s.id },
    { header: "NAME", value: (s) => s.name },
    { header: "KIND", value: (s) => (s.official ? "official" : "custom") },
    { header: "UPDATED", value: (s) => date(s.updated_at) },
    { header: "DESCRIPTION", value: (s) => s.description },
  ]);
}

export function renderSkill(s: Skill): string {
  const head = [`id: ${s.id}`, `name: ${s.name}`, `kind: ${s.official ? "official" : "custom"}`];
  if (s.description) head.push(`description: ${s.description}`);
  return `${head.join("\n")}\n\n${s.content}`;
}

export function renderPush(r: PushResult): string {
  const lines = [
    ...r.created.map((s) => `created    ${s.name}  ${s.id}`),
    ...r.updated.map((s) => `updated    ${s.name}  ${s.id}`),
    ...r.unchanged.map((s) => `unchanged  ${s.name}  ${s.id}`),
    ...r.refused.map((s) => `refused    ${s.name}  (not created: the skill list is incomplete)`),
    ...r.warnings.map((w) => `warning: ${w}`),
  ];
  const refused = r.refused.length > 0 ? `, ${r.refused.length} refused` : "";
  lines.push(
    `${r.created.length} created, ${r.updated.length} updated, ${r.unchanged.length} unchanged${refused}`,
  );
  return lines.join("\n");
}
