// Writing the reports beside the outputs: report.json, report.md, junit.xml and report.html, and
// the summary for GitHub Actions.
import { Readable } from "node:stream";
import type { Launch } from "../episode/ffmpeg-run.js";
import type { Job } from "../manifest/index.js";
import { reviewPageParts } from "../review/page.js";
import { pageInput } from "../review/page-input.js";
import { picksPath } from "../review/picks.js";
import type { Sink } from "../sinks/sink.js";
import { reportJson } from "./json.js";
import { junitXml } from "./junit.js";
import { reportMarkdown } from "./markdown.js";
import type { Report } from "./model.js";
import { appendStepSummary } from "./summary.js";

interface WriteReportsOptions {
  /**
   * Append the summary to `$GITHUB_STEP_SUMMARY` when it is set. Default true: the run writes it.
   * `clapper report` passes false: each step of a GitHub job has its own summary file, all shown
   * together, so a report written again in a later step would show the run twice.
   */
  stepSummary?: boolean;
  /** Where in the sink: `reports` (default), `reports/shards/I-of-N` for a shard. */
  folder?: string;
  /**
   * The manifest's jobs: report.html shows what they asked for (prompt, text, voice, shot, take)
   * beside what the report says became of them. Without them the page lists the report's rows.
   */
  jobs?: readonly Job[];
  /** The manifest's path: report.html shows the picks of the picks.yaml beside it. */
  manifestPath?: string | undefined;
  /** The run's stop: the stills' ffmpeg ends with it. */
  signal?: AbortSignal | undefined;
  /** What could not be shown on report.html (a still, the picks): said, never a failure. */
  onWarning?: ((message: string) => void) | undefined;
  /**
   * Make the stills of the videos for report.html's grid (default true); a Launch starts their
   * ffmpegs (the run's spawner, already started for the stills made as videos were stored).
   */
  stills?: boolean | Launch;
}

/** Strings as UTF-8 buffers of about `size` characters: a write per buffer, not per piece. */
function* utf8Chunks(pieces: readonly string[], size = 256 * 1024): Generator<Buffer> {
  let batch: string[] = [];
  let length = 0;
  for (const piece of pieces) {
    batch.push(piece);
    length += piece.length;
    if (length >= size) {
      yield Buffer.from(batch.join(""), "utf8");
      batch = [];
      length = 0;
    }
  }
  if (length > 0) yield Buffer.from(batch.join(""), "utf8");
}

/** The reports' folder in the sink: a shard's go to `reports/shards/I-of-N`. */
export function reportsFolder(shard?: { index: number; total: number }): string {
  return shard ? `reports/shards/${shard.index}-of-${shard.total}` : "reports";
}

/** Writes the four reports beside the outputs, and the summary for GitHub Actions when asked. */
export async function writeReports(
  sink: Sink,
  report: Report,
  env: NodeJS.ProcessEnv,
  options: WriteReportsOptions = {},
): Promise<string[]> {
  const folder = options.folder ?? "reports";
  const uris = [
    await sink.writeText(`${folder}/report.json`, reportJson(report), "application/json"),
    await sink.writeText(`${folder}/report.md`, reportMarkdown(report), "text/markdown"),
    await sink.writeText(`${folder}/junit.xml`, junitXml(report), "application/xml"),
  ];
  const { input, warnings } = await pageInput(sink, report, {
    jobs: options.jobs ?? [],
    folder,
    picksFile: options.manifestPath ? picksPath(options.manifestPath) : undefined,
    signal: options.signal,
    stills:
      options.stills === false
        ? false
        : typeof options.stills === "function"
          ? { launch: options.stills }
          : undefined,
  });
  for (const w of warnings) options.onWarning?.(w);
  // Streamed, never joined: with a still per video the page is tens of MB, and one string of it
  // (two bytes a character once any character is not Latin-1) was a run's peak of memory.
  const page = Readable.from(utf8Chunks(reviewPageParts(input)));
  const written = await sink.write(`${folder}/report.html`, page, {
    contentType: "text/html; charset=utf-8",
  });
  uris.push(written.uri);
  if (env.GITHUB_STEP_SUMMARY && options.stepSummary !== false)
    await appendStepSummary(env.GITHUB_STEP_SUMMARY, report);
  return uris;
}
