// One process's connection to the coordinator: the Redis client, this process's holder lease, the
// scripts, the pub/sub connection for wake-ups, and the policy for losing it all.
//
// Lost policy: the first command that fails (an error, a timeout, a connection that closed under
// it or cannot take it) loses the coordinator for good, as does the end of ioredis's bounded
// reconnect attempts and a holder lease found gone. Whether a script that timed out ran is
// unknowable, and once the lease lapsed other processes have lapsed this one's pending
// reservations and reclaimed its slots: going on could create without a reservation. So the run
// stops (`onLost`, once), every later call fails at once with the same CoordinatorLostError, and
// the next run reconciles the coordinator with its journal. A connection that drops and comes back
// while nothing was asked is not a loss, unless the server lost its data (the lease is checked as
// soon as the connection is ready again).
import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { Redis, type RedisOptions } from "ioredis";
import { AbortedError } from "../api/errors.js";
import { CoordinatorLostError, CoordinatorUnavailableError } from "./errors.js";
import { Keys } from "./keys.js";
import { SCRIPTS, type ScriptName } from "./scripts.js";
import type { CoordinatorUrl } from "./url.js";

/** How long shared keys (rates, slots) outlive the last process that touched them. */
export const SHARED_KEY_TTL_MS = 10 * 60_000;
/** The generation outlives any ledger (a `total` pool's 400 days). */
const GENERATION_TTL_MS = 400 * 86_400_000;
/** Reconnect attempts after a drop, before the coordinator counts as lost: 0.1 + 0.2 + 0.4 + 0.8 s. */
const RECONNECT_ATTEMPTS = 4;

export interface LinkOptions {
  account: string;
  connectTimeoutMs: number;
  commandTimeoutMs: number;
  holderLeaseMs: number;
  signal?: AbortSignal | undefined;
  onLost?: ((error: CoordinatorLostError) => void) | undefined;
  now?: (() => number) | undefined;
}

type Arg = string | number;

export class Link {
  readonly keys: Keys;
  readonly holder: string;
  readonly address: string;
  readonly commandTimeoutMs: number;
  readonly holderLeaseMs: number;
  /** Aborted, with the CoordinatorLostError as its reason, when the coordinator is lost or closed. */
  readonly gone: AbortSignal;
  private readonly goneController = new AbortController();
  private lostError: CoordinatorLostError | undefined;
  private closed = false;
  private heartbeat: NodeJS.Timeout | undefined;
  /** Keys whose expiry the heartbeat pushes back while this process uses them, with their time to live. */
  private readonly kept = new Map<string, number>();
  /** The account's data generation in this Redis when this process connected (see Keys.generation). */
  generation = "";
  private subscriber: Redis | undefined;
  private subscribing: Promise<void> | undefined;
  private readonly listeners = new Map<string, Set<() => void>>();
  private lastError: Error | undefined;

  private constructor(
    readonly redis: Redis,
    private readonly url: CoordinatorUrl,
    private readonly redisOptions: RedisOptions,
    private readonly options: LinkOptions,
  ) {
    this.keys = new Keys(options.account);
    this.holder = `${hostname()}:${process.pid}:${randomBytes(4).toString("hex")}`;
    this.address = url.display;
    this.commandTimeoutMs = options.commandTimeoutMs;
    this.holderLeaseMs = options.holderLeaseMs;
    this.gone = this.goneController.signal;
    for (const [name, lua] of Object.entries(SCRIPTS)) redis.defineCommand(name, { lua });
  }

