// One in-flight cap per account and service, shared by every process: a sorted set of slots, each
// named by its holder's lease, so the slots of a process that died are dropped as soon as its lease
// is gone (checked when the set is full). Within a process the waiters queue first come, first
// served, and only the head of the queue asks Redis, so a release costs one call per process, not
// one per waiter. A waiting process wakes on the release message of any process, with a poll as
// the fallback when a message is missed (pub/sub is best effort).
import { AbortedError } from "../api/errors.js";
import { type Link, SHARED_KEY_TTL_MS } from "./link.js";
import { sleep } from "./sleep.js";

interface Slot {
  release(): Promise<void>;
}

export interface SharedSlots {
  /** Resolves with a slot once fewer than the cap are held; rejects on abort or a lost coordinator. */
  acquire(signal?: AbortSignal): Promise<Slot>;
  /** Slots this process holds now. */
  readonly held: number;
}

/** A full set is looked at again this often even without a release message (a dead holder's slots). */
const POLL_MS = 250;

interface Waiter {
  resolve(slot: Slot): void;
  reject(error: Error): void;
  signal: AbortSignal | undefined;
  onAbort: () => void;
}

export class RedisSlots implements SharedSlots {
  held = 0;
  private seq = 0;
  private readonly key: string;
  private readonly channel: string;
  private readonly queue: Waiter[] = [];
  private pumping = false;
  /** Wakes the pump when another process released a slot. */
  private wake: (() => void) | undefined;
  private unlisten: (() => void) | undefined;

  constructor(
    private readonly link: Link,
    service: string,
    private readonly cap: number,
  ) {
    if (!Number.isInteger(cap) || cap < 1) {
      throw new RangeError(`Expected the in-flight cap to be an integer >= 1, got ${cap}`);
    }
    this.key = link.keys.slots(service);
    this.channel = link.keys.slotsFreed(service);
    link.keep(this.key);
  }

  acquire(signal?: AbortSignal): Promise<Slot> {
    if (signal?.aborted) return Promise.reject(aborted());
    this.unlisten ??= this.link.listen(this.channel, () => this.wake?.());
    return new Promise<Slot>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const i = this.queue.indexOf(waiter);
          if (i >= 0) this.queue.splice(i, 1);
          reject(aborted());
        },
      };
      signal?.addEventListener("abort", waiter.onAbort, { once: true });
      this.queue.push(waiter);
      void this.pump();
    });
  }

  /** One loop per process: the head of the queue asks, and waits for a release when the set is full. */
  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.queue.length > 0) {
        // Listening before asking: a release between the answer and the wait is not missed.
        let woken = false;
        const released = new Promise<void>((resolve) => {
          this.wake = () => {
            woken = true;
            resolve();
          };
        });
        const member = `${this.link.holder}|${++this.seq}`;
        let taken: boolean;
        try {
          const answer = (await this.link.script(
            "clapperSlotsAcquire",
            [this.key],
            [this.link.now(), this.cap, member, this.link.keys.holder(""), SHARED_KEY_TTL_MS],
          )) as [number, number];
          taken = Number(answer[0]) === 1;
        } catch (error) {
          // A lost coordinator: every waiter hears it (the run halts).
          for (const w of this.queue.splice(0)) this.fail(w, error as Error);
          return;
        }
        if (taken) {
          const waiter = this.queue.shift();
          if (waiter) this.give(waiter, member);
          // Nobody is left to take it (they were aborted while asking): given straight back.
          else await this.drop(member).catch(() => undefined);
          continue;
        }
        if (!woken) {
          try {
            await Promise.race([released, sleep(POLL_MS, "an in-flight slot", this.link.gone)]);
          } catch (error) {
            for (const w of this.queue.splice(0)) this.fail(w, error as Error);
            return;
          }
        }
      }
    } finally {
      this.wake = undefined;
      this.pumping = false;
    }
  }

  private give(waiter: Waiter, member: string): void {
    waiter.signal?.removeEventListener("abort", waiter.onAbort);
    this.held += 1;
    let done: Promise<void> | undefined;
    waiter.resolve({
      release: () => {
        done ??= this.release(member);
        return done;
      },
    });
  }

  private fail(waiter: Waiter, error: Error): void {
    waiter.signal?.removeEventListener("abort", waiter.onAbort);
    waiter.reject(error);
  }

  private async release(member: string): Promise<void> {
    this.held = Math.max(0, this.held - 1);
    await this.drop(member);
  }

  private async drop(member: string): Promise<void> {
    await this.link.script("clapperSlotsRelease", [this.key], [member, this.channel]);
  }
}

function aborted(): AbortedError {
  return new AbortedError("aborted while waiting for an in-flight slot", false);
}
