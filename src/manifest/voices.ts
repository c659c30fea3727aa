// The voice of a line: a preset or custom voice ID, or a reference audio file checked as the
// service would check it at upload, without the service.
import { resolve } from "node:path";
import { issuesFromZod } from "../api/common.js";
import type { ReferenceAudioFacts } from "../api/reference-audio.js";
import { UploadUrlRequest } from "../api/speech-request.js";
import { checkRegularFile, FileError } from "./files.js";
import type { VoiceSpec } from "./job.js";
import { sha256File } from "./materials.js";

export class VoiceResolver {
  private readonly cache = new Map<
    string,
    Promise<({ sha256: string } & ReferenceAudioFacts) | { error: string }>
  >();

  constructor(private readonly baseDir: string) {}

  async resolve(raw: string): Promise<VoiceSpec | { error: string }> {
    const m = raw.match(/^(preset|custom):(.*)$/);
    if (m) {
      const id = (m[2] ?? "").trim();
      if (!id) return { error: `expected ${m[1]}:VOICE_ID, got ${JSON.stringify(raw)}` };
      return { source: m[1] as "preset" | "custom", voiceId: id };
    }
    const expected = "expected preset:ID, custom:ID or a reference audio file";
    const scheme = /^([a-z]+):(.*)$/i.exec(raw);
    if (scheme && !/^[a-z]:[\\/]/i.test(raw)) {
      const lower = (scheme[1] ?? "").toLowerCase();
      const hint = lower === "preset" || lower === "custom" ? ` (did you mean "${lower}:${scheme[2]}"?)` : "";
      return { error: `${expected}, got ${JSON.stringify(raw)}${hint}` };
    }
    const path = resolve(this.baseDir, raw);
    let entry = this.cache.get(path);
    if (!entry) {
      entry = inspectVoice(path);
      this.cache.set(path, entry);
    }
    const facts = await entry;
    if ("error" in facts) {
      // A bare word that is no file was most likely meant as a voice ID.
      if (!/[./\\]/.test(raw) && /file not found|cannot be read|expected a \.wav/.test(facts.error)) {
        return { error: `${expected}, got ${JSON.stringify(raw)} (did you mean "preset:${raw}"?)` };
      }
      // Messages name the file as the manifest wrote it.
      return {
        error: facts.error.replace(path, raw),
      };
    }
    return { source: "file", path, ...facts };
  }
}

/**
 * A reference voice file: a regular file outside /proc, /dev and /sys (a FIFO would hang the audio
 * reader), that the service accepts (type, size, duration, and the file name sent at upload).
 */
async function inspectVoice(
  path: string,
): Promise<({ sha256: string } & ReferenceAudioFacts) | { error: string }> {
  try {
    await checkRegularFile(path);
  } catch (error) {
    if (!(error instanceof FileError)) return { error: `${path}: cannot be read (${error})` };
    if (error.problem === "missing") return { error: `${path}: file not found` };
    if (error.problem === "unreadable") return { error: `${path}: ${error.message}` };
    return { error: `${path} is ${error.message}` };
  }
  let facts: ReferenceAudioFacts;
  try {
    // Loaded on use: its audio parser (music-metadata) is wanted only by manifests with voice files.
    const { inspectReferenceAudio } = await import("../api/reference-audio.js");
    facts = await inspectReferenceAudio(path);
  } catch (error) {
    return { error: (error as Error).message };
  }
  // The name travels as the upload's file_name; the service refuses control characters and
  // separators in it, after the plan would have said all was well.
  const upload = UploadUrlRequest.safeParse({
    file_name: facts.fileName,
    content_type: facts.contentType,
    file_size: facts.fileSize,
  });
  if (!upload.success) {
    const issue = issuesFromZod(upload.error).find((i) => i.path[0] === "file_name");
    if (issue) return { error: `expected a file name the service accepts at upload: ${issue.message}` };
  }
  try {
    return { ...facts, sha256: await sha256File(path, facts.fileSize) };
  } catch (error) {
    return { error: `${path}: ${(error as Error).message}` };
  }
}
