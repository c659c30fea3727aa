// The fields a shot and a line may have, with their types, and the coercion of CSV text and YAML
// values into them. Range and cross-field rules are the services' own (src/api/), applied later.
import { show } from "../api/common.js";
import { didYouMean, type Problems, quoted } from "./problems.js";
import type { Fields, Located, RowKind } from "./rows.js";

type FieldType =
  | "string"
  | "path"
  | "int"
  | "duration"
  | "number"
  | "bool"
  | "strings"
  | "numbers"
  | "vars"
  | "pronunciations";

export const SHOT_FIELDS = {
  id: "string",
  prompt: "string",
  template: "string",
  model: "string",
  resolution: "string",
  duration: "duration",
  ratio: "string",
  use_context_ir: "bool",
  skill: "string",
  mute_audio: "bool",
  aigc_watermark: "bool",
  first_frame: "path",
  last_frame: "path",
  reference_images: "strings",
  reference_videos: "strings",
  reference_audios: "strings",
  takes: "int",
  vars: "vars",
} as const satisfies Record<string, FieldType>;

export const LINE_FIELDS = {
  id: "string",
  text: "string",
  template: "string",
  shot: "string",
  voice: "string",
  save_voice_as: "string",
  language: "string",
  speed: "number",
  auto_emotion: "bool",
  emotion_description: "string",
  emotion_strength: "number",
  emotion_vector: "numbers",
  emotion_vector_mode: "string",
  pronunciations: "pronunciations",
  vars: "vars",
} as const satisfies Record<string, FieldType>;

interface Pronunciation {
  word: string;
  kind: string;
  value: string;
}

type ValueOf<T extends FieldType> = T extends "string" | "path"
  ? string
  : T extends "duration"
    ? number | "auto"
    : T extends "int" | "number"
      ? number
      : T extends "bool"
        ? boolean
        : T extends "strings"
          ? string[]
          : T extends "numbers"
            ? number[]
            : T extends "vars"
              ? Record<string, string>
              : Pronunciation[];

export type ShotValues = { -readonly [K in keyof typeof SHOT_FIELDS]?: ValueOf<(typeof SHOT_FIELDS)[K]> };
export type LineValues = { -readonly [K in keyof typeof LINE_FIELDS]?: ValueOf<(typeof LINE_FIELDS)[K]> };

/** Where each value came from (a row, or the manifest's defaults), for messages. */
export type Origins = Record<string, { file: string; line: number; paths?: Record<string, number> }>;

const BOOL_TEXT: Record<string, boolean> = {
  true: true,
  false: false,
  yes: true,
  no: false,
  "1": true,
  "0": false,
};

/** CSV list cells separate items with `|`. */
function splitList(text: string): string[] {
  return text
    .split("|")
    .map((s) => s.trim())
    .filter((s) => s !== "");
}

/** A value as a message quotes it: text as a short, masked snippet (a cell may come from any file). */
function got(value: unknown): string {
  return typeof value === "string" ? quoted(value) : show(value);
}

type Coerced = { value: unknown } | { error: string };

/** The cell's text when the value is a CSV cell (which needs coercing); undefined for YAML values. */
function csvCell(located: Located): string | undefined {
  return located.fromCsv && typeof located.value === "string" ? located.value : undefined;
}

/** A CSV cell read as an integer (NaN when it is not one); a YAML value as it is. */
function intOf(v: unknown, cell: string | undefined): unknown {
  if (cell === undefined) return v;
  return /^[+-]?\d+$/.test(cell) ? Number(cell) : Number.NaN;
}

function coerceString(v: unknown): Coerced {
  if (typeof v === "string") return { value: v };
  if (typeof v === "number" || typeof v === "boolean") return { value: String(v) };
  return { error: `expected text, got ${got(v)}` };
}

function coercePath(v: unknown, cell: string | undefined): Coerced {
  // One frame image: the service takes at most one first frame and one last frame.
  const many = cell !== undefined ? splitList(cell) : Array.isArray(v) ? v : undefined;
  if (many && many.length > 1) {
    return {
      error: `expected one image (at most 1 frame of each kind per request), got ${many.length}: ${got(v)}`,
    };
  }
  const one = many ? many[0] : v;
  if (typeof one === "string") return { value: one };
  return { error: `expected a path or URL, got ${got(v)}` };
}

function coerceInt(v: unknown, cell: string | undefined): Coerced {
  const n = intOf(v, cell);
  if (typeof n === "number" && Number.isInteger(n)) return { value: n };
  return { error: `expected an integer, got ${got(v)}` };
}

function coerceDuration(v: unknown, cell: string | undefined): Coerced {
  // `auto`: timed to the shot's narration once its lines exist (src/manifest/timing.ts).
  if (typeof v === "string" && v.trim().toLowerCase() === "auto") return { value: "auto" };
  const n = intOf(v, cell);
  if (typeof n === "number" && Number.isInteger(n)) return { value: n };
  return { error: `expected an integer or auto, got ${got(v)}` };
}

function coerceNumber(v: unknown, cell: string | undefined): Coerced {
  const n =
    cell !== undefined
      ? /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(cell)
        ? Number(cell)
        : Number.NaN
      : v;
  if (typeof n === "number" && Number.isFinite(n)) return { value: n };
  return { error: `expected a number, got ${got(v)}` };
}

function coerceBool(v: unknown, cell: string | undefined): Coerced {
  if (typeof v === "boolean") return { value: v };
  const b = cell !== undefined ? BOOL_TEXT[cell.toLowerCase()] : undefined;
  if (b !== undefined) return { value: b };
  return { error: `expected true or false, got ${got(v)}` };
}

