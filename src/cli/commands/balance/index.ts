// `clapper balance`: points summary, packages and speech pricing, read in parallel.
import type { PointsPackage, PointsSummary } from "../../../api/common.js";
import { type Clients, incompleteWarning } from "../../../api/index.js";
import type { Pricing } from "../../../api/speech.js";
import { POINTS_PER_SECOND, RESOLUTIONS } from "../../../api/video.js";
import { date, table } from "../../output.js";

export interface BalanceOptions {
  clients: Pick<Clients, "video" | "speech">;
  signal?: AbortSignal;
}

export interface BalanceResult {
  summary: PointsSummary;
  packages: PointsPackage[];
  pricing: Pricing;
  /** Set when the packages came back fewer than the service's `total` says. */
  warnings?: string[];
}

export async function balance({ clients, signal }: BalanceOptions): Promise<BalanceResult> {
  const opts = signal ? { signal } : {};
  const [summary, packages, pricing] = await Promise.all([
    clients.video.pointsSummary(opts),
    clients.video.listPackages(opts),
    clients.speech.pricing(opts),
  ]);
  if (packages.complete) return { summary, packages: packages.items, pricing };
  return {
    summary,
    packages: packages.items,
    pricing,
    warnings: [incompleteWarning("points packages", packages)],
  };
}

export function renderBalance({ summary, packages, pricing }: BalanceResult): string {
  const lines = [
    `points: ${summary.available_points} available, ${summary.reserved_points} reserved, ${summary.total_points} total`,
    "",
    table(packages, [
      { header: "PACKAGE", value: (p) => p.name },
      { header: "ID", value: (p) => p.id },
      { header: "STATUS", value: (p) => p.status },
      { header: "REMAINING", value: (p) => p.remaining_points, align: "right" },
      { header: "RESERVED", value: (p) => p.reserved_points, align: "right" },
      { header: "AVAILABLE", value: (p) => p.available_points, align: "right" },
      { header: "EXPIRES", value: (p) => date(p.expires_at) },
    ]),
    "",
    pricing.enabled
      ? `speech: ${pricing.costs.text_to_speech} points per ${pricing.unit_characters} counted characters (pricing version ${pricing.pricing_version})`
      : "speech: billing is disabled, no speech task can be created",
    `video: points per second ${RESOLUTIONS.map((r) => `${r} ${POINTS_PER_SECOND[r]}`).join(", ")}`,
  ];
  return lines.join("\n");
}
