// Who may call the API: the key named in `Authorization: Bearer`, mapped to its organization, and
// the per-key rate limit.
import type { IncomingMessage } from "node:http";
import { ApiError } from "./http.js";
import { bearer } from "./request.js";
import type { Org, World } from "./world.js";

/** Token bucket per API key: `rps` requests a second with a burst of one second's worth. */
export class RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  /** 0 when the request may go now; otherwise the whole seconds to wait. */
  take(key: string, rps: number): number {
    const now = Date.now();
    // A burst of at least one request, so rates below 1/s still let a request through now and then.
    const capacity = Math.max(1, rps);
    const bucket = this.buckets.get(key) ?? { tokens: capacity, at: now };
    bucket.tokens = Math.min(capacity, bucket.tokens + ((now - bucket.at) / 1000) * rps);
    bucket.at = now;
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / rps));
  }
}

export class ApiAccess {
  private readonly limiter = new RateLimiter();

  constructor(private readonly world: World) {}

  /** The organization the request's key belongs to; throws a 401 for no or an unknown key, a 429 over the rate. */
  admit(req: IncomingMessage, rateLimitRps: number | null): Org {
    const key = bearer(req);
    const orgId = key === undefined ? undefined : this.world.keys.get(key);
    if (key === undefined || orgId === undefined) {
      throw new ApiError(
        401,
        "authentication_error",
        key === undefined
          ? "missing API key: send Authorization: Bearer <API_KEY>"
          : "the API key was refused",
      );
    }
    if (rateLimitRps !== null) {
      const wait = this.limiter.take(key, rateLimitRps);
      if (wait > 0) {
        throw new ApiError(
          429,
          "rate_limit_error",
          `rate limit of ${rateLimitRps} requests per second exceeded`,
          {
            "retry-after": String(wait),
          },
        );
      }
    }
    return this.world.org(orgId);
  }
}
