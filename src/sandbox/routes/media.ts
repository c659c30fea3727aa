// The media URLs: results, uploads, assets and voice samples, reached by signed or public URLs with no
// API key. GET routes here answer HEAD too.
import type { MediaControl } from "../faults.js";
import { sendJson } from "../http.js";
import { makeMp4, makeWav } from "../media.js";
import { MiB } from "../request.js";
import { denied, missing, sendMedia, sendPadded } from "./downloads.js";
import { type Ctx, param, type Route } from "./route.js";

export const MEDIA_ROUTES: readonly Route[] = [
  {
    method: "GET",
    path: "/_media/videos/:file",
    kind: "media",
    handler: async (c, s) => {
      const file = param(c, "file");
      if (s.world.verify(`/_media/videos/${file}`, c.query) !== "ok")
        return denied(c, "signature invalid or expired");
      const task = s.video.media(file.replace(/\.mp4$/, ""));
      if (task?.status !== "succeeded") return missing(c);
      if (injectedMediaFault(c, s.media)) return undefined;
      // Without a task, the picture is made once per size and length (the cache's key).
      const mp4 = s.plainVideos
        ? await makeMp4(task.duration, task.width, task.height)
        : await makeMp4(task.duration, task.width, task.height, { id: task.id, prompt: task.prompt ?? "" });
      if (s.media.video_pad_bytes >= 8) return sendPadded(c, mp4, s.media.video_pad_bytes);
      return sendMedia(c, mp4, "video/mp4");
    },
  },
  {
    method: "GET",
    path: "/_media/speech/:file",
    kind: "media",
    handler: (c, s) => {
      const file = param(c, "file");
      if (s.world.verify(`/_media/speech/${file}`, c.query) !== "ok")
        return denied(c, "signature invalid or expired");
      const task = s.speech.media(file.replace(/\.wav$/, ""));
      if (!task) return missing(c);
      return sendMedia(c, makeWav(task.audioMs), "audio/wav");
    },
  },
  {
    method: "PUT",
    path: "/_uploads/:id",
    kind: "media",
    body: { limit: 15 * MiB, raw: true },
    handler: (c, s) => {
      const id = param(c, "id");
      const upload = s.speech.upload(id);
      const check = s.world.verify(`/_uploads/${id}`, c.query);
      if (!upload || check !== "ok") {
        return denied(c, check === "expired" ? "the upload URL has expired" : "signature invalid");
      }
      const type = (c.req.headers["content-type"] ?? "").split(";")[0]?.trim();
      if (type !== upload.content_type) {
        return denied(
          c,
          `Content-Type must be ${upload.content_type} as requested, got ${type || "nothing"}`,
        );
      }
      upload.data = c.raw;
      c.res.writeHead(200, { etag: `"${id}"`, "content-length": 0 });
      c.res.end();
      return undefined;
    },
  },
  {
    method: "GET",
    path: "/_media/uploads/:id",
    kind: "media",
    handler: (c, s) => {
      const upload = s.speech.upload(param(c, "id"));
      if (!upload?.data) return missing(c);
      return sendMedia(c, upload.data, upload.content_type);
    },
  },
  {
    method: "GET",
    path: "/_media/assets/:id",
    kind: "media",
    handler: (c, s) => {
      const asset = s.speech.asset(param(c, "id"));
      if (!asset) return missing(c);
      return sendMedia(c, asset.data, asset.content_type);
    },
  },
  {
    method: "GET",
    path: "/_media/voices/:id",
    kind: "media",
    handler: (c, s) => {
      const voice = s.speech.voiceAudio(param(c, "id"));
      if (!voice) return missing(c);
      return sendMedia(c, voice.audio ?? makeWav(2500), voice.audioContentType ?? "audio/wav");
    },
  },
];

/**
 * Answers a video result request with the injected status while the fault lasts; false when the
 * file is to be served. A status below 400 is not an error a store would give, so it means off.
 */
function injectedMediaFault(c: Ctx, media: MediaControl): boolean {
  const status = media.video_error_status;
  if (status < 400 || media.video_error_count === 0) return false;
  if (media.video_error_count !== null) media.video_error_count -= 1;
  sendJson(c.res, status, {
    type: "error",
    error: {
      type: "internal_error",
      message: "the result store failed (injected fault)",
      http_code: String(status),
    },
  });
  return true;
}
