// The /_sandbox/ endpoints a test or an operator drives: health, stats, point packages, faults,
// result shaping and speech pricing. No API key; not counted in the stats.
import { z } from "zod";
import { PackageStatus } from "../../api/common.js";
import { FaultsBody } from "../faults.js";
import { ApiError } from "../http.js";
import { packageProblem } from "../points.js";
import { MiB } from "../request.js";
import { param, parseControl, type Route } from "./route.js";

const PackageBody = z.object({
  total_points: z.number().int().min(0),
  status: PackageStatus.optional(),
  expires_at: z.number().int().optional(),
  code: z.string().optional(),
  name: z.string().optional(),
  order_no: z.string().optional(),
  total_price: z.number().int().min(0).optional(),
});

const MediaBody = z.object({
  /** Bytes appended to every video result as a trailing `free` box: large files for streaming tests. */
  video_pad_bytes: z
    .number()
    .int()
    .min(0)
    .max(8 * 1024 * 1024 * 1024)
    .optional(),
  /**
   * Video result URLs answer this HTTP status instead of the file (0: off): a result store that
   * fails after the task succeeded and was paid. API requests are not affected.
   */
  video_error_status: z.number().int().min(0).max(599).optional(),
  /** How many video result requests fail so before they serve again (null: every one). */
  video_error_count: z.number().int().min(0).nullable().optional(),
});

const PricingBody = z.object({
  enabled: z.boolean().optional(),
  text_to_speech: z.number().int().min(0).optional(),
});

const json = { limit: MiB };

export const CONTROL_ROUTES: readonly Route[] = [
  { method: "GET", path: "/_sandbox/health", kind: "control", handler: () => ({ ok: true }) },
  { method: "GET", path: "/_sandbox/stats", kind: "control", handler: (_c, s) => s.world.stats },
  {
    method: "POST",
    path: "/_sandbox/orgs/:org/packages",
    kind: "control",
    body: json,
    handler: (c, s) => {
      const body = parseControl(PackageBody, c.body);
      const problem = packageProblem(body, s.world.nowS());
      if (problem) throw ApiError.badRequest(problem);
      const org = s.world.org(param(c, "org"));
      const pkg = org.ledger.add(body);
      return org.ledger.list().find((p) => p.id === pkg.id);
    },
  },
  {
    method: "POST",
    path: "/_sandbox/faults",
    kind: "control",
    body: json,
    handler: (c, s) => s.faults.update(parseControl(FaultsBody, c.body)),
  },
  {
    method: "POST",
    path: "/_sandbox/media",
    kind: "control",
    body: json,
    handler: (c, s) => {
      const body = parseControl(MediaBody, c.body);
      if (body.video_pad_bytes !== undefined) s.media.video_pad_bytes = body.video_pad_bytes;
      if (body.video_error_status !== undefined) s.media.video_error_status = body.video_error_status;
      if (body.video_error_count !== undefined) s.media.video_error_count = body.video_error_count;
      return { ...s.media };
    },
  },
  {
    method: "POST",
    path: "/_sandbox/pricing",
    kind: "control",
    body: json,
    handler: (c, s) => {
      const body = parseControl(PricingBody, c.body);
      const pricing = s.speech.pricing;
      if (body.enabled !== undefined) pricing.enabled = body.enabled;
      if (body.text_to_speech !== undefined && body.text_to_speech !== pricing.text_to_speech) {
        pricing.text_to_speech = body.text_to_speech;
        pricing.pricing_version += 1;
      }
      return { ...pricing };
    },
  },
];
