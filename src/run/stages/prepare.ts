// Stage 3, prepare: what the jobs need before the first create. Skills of the manifest synced by
// name, reference voice files uploaded once per content hash, and what dead writers left in the
// store cleaned up. Each step is journalled, so a resumed run does not do it again.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import type { Logger } from "pino";
import {
  type Clients,
  collectList,
  IncompleteListError,
  incompleteWarning,
  type ListResult,
} from "../../api/index.js";
import type { Skill } from "../../api/video.js";
import type { Job } from "../../manifest/index.js";
import { jobsOf, type VoiceRef, voiceHash } from "../../services/index.js";
import type { RunContext } from "../context.js";
import { errorInfo } from "../errors.js";
import { allInOrder } from "../plan.js";
import type { RunOutcome, StateStore } from "../types.js";
import type { Admitted } from "./admission.js";
import type { Opened } from "./open.js";

export interface Prepared {
  skillIds: Map<string, string>;
  voiceRefs: Map<string, VoiceRef>;
}

export async function prepare(
  ctx: RunContext,
  opened: Opened,
  admitted: Admitted,
): Promise<Prepared | RunOutcome> {
  const { options, signal, log } = ctx;
  const { store, planned } = admitted;
  // Skills (the video service) and voices (the speech service) at once: neither needs the other. A
  // failure is reported as it was when they were done one after another: the skills' first.
  let skillIds: Map<string, string>;
  let voiceRefs: Map<string, VoiceRef>;
  try {
    [skillIds, voiceRefs] = await allInOrder([
      syncSkills(options.clients, store, planned.jobs, opened.located.manifest.skills, signal),
      prepareVoices(options.clients, store, planned.jobs, signal, log),
    ] as const);
  } catch (error) {
    // A refusal before the first create, not a failure of the service: nothing was submitted.
    if (error instanceof IncompleteListError) return { end: "refused", message: error.message };
    throw error;
  }
  const { sink } = opened;
  if (sink.cleanup) {
    // Only uploads begun before this process held the lock, only files of writers that are gone: no
    // live writer of this run owns them.
    const cleaned = await sink.cleanup(opened.lockedAt).catch((error: unknown) => {
      log.warn(
        { event: "cleanup-failed", error: errorInfo(error) },
        "could not clean up what a stopped run left",
      );
      return { aborted: 0, removed: 0 };
    });
    if (cleaned.aborted > 0)
      log.info({ event: "uploads-aborted", count: cleaned.aborted }, "aborted uploads left by a stopped run");
    if ((cleaned.removed ?? 0) > 0)
      log.info(
        { event: "partials-removed", count: cleaned.removed },
        "removed temporary files left by a stopped run",
      );
  }
  return { skillIds, voiceRefs };
}

/** Manifest skills become custom skills by name before the run (created or updated once). */
async function syncSkills(
  clients: Clients,
  j: StateStore,
  jobs: readonly Job[],
  skills: ReadonlyArray<{ name: string; file?: string; sha256?: string }>,
  signal: AbortSignal,
): Promise<Map<string, string>> {
  const ids = new Map<string, string>();
  const used = new Set(jobsOf(jobs, "video").flatMap((job) => (job.skill ? [job.skill.name] : [])));
  const wanted = skills.filter((s) => s.file && used.has(s.name));
  let existing: ListResult<Skill> | undefined;
  for (const skill of wanted) {
    const known = j.state.skills[skill.name];
    if (known && known.sha256 === skill.sha256) {
      ids.set(skill.name, known.id);
      continue;
    }
    const text = await readFile(skill.file as string, "utf8");
    const content = text.replace(/^---\r?\n[\s\S]*?\r?\n---\r?\n?/, "");
    existing ??= await collectList(clients.video.listSkills({}, { signal }));
    const same = existing.items.find((s) => !s.official && s.name === skill.name);
    if (!same && !existing.complete) {
      throw new IncompleteListError(
        `refused to create skill ${JSON.stringify(skill.name)}: ${incompleteWarning("skills", existing)}, so it may exist on a page the service did not serve and a create could make a twin; nothing was submitted (run again once the service lists every skill, or create it with clapper skills create)`,
      );
    }
    const result = same
      ? await clients.video.updateSkill(same.id, { name: skill.name, content }, { signal })
      : await clients.video.createSkill({ name: skill.name, content }, { signal });
    await j.append(
      { t: "skill", name: skill.name, id: result.id, sha256: skill.sha256 as string },
      { durable: true },
    );
    ids.set(skill.name, result.id);
  }
  // A skill a shot names that the manifest does not define (an official skill, or one made with
  // `clapper skills create`) is sent by its id: the service takes ids, and a shot may name it
  // either way. Only a name not found is sent as it is (plan has said so already).
  const external = [...used].filter((name) => !wanted.some((s) => s.name === name));
  if (external.length > 0) {
    existing ??= await collectList(clients.video.listSkills({}, { signal }));
    for (const name of external) {
      if (existing.items.some((s) => s.id === name)) continue;
      const named = existing.items.filter((s) => s.name === name);
      // The account's own first: an official skill of the same name is the platform's.
      const chosen = named.find((s) => !s.official) ?? named[0];
      if (chosen) ids.set(name, chosen.id);
    }
  }
  return ids;
}

/** Reference audio files become assets (or custom voices when saved), once per content hash. */
async function prepareVoices(
  clients: Clients,
  j: StateStore,
  jobs: readonly Job[],
  signal: AbortSignal,
  log: Logger,
): Promise<Map<string, VoiceRef>> {
  const refs = new Map<string, VoiceRef>();
  for (const job of jobsOf(jobs, "speech")) {
    if (job.voice.source !== "file") continue;
    // Loaded on use: its audio parser is wanted only by runs with reference voice files.
    const { uploadReferenceAudio } = await import("../../api/reference-audio.js");
    const hash = voiceHash(job);
    if (refs.has(hash)) continue;
    const known = j.state.voices[hash];
    if (job.voice.saveAs) {
      if (known?.voice_id) {
        refs.set(hash, { source: "custom", voice_id: known.voice_id });
        continue;
      }
      const asset = await uploadReferenceAudio(clients.http, clients.speech, job.voice.path, { signal });
      const key = `clapper-voice-${createHash("sha256").update(hash).digest("hex").slice(0, 48)}`;
      const voice = await clients.speech.createVoice(
        { asset_id: asset.asset_id, name: job.voice.saveAs },
        { idempotencyKey: key, signal },
      );
      await j.append(
        { t: "voice", hash, asset_id: asset.asset_id, voice_id: voice.voice_id },
        { durable: true },
      );
      log.info(
        { event: "voice-created", voice_id: voice.voice_id, name: job.voice.saveAs },
        "custom voice created",
      );
      refs.set(hash, { source: "custom", voice_id: voice.voice_id });
      continue;
    }
    // Unused assets expire after 7 days: one uploaded by an earlier run is uploaded again.
    const asset = await uploadReferenceAudio(clients.http, clients.speech, job.voice.path, { signal });
    await j.append({ t: "voice", hash, asset_id: asset.asset_id }, { durable: true });
    refs.set(hash, { source: "asset", asset_id: asset.asset_id });
  }
  return refs;
}
