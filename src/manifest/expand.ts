// Rows become jobs: defaults merged, templates filled, the services' own rules applied (src/api/)
// with every issue mapped back to the manifest field it came from. What a shot and a line share is
// here (`RowExpansion`); what each makes of its row is in expand-shot.ts and expand-line.ts.
import { type Issue, issuesFromZod } from "../api/common.js";
import { EMOTION_VECTOR_MODES, PRONUNCIATION_KINDS, SPEECH_LANGUAGES } from "../api/speech.js";
import { VIDEO_MODELS, VIDEO_RATIOS } from "../api/video.js";
import { type Origins, readFields } from "./fields.js";
import type { SkillRef } from "./job.js";
import { didYouMean, displayPath, type Problems } from "./problems.js";
import type { RawManifest, RawRow, RowKind } from "./rows.js";
import { malformedMessage, renderTemplate, type TemplateStore } from "./templates.js";

export const ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

export interface ExpandContext {
  manifest: RawManifest;
  /** Paths in messages are shown relative to it. */
  cwd: string;
  problems: Problems;
  templates: TemplateStore;
  vars: Record<string, string>;
  skills: Map<string, SkillRef>;
  /** Points per 10 counted characters; undefined when unknown. */
  speechPrice: number | undefined;
}

/** The defaults of a kind, read once; `broken` when one of them could not be read (reported once). */
export interface DefaultsRead {
  values: Record<string, unknown>;
  origins: Origins;
  broken?: boolean;
}

/** The row's fields over the defaults of its kind; vars are merged key by key. */
function merged(kind: "shot" | "line", row: RawRow, ctx: ExpandContext, defaultsRead: DefaultsRead) {
  const own = readFields(kind, row.fields, row.file, ctx.problems);
  const values = { ...defaultsRead.values, ...own.values };
  const origins = { ...defaultsRead.origins, ...own.origins };
  if (defaultsRead.values.vars && own.values.vars) {
    values.vars = { ...(defaultsRead.values.vars as object), ...(own.values.vars as object) };
  }
  return { values, origins };
}

/**
 * Reports an issue at the origin of `field` (the row, or the defaults it inherited from); in YAML,
 * at the line of the very list item or key (`pronunciations[2].value`) when it has one.
 */
