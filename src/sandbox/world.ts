// The sandbox's whole state: organizations (each with its own tasks, skills, voices, assets,
// uploads, idempotency keys and points ledger), the clock, request statistics and URL signing.
import { createHmac, randomBytes, randomUUID } from "node:crypto";
import type { ResolutionTier, VideoRatio, VideoStatus } from "../api/video.js";
import { type Allocation, PointsLedger } from "./points.js";
import type { SpeechInput } from "./protocol/speech.js";

interface SandboxSettings {
  timeScale: number;
  allowPrivateUrls: boolean;
  points: number;
}

export type Outcome = "succeed" | "fail" | "upscale-fail" | "fail-once";

export interface Stage {
  name: "queue" | "prompt_optimization" | "generation" | "upload" | "upscale";
  endMs: number;
}

export interface VideoRecord {
  id: string;
  org: string;
  seq: number;
  model: string;
  status: VideoStatus;
  createdMs: number;
  updatedMs: number;
  tier: ResolutionTier;
  /** What the task reports: the tier, or 768P when the upscale failed. */
  resolution: ResolutionTier;
  duration: number;
  ratio: VideoRatio;
  width: number;
  height: number;
  /** The request's text, which its result video shows the start of (absent in older saved states). */
  prompt?: string;
  inputSeconds: number;
  inputImageCount: number;
  useContextIr: boolean;
  callback?: { url: string; token?: string };
  cost: number;
  basePoints: number;
  allocation: Allocation;
  stages: Stage[];
  stageIndex: number;
  outcome: Outcome;
  cancelAtMs?: number;
  error?: { code: string; message: string };
}

export interface SpeechEvent {
  atMs: number;
  kind: "start" | "attempt-failed" | "succeeded" | "failed";
}

export interface SpeechRecord {
  id: string;
  org: string;
  seq: number;
  input: SpeechInput;
  status: "queued" | "generating" | "succeeded" | "failed" | "cancelled";
  createdMs: number;
  startedMs: number;
  finishedMs: number;
  attempt: number;
  pointCost: number;
  pointStatus: "reserved" | "consumed" | "released";
  allocation: Allocation;
  errorMessage: string;
  events: SpeechEvent[];
  eventIndex: number;
  audioMs: number;
  outputSize: number;
  /** Voice or asset this task holds on to while it is active. */
  voiceId?: string;
  assetId?: string;
  saveVoiceName?: string;
}

export interface SkillRecord {
  id: string;
  name: string;
  description: string;
  content: string;
  official: boolean;
  created_at: number;
  updated_at: number;
}

export interface VoiceRecord {
  voice_id: string;
  kind: "preset" | "custom";
  name: string;
  description?: string;
  language?: string;
  voice_type?: string;
  style_tags: string[];
  sample_text?: string;
  created_at: number;
  /** Custom voices keep their own copy of the reference audio. */
  audio?: Buffer;
  audioContentType?: string;
}

export interface UploadRecord {
  id: string;
  object_key: string;
  file_name: string;
  content_type: string;
  file_size: number;
  expiresMs: number;
  data?: Buffer;
  registered: boolean;
}

export interface AssetRecord {
  asset_id: string;
  file_name: string;
  content_type: string;
  file_size: number;
  duration_ms: number;
  created_at: number;
  createdMs: number;
  used: boolean;
  data: Buffer;
}

/**
 * Keys of one creation endpoint of one organization. A request with a key that a create holds
 * waits for it and gets its resource; when that create is refused the key is free again, so the
 * waiting request is handled with its own body (or waits for whoever took the key meanwhile).
 */
class IdempotencyKeys {
  private readonly pending = new Map<string, Promise<string>>();
  /** Keys whose create succeeded, with the resource id: what a state file keeps. */
  readonly done = new Map<string, string>();

