// Every endpoint of the video generation service as a typed method over the one HTTP layer.
import type { z } from "zod";
import {
  formatIssue,
  issuesFromZod,
  type PointsPackage,
  PointsPackageList,
  PointsSummary,
} from "./common.js";
import { BusinessError, ConflictError, ValidationError } from "./errors.js";
import type { HttpClient } from "./http.js";
import { type ListResult, type ListWalk, walkByPage, wholeList } from "./paginate.js";
import {
  type Skill,
  SkillDeleteResponse,
  SkillList,
  SkillResponse,
  SkillWriteRequest,
  VideoCancelResponse,
  VideoCreateResponse,
  type VideoModel,
  type VideoStatus,
  type VideoTask,
  VideoTaskList,
  VideoTaskResponse,
} from "./video.js";
import { VideoCreateRequest } from "./video-request.js";

export interface CallOptions {
  signal?: AbortSignal;
  /**
   * Gives the request up only while it is still waiting for its first turn: once an attempt has
   * left, only `signal` stops it (a create that may have reached the service must be answered).
   */
  queueSignal?: AbortSignal;
  /** Among writes waiting for their turn, a higher rank goes first (see RequestGate.run). */
  rank?: number;
}

/** Checks a request against its schema before anything is sent: a refused request costs nothing. */
export function checkRequest<S extends z.ZodType>(schema: S, body: unknown, what: string): z.output<S> {
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const detail = issuesFromZod(parsed.error).map(formatIssue).join("; ");
  throw new ValidationError(`${what}: invalid request: ${detail}`, undefined, undefined, "invalid_request");
}

interface VideoListFilter {
  status?: VideoStatus;
  model?: VideoModel;
  pageSize?: number;
}

export class VideoClient {
  constructor(private readonly http: HttpClient) {}

  /** Creates a task. Pass a stable `idempotencyKey` so a repeated create returns the same task. */
  async createTask(
    body: z.input<typeof VideoCreateRequest>,
    opts: CallOptions & { idempotencyKey?: string } = {},
  ): Promise<string> {
    const what = "create video task";
    const request = checkRequest(VideoCreateRequest, body, what);
    const res = await this.http.request({
      method: "POST",
      path: "/vid/v2/video_generation",
      body: request,
      schema: VideoCreateResponse,
      policy: "create",
      ...(opts.idempotencyKey !== undefined ? { idempotencyKey: opts.idempotencyKey } : {}),
      ...signalOf(opts),
      what,
    });
    return res.task_id;
  }

  async getTask(taskId: string, opts: CallOptions = {}): Promise<VideoTask> {
    const res = await this.http.request({
      method: "GET",
      path: `/vid/v2/query/video_generation/${encodeURIComponent(taskId)}`,
      schema: VideoTaskResponse,
      policy: "read",
      ...signalOf(opts),
      what: `get video task ${taskId}`,
    });
    return res.task;
  }

  /** One page (1-based), for callers that manage paging themselves. */
  async listPage(
    pageNum: number,
    filter: VideoListFilter = {},
    opts: CallOptions = {},
  ): Promise<VideoTaskList> {
    return this.http.request({
      method: "GET",
      path: "/vid/v2/query/video_generation",
      query: {
        page_num: pageNum,
        page_size: filter.pageSize ?? 100,
        "filter.status": filter.status,
        "filter.model": filter.model,
      },
      schema: VideoTaskList,
      policy: "read",
      ...signalOf(opts),
      what: "list video tasks",
    });
  }

  /**
   * Every task of the organization matching the filter, each once, page by page, in the order the
   * service lists them (the spec states none); the walk ends saying whether it saw them all.
   */
  listTasks(filter: VideoListFilter = {}, opts: CallOptions = {}): ListWalk<VideoTask> {
    // The page size is a detail of the walk: kept within what the service accepts (1 to 100).
    const pageSize = Math.min(100, Math.max(1, Math.floor(filter.pageSize ?? 100)));
    return walkByPage(
      (page, size) => this.listPage(page, { ...filter, pageSize: size }, opts),
      (task) => task.id,
      pageSize,
    );
  }

