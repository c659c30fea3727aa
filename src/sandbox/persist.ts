// The sandbox's state in a file, so that an in-process sandbox (`run --sandbox`) resumes with the
// run that uses it. Written after every request that changes something, before its answer leaves:
// whatever a client was told exists is on disk. Simulated time keeps running across a restart,
// since every schedule is stored in absolute wall-clock milliseconds.
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import type { StoredPackage } from "./points.js";
import type { SpeechPricing } from "./speech.js";
import {
  type AssetRecord,
  Org,
  type SkillRecord,
  type SpeechRecord,
  type Stats,
  type UploadRecord,
  type VideoRecord,
  type VoiceRecord,
  type World,
} from "./world.js";

interface OrgSnapshot {
  packages: StoredPackage[];
  videos: VideoRecord[];
  speeches: SpeechRecord[];
  skills: SkillRecord[];
  voices: Array<Omit<VoiceRecord, "audio"> & { audio?: string }>;
  assets: Array<Omit<AssetRecord, "data"> & { data: string }>;
  uploads: Array<Omit<UploadRecord, "data"> & { data?: string }>;
  idempotency: Record<"video" | "speech" | "voice", Array<[string, string]>>;
}

interface Snapshot {
  version: 1;
  stats: Stats;
  pricing: SpeechPricing;
  orgs: Record<string, OrgSnapshot>;
}

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);

export function saveWorld(path: string, world: World, pricing: SpeechPricing): void {
  const orgs: Record<string, OrgSnapshot> = {};
  for (const [id, org] of world.orgs) {
    orgs[id] = {
      packages: org.ledger.packages,
      videos: [...org.videos.values()],
      speeches: [...org.speeches.values()],
      skills: [...org.skills.values()],
      voices: [...org.voices.values()].map(({ audio, ...v }) => ({
        ...v,
        ...(audio ? { audio: audio.toString("base64") } : {}),
      })),
      assets: [...org.assets.values()].map(({ data, ...a }) => ({ ...a, data: data.toString("base64") })),
      uploads: [...org.uploads.values()].map(({ data, ...u }) => ({
        ...u,
        ...(data ? { data: data.toString("base64") } : {}),
      })),
      idempotency: {
        video: [...org.idempotency.video.done],
        speech: [...org.idempotency.speech.done],
        voice: [...org.idempotency.voice.done],
      },
    };
  }
  const snapshot: Snapshot = { version: 1, stats: world.stats, pricing, orgs };
  const temp = `${path}.${process.pid}.tmp`;
  writeFileSync(temp, JSON.stringify(snapshot));
  renameSync(temp, path);
}

/** Loads a saved state into a fresh world; false when there is no file yet. */
export function loadWorld(path: string, world: World, pricing: SpeechPricing): boolean {
  let snapshot: Snapshot;
  try {
    snapshot = JSON.parse(readFileSync(path, "utf8")) as Snapshot;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
    throw new Error(`sandbox state ${path} cannot be read: ${(error as Error).message}`);
  }
  Object.assign(world.stats, snapshot.stats);
  Object.assign(pricing, snapshot.pricing);
  for (const [id, saved] of Object.entries(snapshot.orgs)) world.orgs.set(id, restoreOrg(id, saved, world));
  return true;
}

/** An organisation as saved: its tasks (the unfinished ones active again), files and idempotency keys. */
function restoreOrg(id: string, saved: OrgSnapshot, world: World): Org {
  const org = new Org(id, () => world.nowS());
  org.ledger.packages.push(...saved.packages);
  for (const v of saved.videos) {
    org.videos.set(v.id, v);
    if (!TERMINAL.has(v.status)) org.activeVideos.add(v);
  }
  for (const t of saved.speeches) {
    org.speeches.set(t.id, t);
    if (!TERMINAL.has(t.status)) org.activeSpeeches.add(t);
  }
  for (const k of saved.skills) org.skills.set(k.id, k);
  for (const { audio, ...v } of saved.voices) {
    org.voices.set(v.voice_id, { ...v, ...(audio ? { audio: Buffer.from(audio, "base64") } : {}) });
  }
  for (const { data, ...a } of saved.assets)
    org.assets.set(a.asset_id, { ...a, data: Buffer.from(data, "base64") });
  for (const { data, ...u } of saved.uploads) {
    org.uploads.set(u.id, { ...u, ...(data ? { data: Buffer.from(data, "base64") } : {}) });
  }
  for (const kind of ["video", "speech", "voice"] as const) {
    for (const [key, value] of saved.idempotency[kind]) org.idempotency[kind].done.set(key, value);
  }
  return org;
}