function at(ctx: ExpandContext, row: RawRow, origins: Origins, field: string) {
  const root = field.replace(/[[.].*$/, "");
  const origin = origins[root] ?? { file: row.file, line: row.line };
  let line = origin.line;
  for (
    let rest = field.slice(root.length);
    origin.paths && rest !== "";
    rest = rest.replace(/(\[\d+\]|\.[^.[]*)$/, "")
  ) {
    const nested = origin.paths[rest];
    if (nested) {
      line = nested;
      break;
    }
  }
  return {
    error: (message: string) => ctx.problems.error(origin.file, line, field, message),
    warn: (message: string) => ctx.problems.warn(origin.file, line, field, message),
  };
}

/** The values a few enumerated fields accept, for a "did you mean" after the service's message. */
const CHOICES: Record<string, readonly string[]> = {
  model: VIDEO_MODELS,
  ratio: VIDEO_RATIOS,
  language: SPEECH_LANGUAGES,
  emotion_vector_mode: EMOTION_VECTOR_MODES,
};

function withHint(field: string, message: string, values: Record<string, unknown>): string {
  const kind = /^pronunciations\[(\d+)\]\.kind$/.exec(field);
  const choices = kind ? PRONUNCIATION_KINDS : CHOICES[field];
  const got = kind
    ? (values.pronunciations as Array<{ kind?: unknown }> | undefined)?.[Number(kind[1])]?.kind
    : values[field];
  if (!choices || typeof got !== "string" || choices.includes(got)) return message;
  return `${message}${didYouMean(got, choices)}`;
}

/** What `{{ name }}` may name: the manifest's vars, the row's vars, then the row's own fields. */
function scopeOf(
  ctx: ExpandContext,
  values: Record<string, unknown>,
  textField: string,
): Record<string, string> {
  const scope: Record<string, string> = {
    ...ctx.vars,
    ...(values.vars as Record<string, string> | undefined),
  };
  for (const [k, v] of Object.entries(values)) {
    // The text does not fill itself.
    if (k === textField) continue;
    if (typeof v === "string" || typeof v === "number" || typeof v === "boolean") scope[k] ??= String(v);
  }
  return scope;
}

function notDefined(missing: readonly string[]): string {
  const names = missing.map((m) => JSON.stringify(m)).join(", ");
  return `${names}, which ${missing.length > 1 ? "are" : "is"} not defined (vars, the row's vars.* or its fields)`;
}

/**
 * The text of a shot (`prompt`) or a line (`text`): written inline, or filled from a template. Both
 * are filled the same strict way, from the manifest's vars, the row's vars and the row's fields: an
 * inline `{{ name }}` sent as it is would be paid for and rendered as braces.
 */
async function fillText(
  ctx: ExpandContext,
  row: RawRow,
  origins: Origins,
  values: { id?: string; template?: string; vars?: Record<string, string> } & Record<string, unknown>,
  textField: "prompt" | "text",
): Promise<string | undefined> {
  const literal = values[textField] as string | undefined;
  if (values.template === undefined) {
    // Most text has no braces at all: nothing to fill.
    if (literal === undefined || !(literal.includes("{{") || literal.includes("}}"))) return literal;
    const filled = renderTemplate(literal, scopeOf(ctx, values, textField));
    if ("text" in filled) return filled.text;
    at(ctx, row, origins, textField).error(
      "malformed" in filled ? malformedMessage(filled.malformed) : `uses ${notDefined(filled.missing)}`,
    );
    return undefined;
  }
  if (literal !== undefined) {
    at(ctx, row, origins, "template").error(`set either ${textField} or template, not both`);
    return undefined;
  }
  const template = await ctx.templates.get(values.template);
  if (!template) {
    at(ctx, row, origins, "template").error(
      `no template ${JSON.stringify(values.template)} in the templates folder`,
    );
    return undefined;
  }
  if ("error" in template) {
    at(ctx, row, origins, "template").error(
      `template ${JSON.stringify(values.template)}: ${displayPath(template.file, ctx.cwd)}: ${template.error}`,
    );
    return undefined;
  }
  const filled = renderTemplate(template.text, scopeOf(ctx, values, textField));
  if ("malformed" in filled) {
    at(ctx, row, origins, "template").error(
      `template ${JSON.stringify(values.template)}: ${malformedMessage(filled.malformed)}`,
    );
    return undefined;
  }
  if ("missing" in filled) {
    at(ctx, row, origins, "template").error(
      `template ${JSON.stringify(values.template)} uses ${notDefined(filled.missing)}`,
    );
    return undefined;
  }
  return filled.text;
}

/** The row's id, reported when missing (no job without one) or when it is unfit for file names and keys. */
function checkedId(
  ctx: ExpandContext,
  row: RawRow,
  origins: Origins,
  id: string | undefined,
): string | undefined {
  if (id === undefined) {
    ctx.problems.error(row.file, row.line, "id", "is required");
    return undefined;
  }
  if (!ID_PATTERN.test(id)) {
    at(ctx, row, origins, "id").error(
      `expected letters, digits, ".", "_" or "-" (at most 64), got ${JSON.stringify(id)}`,
    );
  }
  return id;
}

type ZodError = Parameters<typeof issuesFromZod>[0];

/**
 * A row on its way to jobs: its fields over the defaults of its kind, where each came from, its
 * id, and the count of errors before it, so that a row whose own checks failed makes no job.
 */
export class RowExpansion<V> {
  private constructor(
    readonly ctx: ExpandContext,
    readonly row: RawRow,
    private readonly defaults: DefaultsRead,
    private readonly errorsBefore: number,
    /** The merged values, untyped (for hints on enumerated fields). */
    readonly raw: Record<string, unknown>,
    readonly origins: Origins,
    readonly id: string,
  ) {}

  /** The row read and its id checked; undefined when it has no id (reported: no job without one). */
  static open<V>(
    kind: RowKind,
    row: RawRow,
    ctx: ExpandContext,
    defaults: DefaultsRead,
  ): RowExpansion<V> | undefined {
    // Errors of this row's own fields count too: a row with a value that could not be read makes no job.
    const errorsBefore = ctx.problems.errorCount;
    const { values, origins } = merged(kind, row, ctx, defaults);
    const id = checkedId(ctx, row, origins, values.id as string | undefined);
    if (id === undefined) return undefined;
    return new RowExpansion<V>(ctx, row, defaults, errorsBefore, values, origins, id);
  }

  /** The values, typed by the field table of the row's kind. */
  get values(): V {
    return this.raw as V;
  }

  at(field: string) {
    return at(this.ctx, this.row, this.origins, field);
  }

  /** No error since the row was opened. */
  get clean(): boolean {
    return this.ctx.problems.errorCount === this.errorsBefore;
  }

  /** The row may make jobs: nothing of it, nor of the defaults it inherits, was found wrong. */
  get sound(): boolean {
    return this.clean && !this.defaults.broken && !this.row.unreadable;
  }

  /** The prompt of a shot or the text of a line, inline or from its template, filled. */
  text(field: "prompt" | "text"): Promise<string | undefined> {
    return fillText(this.ctx, this.row, this.origins, this.raw, field);
  }

  /**
   * The service's rule violations, each at the manifest field its path came from (`fieldOf`), said
   * once per field, with a "did you mean" on enumerated fields; `skip` leaves out those said already
   * in the manifest's terms, `words` says the message in them.
   */
  reportIssues(
    error: ZodError,
    fieldOf: (path: Issue["path"]) => string,
    skip: (issue: Issue, field: string) => boolean,
    words: (message: string) => string = (message) => message,
  ): void {
    const seen = new Set<string>();
    for (const issue of issuesFromZod(error)) {
      const field = fieldOf(issue.path);
      if (skip(issue, field)) continue;
      const key = `${field}\n${issue.message}`;
      if (seen.has(key)) continue;
      seen.add(key);
      this.at(field).error(words(withHint(field, issue.message, this.raw)));
    }
  }

  /** What every job of the row starts with. */
  jobBase(jobId: string): { id: string; rowId: string; file: string; line: number } {
    return { id: jobId, rowId: this.id, file: this.row.file, line: this.row.line };
  }
}
