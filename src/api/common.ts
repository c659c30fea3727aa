// Shapes shared by both services: error bodies, points packages and balances, and the
// one way we turn a zod failure into the precise, field-naming messages users read.

import { z } from "zod";
import { show } from "./show.js";

/** HTTP 400 body for request-format and parameter-validation failures (both specs). */
export const ValidationErrorBody = z.looseObject({
  type: z.literal("error"),
  error: z.looseObject({
    type: z.string(),
    message: z.string(),
    // The specs send the status as a string ("400"), not a number.
    http_code: z.string(),
  }),
  request_id: z.string().optional(),
});
export type ValidationErrorBody = z.infer<typeof ValidationErrorBody>;

/** Business errors of downstream services; HTTP 200 with a non-zero RetCode is also a failure. */
export const BusinessErrorBody = z.looseObject({
  RetCode: z.number().int(),
  Message: z.string(),
  request_uuid: z.string().optional(),
});
export type BusinessErrorBody = z.infer<typeof BusinessErrorBody>;

export const PackageStatus = z.enum(["pending", "active", "exhausted", "expired"]);
export type PackageStatus = z.infer<typeof PackageStatus>;

export const PointsPackage = z.looseObject({
  id: z.string(),
  code: z.string(),
  name: z.string(),
  status: PackageStatus,
  total_points: z.number().int(),
  remaining_points: z.number().int(),
  reserved_points: z.number().int(),
  available_points: z.number().int(),
  purchased_at: z.number().int().optional(),
  expires_at: z.number().int().optional(),
  created_at: z.number().int(),
  order_no: z.string().optional(),
  total_price: z.number().int().optional(),
});
export type PointsPackage = z.infer<typeof PointsPackage>;

export const PointsPackageList = z.looseObject({
  items: z.array(PointsPackage),
  total: z.number().int(),
});
export type PointsPackageList = z.infer<typeof PointsPackageList>;

export const PointsSummary = z.looseObject({
  total_points: z.number().int(),
  reserved_points: z.number().int(),
  available_points: z.number().int(),
});
export type PointsSummary = z.infer<typeof PointsSummary>;

/** One problem found in a request, with the path of the offending field. */
export interface Issue {
  path: ReadonlyArray<string | number>;
  message: string;
}

/** `content[2].image_url.url`, `pronunciations[0].word`: the way users and the service name a field. */
export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else out += out === "" ? String(part) : `.${String(part)}`;
  }
  return out;
}

export function formatIssue(issue: Issue): string {
  const where = formatPath(issue.path);
  return where === "" ? issue.message : `${where}: ${issue.message}`;
}

export function issuesFromZod(error: z.ZodError): Issue[] {
  return error.issues.map((i) => ({ path: i.path.filter((p) => typeof p !== "symbol"), message: i.message }));
}

/**
 * Zod's default messages ("Too big: expected number to be <=30") do not say what was sent.
 * This map gives every schema in src/api/ the p-queue style: what was expected, and what came.
 */
const preciseErrors: z.core.$ZodErrorMap = (iss) => {
  const got = `got ${show(iss.input)}`;
  switch (iss.code) {
    case "invalid_type":
      if (iss.input === undefined) return "is required";
      return `expected ${article(iss.expected === "int" ? "integer" : iss.expected)}, ${got}`;
    case "invalid_value":
      if (iss.input === undefined) return "is required";
      return `expected one of ${iss.values.map((v) => show(v)).join(", ")}, ${got}`;
    case "too_small": {
      const what = iss.origin === "string" ? "characters" : iss.origin === "array" ? "elements" : "";
      if (what)
        return `expected at least ${String(iss.minimum)} ${plural(Number(iss.minimum), what)}, got ${lengthOf(iss.input)}`;
      return `expected a number ${iss.inclusive ? ">=" : ">"} ${String(iss.minimum)}, ${got}`;
    }
    case "too_big": {
      const what = iss.origin === "string" ? "characters" : iss.origin === "array" ? "elements" : "";
      if (what)
        return `expected at most ${String(iss.maximum)} ${plural(Number(iss.maximum), what)}, got ${lengthOf(iss.input)}`;
      return `expected a number ${iss.inclusive ? "<=" : "<"} ${String(iss.maximum)}, ${got}`;
    }
    case "unrecognized_keys":
      return `unsupported field${iss.keys.length > 1 ? "s" : ""} ${iss.keys.map((k) => show(k)).join(", ")}`;
    default:
      return undefined;
  }
};

function plural(n: number, noun: string): string {
  return n === 1 ? noun.replace(/s$/, "") : noun;
}

function article(noun: string): string {
  return /^[aeiou]/.test(noun) ? `an ${noun}` : `a ${noun}`;
}

function lengthOf(input: unknown): number {
  if (typeof input === "string") return [...input].length;
  if (Array.isArray(input)) return input.length;
  return 0;
}

z.config({ customError: preciseErrors });

/** Integer in [min, max] with a message that states the range and what was sent. */
export function intInRange(min: number, max: number) {
  const error = rangeMessage(`an integer from ${min} to ${max}`);
  return z.number({ error }).int({ error }).min(min, { error }).max(max, { error });
}

/** Number in [min, max] (inclusive) with a message that states the range and what was sent. */
export function numberInRange(min: number, max: number) {
  const error = rangeMessage(`a number from ${min} to ${max}`);
  return z.number({ error }).min(min, { error }).max(max, { error });
}

function rangeMessage(expected: string) {
  return (iss: { input?: unknown }) =>
    iss.input === undefined ? "is required" : `expected ${expected}, got ${show(iss.input)}`;
}

/** Counts Unicode code points, which is how both specs measure text ("Unicode characters"). */
export function charLength(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

export { show };
