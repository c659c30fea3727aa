// The metrics file (for node_exporter's textfile collector, or anything that reads Prometheus'
// text format from a file) and the last success that must outlive a failed run.
//
// The file is replaced whole: written under a temporary name in the same folder, then renamed, so
// a collector reading at any moment sees the last file or the next, never half of one.
import { randomBytes } from "node:crypto";
import { open, readFile, rename, unlink, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { z } from "zod";

/** A metrics file or a kept success this large is not one clapper wrote. */
const MAX_READ_BYTES = 1024 * 1024;

export async function replaceFile(path: string, text: string): Promise<void> {
  const temp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  try {
    await writeFile(temp, text, { mode: 0o644 });
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => {});
    throw error;
  }
}

/** A file's text when it exists and is small enough; undefined otherwise. */
async function readSmall(path: string): Promise<string | undefined> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(path, "r");
    const { size } = await handle.stat();
    if (size > MAX_READ_BYTES) return undefined;
    return await readFile(handle, "utf8");
  } catch {
    return undefined;
  } finally {
    await handle?.close();
  }
}

/** A label value as the text format writes it (backslash, quote and newline escaped). */
function escapeLabel(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

/** The run's last success in an earlier metrics file (seconds since the epoch). */
export async function lastSuccessInFile(path: string, run: string): Promise<number | undefined> {
  const text = await readSmall(path);
  if (text === undefined) return undefined;
  const label = `run="${escapeLabel(run)}"`;
  for (const line of text.split("\n")) {
    if (!line.startsWith("clapper_last_success_timestamp_seconds{") || !line.includes(label)) continue;
    const value = Number(
      line
        .slice(line.lastIndexOf("}") + 1)
        .trim()
        .split(/\s+/)[0],
    );
    if (Number.isFinite(value) && value > 0) return value;
  }
  return undefined;
}

const Kept = z.object({ last_success: z.number().positive().finite() });

/** Beside the state: the last success, for runs without a metrics file to read it back from. */
export function keptSuccessPath(statePath: string): string {
  return join(dirname(statePath), "last-success.json");
}

export async function readKeptSuccess(path: string): Promise<number | undefined> {
  const text = await readSmall(path);
  if (text === undefined) return undefined;
  try {
    const parsed = Kept.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data.last_success : undefined;
  } catch {
    return undefined;
  }
}

export async function keepSuccess(path: string, seconds: number): Promise<void> {
  await replaceFile(path, `${JSON.stringify({ last_success: seconds })}\n`);
}
