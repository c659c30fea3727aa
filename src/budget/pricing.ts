// Speech prices as the service states them. The plan prices every line once; during the run the
// price is read again (before each create when a points cap must hold exactly, and whenever a task's
// own `point_cost` shows it moved), and an answer no sane price list gives is refused, not used.
import { ServiceError } from "../api/errors.js";
import type { Pricing } from "../api/speech.js";
import { speechPoints } from "../api/speech.js";

/** Points per 10 counted characters above which a price is taken for a fault, not a price. */
export const MAX_SPEECH_PRICE = 10_000;

/** A pricing answer no sane price list gives: the service's fault, not the manifest's (exit 6). */
export class PriceError extends ServiceError {
  override name = "PriceError";
  constructor(message: string) {
    super(message, undefined, undefined, undefined);
  }
}

export interface SpeechPrice {
  /** Points per 10 counted characters (`costs.text_to_speech`). */
  perTen: number;
  version: number;
}

/** Speech billing is off for the account: a state of the account, said like a problem of the plan. */
export class SpeechDisabledError extends Error {
  override name = "SpeechDisabledError";
}

/** The price a pricing answer states, or why it cannot be used (SpeechDisabledError, PriceError). */
export function priceFrom(pricing: Pricing): SpeechPrice {
  if (!pricing.enabled)
    throw new SpeechDisabledError("speech billing is disabled on the service: no speech task can be created");
  const perTen = pricing.costs.text_to_speech;
  if (!Number.isInteger(perTen) || perTen < 0 || perTen > MAX_SPEECH_PRICE) {
    throw new PriceError(
      `the service states a speech price of ${perTen} points per 10 characters; expected a whole number from 0 to ${MAX_SPEECH_PRICE}, so it is refused`,
    );
  }
  if (pricing.unit_characters !== undefined && pricing.unit_characters !== 10) {
    throw new PriceError(
      `the service prices speech per ${pricing.unit_characters} characters; the specification fixes 10, so the price is refused`,
    );
  }
  return { perTen, version: pricing.pricing_version };
}

/** What a line costs at `price`. */
export function linePoints(text: string, price: SpeechPrice): number {
  return speechPoints(text, price.perTen);
}

/**
 * The current speech price. `refresh()` reads it again; callers that ask while a read is under way
 * share it, so a burst of creates costs one pricing request.
 */
export class SpeechPricer {
  private reading: Promise<SpeechPrice> | undefined;

  constructor(
    private readonly read: (signal?: AbortSignal) => Promise<Pricing>,
    public current: SpeechPrice | undefined,
  ) {}

  refresh(signal?: AbortSignal): Promise<SpeechPrice> {
    this.reading ??= this.read(signal)
      .then((pricing) => {
        this.current = priceFrom(pricing);
        return this.current;
      })
      .finally(() => {
        this.reading = undefined;
      });
    return this.reading;
  }
}