function coerceStrings(v: unknown, cell: string | undefined): Coerced {
  if (cell !== undefined) return { value: splitList(cell) };
  if (typeof v === "string") return { value: [v] };
  if (Array.isArray(v) && v.every((s) => typeof s === "string")) return { value: v };
  return { error: `expected a list of paths or URLs, got ${got(v)}` };
}

function coerceNumbers(v: unknown, cell: string | undefined, fromCsv: boolean): Coerced {
  const items =
    cell !== undefined ? splitList(cell).map((s) => (/^[+-]?(\d+\.?\d*|\.\d+)$/.test(s) ? Number(s) : s)) : v;
  if (Array.isArray(items) && items.every((n) => typeof n === "number" && Number.isFinite(n))) {
    return { value: items };
  }
  return {
    error: `expected a list of numbers${fromCsv ? " separated by |" : ""}, got ${got(v)}`,
  };
}

function coerceVars(v: unknown): Coerced {
  if (v && typeof v === "object" && !Array.isArray(v)) {
    const out: Record<string, string> = {};
    for (const [k, x] of Object.entries(v)) {
      if (typeof x === "object" && x !== null) return { error: `vars.${k}: expected text, got ${show(x)}` };
      out[k] = String(x);
    }
    return { value: out };
  }
  return { error: `expected a mapping of name: value, got ${got(v)}` };
}

/** `word=kind:value|word=kind:value` */
function pronunciationsFromCell(cell: string): Coerced {
  const rules: Pronunciation[] = [];
  for (const item of splitList(cell)) {
    const m = item.match(/^([^=]+)=([A-Za-z]+):(.+)$/);
    if (!m) return { error: `expected word=kind:value items separated by |, got ${got(item)}` };
    rules.push({ word: (m[1] ?? "").trim(), kind: m[2] ?? "", value: (m[3] ?? "").trim() });
  }
  return { value: rules };
}

/** The first problem of a YAML list of {word, kind, value} rules, or undefined when every rule is whole. */
function pronunciationListProblem(list: readonly unknown[]): string | undefined {
  for (const [i, r] of list.entries()) {
    const rule = r as Record<string, unknown>;
    if (
      !rule ||
      typeof rule !== "object" ||
      ["word", "kind", "value"].some((k) => typeof rule[k] !== "string")
    ) {
      return `[${i}]: expected {word, kind, value} (all text), got ${show(r)}`;
    }
    const extra = Object.keys(rule).filter((k) => !["word", "kind", "value"].includes(k));
    if (extra.length > 0) return `[${i}]: unknown field ${quoted(String(extra[0]))}`;
  }
  return undefined;
}

function coercePronunciations(v: unknown, cell: string | undefined): Coerced {
  if (cell !== undefined) return pronunciationsFromCell(cell);
  if (Array.isArray(v)) {
    const error = pronunciationListProblem(v);
    return error === undefined ? { value: v } : { error };
  }
  return { error: `expected a list of {word, kind, value}, got ${got(v)}` };
}

function coerce(type: FieldType, located: Located): Coerced {
  const v = located.value;
  const cell = csvCell(located);
  switch (type) {
    case "string":
      return coerceString(v);
    case "path":
      return coercePath(v, cell);
    case "int":
      return coerceInt(v, cell);
    case "duration":
      return coerceDuration(v, cell);
    case "number":
      return coerceNumber(v, cell);
    case "bool":
      return coerceBool(v, cell);
    case "strings":
      return coerceStrings(v, cell);
    case "numbers":
      return coerceNumbers(v, cell, located.fromCsv);
    case "vars":
      return coerceVars(v);
    case "pronunciations":
      return coercePronunciations(v, cell);
  }
}

/**
 * Reads the fields of one row (or of the defaults) into typed values. Unknown fields and values of
 * the wrong type are reported; the row keeps every field that could be read.
 */
export function readFields(
  kind: RowKind,
  fields: Fields,
  file: string,
  problems: Problems,
  { allowId = true }: { allowId?: boolean } = {},
): { values: Record<string, unknown>; origins: Origins } {
  const specs: Record<string, FieldType> = kind === "shot" ? SHOT_FIELDS : LINE_FIELDS;
  const known = Object.keys(specs).filter((k) => allowId || k !== "id");
  const values: Record<string, unknown> = {};
  const origins: Origins = {};
  const vars: Record<string, string> = {};
  for (const [name, located] of fields) {
    // CSV rows carry template variables as `vars.NAME` columns.
    if (name.startsWith("vars.") && name.length > 5) {
      vars[name.slice(5)] = String(located.value);
      origins.vars = { file, line: located.line };
      continue;
    }
    const type = specs[name];
    if (!allowId && name === "id") {
      problems.error(file, located.line, name, `an id cannot be a default: each ${kind} has its own`);
      continue;
    }
    if (!type) {
      const other = kind === "shot" ? LINE_FIELDS : SHOT_FIELDS;
      const hint =
        didYouMean(name, known) ||
        (name in other
          ? ` (${name} is a ${kind === "shot" ? "line" : "shot"} field)`
          : `; known fields: ${known.join(", ")}`);
      problems.error(file, located.line, name, `unknown ${kind} field${hint}`);
      continue;
    }
    const result = coerce(type, located);
    if ("error" in result) {
      problems.error(file, located.line, name, result.error);
      continue;
    }
    values[name] = result.value;
    origins[name] = { file, line: located.line, ...(located.paths ? { paths: located.paths } : {}) };
  }
  if (Object.keys(vars).length > 0) {
    values.vars = { ...(values.vars as Record<string, string> | undefined), ...vars };
  }
  return { values, origins };
}