  static async open(url: CoordinatorUrl, options: LinkOptions): Promise<Link> {
    const credentials = new URL(url.url);
    let ready = false;
    const redisOptions: RedisOptions = {
      host: url.host,
      port: url.port,
      db: url.db,
      ...(credentials.username ? { username: decodeURIComponent(credentials.username) } : {}),
      ...(credentials.password ? { password: decodeURIComponent(credentials.password) } : {}),
      ...(url.tls ? { tls: { servername: url.host } } : {}),
      lazyConnect: true,
      connectTimeout: options.connectTimeoutMs,
      commandTimeout: options.commandTimeoutMs,
      // A command is never queued or sent again behind the caller's back: a script whose answer was
      // lost may have run, and a queue would turn a dead server into a hang.
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      autoResendUnfulfilledCommands: false,
      // No retry at start (unreachable is exit 6 at once), a few quick ones mid-run.
      retryStrategy: (times) => (ready && times <= RECONNECT_ATTEMPTS ? 100 * 2 ** (times - 1) : null),
    };
    const redis = new Redis(redisOptions);
    const link = new Link(redis, url, redisOptions, options);
    redis.on("error", (error: Error) => {
      link.lastError = error;
    });
    try {
      await link.bounded(
        (async () => {
          await redis.connect();
          await redis.ping();
        })(),
        options.connectTimeoutMs,
        options.signal,
      );
      // The data's generation: kept if there is one, made if the account has none here yet.
      await redis.set(link.keys.generation, randomBytes(8).toString("hex"), "PX", GENERATION_TTL_MS, "NX");
      link.generation = (await redis.get(link.keys.generation)) ?? "";
      link.keep(link.keys.generation, GENERATION_TTL_MS);
      // The lease exists before anything can be reserved under it.
      await redis.set(
        link.keys.holder(link.holder),
        JSON.stringify({ host: hostname(), pid: process.pid, started: new Date().toISOString() }),
        "PX",
        options.holderLeaseMs,
      );
    } catch (error) {
      redis.disconnect();
      if (error instanceof AbortedError) throw error;
      throw new CoordinatorUnavailableError(url.display, link.describe(error), { cause: error });
    }
    ready = true;
    redis.on("end", () => link.fail(new Error("the connection closed and could not be opened again")));
    // Back after a drop: if the server restarted empty, this process's lease is gone with its data.
    redis.on("ready", () => void link.beat());
    link.startHeartbeat();
    return link;
  }

