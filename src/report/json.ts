// report.json: the model as it is, two-space indented, ending in a line feed.
import type { Report } from "./model.js";

export function reportJson(report: Report): string {
  return `${JSON.stringify(report, null, 2)}\n`;
}
