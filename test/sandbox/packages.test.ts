// Points packages of the sandbox over real HTTP: every status of the spec ("Points package": pending,
// active, exhausted, expired) can be created with POST /_sandbox/orgs/{org}/packages, and the
// package list, the points summary and the speech pricing balance agree on what they are worth.
import { randomUUID } from "node:crypto";
import { describe, expect, it, onTestFinished } from "vitest";
import { type PointsPackage, PointsPackageList, PointsSummary } from "../../src/api/common.js";
import { Pricing, SpeechCreateResponse, SpeechTaskResponse, speechPoints } from "../../src/api/speech.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/index.js";
import { call, sandbox } from "../helpers/sandbox.js";

const YEAR_S = 365 * 24 * 3600;
const nowS = () => Math.floor(Date.now() / 1000);

async function fresh(options: SandboxOptions = {}): Promise<Sandbox> {
  const s = await sandbox({ points: 0, ...options });
  onTestFinished(() => s.close());
  return s;
}

const addPackage = (s: Sandbox, body: unknown) =>
  call(s.url, "POST", "/_sandbox/orgs/acme/packages", { key: null, body });

async function add(s: Sandbox, body: Record<string, unknown>): Promise<PointsPackage> {
  const res = await addPackage(s, body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as PointsPackage;
}

async function packages(s: Sandbox): Promise<PointsPackage[]> {
  return PointsPackageList.parse((await call(s.url, "GET", "/vid/v2/query/point_packages")).body).items;
}

async function summary(s: Sandbox): Promise<PointsSummary> {
  return PointsSummary.parse((await call(s.url, "GET", "/vid/v2/query/point_usage_summary")).body);
}

async function pricing(s: Sandbox): Promise<Pricing> {
  return Pricing.parse((await call(s.url, "GET", "/audio/v1/pricing")).body);
}

/**
 * The three views of one balance, checked against each other by the spec's definitions: the summary
 * counts the remaining and reserved points of unexpired, activated packages; available points are
 * what the packages say is available; the speech pricing balance is the same summary.
 */
async function balance(s: Sandbox): Promise<PointsSummary> {
  const [items, sum, price] = [await packages(s), await summary(s), await pricing(s)];
  const counted = items.filter((p) => p.status === "active" || p.status === "exhausted");
  expect(sum).toEqual({
    total_points: counted.reduce((n, p) => n + p.remaining_points, 0),
    reserved_points: counted.reduce((n, p) => n + p.reserved_points, 0),
    available_points: items.reduce((n, p) => n + p.available_points, 0),
  });
  expect(price.balance).toEqual(sum);
  for (const p of items) {
    if (p.status !== "active") expect(p.available_points, p.status).toBe(0);
    else expect(p.available_points).toBe(p.remaining_points - p.reserved_points);
  }
  return sum;
}

describe("POST /_sandbox/orgs/{org}/packages with each status of the spec", () => {
  it("pending: not activated, no purchase or expiry time, nothing available", async () => {
    const s = await fresh();
    const pkg = await add(s, { total_points: 1000, status: "pending" });
    expect(pkg).toMatchObject({
      status: "pending",
      total_points: 1000,
      remaining_points: 1000,
      reserved_points: 0,
      available_points: 0,
    });
    expect(pkg).not.toHaveProperty("purchased_at");
    expect(pkg).not.toHaveProperty("expires_at");
    expect(await balance(s)).toEqual({ total_points: 0, reserved_points: 0, available_points: 0 });
  });

  it("active (the default): usable for a year", async () => {
    const s = await fresh();
    const before = nowS();
    const pkg = await add(s, { total_points: 1000, status: "active" });
    expect(pkg).toMatchObject({ status: "active", remaining_points: 1000, available_points: 1000 });
    expect(pkg.expires_at).toBeGreaterThanOrEqual(before + YEAR_S);
    expect(await balance(s)).toEqual({ total_points: 1000, reserved_points: 0, available_points: 1000 });
  });

  it("exhausted: activated, every point deducted", async () => {
    const s = await fresh();
    const before = nowS();
    const pkg = await add(s, { total_points: 300, status: "exhausted", code: "used-up" });
    expect(pkg).toMatchObject({
      status: "exhausted",
      code: "used-up",
      total_points: 300,
      remaining_points: 0,
      reserved_points: 0,
      available_points: 0,
    });
    expect(pkg.purchased_at).toBeGreaterThanOrEqual(before);
    expect(pkg.expires_at).toBeGreaterThan(before);
    expect(await balance(s)).toEqual({ total_points: 0, reserved_points: 0, available_points: 0 });
  });

  it("expired: activated, its points unused and lost; expired now unless expires_at says when", async () => {
    const s = await fresh();
    const before = nowS();
    const now = await add(s, { total_points: 700, status: "expired" });
    expect(now).toMatchObject({ status: "expired", remaining_points: 700, available_points: 0 });
    expect(now.expires_at).toBeGreaterThanOrEqual(before);
    expect(now.expires_at).toBeLessThanOrEqual(nowS());
    expect(now.purchased_at).toBe((now.expires_at as number) - YEAR_S);

    const past = before - 3600;
    const then = await add(s, { total_points: 50, status: "expired", expires_at: past });
    expect(then).toMatchObject({ status: "expired", expires_at: past, available_points: 0 });
    expect(await balance(s)).toEqual({ total_points: 0, reserved_points: 0, available_points: 0 });
  });

  it("active with expires_at in the past reads expired, as before", async () => {
    const s = await fresh();
    const pkg = await add(s, { total_points: 100, expires_at: nowS() - 60 });
    expect(pkg).toMatchObject({ status: "expired", available_points: 0 });
    expect((await balance(s)).total_points).toBe(0);
  });

  it.each([
    [{ total_points: 100, status: "used_up" }, "status"],
    [{ total_points: 100, status: "expired", expires_at: nowS() + 3600 }, "expires_at: an expired package"],
    [
      { total_points: 100, status: "exhausted", expires_at: nowS() - 3600 },
      "would be expired, not exhausted",
    ],
    [
      { total_points: 100, status: "pending", expires_at: nowS() + 3600 },
      "a pending package is not activated",
    ],
  ])("refuses %j, whose status and expiry contradict each other", async (body, part) => {
    const s = await fresh();
    const res = await addPackage(s, body);
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.error).toMatchObject({ type: "bad_request_error" });
    expect(res.body.error.message).toContain(part);
    expect(await packages(s)).toHaveLength(1); // the default package only
  });
});

