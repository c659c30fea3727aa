// `clapper budget`: every pool and run cap the coordinator holds for this account, with what is
// reserved (tasks created or about to be) and spent, in the current period of each pool.
import { type BudgetView, CoordinatorUnavailableError, connectCoordinator } from "../../../coord/index.js";
import type { CoordinatorUrl } from "../../../coord/url.js";
import { ExitError } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";
import { table } from "../../output.js";

export interface BudgetOptions {
  url: CoordinatorUrl;
  /** The account's hash (never the key). */
  account: string;
  signal?: AbortSignal;
}

export interface BudgetResult {
  coordinator: string;
  budgets: BudgetView[];
}

export async function budgets({ url, account, signal }: BudgetOptions): Promise<BudgetResult> {
  let coordinator: Awaited<ReturnType<typeof connectCoordinator>>;
  try {
    coordinator = await connectCoordinator(url.url, { account, ...(signal ? { signal } : {}) });
  } catch (error) {
    if (error instanceof CoordinatorUnavailableError)
      throw new ExitError(ExitCode.Unreachable, error.message);
    throw error;
  }
  try {
    const views = await coordinator.budgets();
    views.sort((a, b) => a.kind.localeCompare(b.kind) || a.name.localeCompare(b.name));
    return { coordinator: url.display, budgets: views };
  } finally {
    await coordinator.close();
  }
}

export function renderBudgets({ coordinator, budgets }: BudgetResult): string {
  if (budgets.length === 0) return `no shared budgets on ${coordinator} for this account`;
  return table(budgets, [
    { header: "KIND", value: (b) => b.kind },
    { header: "NAME", value: (b) => b.name },
    { header: "PERIOD", value: (b) => (b.kind === "pool" ? (b.periodId ?? b.period ?? "") : "") },
    { header: "CAP", value: (b) => b.cap, align: "right" },
    { header: "RESERVED", value: (b) => b.reserved, align: "right" },
    { header: "SPENT", value: (b) => b.spent, align: "right" },
    { header: "LEFT", value: (b) => Math.max(0, b.cap - b.reserved - b.spent), align: "right" },
    { header: "OPEN", value: (b) => b.reservations, align: "right" },
  ]);
}
