// package.json as the CLI reads it: its version (--version) and where bugs are reported.
import { readFileSync } from "node:fs";

interface PackageInfo {
  version: string;
  bugs?: string | { url?: string };
  repository?: string | { url?: string };
}

export function packageInfo(): PackageInfo {
  return JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as PackageInfo;
}

/** Where a bug is reported: package.json's `bugs`, else its repository's issues, else a sentence. */
export function bugsUrl(pkg: Pick<PackageInfo, "bugs" | "repository">): string {
  const bugs = typeof pkg.bugs === "string" ? pkg.bugs : pkg.bugs?.url;
  if (bugs) return bugs;
  const repo = typeof pkg.repository === "string" ? pkg.repository : pkg.repository?.url;
  const m = repo?.match(/github\.com[/:]([^/]+\/[^/.]+)/);
  if (m) return `https://github.com/${m[1]}/issues`;
  return "the issue tracker of the clapper repository";
}
