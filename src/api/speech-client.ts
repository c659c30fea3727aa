// Every endpoint of the text-to-speech service as a typed method over the one HTTP layer.
import { randomUUID } from "node:crypto";
import type { z } from "zod";
import { BusinessError, ConflictError } from "./errors.js";
import type { HttpClient } from "./http.js";
import { type ListResult, type ListWalk, walkByOffset, wholeList } from "./paginate.js";
import {
  type Asset,
  AssetResponse,
  Pricing,
  SpeechCancelResponse,
  SpeechCreateResponse,
  SpeechDeleteResponse,
  type SpeechStatus,
  type SpeechTask,
  SpeechTaskList,
  SpeechTaskResponse,
  UploadTicket,
  type Voice,
  VoiceDeleteResponse,
  type VoiceKind,
  VoiceList,
  VoiceResponse,
} from "./speech.js";
import {
  AssetRegisterRequest,
  CustomVoiceCreateRequest,
  SpeechCreateRequest,
  UploadUrlRequest,
} from "./speech-request.js";
import { type CallOptions, checkRequest, signalOf } from "./video-client.js";

interface SpeechListFilter {
  taskId?: string;
  statuses?: readonly SpeechStatus[];
  startTime?: number;
  endTime?: number;
  limit?: number;
}

export class SpeechClient {
  constructor(private readonly http: HttpClient) {}

  /** The service requires an Idempotency-Key here; pass a stable one to make the create repeatable. */
  async createTask(
    body: z.input<typeof SpeechCreateRequest>,
    opts: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<string> {
    const what = "create speech task";
    const res = await this.http.request({
      method: "POST",
      path: "/audio/v1/speech/jobs",
      body: checkRequest(SpeechCreateRequest, body, what),
      schema: SpeechCreateResponse,
      policy: "create",
      idempotencyKey: opts.idempotencyKey ?? randomUUID(),
      ...signalOf(opts),
      what,
    });
    return res.task_id;
  }

  async getTask(taskId: string, opts: CallOptions = {}): Promise<SpeechTask> {
    const res = await this.http.request({
      method: "GET",
      path: `/audio/v1/speech/jobs/${encodeURIComponent(taskId)}`,
      schema: SpeechTaskResponse,
      policy: "read",
      ...signalOf(opts),
      what: `get speech task ${taskId}`,
    });
    return res.task;
  }

  async listPage(
    offset: number,
    filter: SpeechListFilter = {},
    opts: CallOptions = {},
  ): Promise<SpeechTaskList> {
    return this.http.request({
      method: "GET",
      path: "/audio/v1/speech/jobs",
      query: {
        offset,
        limit: filter.limit ?? 100,
        task_id: filter.taskId,
        statuses: filter.statuses,
        start_time: filter.startTime,
        end_time: filter.endTime,
      },
      schema: SpeechTaskList,
      policy: "read",
      ...signalOf(opts),
      what: "list speech tasks",
    });
  }

  /**
   * Every task matching the filter, newest first, each once; `limit` is the page size asked for.
   * The walk ends saying whether it saw them all.
   */
  listTasks(filter: SpeechListFilter = {}, opts: CallOptions = {}): ListWalk<SpeechTask> {
    // The page size is a detail of the walk: kept within what the service accepts (1 to 100).
    const limit = Math.min(100, Math.max(1, Math.floor(filter.limit ?? 100)));
    return walkByOffset(
      (offset) => this.listPage(offset, { ...filter, limit }, opts),
      (task) => task.task_id,
    );
  }

  async cancelTask(taskId: string, opts: CallOptions = {}): Promise<z.output<typeof SpeechCancelResponse>> {
    try {
      return await this.http.request({
        method: "POST",
        path: `/audio/v1/speech/jobs/${encodeURIComponent(taskId)}/cancel`,
        schema: SpeechCancelResponse,
        policy: "read",
        ...signalOf(opts),
        what: `cancel speech task ${taskId}`,
      });
    } catch (error) {
      // A retried cancel whose first attempt worked is refused as "already ended": look before failing.
      if (!(error instanceof BusinessError || error instanceof ConflictError)) throw error;
      const task = await this.getTask(taskId, opts);
      if (task.status === "cancelled") return { task_id: taskId, status: "cancelled" };
      throw error;
    }
  }

  async deleteTask(taskId: string, opts: CallOptions = {}): Promise<void> {
    await this.http.request({
      method: "DELETE",
      path: `/audio/v1/speech/jobs/${encodeURIComponent(taskId)}`,
      schema: SpeechDeleteResponse,
      policy: "write",
      ...signalOf(opts),
      what: `delete speech task ${taskId}`,
    });
  }

  /** Not paged: one answer, each voice once, `complete` when it holds as many as its `total`. */
  async listVoices(kind: VoiceKind = "preset", opts: CallOptions = {}): Promise<ListResult<Voice>> {
    const res = await this.http.request({
      method: "GET",
      path: "/audio/v1/voices",
      query: { kind },
      schema: VoiceList,
      policy: "read",
      ...signalOf(opts),
      what: `list ${kind} voices`,
    });
    return wholeList(res, (v) => v.voice_id);
  }

  async createVoice(
    body: z.input<typeof CustomVoiceCreateRequest>,
    opts: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<Voice> {
    const what = "create custom voice";
    const res = await this.http.request({
      method: "POST",
      path: "/audio/v1/voices",
      body: checkRequest(CustomVoiceCreateRequest, body, what),
      schema: VoiceResponse,
      policy: "create",
      idempotencyKey: opts.idempotencyKey ?? randomUUID(),
      ...signalOf(opts),
      what,
    });
    return res.voice;
  }

  async deleteVoice(voiceId: string, opts: CallOptions = {}): Promise<void> {
    await this.http.request({
      method: "DELETE",
      path: `/audio/v1/voices/${encodeURIComponent(voiceId)}`,
      schema: VoiceDeleteResponse,
      policy: "write",
      ...signalOf(opts),
      what: `delete voice ${voiceId}`,
    });
  }

  async requestUpload(body: z.input<typeof UploadUrlRequest>, opts: CallOptions = {}): Promise<UploadTicket> {
    const what = "request upload URL";
    return this.http.request({
      method: "POST",
      path: "/audio/v1/upload_urls",
      body: checkRequest(UploadUrlRequest, body, what),
      schema: UploadTicket,
      // A second ticket is harmless: an unused upload record is never registered.
      policy: "read",
      ...signalOf(opts),
      what,
    });
  }

  async registerAsset(body: z.input<typeof AssetRegisterRequest>, opts: CallOptions = {}): Promise<Asset> {
    const what = "register reference audio";
    const res = await this.http.request({
      method: "POST",
      path: "/audio/v1/assets",
      body: checkRequest(AssetRegisterRequest, body, what),
      schema: AssetResponse,
      // One upload record registers once, so a blind retry could fail on its own success.
      policy: "write",
      ...signalOf(opts),
      what,
    });
    return res.asset;
  }

  async pricing(opts: CallOptions = {}): Promise<Pricing> {
    return this.http.request({
      method: "GET",
      path: "/audio/v1/pricing",
      schema: Pricing,
      policy: "read",
      ...signalOf(opts),
      what: "get speech pricing",
    });
  }
}
