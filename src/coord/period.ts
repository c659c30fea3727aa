// The period a pool's spending counts in, in UTC, so that processes in different time zones agree.

export type PoolPeriod = "day" | "week" | "month" | "total";

/** `2026-11-25`, ISO week `2026-W48`, `2026-11`, or `total`. */
export function periodId(period: PoolPeriod, now: Date): string {
  const iso = now.toISOString();
  if (period === "day") return iso.slice(0, 10);
  if (period === "month") return iso.slice(0, 7);
  if (period === "total") return "total";
  // ISO 8601: weeks start on Monday, and week 1 is the one holding the year's first Thursday, so
  // the days around New Year may belong to the other year's week.
  const day = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
  const weekday = day.getUTCDay() || 7;
  day.setUTCDate(day.getUTCDate() + 4 - weekday);
  const yearStart = Date.UTC(day.getUTCFullYear(), 0, 1);
  const week = Math.ceil(((day.getTime() - yearStart) / 86_400_000 + 1) / 7);
  return `${day.getUTCFullYear()}-W${String(week).padStart(2, "0")}`;
}

const DAY_MS = 86_400_000;

/**
 * How long a pool's ledger outlives its last write: its period, and a week more so that
 * `clapper budget` still shows the last period and late settlements still find it.
 */
export function periodTtlMs(period: PoolPeriod): number {
  const margin = 7 * DAY_MS;
  if (period === "day") return DAY_MS + margin;
  if (period === "week") return 7 * DAY_MS + margin;
  if (period === "month") return 31 * DAY_MS + margin;
  return 400 * DAY_MS;
}
