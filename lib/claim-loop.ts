/**
 * A queue drained from the database by claims (webhook deliveries, batch lines): a claim every
 * `pollMs` and whenever woken (one at a time; a wake during a claim runs it once more), each
 * claimed item run in its own slot, counted per account so the next claim can respect a share,
 * and the queue looked at again as each settles. stop() claims nothing more and waits for the
 * items in flight.
 */
import type { LoggerInstance } from "moleculer";

export abstract class ClaimLoop {
  private timer?: NodeJS.Timeout;
  /** The claim under way (one at a time). */
  private claiming?: Promise<void>;
  private again = false;
  protected stopped = false;
  /** Items in flight, per account. */
  protected readonly inFlight = new Map<string, number>();
  private readonly running = new Set<Promise<void>>();

  constructor(
    private readonly pollMs: number,
    protected readonly logger: LoggerInstance,
    /** Says what failed to be claimed, for the log ("Webhook deliveries not claimed"). */
    private readonly claimFailure: string,
  ) {}

  /** Claims due items for the free slots (launch() starts each). */
  protected abstract claim(): Promise<void>;

  /** Items in flight now. */
  protected get busy(): number {
    return this.running.size;
  }

  start(): void {
    this.timer = setInterval(() => this.wake(), this.pollMs);
    this.wake();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    while (this.claiming || this.running.size) await Promise.all([this.claiming, ...this.running]);
  }

  wake(): void {
    if (this.stopped) return;
    if (this.claiming) {
      this.again = true;
      return;
    }
    this.claiming = this.claim()
      .catch((err) => this.logger.warn(`${this.claimFailure}: ${(err as Error).message}`))
      .finally(() => {
        this.claiming = undefined;
        if (this.again && !this.stopped) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** Runs one claimed item of `account` in its own slot; a failure is logged with `failure`'s words. */
  protected launch(account: string, work: () => Promise<void>, failure: (err: Error) => string): void {
    this.inFlight.set(account, (this.inFlight.get(account) ?? 0) + 1);
    const done: Promise<void> = work()
      .catch((err) => this.logger.warn(failure(err as Error)))
      .finally(() => {
        const left = this.inFlight.get(account)! - 1;
        if (left) this.inFlight.set(account, left);
        else this.inFlight.delete(account);
        this.running.delete(done);
        this.wake();
      });
    this.running.add(done);
  }
}
