// Speech prices as the service states them: a price no price list gives is refused, not used.
import { describe, expect, it } from "vitest";
import type { Pricing } from "../../src/api/speech.js";
import {
  linePoints,
  MAX_SPEECH_PRICE,
  PriceError,
  priceFrom,
  SpeechPricer,
} from "../../src/budget/pricing.js";

const pricing = (perTen: number, extra: Partial<Pricing> = {}): Pricing => ({
  enabled: true,
  pricing_version: 3,
  unit_characters: 10,
  costs: { text_to_speech: perTen },
  balance: { total_points: 100, reserved_points: 0, available_points: 100 },
  ...extra,
});

describe("priceFrom", () => {
  it("takes a whole number from 0 to the maximum", () => {
    expect(priceFrom(pricing(2))).toEqual({ perTen: 2, version: 3 });
    expect(priceFrom(pricing(0)).perTen).toBe(0);
    expect(priceFrom(pricing(MAX_SPEECH_PRICE)).perTen).toBe(MAX_SPEECH_PRICE);
  });

  it("refuses negative, fractional and absurd prices, saying what it got", () => {
    for (const bad of [-1, 2.5, MAX_SPEECH_PRICE + 1, Number.NaN]) {
      expect(() => priceFrom(pricing(bad))).toThrow(PriceError);
    }
    expect(() => priceFrom(pricing(-5))).toThrow(/speech price of -5 .* refused/);
  });

  it("refuses a price per other than 10 characters, and disabled billing", () => {
    expect(() => priceFrom(pricing(2, { unit_characters: 100 }))).toThrow(/per 100 characters/);
    expect(() => priceFrom(pricing(2, { enabled: false }))).toThrow(/disabled/);
  });

  it("prices a line once, rounded up: ceil(counted x price / 10)", () => {
    expect(linePoints("Hello, world!", { perTen: 3, version: 1 })).toBe(3);
  });
});

describe("SpeechPricer", () => {
  it("shares one read among callers that ask while it is under way", async () => {
    let reads = 0;
    const pricer = new SpeechPricer(async () => {
      reads += 1;
      await new Promise((r) => setTimeout(r, 10));
      return pricing(4);
    }, undefined);
    const all = await Promise.all([pricer.refresh(), pricer.refresh(), pricer.refresh()]);
    expect(all.map((p) => p.perTen)).toEqual([4, 4, 4]);
    expect(reads).toBe(1);
    await pricer.refresh();
    expect(reads).toBe(2);
    expect(pricer.current?.perTen).toBe(4);
  });

  it("keeps the last good price when a read states an absurd one", async () => {
    let next = pricing(2);
    const pricer = new SpeechPricer(async () => next, undefined);
    await pricer.refresh();
    next = pricing(-3);
    await expect(pricer.refresh()).rejects.toThrow(PriceError);
    expect(pricer.current?.perTen).toBe(2);
  });
});
