// The values of flags (and of their CLAPPER_* variables), parsed from the text as typed so that a
// refusal quotes what was given (`--rps: expected a number >= 0.1, got "fast"`, never `NaN`).
// Pure functions: `parseCommandLine` applies them without running anything.
import type { MaxFailures } from "../run/types.js";
import { ExitError } from "./errors.js";

/** A refused value: exit 2, the message names the flag (or variable) and quotes what was got. */
export class ValueError extends ExitError {
  constructor(message: string) {
    super(2, message);
  }
}

const NUMBER = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?$/i;

/** `"abc"`: what was got, quoted (long text cut). */
function got(raw: unknown): string {
  const text = typeof raw === "string" ? raw : String(raw);
  return JSON.stringify(text.length > 60 ? `${text.slice(0, 59)}…` : text);
}

export interface NumberRule {
  /** Smallest value allowed (inclusive unless `above`). */
  min?: number;
  /** Refuse `min` itself: the value must be above it. */
  above?: boolean;
  max?: number;
  integer?: boolean;
  /** What the number counts, for the message: "seconds", "points". */
  unit?: string;
}

function expectation(rule: NumberRule): string {
  const kind = rule.integer ? "a whole number" : "a number";
  const bounds: string[] = [];
  if (rule.min !== undefined) bounds.push(`${rule.above ? ">" : ">="} ${rule.min}`);
  if (rule.max !== undefined) bounds.push(`<= ${rule.max}`);
  const unit = rule.unit ? ` of ${rule.unit}` : "";
  return `${kind}${unit}${bounds.length ? ` ${bounds.join(" and ")}` : ""}`;
}

/** A number typed as text. `name` is the flag (`--rps`) or the variable (`CLAPPER_RPS`). */
export function parseNumber(name: string, raw: unknown, rule: NumberRule = {}): number {
  const text = typeof raw === "number" ? String(raw) : typeof raw === "string" ? raw.trim() : "";
  const value = NUMBER.test(text) ? Number(text) : Number.NaN;
  const ok =
    Number.isFinite(value) &&
    (!rule.integer || Number.isInteger(value)) &&
    (rule.min === undefined || (rule.above ? value > rule.min : value >= rule.min)) &&
    (rule.max === undefined || value <= rule.max);
  if (!ok) throw new ValueError(`${name}: expected ${expectation(rule)}, got ${got(raw)}`);
  return value;
}

/**
 * `--max-failures N|P%`: N, a whole number >= 0, of failed jobs; or P%, a share above 0 and up to
 * 100 (decimals allowed) of the jobs that ended.
 */
export function parseMaxFailures(raw: unknown, name = "--max-failures"): MaxFailures {
  const text = typeof raw === "string" ? raw.trim() : String(raw);
  const expected = `expected a whole number of failed jobs >= 0 (like 3) or a percentage above 0 and up to 100 (like 10%)`;
  if (/^\d+$/.test(text)) return { count: Number(text) };
  const percent = /^(\d+(?:\.\d+)?|\.\d+)\s*%$/.exec(text);
  if (percent) {
    const p = Number(percent[1]);
    if (p > 0 && p <= 100) return { percent: p };
    throw new ValueError(`${name}: a percentage must be above 0 and up to 100, got ${got(raw)}`);
  }
  throw new ValueError(`${name}: ${expected}, got ${got(raw)}`);
}

const UNIT_SECONDS: Record<string, number> = { d: 86_400, h: 3600, m: 60, s: 1 };

/**
 * A duration in seconds: `90s`, `45m`, `2h`, `1h30m`, `1d`, or plain seconds `600` (decimals
 * allowed: `1.5h`). Undefined when the text is not shaped like a duration at all.
 */
