// The sandbox's front without HTTP: the per-key token bucket, the fault draws (seeded, every Nth,
// drops), and the route table's 404 and 405.
import { afterEach, describe, expect, it, vi } from "vitest";
import { RateLimiter } from "../../src/sandbox/access.js";
import { Faults } from "../../src/sandbox/faults.js";
import { ApiError } from "../../src/sandbox/http.js";
import { API_ROUTES } from "../../src/sandbox/routes/api.js";
import { CONTROL_ROUTES } from "../../src/sandbox/routes/control.js";
import { MEDIA_ROUTES } from "../../src/sandbox/routes/media.js";
import { RouteTable } from "../../src/sandbox/routes/table.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("RateLimiter", () => {
  it("lets a second's worth through, then tells the whole seconds to wait, per key", () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const limiter = new RateLimiter();
    expect([1, 2, 3].map(() => limiter.take("a", 3))).toEqual([0, 0, 0]);
    expect(limiter.take("a", 3)).toBe(1);
    expect(limiter.take("b", 3)).toBe(0);
    vi.advanceTimersByTime(334);
    expect(limiter.take("a", 3)).toBe(0);
  });

  it("holds one request at least, so a rate below 1/s still serves now and then", () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const limiter = new RateLimiter();
    expect(limiter.take("a", 0.25)).toBe(0);
    expect(limiter.take("a", 0.25)).toBe(4);
    vi.advanceTimersByTime(4000);
    expect(limiter.take("a", 0.25)).toBe(0);
  });
});

function verdicts(faults: Faults, n: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    try {
      out.push(faults.draws());
    } catch (error) {
      out.push(error instanceof ApiError ? String(error.status) : "?");
    }
  }
  return out;
}

describe("Faults", () => {
  it("serves everything when nothing is injected", () => {
    expect(verdicts(new Faults(null), 3)).toEqual(["serve", "serve", "serve"]);
  });

  it("answers every Nth API request with a 503", () => {
    const faults = new Faults(null);
    expect(faults.update({ error_every: 3 })).toMatchObject({ error_every: 3, rate_limit_rps: null });
    expect(verdicts(faults, 6)).toEqual(["serve", "serve", "503", "serve", "serve", "503"]);
  });

  it("draws the same faults in the same order from one seed", () => {
    const faults = new Faults(5);
    const settings = faults.update({ drop_rate: 0.3, error_rate: 0.3, seed: 42 });
    expect(settings).not.toHaveProperty("seed");
    expect(settings.rate_limit_rps).toBe(5);
    const first = verdicts(faults, 40);
    faults.update({ seed: 42 });
    expect(verdicts(faults, 40)).toEqual(first);
    expect(new Set(first)).toEqual(new Set(["serve", "drop", "drop-after", "503"]));
  });

  it("keeps one settings object, so the lists see paging faults as they change", () => {
    const faults = new Faults(null);
    const settings = faults.settings;
    faults.update({ page_cap: 2, latency_ms: undefined });
    expect(settings.page_cap).toBe(2);
    expect(settings.latency_ms).toBe(0);
  });
});

describe("RouteTable", () => {
  const table = new RouteTable([...API_ROUTES, ...MEDIA_ROUTES, ...CONTROL_ROUTES]);

  it("names a route by its template, parameters in braces", () => {
    const { route, params } = table.find("GET", "/vid/v2/query/video_generation/abc/");
    expect(route.template).toBe("GET /vid/v2/query/video_generation/{task_id}");
    expect(params).toEqual({ task_id: "abc" });
  });

  it("answers HEAD on media GETs only", () => {
    expect(table.find("HEAD", "/_media/videos/x.mp4").route.template).toBe("HEAD /_media/videos/{file}");
    expect(() => table.find("HEAD", "/vid/v2/skills")).toThrow(
      expect.objectContaining({ status: 405, headers: { allow: "GET, POST" } }),
    );
  });

  it("throws a 404 for a path no method serves", () => {
    expect(() => table.find("GET", "/nothing")).toThrow(
      expect.objectContaining({ status: 404, type: "not_found_error" }),
    );
  });
});
