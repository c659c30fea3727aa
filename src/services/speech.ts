// The speech service behind the one service shape (src/services/index.ts).
import { incompleteWarning, takeList } from "../api/index.js";
import { SPEECH_STATUSES, type SpeechStatus, type SpeechTask } from "../api/speech.js";
import { linePoints } from "../budget/pricing.js";
import type { SpeechJob } from "../manifest/index.js";
import { shotOf } from "../manifest/job.js";
import { expectedSpeechMs } from "../tracking/durations.js";
import type { TaskService } from "./index.js";
import { MaterialError } from "./staging.js";

export type VoiceRef = { source: "custom"; voice_id: string } | { source: "asset"; asset_id: string };

export type SpeechService = TaskService<SpeechJob, SpeechTask>;

export const speechService: SpeechService = {
  kind: "speech",
  row: "line",
  pricedAtCreate: true,
  contentType: "audio/wav",
  retention: " (results are kept 7 days)",

  estimate: (job, price) => linePoints(job.request.text, price),
  nominalMs: (job) => expectedSpeechMs(job.request.text, job.request.speed ?? 1),
  body: (job, inputs) => Promise.resolve(speechBody(job, inputs.voiceRefs)),
  create: (clients, body, call) => clients.speech.createTask(body as never, call),
  get: (clients, taskId, call) => clients.speech.getTask(taskId, call),
  getPaid: (clients, taskId, signal) => clients.speech.getTask(taskId, { signal }),
  cancel: (clients, taskId, call) => clients.speech.cancelTask(taskId, call),
  statuses: new Set(SPEECH_STATUSES),
  async listNewest(clients, status, limit, call) {
    const filter = status ? { statuses: [status as SpeechStatus] } : {};
    const walk = clients.speech.listTasks({ ...filter, limit: Math.min(100, limit) }, call);
    const { items, end } = await takeList(walk, limit);
    return { items, ...(end && !end.complete ? { warning: incompleteWarning("speech tasks", end) } : {}) };
  },
  track: (trackers, taskId, createdAt, onUpdate, hint) =>
    trackers.speech.track(taskId, createdAt, onUpdate, hint),
  // No hint for a line: its first look is at once, by one list for all the lines created
  // together, and the early looks find the pace of a service faster than nominal.
  trackHint: () => undefined,

  id: (task) => task.task_id,
  status: (task) => task.status,
  createdAt: (task) => task.created_at,
  resultUrl: (task) => task.output_url,
  detail: (task) => `attempt ${task.attempt}/${task.max_attempts}`,
  errorMessage: (task) => task.error_message || undefined,
  failure: (task) => ({ code: "task_failed", message: task.error_message || "the task failed" }),
  // A speech task states its own cost from the start.
  statedCost: (task) => task.point_cost,
  taskCost: (task) => (validCost(task.point_cost) ? task.point_cost : undefined),
  cost: (_job, task) => speechService.taskCost(task),
  requested: () => undefined,
  delivered: () => undefined,
  fallbackPoints: () => undefined,
  resultLimit: (job) => ({ kind: "speech", countedChars: job.countedChars, speed: job.request.speed ?? 1 }),
  expectedSeconds: () => undefined,
  shot: shotOf,
};

/** A task cost the service may state: a whole number, not negative, not beyond reason. */
export function validCost(cost: number): boolean {
  return Number.isInteger(cost) && cost >= 0 && cost <= 100_000_000;
}

function speechBody(job: SpeechJob, voices: Map<string, VoiceRef>) {
  const voice =
    job.voice.source === "file"
      ? voices.get(voiceHash(job))
      : { source: job.voice.source, voice_id: job.voice.voiceId };
  if (!voice) throw new MaterialError(`${job.id}: the reference voice was not uploaded`);
  // save_voice_as made the custom voice before the run: the task uses it and saves nothing more.
  const {
    save_voice: _save,
    voice_name: _name,
    ...request
  } = job.request as typeof job.request & { save_voice?: boolean; voice_name?: string };
  return { ...request, voice };
}

/** What a reference voice file is uploaded once per: its content, and the name it is saved as. */
export function voiceHash(job: SpeechJob): string {
  return job.voice.source === "file"
    ? `${job.voice.sha256}${job.voice.saveAs ? `:${job.voice.saveAs}` : ""}`
    : "";
}
