// The video generation service: tasks, their simulated stages, points, callbacks and skills.
// Tasks advance lazily: every read first moves a task through the stages whose time has passed,
// so 10,000 stored tasks cost no timers. Tasks with a callback_url get one timer for their next change.
import { type Issue, issuesFromZod } from "../api/common.js";
import { basePoints, resolutionTier, SkillWriteRequest, UPSCALE_TIERS, videoPoints } from "../api/video.js";
import {
  materialKind,
  type VideoCreateRequest as VideoCreate,
  VideoCreateRequest,
} from "../api/video-request.js";
import type { CallbackSender } from "./callbacks.js";
import { ApiError, BusinessError, notFound, RetCode } from "./http.js";
import { checkResolvedHost, loadMaterial, type Material, type MaterialKind } from "./materials.js";
import { NO_PAGING_FAULTS, numberedPage, type PagingFaults } from "./paging.js";
import { parseIdempotencyKey } from "./protocol/idempotency.js";
import {
  inputImageCount,
  outputSize,
  parseSkillListQuery,
  parseVideoListQuery,
  requestUrlIssues,
  type Size,
} from "./protocol/video.js";
import type { Org, Outcome, SkillRecord, Stage, VideoRecord, World } from "./world.js";

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
/** How long a result URL stays valid (simulated; scaled). */
const RESULT_URL_TTL_MS = 24 * 3600 * 1000;
/** A running task that is being cancelled stops after this long (simulated): the node must notice. */
const CANCEL_DELAY_MS = 2000;

function markerOutcome(text: string): { outcome: Outcome; slow: boolean } {
  const slow = text.includes("[sandbox:slow]");
  if (text.includes("[sandbox:fail]")) return { outcome: "fail", slow };
  if (text.includes("[sandbox:upscale-fail]")) return { outcome: "upscale-fail", slow };
  return { outcome: "succeed", slow };
}

/** Simulated stage lengths in milliseconds: about a minute for a short native video, more with upscaling. */
function stagePlan(req: VideoCreate, slow: boolean): Array<{ name: Stage["name"]; ms: number }> {
  const duration = req.duration ?? 5;
  const slowFactor = slow ? 10 : 1;
  // The lite model works faster; it does not wait less in the queue. `[sandbox:slow]` stretches every stage.
  const factor = slowFactor * (req.model === "vid-h3-lite" ? 0.6 : 1);
  const plan: Array<{ name: Stage["name"]; ms: number }> = [{ name: "queue", ms: 5000 }];
  if (req.use_context_ir === true) plan.push({ name: "prompt_optimization", ms: 8000 });
  plan.push({ name: "generation", ms: 30_000 + 5000 * duration });
  plan.push({ name: "upload", ms: 2000 + 100 * duration });
  if (UPSCALE_TIERS.includes(resolutionTier(req.resolution))) {
    plan.push({ name: "upscale", ms: 10_000 + 2000 * duration });
  }
  return plan.map((s) => ({ name: s.name, ms: s.ms * (s.name === "queue" ? slowFactor : factor) }));
}

export class VideoService {
  constructor(
    private readonly world: World,
    private readonly callbacks: CallbackSender,
  ) {}

  private readonly timers = new Map<string, NodeJS.Timeout>();

  // ---------- tasks ----------

  async create(org: Org, idempotencyHeader: string | undefined, body: unknown): Promise<{ task_id: string }> {
    const key = parseIdempotencyKey(idempotencyHeader, false);
    if (!key.ok) throw ApiError.badRequest(key.issue);
    const taskId = await org.idempotency.video.run(
      key.key,
      () => this.createNew(org, body),
      () => {
        this.world.stats.idempotent_replays += 1;
      },
    );
    return { task_id: taskId };
  }