export function parseDuration(text: string): number | undefined {
  const t = text.trim().toLowerCase();
  if (/^(\d+(?:\.\d+)?|\.\d+)$/.test(t)) return Number(t);
  const m = /^(?:(\d+(?:\.\d+)?)d)?(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$/.exec(t);
  if (!m || t === "") return undefined;
  const [, d, h, min, s] = m;
  const parts: Array<[string | undefined, string]> = [
    [d, "d"],
    [h, "h"],
    [min, "m"],
    [s, "s"],
  ];
  return parts.reduce((sum, [v, unit]) => sum + (v ? Number(v) * (UNIT_SECONDS[unit] ?? 0) : 0), 0);
}

const ISO_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?\s*(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

/**
 * `--deadline DURATION|ISO-TIME`: a duration from now (`90s`, `45m`, `2h`, `1h30m`, `600`), or a
 * time with its zone (`2026-11-25T06:00:00Z`, `2026-11-25T07:00:00+01:00`). A time without a zone
 * is refused (which clock?), and so is a time in the past.
 */
export function parseDeadline(raw: unknown, now: Date = new Date(), name = "--deadline"): Date {
  const text = typeof raw === "string" ? raw.trim() : String(raw);
  const seconds = parseDuration(text);
  if (seconds !== undefined) {
    if (!(seconds > 0)) throw new ValueError(`${name}: a duration must be above 0, got ${got(raw)}`);
    return new Date(now.getTime() + Math.round(seconds * 1000));
  }
  const iso = ISO_TIME.exec(text);
  if (iso) {
    if (!iso[7]) {
      throw new ValueError(
        `${name}: a time needs its zone, Z or an offset (like 2026-11-25T06:00:00Z or 2026-11-25T07:00:00+01:00), got ${got(raw)}`,
      );
    }
    const [, y, mo, d, h, mi, s] = iso;
    const daysInMonth = new Date(Date.UTC(Number(y), Number(mo), 0)).getUTCDate();
    const valid =
      Number(mo) >= 1 &&
      Number(mo) <= 12 &&
      Number(d) >= 1 &&
      Number(d) <= daysInMonth &&
      Number(h) <= 23 &&
      Number(mi) <= 59 &&
      Number(s ?? 0) <= 59;
    const offset =
      iso[7].toUpperCase() === "Z"
        ? "Z"
        : iso[7].replace(/^([+-]\d{2}):?(\d{2})?$/, (_, hh, mm) => `${hh}:${mm ?? "00"}`);
    const at = new Date(`${y}-${mo}-${d}T${h}:${mi}:${s ?? "00"}${offset}`);
    if (!valid || Number.isNaN(at.getTime())) {
      throw new ValueError(`${name}: not a real date and time, got ${got(raw)}`);
    }
    if (at.getTime() <= now.getTime()) {
      throw new ValueError(
        `${name}: ${text} is in the past (it is ${now.toISOString().replace(/\.\d+Z$/, "Z")} now); give a later time or a duration like 2h`,
      );
    }
    return at;
  }
  throw new ValueError(
    `${name}: expected a duration (90s, 45m, 2h, 1h30m, or seconds: 600) or a time with its zone (2026-11-25T06:00:00Z), got ${got(raw)}`,
  );
}

const TRUE = new Set(["1", "true", "yes", "on"]);
const FALSE = new Set(["0", "false", "no", "off", ""]);

/** A boolean variable (`CLAPPER_SANDBOX=1`). */
export function parseBoolean(name: string, raw: string): boolean {
  const t = raw.trim().toLowerCase();
  if (TRUE.has(t)) return true;
  if (FALSE.has(t)) return false;
  throw new ValueError(`${name}: expected true or false (1/0, yes/no), got ${got(raw)}`);
}

/** One of a fixed list. */
export function parseChoice<T extends string>(name: string, raw: unknown, choices: readonly T[]): T {
  const text = typeof raw === "string" ? raw.trim() : String(raw);
  if ((choices as readonly string[]).includes(text)) return text as T;
  throw new ValueError(`${name}: expected one of ${choices.join(", ")}, got ${got(raw)}`);
}

/** `--rps`: the ceiling of the rate found as the run goes, or `fixed:N` for a rate that never moves. */
export interface RpsValue {
  rps: number;
  fixed: boolean;
}

/** `--rps N` (a ceiling, N >= 0.1) or `--rps fixed:N` (exactly N requests a second). */
export function parseRps(raw: unknown, name = "--rps"): RpsValue {
  const text = typeof raw === "string" ? raw.trim() : String(raw);
  const fixed = /^fixed:/i.test(text);
  const number = fixed ? text.slice("fixed:".length) : text;
  if (!NUMBER.test(number.trim())) {
    throw new ValueError(
      `${name}: expected a number of requests per second >= 0.1 (a ceiling, like 20) or fixed:N (a rate that never moves, like fixed:5), got ${got(raw)}`,
    );
  }
  return { rps: parseNumber(name, number, { min: 0.1 }), fixed };
}