describe("one balance across packages of every status", () => {
  it("reserves from active packages only, soonest expiry first; summary, list and pricing agree throughout", async () => {
    // time-scale 0.5: a `[sandbox:slow]` speech task stays queued for 5 s, holding its reservation.
    const s = await fresh({ timeScale: 0.5 });
    const t = nowS();
    const later = await add(s, { total_points: 100, expires_at: t + 7200, code: "later" });
    const sooner = await add(s, { total_points: 50, expires_at: t + 3600, code: "sooner" });
    await add(s, { total_points: 1000, status: "pending" });
    await add(s, { total_points: 700, status: "expired" });
    await add(s, { total_points: 300, status: "exhausted" });
    expect(await balance(s)).toEqual({ total_points: 150, reserved_points: 0, available_points: 150 });

    // 400 counted characters at 2 points per 10: 80 points, more than the sooner package has.
    const text = `[sandbox:slow] ${"a".repeat(389)}`;
    expect(speechPoints(text, 2)).toBe(80);
    const body = { text, language: "EN", voice: { source: "preset", voice_id: "en_female_bright" } };
    const created = await call(s.url, "POST", "/audio/v1/speech/jobs", { body, idem: randomUUID() });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    const id = SpeechCreateResponse.parse(created.body).task_id;
    const task = SpeechTaskResponse.parse(
      (await call(s.url, "GET", `/audio/v1/speech/jobs/${id}`)).body,
    ).task;
    expect(task).toMatchObject({ status: "queued", point_cost: 80, point_status: "reserved" });

    const byId = new Map((await packages(s)).map((p) => [p.id, p]));
    expect(byId.get(sooner.id)).toMatchObject({ reserved_points: 50, available_points: 0, status: "active" });
    expect(byId.get(later.id)).toMatchObject({ reserved_points: 30, available_points: 70 });
    for (const p of byId.values()) {
      if (p.id !== sooner.id && p.id !== later.id) expect(p.reserved_points, p.status).toBe(0);
    }
    expect(await balance(s)).toEqual({ total_points: 150, reserved_points: 80, available_points: 70 });

    // 70 available: a second 80-point task is refused, whatever the pending and expired packages hold.
    const refused = await call(s.url, "POST", "/audio/v1/speech/jobs", { body, idem: randomUUID() });
    expect(refused.status).toBe(200);
    expect(refused.body).toMatchObject({ RetCode: 40201 });
    expect(String(refused.body.Message)).toContain("insufficient points");

    // Cancelled, it gives its reservation back to the packages it came from.
    const cancel = await call(s.url, "POST", `/audio/v1/speech/jobs/${id}/cancel`);
    expect(cancel.status, JSON.stringify(cancel.body)).toBe(200);
    expect(await balance(s)).toEqual({ total_points: 150, reserved_points: 0, available_points: 150 });
  });
});