  private async createNew(org: Org, body: unknown): Promise<string> {
    const parsed = VideoCreateRequest.safeParse(body);
    if (!parsed.success) throw ApiError.badRequest(issuesFromZod(parsed.error));
    const req = parsed.data;
    const allowPrivate = this.world.settings.allowPrivateUrls;

    // Literal addresses first, all at once; then names resolved (DNS) for the callback.
    const urlIssues = requestUrlIssues(req, { allowPrivate });
    if (urlIssues.length > 0) throw ApiError.badRequest(urlIssues);
    if (req.callback_url !== undefined) {
      const problem = await checkResolvedHost(new URL(req.callback_url).hostname, allowPrivate);
      if (problem) throw ApiError.badRequest({ path: ["callback_url"], message: problem });
    }
    if (req.skill_id !== undefined && !this.findSkill(org, req.skill_id)) {
      throw notFound("skill", req.skill_id);
    }

    const materials = await this.loadMaterials(req);
    const tier = resolutionTier(req.resolution);
    const duration = req.duration ?? 5;
    const ratio = req.ratio ?? "16:9";
    const size = outputSize(tier, ratio, adaptiveImage(req.content, materials));

    const cost = videoPoints(req.resolution, duration);
    // Tasks advance lazily: settle the ones that ended unobserved, or their reservations still count.
    this.syncAll(org);
    const allocation = org.ledger.reserve(cost);
    if (!allocation) {
      const { available_points } = this.summary(org);
      // Some downstream billing errors arrive as HTTP 200 with a non-zero RetCode; the spec allows it.
      throw new BusinessError(
        200,
        RetCode.insufficientPoints,
        `insufficient points: the task needs ${cost}, available ${available_points}`,
      );
    }

    const text = req.content.flatMap((c) => (c.type === "text" ? [c.text] : [])).join("\n");
    const { outcome, slow } = markerOutcome(text);
    const now = this.world.nowMs();
    let at = now;
    const stages = stagePlan(req, slow).map((s) => {
      at += this.world.scaled(s.ms);
      return { name: s.name, endMs: at };
    });
    const videoSeconds = [...materials.values()]
      .filter((m) => m.kind === "video")
      .reduce((sum, m) => sum + (m.seconds ?? 0), 0);
    const task: VideoRecord = {
      id: this.world.newId("vtask"),
      org: org.id,
      seq: this.world.nextSeq(),
      model: req.model,
      status: "queued",
      createdMs: now,
      updatedMs: now,
      tier,
      resolution: tier,
      duration,
      ratio,
      width: size.width,
      height: size.height,
      prompt: text,
      inputSeconds: Math.ceil(videoSeconds),
      inputImageCount: inputImageCount(req.content),
      useContextIr: req.use_context_ir === true,
      ...(req.callback_url !== undefined
        ? {
            callback: {
              url: req.callback_url,
              ...(req.callback_token ? { token: req.callback_token } : {}),
            },
          }
        : {}),
      cost,
      basePoints: basePoints(duration),
      allocation,
      stages,
      stageIndex: 0,
      outcome,
    };
    org.videos.set(task.id, task);
    org.activeVideos.add(task);
    this.world.stats.tasks_created.video += 1;
    this.emit(task, now);
    this.schedule(task);
    return task.id;
  }

  /** Fetches every material of the request; the result is keyed by the element's index in `content`. */
  private async loadMaterials(req: VideoCreate): Promise<Map<number, Material>> {
    const jobs: Array<Promise<{ index: number; material: Material } | { issue: Issue }>> = [];
    req.content.forEach((item, index) => {
      const kind: MaterialKind | undefined =
        item.type === "image_url"
          ? "image"
          : item.type === "video_url"
            ? "video"
            : item.type === "audio_url"
              ? "audio"
              : undefined;
      if (!kind || item.type === "text") return;
      const url =
        item.type === "image_url"
          ? item.image_url.url
          : item.type === "video_url"
            ? item.video_url.url
            : item.audio_url.url;
      jobs.push(
        loadMaterial(kind, url, ["content", index, item.type, "url"], {
          allowPrivate: this.world.settings.allowPrivateUrls,
        }).then((r) => ("material" in r ? { index, material: r.material } : r)),
      );
    });
    const results = await Promise.all(jobs);
    const issues = results.flatMap((r) => ("issue" in r ? [r.issue] : []));
    if (issues.length > 0) throw ApiError.badRequest(issues);
    return new Map(results.flatMap((r) => ("material" in r ? [[r.index, r.material] as const] : [])));
  }