  /** `status` may still be `running`: the task stops shortly after; query until `cancelled`. */
  async cancelTask(taskId: string, opts: CallOptions = {}): Promise<z.output<typeof VideoCancelResponse>> {
    try {
      return await this.http.request({
        method: "DELETE",
        path: `/vid/v2/video_generation/${encodeURIComponent(taskId)}`,
        schema: VideoCancelResponse,
        policy: "read",
        ...signalOf(opts),
        what: `cancel video task ${taskId}`,
      });
    } catch (error) {
      // A retried cancel whose first attempt worked is refused as "already ended": look before failing.
      if (!(error instanceof BusinessError || error instanceof ConflictError)) throw error;
      const task = await this.getTask(taskId, opts);
      if (task.status === "cancelled") return { task_id: taskId, action: "delete", status: "cancelled" };
      throw error;
    }
  }

  /** Not paged: one answer, each package once, `complete` when it holds as many as its `total`. */
  async listPackages(opts: CallOptions = {}): Promise<ListResult<PointsPackage>> {
    const list = await this.http.request({
      method: "GET",
      path: "/vid/v2/query/point_packages",
      schema: PointsPackageList,
      policy: "read",
      ...signalOf(opts),
      what: "list points packages",
    });
    return wholeList(list, (p) => p.id);
  }

  async pointsSummary(opts: CallOptions = {}): Promise<PointsSummary> {
    return this.http.request({
      method: "GET",
      path: "/vid/v2/query/point_usage_summary",
      schema: PointsSummary,
      policy: "read",
      ...signalOf(opts),
      what: "get points balance",
    });
  }

  /** Official and custom skills, each once, page by page; the walk ends saying whether it saw them all. */
  listSkills(filter: { keyword?: string } = {}, opts: CallOptions = {}): ListWalk<Skill> {
    return walkByPage(
      (page, size) =>
        this.http.request({
          method: "GET",
          path: "/vid/v2/skills",
          query: { page_num: page, page_size: size, keyword: filter.keyword },
          schema: SkillList,
          policy: "read",
          ...signalOf(opts),
          what: "list skills",
        }),
      (skill) => skill.id,
    );
  }

  async createSkill(body: z.input<typeof SkillWriteRequest>, opts: CallOptions = {}): Promise<Skill> {
    const what = "create skill";
    const res = await this.http.request({
      method: "POST",
      path: "/vid/v2/skills",
      body: checkRequest(SkillWriteRequest, body, what),
      schema: SkillResponse,
      // No idempotency on this endpoint: a retry after an ambiguous failure could create a twin.
      policy: "write",
      ...signalOf(opts),
      what,
    });
    return res.skill;
  }

  /** Replaces name, description and content: omitted strings would be stored empty. */
  async updateSkill(
    skillId: string,
    body: z.input<typeof SkillWriteRequest>,
    opts: CallOptions = {},
  ): Promise<Skill> {
    const what = `update skill ${skillId}`;
    const res = await this.http.request({
      method: "PUT",
      path: `/vid/v2/skills/${encodeURIComponent(skillId)}`,
      body: checkRequest(SkillWriteRequest, body, what),
      schema: SkillResponse,
      // A full replacement: repeating it leaves the same result.
      policy: "read",
      ...signalOf(opts),
      what,
    });
    return res.skill;
  }

  async deleteSkill(skillId: string, opts: CallOptions = {}): Promise<string> {
    const res = await this.http.request({
      method: "DELETE",
      path: `/vid/v2/skills/${encodeURIComponent(skillId)}`,
      schema: SkillDeleteResponse,
      policy: "write",
      ...signalOf(opts),
      what: `delete skill ${skillId}`,
    });
    return res.skill_id;
  }
}

export function signalOf(opts: CallOptions): {
  signal?: AbortSignal;
  queueSignal?: AbortSignal;
  rank?: number;
} {
  return {
    ...(opts.signal ? { signal: opts.signal } : {}),
    ...(opts.queueSignal ? { queueSignal: opts.queueSignal } : {}),
    ...(opts.rank !== undefined ? { rank: opts.rank } : {}),
  };
}