  /** Runs `create` unless the key is known; `replayed` learns when an earlier resource was returned. */
  async run(key: string | undefined, create: () => Promise<string>, replayed: () => void): Promise<string> {
    if (key === undefined) return create();
    for (;;) {
      const known = this.done.get(key);
      if (known !== undefined) {
        replayed();
        return known;
      }
      const held = this.pending.get(key);
      if (!held) break;
      try {
        const id = await held;
        replayed();
        return id;
      } catch {
        // The holder was refused; look again (someone else may hold the key by now).
      }
    }
    const work = create();
    this.pending.set(key, work);
    try {
      const id = await work;
      this.done.set(key, id);
      return id;
    } finally {
      if (this.pending.get(key) === work) this.pending.delete(key);
    }
  }
}

export class Org {
  readonly ledger: PointsLedger;
  readonly videos = new Map<string, VideoRecord>();
  readonly speeches = new Map<string, SpeechRecord>();
  /** Tasks that can still change: only these need advancing before a balance or list answer. */
  readonly activeVideos = new Set<VideoRecord>();
  readonly activeSpeeches = new Set<SpeechRecord>();
  readonly skills = new Map<string, SkillRecord>();
  readonly voices = new Map<string, VoiceRecord>();
  readonly assets = new Map<string, AssetRecord>();
  readonly uploads = new Map<string, UploadRecord>();
  /** Idempotency keys per creation endpoint. */
  readonly idempotency = {
    video: new IdempotencyKeys(),
    speech: new IdempotencyKeys(),
    voice: new IdempotencyKeys(),
  };

  constructor(
    readonly id: string,
    nowS: () => number,
  ) {
    this.ledger = new PointsLedger(nowS);
  }
}

export interface Stats {
  requests: Record<string, number>;
  tasks_created: { video: number; speech: number };
  idempotent_replays: number;
  callbacks: { delivered: number; failed: number };
}

export class World {
  readonly orgs = new Map<string, Org>();
  readonly keys = new Map<string, string>();
  readonly stats: Stats = {
    requests: {},
    tasks_created: { video: 0, speech: 0 },
    idempotent_replays: 0,
    callbacks: { delivered: 0, failed: 0 },
  };
  readonly officialSkills = new Map<string, SkillRecord>();
  readonly presetVoices = new Map<string, VoiceRecord>();
  /** Public base URL of the server, known once it listens; result and upload URLs point here. */
  baseUrl = "";
  private seq = 0;
  private readonly secret: Buffer;

  constructor(
    readonly settings: SandboxSettings,
    secret?: string,
  ) {
    this.secret = secret ? Buffer.from(secret) : randomBytes(32);
  }

  nowMs(): number {
    return Date.now();
  }

  nowS(): number {
    return Math.floor(Date.now() / 1000);
  }

  /** Real milliseconds that a simulated duration takes at this time scale. */
  scaled(ms: number): number {
    return ms * this.settings.timeScale;
  }

  nextSeq(): number {
    this.seq += 1;
    return this.seq;
  }

  org(id: string): Org {
    let org = this.orgs.get(id);
    if (!org) {
      org = new Org(id, () => this.nowS());
      org.ledger.add({ total_points: this.settings.points, code: "sandbox-default" });
      this.orgs.set(id, org);
    }
    return org;
  }

  newId(prefix: string): string {
    return `${prefix}_${randomUUID().replaceAll("-", "")}`;
  }

  sign(path: string, expiresS: number): string {
    return createHmac("sha256", this.secret).update(`${path}\n${expiresS}`).digest("hex").slice(0, 32);
  }

  /** A URL under the sandbox that stops working at `expiresS` (seconds). */
  signedUrl(path: string, expiresS: number): string {
    return `${this.baseUrl}${path}?expires=${expiresS}&signature=${this.sign(path, expiresS)}`;
  }

  verify(path: string, params: URLSearchParams): "ok" | "invalid" | "expired" {
    const expires = Number(params.get("expires"));
    const signature = params.get("signature") ?? "";
    if (!Number.isInteger(expires) || signature !== this.sign(path, expires)) return "invalid";
    return this.nowMs() > expires * 1000 ? "expired" : "ok";
  }

  countRequest(template: string): void {
    this.stats.requests[template] = (this.stats.requests[template] ?? 0) + 1;
  }
}
