/**
 * A background task run every `intervalS` (first run after `firstDelayMs`), never twice at once;
 * `runNow` runs it after any run in flight. Timer failures are logged, never thrown.
 */
import type { LoggerInstance } from "moleculer";

export class Periodic<T> {
  private timer?: NodeJS.Timeout;
  /** Every run chains on the previous one, so runs never overlap. */
  private tail: Promise<unknown> = Promise.resolve();
  private stopped = false;
  private dueAt = Infinity;

  constructor(
    private readonly name: string,
    private readonly task: () => Promise<T>,
    private readonly intervalS: () => number,
    private readonly logger: LoggerInstance,
  ) {}

  start(firstDelayMs = 0): void {
    this.stopped = false;
    this.schedule(firstDelayMs);
  }

  /** Runs the task now (after any run in flight), rejecting with its error. */
  runNow(): Promise<T> {
    return this.exclusive(this.task);
  }

  /** Runs `work` in the task's place: never at the same time as a run of the task. */
  exclusive<R>(work: () => Promise<R>): Promise<R> {
    const run = this.tail.then(() => work());
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Brings the next run forward to within `delayMs` (never later than already planned). */
  runWithin(delayMs: number): void {
    if (this.stopped || !this.timer || this.dueAt <= Date.now() + delayMs) return;
    clearTimeout(this.timer);
    this.schedule(delayMs);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.tail;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.dueAt = Date.now() + delayMs;
    this.timer = setTimeout(() => void this.runScheduled(), delayMs);
    this.timer.unref();
  }

  private async runScheduled(): Promise<void> {
    try {
      await this.runNow();
    } catch (err) {
      this.logger.warn(`${this.name} failed: ${(err as Error).message}`);
    } finally {
      this.schedule(this.intervalS() * 1000);
    }
  }
}
