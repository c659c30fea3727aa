// The text-to-speech service: tasks with attempts, reference-audio uploads and assets, custom
// voices and pricing. Like video tasks, speech tasks advance lazily on every read.
import { issuesFromZod } from "../api/common.js";
import { countBillableChars, speechPoints } from "../api/speech.js";
import {
  AssetRegisterRequest,
  CustomVoiceCreateRequest,
  SpeechCreateRequest,
  UploadUrlRequest,
} from "../api/speech-request.js";
import { ApiError, BusinessError, notFound, RetCode } from "./http.js";
import { speechDurationMs } from "./media.js";
import { NO_PAGING_FAULTS, offsetPage, type PagingFaults } from "./paging.js";
import { parseIdempotencyKey } from "./protocol/idempotency.js";
import { MAX_ATTEMPTS, normalizeSpeechInput, parseSpeechListQuery } from "./protocol/speech.js";
import type { AssetRecord, Org, SpeechEvent, SpeechRecord, VoiceRecord, World } from "./world.js";

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);
const DAY_MS = 24 * 3600 * 1000;
/** Result files and unused assets are kept this long (simulated; scaled). */
const RETENTION_MS = 7 * DAY_MS;
const UPLOAD_URL_TTL_MS = 15 * 60 * 1000;
const QUEUE_MS = 1000;
const RETRY_PAUSE_MS = 500;

export interface SpeechPricing {
  enabled: boolean;
  pricing_version: number;
  text_to_speech: number;
}

function attemptMs(countedChars: number): number {
  return 2000 + 15 * countedChars;
}

export class SpeechService {
  readonly pricing: SpeechPricing = { enabled: true, pricing_version: 1, text_to_speech: 2 };

  constructor(private readonly world: World) {}

  // ---------- tasks ----------

  async create(org: Org, idempotencyHeader: string | undefined, body: unknown): Promise<{ task_id: string }> {
    const key = parseIdempotencyKey(idempotencyHeader, true);
    if (!key.ok) throw ApiError.badRequest(key.issue);
    const taskId = await org.idempotency.speech.run(
      key.key,
      async () => this.createNew(org, body),
      () => {
        this.world.stats.idempotent_replays += 1;
      },
    );
    return { task_id: taskId };
  }

  private createNew(org: Org, body: unknown): string {
    const parsed = SpeechCreateRequest.safeParse(body);
    if (!parsed.success) throw ApiError.badRequest(issuesFromZod(parsed.error));
    const input = normalizeSpeechInput(parsed.data);
    const voice = input.voice;
    let voiceId: string | undefined;
    let assetId: string | undefined;
    if (voice.source === "asset") {
      this.usableAsset(org, voice.asset_id);
      assetId = voice.asset_id;
    } else {
      const found =
        voice.source === "preset"
          ? this.world.presetVoices.get(voice.voice_id)
          : org.voices.get(voice.voice_id);
      if (!found) throw notFound(`${voice.source} voice`, voice.voice_id);
      voiceId = voice.voice_id;
    }
    if (!this.pricing.enabled) {
      throw new BusinessError(
        200,
        RetCode.billingDisabled,
        "speech points billing is disabled; no task can be created",
      );
    }
    const cost = speechPoints(input.text, this.pricing.text_to_speech);
    // Tasks advance lazily: settle the ones that ended unobserved, or their reservations would
    // still hold points that a failure already released.
    this.syncAll(org);
    const allocation = org.ledger.reserve(cost);
    if (!allocation) {
      const { available_points } = this.summary(org);
      throw new BusinessError(
        200,
        RetCode.insufficientPoints,
        `insufficient points: the task needs ${cost}, available ${available_points}`,
      );
    }
    if (assetId) {
      const asset = org.assets.get(assetId);
      if (asset) asset.used = true;
    }

    const now = this.world.nowMs();
    const task: SpeechRecord = {
      id: this.world.newId("stask"),
      org: org.id,
      seq: this.world.nextSeq(),
      input,
      status: "queued",
      createdMs: now,
      startedMs: 0,
      finishedMs: 0,
      attempt: 0,
      pointCost: cost,
      pointStatus: "reserved",
      allocation,
      errorMessage: "",
      events: this.plan(input.text, now),
      eventIndex: 0,
      audioMs: speechDurationMs(input.text, input.speed ?? 1),
      outputSize: 0,
      ...(voiceId ? { voiceId } : {}),
      ...(assetId ? { assetId } : {}),
      ...(input.save_voice && input.voice_name ? { saveVoiceName: input.voice_name.trim() } : {}),
    };
    org.speeches.set(task.id, task);
    org.activeSpeeches.add(task);
    this.world.stats.tasks_created.speech += 1;
    return task.id;
  }

