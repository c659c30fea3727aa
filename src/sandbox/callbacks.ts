// Status callbacks as the video spec's Events section describes them. Each push is independent,
// so an intermediate status that exhausts its retries never holds back the terminal one.
import { request } from "undici";
import { checkPublicUrl } from "../api/urls.js";
import { checkResolvedHost } from "./materials.js";
import type { World } from "./world.js";

/** Seconds between attempts, scaled by the time scale like every simulated duration. */
const CALLBACK_RETRY_INTERVALS_S = [10, 30, 60, 120, 300] as const;
/** Per-request timeout. Not scaled: it bounds a real network exchange, not a simulated stage. */
const CALLBACK_TIMEOUT_MS = 10_000;

export class CallbackSender {
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly controller = new AbortController();
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly world: World) {}

  push(url: string, token: string | undefined, body: unknown): void {
    this.attempt(url, token, JSON.stringify(body), 0);
  }

  private attempt(url: string, token: string | undefined, payload: string, retry: number): void {
    if (this.controller.signal.aborted) return;
    const run = this.send(url, token, payload).then((ok) => {
      if (ok) {
        this.world.stats.callbacks.delivered += 1;
        return;
      }
      this.world.stats.callbacks.failed += 1;
      const interval = CALLBACK_RETRY_INTERVALS_S[retry];
      if (interval === undefined || this.controller.signal.aborted) return;
      const timer = setTimeout(
        () => {
          this.timers.delete(timer);
          this.attempt(url, token, payload, retry + 1);
        },
        this.world.scaled(interval * 1000),
      );
      timer.unref();
      this.timers.add(timer);
    });
    this.inFlight.add(run);
    void run.finally(() => this.inFlight.delete(run));
  }

  private async send(url: string, token: string | undefined, payload: string): Promise<boolean> {
    const allowPrivate = this.world.settings.allowPrivateUrls;
    // Checked again at delivery: a name may resolve differently now than at creation.
    if (checkPublicUrl(url, { allowPrivate })) return false;
    if (await checkResolvedHost(new URL(url).hostname, allowPrivate)) return false;
    try {
      const res = await request(url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "user-agent": "clapper-sandbox-callbacks/1",
          ...(token ? { "x-callback-token": token } : {}),
        },
        body: payload,
        headersTimeout: CALLBACK_TIMEOUT_MS,
        bodyTimeout: CALLBACK_TIMEOUT_MS,
        signal: AbortSignal.any([this.controller.signal, AbortSignal.timeout(CALLBACK_TIMEOUT_MS)]),
      });
      await res.body.dump();
      // 3xx is a failure: redirects are not followed.
      return res.statusCode >= 200 && res.statusCode < 300;
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    this.controller.abort();
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    await Promise.allSettled([...this.inFlight]);
  }
}