  /** Moves a task through every stage boundary (and a pending cancel) up to now. */
  sync(task: VideoRecord, now = this.world.nowMs()): void {
    while (!TERMINAL.has(task.status)) {
      const stage = task.stages[task.stageIndex];
      const stageEnd = stage?.endMs ?? Number.POSITIVE_INFINITY;
      const cancelAt = task.cancelAtMs ?? Number.POSITIVE_INFINITY;
      const next = Math.min(stageEnd, cancelAt);
      if (next > now) return;
      if (cancelAt <= stageEnd) {
        this.finish(task, "cancelled", cancelAt);
        return;
      }
      if (!stage) return;
      task.stageIndex += 1;
      if (stage.name === "generation" && task.outcome === "fail") {
        task.error = {
          code: "generation_failed",
          message: "video generation failed ([sandbox:fail] marker)",
        };
        this.finish(task, "failed", stage.endMs);
        return;
      }
      if (stage.name === "upscale" && task.outcome === "upscale-fail") {
        // The native 768P video is delivered: its size is the 768P size of the same ratio (an
        // upscaled size is computed from the ratio, so the nearest native size is that ratio's).
        task.resolution = "768P";
        const native = outputSize("768P", "adaptive", { width: task.width, height: task.height });
        task.width = native.width;
        task.height = native.height;
      }
      if (stage.name === "queue") this.change(task, "running", stage.endMs);
      if (task.stageIndex >= task.stages.length) this.finish(task, "succeeded", stage.endMs);
    }
  }

  private change(task: VideoRecord, status: VideoRecord["status"], atMs: number): void {
    task.status = status;
    task.updatedMs = atMs;
    this.emit(task, atMs);
  }

  private finish(task: VideoRecord, status: "succeeded" | "failed" | "cancelled", atMs: number): void {
    const org = this.world.org(task.org);
    const consumed =
      status === "succeeded" ? (task.resolution === task.tier ? task.cost : task.basePoints) : 0;
    org.ledger.settle(task.allocation, consumed);
    org.activeVideos.delete(task);
    const timer = this.timers.get(task.id);
    if (timer) clearTimeout(timer);
    this.timers.delete(task.id);
    this.change(task, status, atMs);
  }

  private emit(task: VideoRecord, atMs: number): void {
    if (!task.callback) return;
    this.callbacks.push(task.callback.url, task.callback.token, { task: this.json(task, atMs) });
  }

  /** Only tasks with callbacks need a timer: nobody else can observe a change before the next read. */
  private schedule(task: VideoRecord): void {
    if (!task.callback || TERMINAL.has(task.status)) return;
    const nextStatusChange = task.status === "queued" ? task.stages[0]?.endMs : task.stages.at(-1)?.endMs;
    const candidates = [nextStatusChange, task.cancelAtMs].filter((v): v is number => v !== undefined);
    // A failing task ends at the end of generation, earlier than the last stage.
    const generation = task.stages.find((s) => s.name === "generation");
    if (task.outcome === "fail" && generation) candidates.push(generation.endMs);
    const at = Math.min(...candidates);
    const previous = this.timers.get(task.id);
    if (previous) clearTimeout(previous);
    const timer = setTimeout(
      () => {
        this.timers.delete(task.id);
        this.sync(task);
        this.schedule(task);
      },
      Math.max(0, at - this.world.nowMs()) + 1,
    );
    timer.unref();
    this.timers.set(task.id, timer);
  }

