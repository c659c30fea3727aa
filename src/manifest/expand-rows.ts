// Every row of a manifest into jobs, shots first (a line names its shot): defaults read once, ids
// checked to be unique within their kind, and output files checked to be each job's own.
import type { DefaultsRead, ExpandContext } from "./expand.js";
import { expandLine } from "./expand-line.js";
import { expandShot } from "./expand-shot.js";
import { readFields } from "./fields.js";
import type { Job } from "./job.js";
import { MaterialResolver } from "./materials.js";
import { OutputCheck } from "./outputs.js";
import type { RawRow, RowKind } from "./rows.js";
import { VoiceResolver } from "./voices.js";

export async function expandRows(ctx: ExpandContext): Promise<Job[]> {
  const { manifest: raw, problems } = ctx;
  const readDefaults = (kind: RowKind): DefaultsRead => {
    const before = problems.errorCount;
    const read = readFields(kind, raw.defaults[kind], raw.display, problems, { allowId: false });
    return { ...read, broken: problems.errorCount > before };
  };
  const shotDefaults = readDefaults("shot");
  const lineDefaults = readDefaults("line");
  const materials = new MaterialResolver(raw.dir);
  const voices = new VoiceResolver(raw.dir);

  const jobs: Job[] = [];
  const outputs = new OutputCheck(jobs, problems);
  const keep = (row: RawRow, expanded: Job[]) => {
    if (expanded.length > 0) outputs.add(expanded, row.file, () => idOf(row)?.line ?? row.line);
  };
  const shotIds = new Ids("shot", ctx);
  const shotRows = raw.shots.map((row) => ({ row, duplicate: shotIds.duplicate(row) }));
  for (const { row, duplicate } of shotRows) {
    const expanded = await expandShot(row, ctx, materials, shotDefaults);
    if (!duplicate) keep(row, expanded);
  }
  const lineIds = new Ids("line", ctx);
  const shotSet = shotIds.set();
  for (const row of raw.lines) {
    const isDuplicate = lineIds.duplicate(row);
    const expanded = await expandLine(row, ctx, voices, shotSet, lineDefaults);
    if (!isDuplicate) keep(row, expanded);
  }
  return jobs;
}

/** The row's id as its job id will spell it (YAML may type `id: 12` as a number); undefined when unusable. */
function idOf(row: RawRow): { id: string; line: number } | undefined {
  const located = row.fields.get("id");
  const id = located?.value;
  return typeof id === "string" || typeof id === "number"
    ? { id: String(id), line: located?.line ?? row.line }
    : undefined;
}

/** The ids of one kind of row, and where each was first seen. */
class Ids {
  private readonly seen = new Map<string, string>();

  constructor(
    private readonly kind: RowKind,
    private readonly ctx: ExpandContext,
  ) {}

  /** True when the id was seen before (reported here); the row is still checked, but makes no job. */
  duplicate(row: RawRow): boolean {
    const found = idOf(row);
    if (!found) return false;
    const first = this.seen.get(found.id);
    if (first) {
      this.ctx.problems.error(
        row.file,
        found.line,
        "id",
        `duplicate ${this.kind} id ${JSON.stringify(found.id)} (first at ${first})`,
      );
      return true;
    }
    this.seen.set(found.id, `${row.file}:${found.line}`);
    return false;
  }

  set(): Set<string> {
    return new Set(this.seen.keys());
  }
}
