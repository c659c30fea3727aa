// `clapper voices ...`: list preset or custom voices, make a custom voice from a reference audio
// file, delete one.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { type Clients, incompleteWarning, uploadReferenceAudio } from "../../../api/index.js";
import type { Voice } from "../../../api/speech.js";
import type { Listed } from "../../command.js";
import { date, table } from "../../output.js";

export interface VoicesOptions {
  clients: Pick<Clients, "http" | "speech">;
  signal?: AbortSignal;
}

export async function listVoices(o: VoicesOptions & { custom?: boolean }): Promise<Listed<Voice>> {
  const kind = o.custom ? "custom" : "preset";
  const list = await o.clients.speech.listVoices(kind, o.signal ? { signal: o.signal } : {});
  return { items: list.items, warnings: list.complete ? [] : [incompleteWarning(`${kind} voices`, list)] };
}

async function sha256File(path: string): Promise<string> {
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest("hex");
}

/** A custom voice, and whether this command made it (false: it was there already). */
export type CreatedVoice = Voice & { created: boolean };

/**
 * Reference audio -> asset -> custom voice. A custom voice of that name that exists already is
 * given back as it is, with nothing uploaded or registered (a second asset would only lie unused
 * for 7 days). The Idempotency-Key derives from the name and the file's content, so a create cut
 * off by a kill and sent again gives back the voice the first one made, which is said as such.
 */
export async function createVoice(o: VoicesOptions & { name: string; file: string }): Promise<CreatedVoice> {
  const opts = o.signal ? { signal: o.signal } : {};
  const name = o.name.trim();
  const existing = (await o.clients.speech.listVoices("custom", opts)).items.find(
    (v) => v.name.trim() === name,
  );
  if (existing) return { ...existing, created: false };
  const started = Math.floor(Date.now() / 1000);
  const asset = await uploadReferenceAudio(o.clients.http, o.clients.speech, o.file, opts);
  const digest = await sha256File(o.file);
  const idempotencyKey = `clapper-voice-${createHash("sha256").update(`${o.name}\n${digest}`).digest("hex").slice(0, 48)}`;
  const voice = await o.clients.speech.createVoice(
    { asset_id: asset.asset_id, name: o.name },
    { ...opts, idempotencyKey },
  );
  // Made before this command began (within the clocks' whole seconds): the key's earlier voice.
  const offset = Math.round(o.clients.http.clockOffsetMs / 1000);
  return { ...voice, created: !(voice.created_at > 0 && voice.created_at < started + offset - 2) };
}

/** What `voices create` says: made now, or there already (and nothing new registered). */
export function renderCreatedVoice(v: CreatedVoice): string {
  return v.created
    ? `created voice ${v.voice_id} (${v.name})`
    : `voice ${v.voice_id} (${v.name}) exists already, made ${date(v.created_at)}: nothing new was created; delete it first to make it again from another file`;
}

export async function deleteVoice(
  o: VoicesOptions & { id: string },
): Promise<{ voice_id: string; deleted: true }> {
  await o.clients.speech.deleteVoice(o.id, o.signal ? { signal: o.signal } : {});
  return { voice_id: o.id, deleted: true };
}

export function renderVoices(voices: readonly Voice[]): string {
  if (voices.length === 0) return "no voices";
  return table(voices, [
    { header: "VOICE_ID", value: (v) => v.voice_id },
    { header: "NAME", value: (v) => v.name },
    { header: "KIND", value: (v) => v.kind },
    { header: "LANGUAGE", value: (v) => v.language },
    { header: "TAGS", value: (v) => v.style_tags.join(",") || undefined },
    { header: "CREATED", value: (v) => date(v.created_at) },
  ]);
}