  json(task: VideoRecord, now = this.world.nowMs(), withUrl = true): Record<string, unknown> {
    const terminal = TERMINAL.has(task.status);
    const end = task.stages.at(-1)?.endMs ?? now;
    const succeeded = task.status === "succeeded";
    let url: string | undefined;
    if (succeeded && withUrl) {
      const expires = Math.ceil((now + this.world.scaled(RESULT_URL_TTL_MS)) / 1000);
      url = this.world.signedUrl(`/_media/videos/${task.id}.mp4`, expires);
    }
    return {
      id: task.id,
      model: task.model,
      status: task.status,
      ...(task.error ? { error: task.error } : {}),
      created_at: Math.floor(task.createdMs / 1000),
      updated_at: Math.floor(task.updatedMs / 1000),
      ...(url ? { content: { url } } : {}),
      resolution: task.resolution,
      duration: task.duration,
      ratio: task.ratio,
      task_type: "generation",
      modality: "video",
      estimated_remaining_seconds: terminal ? 0 : Math.max(1, Math.ceil((end - now) / 1000)),
      usage: {
        input_seconds: task.inputSeconds,
        input_image_count: task.inputImageCount,
        use_context_ir: task.useContextIr,
        ...(succeeded ? { total_seconds: task.duration, output_seconds: task.duration } : {}),
      },
    };
  }

  private task(org: Org, id: string): VideoRecord {
    const task = org.videos.get(id);
    if (!task) throw notFound("job", id);
    this.sync(task);
    return task;
  }

  get(org: Org, id: string): { task: Record<string, unknown> } {
    return { task: this.json(this.task(org, id)) };
  }

  /** The stored task, synced, for serving its media. */
  media(id: string): VideoRecord | undefined {
    for (const org of this.world.orgs.values()) {
      const task = org.videos.get(id);
      if (task) {
        this.sync(task);
        return task;
      }
    }
    return undefined;
  }

  list(
    org: Org,
    params: URLSearchParams,
    paging: PagingFaults = NO_PAGING_FAULTS,
  ): { items: Record<string, unknown>[]; total: number } {
    const query = parseVideoListQuery(params);
    if (!query.ok) throw ApiError.badRequest(query.issues);
    const { page_num, page_size, status, model } = query.value;
    this.syncAll(org);
    const matching: VideoRecord[] = [];
    for (const task of org.videos.values()) {
      if (status !== undefined && task.status !== status) continue;
      if (model !== undefined && task.model !== model) continue;
      matching.push(task);
    }
    matching.sort((a, b) => b.seq - a.seq);
    const now = this.world.nowMs();
    // List items never carry content.url: the single-task query is where the URL comes from.
    const items = numberedPage(matching, page_num, page_size, paging).map((t) => this.json(t, now, false));
    return { items, total: matching.length };
  }

  cancel(org: Org, id: string): { task_id: string; action: "delete"; status: string } {
    const task = this.task(org, id);
    if (TERMINAL.has(task.status)) {
      throw new BusinessError(400, RetCode.invalidState, `task ${id} has already ended (${task.status})`);
    }
    const now = this.world.nowMs();
    if (task.status === "queued") {
      task.cancelAtMs = now;
      this.sync(task, now);
      return { task_id: id, action: "delete", status: task.status };
    }
    // An execution node already holds it: accepted, but it stops only a moment later.
    if (task.cancelAtMs === undefined) {
      const end = task.stages.at(-1)?.endMs ?? now;
      task.cancelAtMs = now + Math.min(this.world.scaled(CANCEL_DELAY_MS), Math.max(0, (end - now) / 2));
      this.schedule(task);
    }
    return { task_id: id, action: "delete", status: "running" };
  }

  syncAll(org: Org): void {
    const now = this.world.nowMs();
    for (const task of [...org.activeVideos]) this.sync(task, now);
  }

  summary(org: Org) {
    this.syncAll(org);
    return org.ledger.summary();
  }

