// The run's state in S3 (`--state s3://BUCKET/PREFIX`): the journal in the store
// (src/state/s3-journal.ts) with the runner's records, the state read by the commands beside a run,
// and the remembered request rates kept under the same prefix.
import { redactDeep } from "../api/redact.js";
import type { RememberedRate } from "../rate/controller.js";
import { parseRates, RATES_MAX_BYTES, ratesFor, ratesText } from "../rate/remembered.js";
import type { StateOpenOptions, StateStore } from "../run/types.js";
import { createS3Client, type S3ClientOptions } from "../sinks/s3.js";
import { parseS3State } from "./location.js";
import { applyRecord, initialState, type RunRecord, type RunState } from "./run-state.js";
import { readSmallObject, S3Journal, writeSmallObject } from "./s3-journal.js";

export { StateStoreError } from "./s3-journal.js";

function journalOptions(uri: string, s3: S3ClientOptions | undefined) {
  const { bucket, prefix } = parseS3State(uri);
  return {
    client: createS3Client(s3),
    location: { bucket, prefix },
    initial: initialState,
    apply: applyRecord,
    // Records quote the services (error messages): whatever they echo, no secret reaches the store.
    sanitize: redactDeep,
  };
}

/** Opens the state for writing under the lock's fencing token. */
export async function openS3State(uri: string, options: StateOpenOptions = {}): Promise<StateStore> {
  const journal = await S3Journal.open<RunState, RunRecord>({
    ...journalOptions(uri, options.s3),
    ...(options.fence !== undefined ? { fence: options.fence } : {}),
    ...(options.generation !== undefined ? { generation: options.generation } : {}),
  });
  return journal;
}

/** The state as the store holds it, without writing (status, report, cancel). */
export function readS3State(uri: string, s3?: S3ClientOptions): Promise<RunState> {
  return S3Journal.read<RunState, RunRecord>(journalOptions(uri, s3));
}

/**
 * The rates a run found, kept under the state's prefix (`PREFIX/rates.json`) rather than
 * forgotten: a pod starts with no disk every time, and the coordinator's shared rate expires ten
 * minutes after its last use, so a nightly run would otherwise find the limit again each night,
 * meeting the 429s that costs on an account others share. One GET at the start, one PUT at the end.
 * A cache: unreadable, it is ignored.
 */
export function s3Rates(uri: string, s3?: S3ClientOptions) {
  const { bucket, prefix } = parseS3State(uri);
  const location = { bucket, prefix };
  const key = `${prefix}/rates.json`;
  const client = createS3Client(s3);
  const read = async () => parseRates((await readSmallObject(client, location, key, RATES_MAX_BYTES)) ?? "");
  return {
    where: `s3://${bucket}/${key}`,
    async read(account: string): Promise<Record<string, RememberedRate>> {
      return ratesFor(await read().catch(() => undefined), account);
    },
    async write(account: string, rates: Record<string, RememberedRate>): Promise<void> {
      const text = ratesText(await read().catch(() => undefined), account, rates);
      await writeSmallObject(client, location, key, text);
    },
  };
}