  /** The whole life of a task decided up front from its text markers: attempts, failures, the end. */
  private plan(text: string, now: number): SpeechEvent[] {
    const slow = text.includes("[sandbox:slow]") ? 10 : 1;
    const failing = text.includes("[sandbox:fail]")
      ? MAX_ATTEMPTS
      : text.includes("[sandbox:fail-once]")
        ? 1
        : 0;
    const scaled = (ms: number) => this.world.scaled(ms * slow);
    const events: SpeechEvent[] = [];
    let at = now + scaled(QUEUE_MS);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      events.push({ atMs: at, kind: "start" });
      at += scaled(attemptMs(countBillableChars(text)));
      if (attempt > failing) {
        events.push({ atMs: at, kind: "succeeded" });
        return events;
      }
      if (attempt === MAX_ATTEMPTS) {
        events.push({ atMs: at, kind: "failed" });
        return events;
      }
      events.push({ atMs: at, kind: "attempt-failed" });
      at += scaled(RETRY_PAUSE_MS);
    }
    return events;
  }

  sync(task: SpeechRecord, now = this.world.nowMs()): void {
    while (!TERMINAL.has(task.status)) {
      const event = task.events[task.eventIndex];
      if (!event || event.atMs > now) return;
      task.eventIndex += 1;
      switch (event.kind) {
        case "start":
          task.status = "generating";
          task.attempt += 1;
          if (task.startedMs === 0) task.startedMs = event.atMs;
          break;
        case "attempt-failed":
          break;
        case "succeeded":
          task.outputSize = 44 + Math.round((task.audioMs / 1000) * 24_000) * 2;
          this.finish(task, "succeeded", event.atMs);
          break;
        case "failed":
          task.errorMessage = `speech synthesis failed after ${task.attempt} attempts ([sandbox:fail] marker)`;
          this.finish(task, "failed", event.atMs);
          break;
      }
    }
  }

  private finish(task: SpeechRecord, status: "succeeded" | "failed" | "cancelled", atMs: number): void {
    const org = this.world.org(task.org);
    const consumed = status === "succeeded" ? task.pointCost : 0;
    org.ledger.settle(task.allocation, consumed);
    task.pointStatus = status === "succeeded" ? "consumed" : "released";
    task.status = status;
    task.finishedMs = atMs;
    org.activeSpeeches.delete(task);
    if (status === "succeeded" && task.saveVoiceName && task.assetId) {
      const asset = org.assets.get(task.assetId);
      if (asset) this.addCustomVoice(org, asset, task.saveVoiceName, atMs);
    }
  }

  syncAll(org: Org): void {
    const now = this.world.nowMs();
    for (const task of [...org.activeSpeeches]) this.sync(task, now);
  }

  summary(org: Org) {
    this.syncAll(org);
    return org.ledger.summary();
  }

  private resultExpired(task: SpeechRecord, now = this.world.nowMs()): boolean {
    return task.finishedMs > 0 && now >= task.finishedMs + this.world.scaled(RETENTION_MS);
  }

  json(task: SpeechRecord, now = this.world.nowMs()): Record<string, unknown> {
    let outputUrl = "";
    if (task.status === "succeeded" && !this.resultExpired(task, now)) {
      const expires = Math.ceil((task.finishedMs + this.world.scaled(RETENTION_MS)) / 1000);
      outputUrl = this.world.signedUrl(`/_media/speech/${task.id}.wav`, expires);
    }
    return {
      task_id: task.id,
      type: "text_to_speech",
      input: task.input,
      status: task.status,
      attempt: task.attempt,
      max_attempts: MAX_ATTEMPTS,
      point_cost: task.pointCost,
      point_status: task.pointStatus,
      error_message: task.errorMessage,
      output_url: outputUrl,
      output_size: task.status === "succeeded" ? task.outputSize : 0,
      created_at: Math.floor(task.createdMs / 1000),
      started_at: Math.floor(task.startedMs / 1000),
      finished_at: Math.floor(task.finishedMs / 1000),
    };
  }

  private task(org: Org, id: string): SpeechRecord {
    const task = org.speeches.get(id);
    if (!task) throw notFound("task", id);
    this.sync(task);
    return task;
  }

  get(org: Org, id: string) {
    return { task: this.json(this.task(org, id)) };
  }

  /** A stored result that still exists, for the download endpoint. */
  media(id: string): SpeechRecord | undefined {
    for (const org of this.world.orgs.values()) {
      const task = org.speeches.get(id);
      if (task) {
        this.sync(task);
        return task.status === "succeeded" && !this.resultExpired(task) ? task : undefined;
      }
    }
    return undefined;
  }

  list(org: Org, params: URLSearchParams, paging: PagingFaults = NO_PAGING_FAULTS) {
    const query = parseSpeechListQuery(params);
    if (!query.ok) throw ApiError.badRequest(query.issues);
    const { offset, limit, task_id, statuses, start_time, end_time } = query.value;
    this.syncAll(org);
    const counts: Record<string, number> = {};
    const matching: SpeechRecord[] = [];
    for (const task of org.speeches.values()) {
      if (task_id !== undefined && task.id !== task_id) continue;
      const created = Math.floor(task.createdMs / 1000);
      if (start_time && created < start_time) continue;
      if (end_time && created > end_time) continue;
      // status_counts ignore the statuses filter and paging, as the spec says.
      counts[task.status] = (counts[task.status] ?? 0) + 1;
      if (statuses.length > 0 && !statuses.includes(task.status)) continue;
      matching.push(task);
    }
    matching.sort((a, b) => b.seq - a.seq);
    const now = this.world.nowMs();
    return {
      items: offsetPage(matching, offset, limit, paging).map((t) => this.json(t, now)),
      total: matching.length,
      status_counts: counts,
    };
  }

  cancel(org: Org, id: string) {
    const task = this.task(org, id);
    if (task.status !== "queued") {
      throw new BusinessError(
        400,
        RetCode.invalidState,
        `task ${id} is ${task.status}; only queued tasks can be cancelled`,
      );
    }
    this.finish(task, "cancelled", this.world.nowMs());
    return { task_id: id, status: "cancelled" as const };
  }

  delete(org: Org, id: string) {
    const task = this.task(org, id);
    if (!TERMINAL.has(task.status) || task.pointStatus === "reserved") {
      throw new BusinessError(
        400,
        RetCode.invalidState,
        `task ${id} is ${task.status}; only succeeded, failed or cancelled tasks with settled points can be deleted`,
      );
    }
    // The result file goes with the record.
    org.speeches.delete(id);
    return { task_id: id, deleted: true as const };
  }

  // ---------- voices ----------

  listVoices(org: Org, params: URLSearchParams) {
    const kind = params.get("kind") ?? "preset";
    if (kind !== "preset" && kind !== "custom") {
      throw ApiError.badRequest({
        path: ["kind"],
        message: `expected one of "preset", "custom", got "${kind}"`,
      });
    }
    this.syncAll(org);
    const voices = kind === "preset" ? [...this.world.presetVoices.values()] : [...org.voices.values()];
    return { items: voices.map((v) => this.voiceJson(v)), total: voices.length };
  }

  voiceJson(voice: VoiceRecord): Record<string, unknown> {
    const { audio: _audio, audioContentType: _type, ...fields } = voice;
    return { ...fields, audio_url: `${this.world.baseUrl}/_media/voices/${voice.voice_id}` };
  }

  async createVoice(org: Org, idempotencyHeader: string | undefined, body: unknown) {
    const key = parseIdempotencyKey(idempotencyHeader, true);
    if (!key.ok) throw ApiError.badRequest(key.issue);
    const voiceId = await org.idempotency.voice.run(
      key.key,
      async () => {
        const parsed = CustomVoiceCreateRequest.safeParse(body);
        if (!parsed.success) throw ApiError.badRequest(issuesFromZod(parsed.error));
        const asset = this.usableAsset(org, parsed.data.asset_id);
        return this.addCustomVoice(org, asset, parsed.data.name.trim(), this.world.nowMs()).voice_id;
      },
      () => {
        this.world.stats.idempotent_replays += 1;
      },
    );
    const voice = org.voices.get(voiceId);
    if (!voice) throw notFound("voice", voiceId);
    return { voice: this.voiceJson(voice) };
  }

  private addCustomVoice(org: Org, asset: AssetRecord, name: string, atMs: number): VoiceRecord {
    asset.used = true;
    const voice: VoiceRecord = {
      voice_id: this.world.newId("voice"),
      kind: "custom",
      name,
      style_tags: [],
      created_at: Math.floor(atMs / 1000),
      // An independent copy: the voice outlives the asset's 7-day retention.
      audio: Buffer.from(asset.data),
      audioContentType: asset.content_type,
    };
    org.voices.set(voice.voice_id, voice);
    return voice;
  }

  deleteVoice(org: Org, id: string) {
    if (this.world.presetVoices.has(id)) {
      throw new BusinessError(
        403,
        RetCode.presetVoice,
        `voice ${id} is a preset voice; preset voices are platform-managed`,
      );
    }
    if (!org.voices.has(id)) throw notFound("voice", id);
    this.syncAll(org);
    for (const task of org.activeSpeeches) {
      if (task.voiceId === id) {
        throw new BusinessError(
          400,
          RetCode.voiceInUse,
          `voice ${id} is used by ${task.status} task ${task.id}; wait for it to end or cancel it`,
        );
      }
    }
    org.voices.delete(id);
    return { voice_id: id, deleted: true as const };
  }

  // ---------- uploads and assets ----------

  uploadUrl(org: Org, body: unknown) {
    const parsed = UploadUrlRequest.safeParse(body);
    if (!parsed.success) throw ApiError.badRequest(issuesFromZod(parsed.error));
    const req = parsed.data;
    const id = this.world.newId("upl");
    const now = this.world.nowMs();
    const expiresMs = now + this.world.scaled(UPLOAD_URL_TTL_MS);
    const expiresS = Math.ceil(expiresMs / 1000);
    org.uploads.set(id, {
      id,
      object_key: `speech-references/${org.id}/${id}/${req.file_name}`,
      file_name: req.file_name,
      content_type: req.content_type,
      file_size: req.file_size,
      expiresMs,
      registered: false,
    });
    return {
      object_key: `speech-references/${org.id}/${id}/${req.file_name}`,
      upload_url: this.world.signedUrl(`/_uploads/${id}`, expiresS),
      public_url: `${this.world.baseUrl}/_media/uploads/${id}`,
      authorization: "",
      bucket: "clapper-sandbox",
      region: "sandbox-1",
      expires_at: expiresS,
    };
  }

  /** Finds an upload by id across organizations: the PUT carries a signature, not a key. */
  upload(id: string) {
    for (const org of this.world.orgs.values()) {
      const upload = org.uploads.get(id);
      if (upload) return upload;
    }
    return undefined;
  }

  registerAsset(org: Org, body: unknown) {
    const parsed = AssetRegisterRequest.safeParse(body);
    if (!parsed.success) throw ApiError.badRequest(issuesFromZod(parsed.error));
    const req = parsed.data;
    const upload = [...org.uploads.values()].find((u) => u.object_key === req.object_key);
    if (!upload) throw notFound("upload record", req.object_key);
    if (upload.registered) {
      throw new BusinessError(
        400,
        RetCode.alreadyRegistered,
        `upload ${req.object_key} is already registered`,
      );
    }
    const mismatches: string[] = [];
    if (req.file_name !== upload.file_name) mismatches.push(`file_name ${JSON.stringify(upload.file_name)}`);
    if (req.content_type !== upload.content_type)
      mismatches.push(`content_type ${JSON.stringify(upload.content_type)}`);
    if (req.file_size !== upload.file_size) mismatches.push(`file_size ${upload.file_size}`);
    if (mismatches.length > 0) {
      throw new BusinessError(
        400,
        RetCode.uploadMismatch,
        `upload information mismatch: the upload was requested with ${mismatches.join(", ")}`,
      );
    }
    if (!upload.data) {
      throw new BusinessError(400, RetCode.uploadMismatch, `no file was uploaded for ${req.object_key}`);
    }
    if (upload.data.length !== upload.file_size) {
      throw new BusinessError(
        400,
        RetCode.uploadMismatch,
        `upload information mismatch: the uploaded file has ${upload.data.length} bytes, ${upload.file_size} were declared`,
      );
    }
    upload.registered = true;
    const now = this.world.nowMs();
    const asset: AssetRecord = {
      asset_id: this.world.newId("asset"),
      file_name: upload.file_name,
      content_type: upload.content_type,
      file_size: upload.file_size,
      duration_ms: req.duration_ms,
      created_at: Math.floor(now / 1000),
      createdMs: now,
      used: false,
      data: upload.data,
    };
    org.assets.set(asset.asset_id, asset);
    return { asset: this.assetJson(asset) };
  }

  assetJson(asset: AssetRecord): Record<string, unknown> {
    return {
      asset_id: asset.asset_id,
      purpose: "speech_reference",
      file_name: asset.file_name,
      content_type: asset.content_type,
      file_size: asset.file_size,
      duration_ms: asset.duration_ms,
      public_url: `${this.world.baseUrl}/_media/assets/${asset.asset_id}`,
      created_at: asset.created_at,
    };
  }

  /** Unused registered assets are cleaned up after the retention period. */
  private usableAsset(org: Org, id: string): AssetRecord {
    const asset = org.assets.get(id);
    if (asset && !asset.used && this.world.nowMs() >= asset.createdMs + this.world.scaled(RETENTION_MS)) {
      org.assets.delete(id);
    }
    const live = org.assets.get(id);
    if (!live) throw notFound("asset", id);
    return live;
  }

  asset(id: string): AssetRecord | undefined {
    for (const org of this.world.orgs.values()) {
      const asset = org.assets.get(id);
      if (asset) {
        try {
          return this.usableAsset(org, id);
        } catch {
          return undefined;
        }
      }
    }
    return undefined;
  }

  voiceAudio(id: string): VoiceRecord | undefined {
    const preset = this.world.presetVoices.get(id);
    if (preset) return preset;
    for (const org of this.world.orgs.values()) {
      const voice = org.voices.get(id);
      if (voice) return voice;
    }
    return undefined;
  }

  pricingJson(org: Org) {
    return {
      enabled: this.pricing.enabled,
      pricing_version: this.pricing.pricing_version,
      unit_characters: 10,
      costs: { text_to_speech: this.pricing.text_to_speech },
      balance: this.summary(org),
    };
  }
}

