// `clapper tasks ...`: look at (and cancel) what a run left behind, on both services.
import { ClapperApiError, isUnavailable, NotFoundError } from "../../../api/index.js";
import {
  type Kind,
  type ServiceClients,
  type ServiceTask,
  serviceFor,
  type TaskService,
} from "../../../services/index.js";
import type { Listed } from "../../command.js";
import { ExitError } from "../../errors.js";
import { ExitCode } from "../../exit-code.js";
import { date, table } from "../../output.js";
import { ENDED, outcomeOf, SPEECH_STATUSES, VIDEO_STATUSES } from "./statuses.js";

export { TASK_STATUSES } from "./statuses.js";

export type TaskKind = Kind;

export interface TasksOptions {
  clients: ServiceClients;
  signal?: AbortSignal;
}

/** One row for both kinds of task. */
export interface TaskRow {
  kind: TaskKind;
  id: string;
  status: string;
  created_at: number;
  detail: string;
  points?: number;
  error?: string;
  url?: string;
}

function rowOf(service: TaskService, t: ServiceTask): TaskRow {
  const points = service.statedCost(t);
  const error = service.errorMessage(t);
  const url = service.resultUrl(t);
  return {
    kind: service.kind,
    id: service.id(t),
    status: service.status(t),
    created_at: service.createdAt(t),
    detail: service.detail(t),
    ...(points !== undefined ? { points } : {}),
    ...(error ? { error } : {}),
    ...(url ? { url } : {}),
  };
}

/** Both services, in the order they are listed and asked. */
const KINDS: readonly Kind[] = ["video", "speech"];

export async function listTasks(
  o: TasksOptions & { kind?: TaskKind; status?: string; limit: number },
): Promise<Listed<TaskRow>> {
  if (o.status !== undefined && !VIDEO_STATUSES.has(o.status) && !SPEECH_STATUSES.has(o.status)) {
    const known = [...new Set([...VIDEO_STATUSES, ...SPEECH_STATUSES])].join(", ");
    throw new ExitError(ExitCode.Usage, `--status must be one of ${known}, got ${JSON.stringify(o.status)}`);
  }
  if (!(Number.isInteger(o.limit) && o.limit > 0)) {
    throw new ExitError(ExitCode.Usage, `--limit must be a positive whole number, got ${o.limit}`);
  }
  const opts = o.signal ? { signal: o.signal } : {};
  const rows: TaskRow[] = [];
  const warnings: string[] = [];
  for (const service of (o.kind ? [o.kind] : KINDS).map(serviceFor)) {
    if (o.status !== undefined && !service.statuses.has(o.status)) continue;
    const listed = await service.listNewest(o.clients, o.status, o.limit, opts);
    for (const t of listed.items) rows.push(rowOf(service, t));
    if (listed.warning) warnings.push(listed.warning);
  }
  return { items: rows.sort((a, b) => b.created_at - a.created_at).slice(0, o.limit), warnings };
}

/** Asks the named service, or both in turn when the kind is not given. */
async function eitherKind<T>(
  kind: TaskKind | undefined,
  id: string,
  ask: (service: TaskService) => Promise<T>,
): Promise<T> {
  if (kind) return ask(serviceFor(kind));
  for (const service of KINDS.map(serviceFor)) {
    try {
      return await ask(service);
    } catch (error) {
      if (!(error instanceof NotFoundError)) throw error;
    }
  }
  throw new ExitError(ExitCode.Failed, `no video or speech task ${id}`);
}

export async function getTask(o: TasksOptions & { id: string; kind?: TaskKind }): Promise<TaskRow> {
  const opts = o.signal ? { signal: o.signal } : {};
  return eitherKind(o.kind, o.id, async (service) =>
    rowOf(service, await service.get(o.clients, o.id, opts)),
  );
}

/** What `tasks cancel` did: cancelled, accepted and stopping, or nothing to do (it had ended). */
export interface CancelledTask {
  kind: TaskKind;
  id: string;
  status: string;
  outcome: "cancelled" | "stopping" | "ended";
}

/** The service answered and said no (not: it could not be reached, or would not serve). */
function refusal(error: unknown): boolean {
  return error instanceof ClapperApiError && error.status !== undefined && !isUnavailable(error);
}

export async function cancelTask(o: TasksOptions & { id: string; kind?: TaskKind }): Promise<CancelledTask> {
  const opts = o.signal ? { signal: o.signal } : {};
  return eitherKind<CancelledTask>(o.kind, o.id, async (service) => {
    const kind = service.kind;
    try {
      const { status } = await service.cancel(o.clients, o.id, opts);
      return { kind, id: o.id, status, outcome: outcomeOf(status) };
    } catch (error) {
      // Refused: a task that had ended has nothing to cancel, which is no failure; one past
      // cancelling (a line already generating) is, and says so. A service out of reach is neither.
      if (error instanceof NotFoundError || !refusal(error)) throw error;
      const status = service.status(await service.get(o.clients, o.id, opts));
      if (ENDED.has(status)) return { kind, id: o.id, status, outcome: "ended" };
      throw error;
    }
  });
}

export function renderCancelled(r: CancelledTask): string {
  const at = `${r.kind} task ${r.id}`;
  if (r.outcome === "cancelled") return `${at}: cancelled`;
  if (r.outcome === "ended") return `${at}: had already ended (${r.status}); nothing to cancel`;
  return `${at}: cancel accepted; it was ${r.status} on an execution node and stops shortly (look again with clapper tasks get ${r.id})`;
}

export function renderTasks(rows: readonly TaskRow[]): string {
  if (rows.length === 0) return "no tasks";
  return table(rows, [
    { header: "KIND", value: (r) => r.kind },
    { header: "TASK_ID", value: (r) => r.id },
    { header: "STATUS", value: (r) => r.status },
    { header: "CREATED", value: (r) => date(r.created_at) },
    { header: "DETAIL", value: (r) => r.detail },
    { header: "ERROR", value: (r) => r.error },
  ]);
}

export function renderTask(r: TaskRow): string {
  const lines = [
    `kind: ${r.kind}`,
    `id: ${r.id}`,
    `status: ${r.status}`,
    `created: ${date(r.created_at)}`,
    `detail: ${r.detail}`,
  ];
  if (r.points !== undefined) lines.push(`points: ${r.points}`);
  if (r.error) lines.push(`error: ${r.error}`);
  if (r.url) lines.push(`result: ${r.url}`);
  return lines.join("\n");
}
