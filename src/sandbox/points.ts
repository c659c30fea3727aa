// One organization's points packages. Both services draw on the same ledger, as the specs say:
// reserve at creation, consume on success, release on failure or cancellation.
import { randomUUID } from "node:crypto";
import type { Issue, PackageStatus, PointsPackage, PointsSummary } from "../api/common.js";

export interface StoredPackage {
  id: string;
  code: string;
  name: string;
  /** Only `pending` is stored; active/exhausted/expired are derived from points and time. */
  pending: boolean;
  total_points: number;
  remaining_points: number;
  reserved_points: number;
  purchased_at?: number;
  expires_at?: number;
  created_at: number;
  order_no?: string;
  total_price?: number;
}

/** Where a task's reservation was taken from, so it can be consumed or released exactly. */
export type Allocation = ReadonlyArray<{ packageId: string; amount: number }>;

interface NewPackage {
  total_points: number;
  /** Default active. Stored as given: pending (not activated), exhausted (remaining 0), expired. */
  status?: PackageStatus;
  expires_at?: number;
  code?: string;
  name?: string;
  order_no?: string;
  total_price?: number;
}

const YEAR_S = 365 * 24 * 3600;

/**
 * What makes a new package contradict its requested status; undefined when it is consistent.
 * Status is derived from time and points afterwards, so a package created "exhausted" but already
 * past its expiry would read "expired", and one created "expired" with a future expiry "active".
 */
export function packageProblem(input: NewPackage, nowS: number): Issue | undefined {
  const expires = input.expires_at;
  if (expires === undefined) return undefined;
  const at = ["expires_at"];
  switch (input.status) {
    case "pending":
      return {
        path: at,
        message: "a pending package is not activated yet, so it has no expiry; leave it out",
      };
    case "expired":
      return expires > nowS
        ? { path: at, message: `an expired package expired in the past, not at ${expires} (now ${nowS})` }
        : undefined;
    case "exhausted":
      return expires <= nowS
        ? { path: at, message: `at ${expires} the package would be expired, not exhausted (now ${nowS})` }
        : undefined;
    default:
      return undefined;
  }
}

export class PointsLedger {
  readonly packages: StoredPackage[] = [];

  constructor(private readonly nowS: () => number) {}

  /**
   * Adds a package in the requested status. pending: not activated, no purchase or expiry time.
   * active: usable until `expires_at` (a year by default; one in the past makes it expired).
   * exhausted: activated with every point deducted. expired: activated, its points unused, and
   * expired now unless `expires_at` says when (bought a year before that). Only active packages
   * have available points; pending and expired ones count in no balance (see `summary`).
   */
  add(input: NewPackage): StoredPackage {
    const now = this.nowS();
    const pending = input.status === "pending";
    const activation = (): { purchased_at: number; expires_at: number } => {
      if (input.status === "expired") {
        const expires = input.expires_at ?? now;
        return { purchased_at: expires - YEAR_S, expires_at: expires };
      }
      return { purchased_at: now, expires_at: input.expires_at ?? now + YEAR_S };
    };
    const pkg: StoredPackage = {
      id: `pkg_${randomUUID().replaceAll("-", "").slice(0, 20)}`,
      code: input.code ?? "sandbox",
      name: input.name ?? "Sandbox points package",
      pending,
      total_points: input.total_points,
      remaining_points: input.status === "exhausted" ? 0 : input.total_points,
      reserved_points: 0,
      created_at: now,
      ...(pending ? {} : activation()),
      ...(input.order_no !== undefined ? { order_no: input.order_no } : {}),
      ...(input.total_price !== undefined ? { total_price: input.total_price } : {}),
    };
    this.packages.push(pkg);
    return pkg;
  }

  status(pkg: StoredPackage): PackageStatus {
    if (pkg.pending) return "pending";
    if (pkg.expires_at !== undefined && this.nowS() >= pkg.expires_at) return "expired";
    if (pkg.remaining_points <= 0) return "exhausted";
    return "active";
  }

  private available(pkg: StoredPackage): number {
    return this.status(pkg) === "active" ? Math.max(0, pkg.remaining_points - pkg.reserved_points) : 0;
  }

  summary(): PointsSummary {
    let total = 0;
    let reserved = 0;
    for (const pkg of this.packages) {
      const status = this.status(pkg);
      if (status === "pending" || status === "expired") continue;
      total += pkg.remaining_points;
      reserved += pkg.reserved_points;
    }
    return {
      total_points: total,
      reserved_points: reserved,
      available_points: Math.max(0, total - reserved),
    };
  }

  /** Newest first by creation time, as the spec orders them. */
  list(): PointsPackage[] {
    return [...this.packages].reverse().map((pkg) => {
      const { pending: _pending, ...fields } = pkg;
      return { ...fields, status: this.status(pkg), available_points: this.available(pkg) };
    });
  }

  /** Takes `amount` from the packages that expire soonest; undefined when the balance is short. */
  reserve(amount: number): Allocation | undefined {
    const usable = this.packages
      .filter((p) => this.available(p) > 0)
      .sort((a, b) => (a.expires_at ?? Number.MAX_SAFE_INTEGER) - (b.expires_at ?? Number.MAX_SAFE_INTEGER));
    const total = usable.reduce((sum, p) => sum + this.available(p), 0);
    if (total < amount) return undefined;
    const allocation: { packageId: string; amount: number }[] = [];
    let left = amount;
    for (const pkg of usable) {
      if (left === 0) break;
      const take = Math.min(left, this.available(pkg));
      pkg.reserved_points += take;
      allocation.push({ packageId: pkg.id, amount: take });
      left -= take;
    }
    return allocation;
  }

  /**
   * Ends a reservation: `consumed` points (at most the reserved amount) become deductions and the
   * rest is released. An upscale fallback consumes the base price and releases the surcharge this way.
   */
  settle(allocation: Allocation, consumed: number): void {
    let left = consumed;
    for (const { packageId, amount } of allocation) {
      const pkg = this.packages.find((p) => p.id === packageId);
      if (!pkg) continue;
      const take = Math.min(left, amount);
      pkg.reserved_points -= amount;
      pkg.remaining_points -= take;
      left -= take;
    }
  }
}
