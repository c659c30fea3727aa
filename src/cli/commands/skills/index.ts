// `clapper skills ...`: list, show, create, update, delete, and push (sync a folder of .md files).
import { readdir, readFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { parse as parseYaml } from "yaml";
import type { Clients } from "../../../api/index.js";
import type { Skill } from "../../../api/video.js";
import { ExitError, fsExit } from "../../errors.js";
import { date, table } from "../../output.js";

export interface SkillsOptions {
  clients: Pick<Clients, "video">;
  signal?: AbortSignal;
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of it) out.push(item);
  return out;
}

export async function listSkills(o: SkillsOptions & { keyword?: string }): Promise<Skill[]> {
  return collect(
    o.clients.video.listSkills(o.keyword ? { keyword: o.keyword } : {}, o.signal ? { signal: o.signal } : {}),
  );
}

/** By id, or by exact name when no id matches. */
export async function findSkill(o: SkillsOptions, idOrName: string): Promise<Skill> {
  const all = await listSkills(o);
  const match = all.find((s) => s.id === idOrName) ?? all.find((s) => s.name === idOrName);
  if (!match) throw new ExitError(1, `no skill with id or name ${JSON.stringify(idOrName)}`);
  return match;
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
      throw new ExitError(2, `${path}: front matter is not valid YAML: ${(error as Error).message}`);
    }
    if (meta && typeof meta === "object") {
      const m = meta as { name?: unknown; description?: unknown };
      if (typeof m.name === "string" && m.name.trim()) name = m.name.trim();
      if (typeof m.description === "string") description = m.description;
    }
    text = text.slice(front[0].length);
  }
  if (text.trim() === "") throw new ExitError(2, `${path}: the skill has no content`);
  return { name, content: text, path, ...(description !== undefined ? { description } : {}) };
}

export interface PushResult {
  created: Array<{ name: string; id: string }>;
  updated: Array<{ name: string; id: string }>;
  unchanged: Array<{ name: string; id: string }>;
  warnings: string[];
}

/** Creates missing skills, updates changed ones, leaves the rest (including skills not in DIR). */
export async function pushSkills(o: SkillsOptions & { dir: string; dryRun?: boolean }): Promise<PushResult> {
  let entries: string[];
  try {
    entries = (await readdir(o.dir)).filter((f) => f.toLowerCase().endsWith(".md")).sort();
  } catch (error) {
    throw fsExit(error, { action: "read the skills folder", path: o.dir });
  }
  const files = await Promise.all(entries.map((f) => readSkillFile(join(o.dir, f))));
  const custom = (await listSkills(o)).filter((s) => !s.official);
  const result: PushResult = { created: [], updated: [], unchanged: [], warnings: [] };
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
    if (!existing) {
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
  return result;
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
    ...r.warnings.map((w) => `warning: ${w}`),
  ];
  lines.push(`${r.created.length} created, ${r.updated.length} updated, ${r.unchanged.length} unchanged`);
  return lines.join("\n");
}
