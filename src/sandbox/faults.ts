// The faults a test injects into API requests (`POST /_sandbox/faults`, `--rate-limit`): latency,
// dropped connections, 503s at a rate or every Nth request, the rate limit, and the paging faults;
// and the faults of result downloads (`POST /_sandbox/media`).
import { z } from "zod";
import { ApiError } from "./http.js";
import { NO_PAGING_FAULTS, PagingFaults } from "./paging.js";
import { seeded } from "./random.js";

interface FaultSettings extends PagingFaults {
  error_rate: number;
  /** Every Nth API request answers 503: faults a test can count on (0: off). */
  error_every: number;
  drop_rate: number;
  latency_ms: number;
  rate_limit_rps: number | null;
}

export const FaultsBody = z.object({
  error_rate: z.number().min(0).max(1).optional(),
  error_every: z.number().int().min(0).optional(),
  drop_rate: z.number().min(0).max(1).optional(),
  latency_ms: z.number().int().min(0).max(600_000).optional(),
  rate_limit_rps: z.number().positive().nullable().optional(),
  seed: z.number().int().nullable().optional(),
  ...PagingFaults.partial().shape,
});

/** Test-only shaping of result downloads (`POST /_sandbox/media`). */
export interface MediaControl {
  video_pad_bytes: number;
  video_error_status: number;
  video_error_count: number | null;
}

export const NO_MEDIA_CONTROL: Readonly<MediaControl> = {
  video_pad_bytes: 0,
  video_error_status: 0,
  video_error_count: null,
};

/** What becomes of an API request once its faults are drawn (a 503 is thrown instead). */
export type FaultVerdict = "serve" | "drop" | "drop-after";

export class Faults {
  /** One object for the life of the sandbox: the list handlers read its paging faults as they are. */
  readonly settings: FaultSettings;
  // `seed` (not echoed with the settings): the faults' draws from a seeded generator, so a test gets
  // the same faults in the same order; null goes back to Math.random.
  private draw: () => number = Math.random;
  private apiRequests = 0;

  constructor(rateLimit: number | null) {
    this.settings = {
      error_rate: 0,
      error_every: 0,
      drop_rate: 0,
      latency_ms: 0,
      rate_limit_rps: rateLimit,
      ...NO_PAGING_FAULTS,
    };
  }

  /** Applies the settings given (from the next request on) and answers all of them. */
  update(body: z.infer<typeof FaultsBody>): FaultSettings {
    const { seed, ...settings } = body;
    Object.assign(
      this.settings,
      Object.fromEntries(Object.entries(settings).filter(([, v]) => v !== undefined)),
    );
    if (seed !== undefined) this.draw = seed === null ? Math.random : seeded(seed);
    return { ...this.settings };
  }

  /**
   * The injected latency, or undefined with none: an API request without latency goes on in the same
   * tick, as it always has.
   */
  latency(): Promise<void> | undefined {
    const ms = this.settings.latency_ms;
    return ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : undefined;
  }

  /** Draws a drop, or throws an injected 503. */
  draws(): FaultVerdict {
    const f = this.settings;
    let dropAfter = false;
    if (f.drop_rate > 0 && this.draw() < f.drop_rate) {
      // Half the drops happen after the work is done: the hard case for clients (did it happen?).
      if (this.draw() < 0.5) return "drop";
      dropAfter = true;
    }
    this.apiRequests += 1;
    const every = f.error_every > 0 && this.apiRequests % f.error_every === 0;
    if (!dropAfter && (every || (f.error_rate > 0 && this.draw() < f.error_rate))) {
      throw new ApiError(
        503,
        "service_unavailable_error",
        "the service is temporarily unavailable (injected fault)",
      );
    }
    return dropAfter ? "drop-after" : "serve";
  }
}