  close(): void {
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  // ---------- skills ----------

  private findSkill(org: Org, id: string): SkillRecord | undefined {
    return this.world.officialSkills.get(id) ?? org.skills.get(id);
  }

  listSkills(org: Org, params: URLSearchParams, paging: PagingFaults = NO_PAGING_FAULTS) {
    const query = parseSkillListQuery(params);
    if (!query.ok) throw ApiError.badRequest(query.issues);
    const { page_num, page_size, keyword } = query.value;
    const needle = keyword?.toLowerCase();
    const all = [...this.world.officialSkills.values(), ...org.skills.values()].filter(
      (s) =>
        needle === undefined ||
        s.name.toLowerCase().includes(needle) ||
        s.description.toLowerCase().includes(needle),
    );
    return { items: numberedPage(all, page_num, page_size, paging).map(skillJson), total: all.length };
  }

  createSkill(org: Org, body: unknown) {
    const req = this.parseSkill(body);
    const now = this.world.nowS();
    const skill: SkillRecord = {
      id: this.world.newId("skill"),
      name: req.name,
      description: req.description ?? "",
      content: req.content,
      official: false,
      created_at: now,
      updated_at: now,
    };
    org.skills.set(skill.id, skill);
    return { skill: skillJson(skill) };
  }

  updateSkill(org: Org, id: string, body: unknown) {
    const skill = this.ownSkill(org, id, "updated");
    const req = this.parseSkill(body);
    // The spec: omitted string fields are submitted as empty values, so a missing description clears it.
    skill.name = req.name;
    skill.description = req.description ?? "";
    skill.content = req.content;
    skill.updated_at = this.world.nowS();
    return { skill: skillJson(skill) };
  }

  deleteSkill(org: Org, id: string) {
    this.ownSkill(org, id, "deleted");
    org.skills.delete(id);
    return { skill_id: id };
  }

  private ownSkill(org: Org, id: string, verb: string): SkillRecord {
    if (this.world.officialSkills.has(id)) {
      throw new BusinessError(403, RetCode.officialSkill, `official skill ${id} cannot be ${verb}`);
    }
    const skill = org.skills.get(id);
    if (!skill) throw notFound("skill", id);
    return skill;
  }

  private parseSkill(body: unknown) {
    const parsed = SkillWriteRequest.safeParse(body);
    if (!parsed.success) throw ApiError.badRequest(issuesFromZod(parsed.error));
    return parsed.data;
  }
}

const ADAPTIVE_ORDER: readonly string[] = ["first_frame", "last_frame", "reference_image"];

/**
 * The image `ratio: adaptive` follows (spec: "the first frame, last frame or first reference image"),
 * by role and not by position in `content`: the first frame, else the last frame, else the first
 * reference image; an image whose size cannot be read is skipped. Undefined: no usable image.
 */
function adaptiveImage(content: VideoCreate["content"], materials: Map<number, Material>): Size | undefined {
  const candidates = content
    .map((element, index) => ({ rank: ADAPTIVE_ORDER.indexOf(materialKind(element)), index }))
    .filter((c) => c.rank >= 0)
    .sort((a, b) => a.rank - b.rank || a.index - b.index);
  for (const { index } of candidates) {
    const m = materials.get(index);
    if (m?.width && m.height) return { width: m.width, height: m.height };
  }
  return undefined;
}

function skillJson(skill: SkillRecord): Record<string, unknown> {
  return {
    id: skill.id,
    name: skill.name,
    ...(skill.description ? { description: skill.description } : {}),
    content: skill.content,
    official: skill.official,
    created_at: skill.created_at,
    updated_at: skill.updated_at,
  };
}

export const OFFICIAL_SKILLS: ReadonlyArray<Pick<SkillRecord, "id" | "name" | "description" | "content">> = [
  {
    id: "skill_official_camera_language",
    name: "Camera language",
    description:
      "Shot sizes, lens choices and camera moves described the way a director of photography would.",
    content:
      "# Camera language\n\n- Name the shot size (wide, medium, close-up) first.\n- State one camera move per shot: dolly, pan, tilt, crane or static.\n- Keep the lens consistent within a scene.\n",
  },
  {
    id: "skill_official_narrative_continuity",
    name: "Narrative continuity",
    description: "Keeps characters, wardrobe and light consistent across shots.",
    content:
      "# Narrative continuity\n\n- Repeat each character's defining features in every prompt.\n- Keep time of day and light direction stable within a scene.\n",
  },
  {
    id: "skill_official_prompt_polish",
    name: "Prompt polish",
    description: "Rewrites terse prompts into vivid, concrete scene descriptions.",
    content: "# Prompt polish\n\nExpand terse prompts with concrete subjects, actions, setting and mood.\n",
  },
];