  /** Races `work` against a timer and an abort; the work itself is left to fail on disconnect. */
  private bounded<T>(work: Promise<T>, ms: number, signal: AbortSignal | undefined): Promise<T> {
    work.catch(() => undefined);
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => {
        finish();
        reject(new AbortedError("aborted while connecting to the coordinator", false));
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`no answer within ${ms} ms`));
      }, ms);
      const finish = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      if (signal?.aborted) return onAbort();
      signal?.addEventListener("abort", onAbort, { once: true });
      work.then(
        (value) => {
          finish();
          resolve(value);
        },
        (error: unknown) => {
          finish();
          reject(error);
        },
      );
    });
  }

  /** A short cause for a message: the socket's error code when there is one, else the message. */
  private describe(error: unknown): string {
    const e = error as NodeJS.ErrnoException | undefined;
    // ioredis rejects with "Connection is closed." and emits the real cause as an error event.
    const generic = !e?.code && /Connection is closed|Stream isn't writeable/i.test(e?.message ?? "");
    const source = generic && this.lastError ? (this.lastError as NodeJS.ErrnoException) : e;
    return source?.code ?? source?.message ?? String(error);
  }

  /** The time scripts use instead of the server's (tests), as ARGV[1]; empty: the server's. */
  now(): string {
    return this.options.now ? String(this.options.now()) : "";
  }

  /** Runs one script under the lost policy. */
  script(name: ScriptName, keys: readonly string[], args: readonly Arg[]): Promise<unknown> {
    const what = name
      .replace(/^clapper/, "")
      .replace(/([A-Z])/g, " $1")
      .trim()
      .toLowerCase();
    return this.run(what, () => {
      const command = (this.redis as unknown as Record<string, (...a: Arg[]) => Promise<unknown>>)[name];
      if (!command) throw new Error(`the script ${name} is not defined`);
      return command.call(this.redis, keys.length, ...keys, ...args);
    });
  }

  /** Runs Redis commands under the lost policy: a failure loses the coordinator for good. */
  async run<T>(what: string, command: () => Promise<T>): Promise<T> {
    if (this.lostError) throw this.lostError;
    try {
      return await command();
    } catch (error) {
      throw this.fail(error, what);
    }
  }

  /** The coordinator is lost (or was closed): tells once, and every later call fails the same way. */
  fail(error: unknown, what?: string): CoordinatorLostError {
    if (this.lostError) return this.lostError;
    const reason = `${what ? `${what}: ` : ""}${this.describe(error)}`;
    this.lostError = new CoordinatorLostError(this.address, reason, { cause: error });
    this.stopHeartbeat();
    this.goneController.abort(this.lostError);
    this.redis.disconnect();
    this.subscriber?.disconnect();
    if (!this.closed) {
      try {
        this.options.onLost?.(this.lostError);
      } catch {
        // The caller's handler must not take the client's event loop down.
      }
    }
    return this.lostError;
  }

  get lost(): boolean {
    return this.lostError !== undefined && !this.closed;
  }

  /** Keeps `key` from expiring while this process is alive: its time to live renewed with the lease. */
  keep(key: string, ttlMs = SHARED_KEY_TTL_MS): void {
    this.kept.set(key, ttlMs);
  }

  private startHeartbeat(): void {
    const every = Math.max(10, Math.floor(this.holderLeaseMs / 6));
    const tick = () => {
      this.heartbeat = setTimeout(() => {
        void this.beat().finally(() => {
          if (!this.lostError) tick();
        });
      }, every);
      // The lease must never keep a finished process alive.
      this.heartbeat.unref();
    };
    tick();
  }

  private stopHeartbeat(): void {
    clearTimeout(this.heartbeat);
    this.heartbeat = undefined;
  }

  private async beat(): Promise<void> {
    if (this.lostError) return;
    try {
      const alive = await this.script(
        "clapperHolderRenew",
        [this.keys.holder(this.holder), ...this.kept.keys()],
        [this.holderLeaseMs, ...this.kept.values()],
      );
      if (alive !== 1) {
        this.fail(
          new Error(
            `this process's lease (${this.holderLeaseMs} ms) lapsed: it stalled past it, or the coordinator lost its data`,
          ),
        );
      }
    } catch {
      // run() has made it a loss already.
    }
  }

  /**
   * Calls `listener` on every message of `channel`. Best effort: without pub/sub (it failed, or is
   * not connected yet) the callers' fallback polls still work.
   */
  listen(channel: string, listener: () => void): () => void {
    let set = this.listeners.get(channel);
    if (!set) {
      set = new Set();
      this.listeners.set(channel, set);
      void this.subscribe(channel);
    }
    set.add(listener);
    return () => set.delete(listener);
  }

  private async subscribe(channel: string): Promise<void> {
    if (this.closed || this.lostError) return;
    if (!this.subscriber) {
      const sub = new Redis({
        ...this.redisOptions,
        enableOfflineQueue: true,
        commandTimeout: undefined,
        retryStrategy: (times) => (times <= RECONNECT_ATTEMPTS ? 100 * 2 ** (times - 1) : null),
      });
      sub.on("error", () => undefined);
      sub.on("message", (ch: string) => {
        for (const listener of this.listeners.get(ch) ?? []) listener();
      });
      this.subscriber = sub;
      this.subscribing = sub.connect().catch(() => undefined);
    }
    await this.subscribing;
    await this.subscriber.subscribe(channel).catch(() => undefined);
  }

  /** Ends the lease (this process's pending reservations lapse, its slots free) and disconnects. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopHeartbeat();
    const wasLost = this.lostError !== undefined;
    if (!wasLost) {
      try {
        await this.redis.del(this.keys.holder(this.holder));
        await this.redis.quit();
      } catch {
        // Closing: the lease lapses by itself.
      }
    }
    this.fail(new Error("the coordinator was closed by this process"));
    this.subscriber?.disconnect();
  }
}
