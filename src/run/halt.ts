// Why a run stops before its work is done, in one place: the user's signal (Ctrl-C, SIGTERM), the
// deadline (`--deadline`), or a service, store or coordinator that cannot be reached. All three stop submitting
// and waiting alike, save the state and leave the tasks in flight to the next run; only the end
// and the message differ (`interrupted` for a stop and a deadline, `unreachable` for a dependency).

import { LONGEST_TIMER_MS } from "../rate/limiter.js";
import type { RunEnd } from "./end.js";

type HaltReason = "signal" | "deadline" | "unreachable";

export class Halt {
  private readonly controller = new AbortController();
  /** Aborted at the first reason; every wait of the run listens here. */
  readonly signal: AbortSignal = this.controller.signal;
  by: HaltReason | undefined;
  message: string | undefined;
  private timer: NodeJS.Timeout | undefined;
  private readonly onSignal: () => void;

  private readonly onLost: () => void;

  constructor(
    private readonly user: AbortSignal | undefined,
    deadline: Date | undefined,
    private readonly lost?: AbortSignal,
  ) {
    this.onSignal = () => this.stop("signal", "interrupted: state saved; run again to resume");
    this.onLost = () => this.unreachable(lost?.reason);
    if (user?.aborted) this.onSignal();
    else user?.addEventListener("abort", this.onSignal, { once: true });
    if (lost?.aborted) this.onLost();
    else lost?.addEventListener("abort", this.onLost, { once: true });
    if (deadline && !Number.isFinite(deadline.getTime()))
      throw new RangeError("the deadline is not a valid date");
    if (deadline) this.arm(deadline);
  }

  private arm(deadline: Date): void {
    const left = deadline.getTime() - Date.now();
    if (left <= 0) {
      this.stop(
        "deadline",
        `the deadline ${deadline.toISOString()} was reached: new submissions stopped and the tasks in flight are left for the next run, which resumes them and pays nothing twice`,
      );
      return;
    }
    // A deadline further off than the longest timer is reached in steps.
    this.timer = setTimeout(() => this.arm(deadline), Math.min(left, LONGEST_TIMER_MS));
    // A deadline never keeps a finished process alive.
    this.timer.unref();
  }

  /** A service or the store cannot be reached after the HTTP layer's own retries. */
  unreachable(error: unknown): void {
    const what = (error as Error)?.message ?? String(error);
    this.stop("unreachable", `${what}: the run stopped with its state saved; run again once it is reachable`);
  }

  /** The first reason wins: a deadline that comes during a stop does not rename it. */
  private stop(by: HaltReason, message: string): void {
    if (this.by) return;
    this.by = by;
    this.message = message;
    this.controller.abort(new Error(message));
  }

  /** How a run that stopped for this reason ends. */
  get end(): Extract<RunEnd, "interrupted" | "unreachable"> {
    return this.by === "unreachable" ? "unreachable" : "interrupted";
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.user?.removeEventListener("abort", this.onSignal);
    this.lost?.removeEventListener("abort", this.onLost);
  }
}
