/**
 * Bounds the password hashes one auth process runs at once. A scrypt hash at N = 2^17, r = 8
 * holds 128 × N × r bytes = 128 MiB while it runs, so memory is the base plus 128 MiB per
 * concurrent hash: `limit` hashes run, up to `queue` more wait their turn, and beyond that a
 * login or register is refused at once with 503 and Retry-After instead of taking the process
 * past its memory limit (README "Auth: password hashes and memory").
 */
import { apiError } from "../../lib/errors";

/** What a refused request is told to wait, in seconds: about one hash's time, rounded up. */
const RETRY_AFTER_S = 1;

export const hashesBusy = () => apiError("SERVICE_UNAVAILABLE", "Too many sign-ins at once, retry later", { retryAfter: RETRY_AFTER_S });

export class HashGate {
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  /** The most hashes that ever ran at once (tests and the bench read it). */
  peak = 0;

  constructor(
    readonly limit: number,
    readonly queue: number,
  ) {}

  /** Runs `hash` when a slot is free; throws SERVICE_UNAVAILABLE when `limit` run and `queue` wait. */
  async run<T>(hash: () => Promise<T>): Promise<T> {
    if (this.running < this.limit) this.running++;
    else if (this.waiting.length < this.queue) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else throw hashesBusy();
    this.peak = Math.max(this.peak, this.running);
    try {
      return await hash();
    } finally {
      // The slot passes straight to the next waiter, so `running` never dips below a full queue's need.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}
