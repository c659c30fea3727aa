// A line row becomes its speech job: the shot it narrates checked, its voice resolved, the speech
// service's rules applied, then a fingerprint of the resolved request and its points.

import { formatPath } from "../api/common.js";
import { countBillableChars, speechPoints } from "../api/speech.js";
import { SpeechCreateRequest } from "../api/speech-request.js";
import { type DefaultsRead, type ExpandContext, RowExpansion } from "./expand.js";
import type { LineValues } from "./fields.js";
import type { SpeechJob, VoiceSpec } from "./job.js";
import { didYouMean } from "./problems.js";
import type { RawRow } from "./rows.js";
import { fingerprintOf } from "./timing.js";
import type { VoiceResolver } from "./voices.js";

type Line = RowExpansion<LineValues>;

export async function expandLine(
  row: RawRow,
  ctx: ExpandContext,
  voices: VoiceResolver,
  shotIds: ReadonlySet<string>,
  defaultsRead: DefaultsRead,
): Promise<SpeechJob[]> {
  const line = RowExpansion.open<LineValues>("line", row, ctx, defaultsRead);
  if (!line) return [];
  const v = line.values;
  if (v.shot !== undefined && !shotIds.has(v.shot)) {
    line.at("shot").error(`no shot ${JSON.stringify(v.shot)}${didYouMean(v.shot, [...shotIds])}`);
  }
  const text = await line.text("text");
  if (text === undefined && v.template === undefined && v.text === undefined)
    line.at("text").error("is required");
  const voice = await readVoice(line, voices);
  const parsed = checkRequest(line, text, voice);
  if (!parsed || !voice || text === undefined || !line.sound) return [];

  const { voice: _placeholder, ...request } = parsed;
  const voiceIdentity =
    voice.source === "file" ? { source: "file", sha256: voice.sha256, saveAs: voice.saveAs } : voice;
  return [
    {
      kind: "speech",
      ...line.jobBase(`line/${line.id}`),
      ...(v.shot !== undefined ? { shot: v.shot } : {}),
      fingerprint: fingerprintOf({ v: 1, kind: "speech", request, voice: voiceIdentity }),
      points: ctx.speechPrice === undefined ? null : speechPoints(request.text, ctx.speechPrice),
      countedChars: countBillableChars(request.text),
      request,
      voice,
    },
  ];
}

/** The line's voice, to be saved as a custom voice when `save_voice_as` says so; undefined when wrong. */
async function readVoice(line: Line, voices: VoiceResolver): Promise<VoiceSpec | undefined> {
  const v = line.values;
  let voice: VoiceSpec | undefined;
  if (v.voice === undefined) {
    line.at("voice").error("is required: preset:ID, custom:ID or a reference audio file");
  } else {
    const resolved = await voices.resolve(v.voice);
    if ("error" in resolved) line.at("voice").error(resolved.error);
    else voice = resolved;
  }
  if (v.save_voice_as !== undefined) {
    if (voice && voice.source !== "file") {
      line.at("save_voice_as").error("only a reference audio file voice can be saved as a custom voice");
    } else if (voice?.source === "file") {
      voice = { ...voice, saveAs: v.save_voice_as };
    }
  }
  return voice;
}

/** The create body checked by the service's rules; undefined when it breaks one (reported). */
function checkRequest(
  line: Line,
  text: string | undefined,
  voice: VoiceSpec | undefined,
): SpeechCreateRequest | undefined {
  const v = line.values;
  const textField = v.template !== undefined ? "template" : "text";
  const body = {
    // A stand-in when the text is missing or its template failed (reported already), so every
    // other option is still checked in this pass.
    text: text ?? "text",
    ...(v.language !== undefined ? { language: v.language } : {}),
    // Placeholder voice for the rule check; the real reference is filled at run time.
    voice:
      voice?.source === "file"
        ? { source: "asset", asset_id: "asset-to-upload" }
        : { source: voice?.source ?? "preset", voice_id: voice && "voiceId" in voice ? voice.voiceId : "x" },
    ...(v.speed !== undefined ? { speed: v.speed } : {}),
    ...(v.auto_emotion !== undefined ? { auto_emotion: v.auto_emotion } : {}),
    ...(v.emotion_description !== undefined ? { emotion_description: v.emotion_description } : {}),
    ...(v.emotion_strength !== undefined ? { emotion_strength: v.emotion_strength } : {}),
    ...(v.emotion_vector !== undefined ? { emotion_vector: v.emotion_vector } : {}),
    ...(v.emotion_vector_mode !== undefined ? { emotion_vector_mode: v.emotion_vector_mode } : {}),
    ...(v.pronunciations !== undefined ? { pronunciations: v.pronunciations } : {}),
    ...(voice?.source === "file" && voice.saveAs !== undefined
      ? { save_voice: true, voice_name: voice.saveAs }
      : {}),
  };
  const parsed = SpeechCreateRequest.safeParse(body);
  if (parsed.success) return parsed.data;
  line.reportIssues(
    parsed.error,
    (path) => speechField(path, textField),
    // Without a real text there is nothing to check the text, or a word's presence in it, against.
    (issue) =>
      text === undefined && (issue.path[0] === "text" || issue.message.startsWith("must occur in text")),
  );
  return undefined;
}

function speechField(path: ReadonlyArray<string | number>, textField: string): string {
  const [head] = path;
  if (head === "text") return textField;
  if (head === "voice") return "voice";
  if (head === "save_voice" || head === "voice_name") return "save_voice_as";
  return formatPath(path);
}