export const PRESET_VOICES: ReadonlyArray<Omit<VoiceRecord, "created_at">> = [
  {
    voice_id: "zh_female_warm",
    kind: "preset",
    name: "Warm (Mandarin, female)",
    description: "A warm, steady narrator.",
    language: "ZH",
    voice_type: "narration",
    style_tags: ["warm", "narration"],
    sample_text: "夜幕降临，灯塔亮了起来。",
  },
  {
    voice_id: "zh_male_calm",
    kind: "preset",
    name: "Calm (Mandarin, male)",
    language: "ZH",
    voice_type: "narration",
    style_tags: ["calm"],
  },
  {
    voice_id: "en_female_bright",
    kind: "preset",
    name: "Bright (English, female)",
    description: "Clear and lively; good for trailers.",
    language: "EN",
    voice_type: "character",
    style_tags: ["bright", "energetic"],
    sample_text: "Every night, the light came on at seven.",
  },
  {
    voice_id: "en_male_deep",
    kind: "preset",
    name: "Deep (English, male)",
    language: "EN",
    voice_type: "narration",
    style_tags: ["deep", "documentary"],
  },
  {
    voice_id: "ja_female_soft",
    kind: "preset",
    name: "Soft (Japanese, female)",
    language: "JA",
    style_tags: ["soft"],
  },
  {
    voice_id: "es_male_warm",
    kind: "preset",
    name: "Warm (Spanish, male)",
    language: "ES",
    style_tags: ["warm"],
  },
  {
    voice_id: "ar_female_clear",
    kind: "preset",
    name: "Clear (Arabic, female)",
    language: "AR",
    style_tags: [],
  },
];
