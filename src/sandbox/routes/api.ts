// The two services' API, as the specs name it: every route needs an API key.
import { header, KiB, MiB } from "../request.js";
import { param, type Route, syncOrg } from "./route.js";

const json = (limit: number) => ({ limit });

const VIDEO: readonly Route[] = [
  {
    method: "POST",
    path: "/vid/v2/video_generation",
    kind: "api",
    body: json(72 * MiB),
    handler: (c, s) => {
      // Tasks that ended unobserved give their reservations back before a new one is taken.
      syncOrg(s, c.org);
      return s.video.create(c.org, header(c.req, "idempotency-key"), c.body);
    },
  },
  {
    method: "GET",
    path: "/vid/v2/query/video_generation/:task_id",
    kind: "api",
    handler: (c, s) => s.video.get(c.org, param(c, "task_id")),
  },
  {
    method: "GET",
    path: "/vid/v2/query/video_generation",
    kind: "api",
    handler: (c, s) => s.video.list(c.org, c.query, s.faults.settings),
  },
  {
    method: "DELETE",
    path: "/vid/v2/video_generation/:task_id",
    kind: "api",
    handler: (c, s) => s.video.cancel(c.org, param(c, "task_id")),
  },
  {
    method: "GET",
    path: "/vid/v2/query/point_packages",
    kind: "api",
    handler: (c, s) => {
      syncOrg(s, c.org);
      const items = c.org.ledger.list();
      return { items, total: items.length };
    },
  },
  {
    method: "GET",
    path: "/vid/v2/query/point_usage_summary",
    kind: "api",
    handler: (c, s) => {
      syncOrg(s, c.org);
      return c.org.ledger.summary();
    },
  },
  {
    method: "GET",
    path: "/vid/v2/skills",
    kind: "api",
    handler: (c, s) => s.video.listSkills(c.org, c.query, s.faults.settings),
  },
  {
    method: "POST",
    path: "/vid/v2/skills",
    kind: "api",
    body: json(64 * KiB),
    handler: (c, s) => s.video.createSkill(c.org, c.body),
  },
  {
    method: "PUT",
    path: "/vid/v2/skills/:skill_id",
    kind: "api",
    body: json(64 * KiB),
    handler: (c, s) => s.video.updateSkill(c.org, param(c, "skill_id"), c.body),
  },
  {
    method: "DELETE",
    path: "/vid/v2/skills/:skill_id",
    kind: "api",
    handler: (c, s) => s.video.deleteSkill(c.org, param(c, "skill_id")),
  },
];

const SPEECH: readonly Route[] = [
  {
    method: "POST",
    path: "/audio/v1/speech/jobs",
    kind: "api",
    body: json(MiB),
    handler: (c, s) => {
      syncOrg(s, c.org);
      return s.speech.create(c.org, header(c.req, "idempotency-key"), c.body);
    },
  },
  {
    method: "GET",
    path: "/audio/v1/speech/jobs/:task_id",
    kind: "api",
    handler: (c, s) => s.speech.get(c.org, param(c, "task_id")),
  },
  {
    method: "GET",
    path: "/audio/v1/speech/jobs",
    kind: "api",
    handler: (c, s) => s.speech.list(c.org, c.query, s.faults.settings),
  },
  {
    method: "POST",
    path: "/audio/v1/speech/jobs/:task_id/cancel",
    kind: "api",
    handler: (c, s) => s.speech.cancel(c.org, param(c, "task_id")),
  },
  {
    method: "DELETE",
    path: "/audio/v1/speech/jobs/:task_id",
    kind: "api",
    handler: (c, s) => s.speech.delete(c.org, param(c, "task_id")),
  },
  {
    method: "GET",
    path: "/audio/v1/voices",
    kind: "api",
    handler: (c, s) => s.speech.listVoices(c.org, c.query),
  },
  {
    method: "POST",
    path: "/audio/v1/voices",
    kind: "api",
    body: json(MiB),
    handler: (c, s) => s.speech.createVoice(c.org, header(c.req, "idempotency-key"), c.body),
  },
  {
    method: "DELETE",
    path: "/audio/v1/voices/:voice_id",
    kind: "api",
    handler: (c, s) => s.speech.deleteVoice(c.org, param(c, "voice_id")),
  },
  {
    method: "POST",
    path: "/audio/v1/upload_urls",
    kind: "api",
    body: json(MiB),
    handler: (c, s) => s.speech.uploadUrl(c.org, c.body),
  },
  {
    method: "POST",
    path: "/audio/v1/assets",
    kind: "api",
    body: json(MiB),
    handler: (c, s) => s.speech.registerAsset(c.org, c.body),
  },
  {
    method: "GET",
    path: "/audio/v1/pricing",
    kind: "api",
    handler: (c, s) => {
      s.video.syncAll(c.org);
      return s.speech.pricingJson(c.org);
    },
  },
];

export const API_ROUTES: readonly Route[] = [...VIDEO, ...SPEECH];
