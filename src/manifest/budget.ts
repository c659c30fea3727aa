// `budget:`: the points a run may spend (`max_points`), and the pool it may share with other runs.
import { show } from "../api/common.js";

type Fail = (key: string, message: string) => void;

type PoolPeriod = "day" | "week" | "month" | "total";

export interface BudgetPool {
  name: string;
  maxPoints: number;
  period: PoolPeriod;
}

export const POOL_PERIODS: readonly PoolPeriod[] = ["day", "week", "month", "total"];
export const POOL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** `budget: {max_points, pool}`, each optional; a wrong value is reported and left out. */
export function readBudget(budget: unknown, fail: Fail): { maxPoints?: number; pool?: BudgetPool } {
  let maxPoints: number | undefined;
  let pool: BudgetPool | undefined;
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
  return { ...(maxPoints !== undefined ? { maxPoints } : {}), ...(pool ? { pool } : {}) };
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
