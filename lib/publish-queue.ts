/**
 * Events held in this process's memory on their way over a durable channel (a gpu-node's job
 * events to the scheduler, an owner's usage records to the ledger: lib/usage-publisher.ts). A
 * publish that fails (NATS hiccup, channel adapter not connected yet) is retried with backoff
 * until it succeeds or the process stops, and events leave strictly in the order they were
 * pushed, so each job's `started` always precedes its terminal event. Not an outbox: nothing is
 * written down, so what is still queued when the process dies is lost (close() hands it back to
 * log); gpu-scheduler's usage-outbox.ts is the durable kind, a table written in the transaction.
 */

export type PublishQueueOptions<T> = {
  publish: (event: T) => Promise<void>;
  /** Delay before retry number `attempt` (1-based). */
  backoffMs?: (attempt: number) => number;
  onRetry?: (err: unknown, attempt: number, event: T) => void;
};

const defaultBackoffMs = (attempt: number) => Math.min(100 * 2 ** (attempt - 1), 5000);

export class PublishQueue<T> {
  private readonly queue: T[] = [];
  private draining?: Promise<void>;
  private closed = false;
  private wake?: () => void;
  private timer?: NodeJS.Timeout;

  constructor(private readonly opts: PublishQueueOptions<T>) {}

  get pending(): number {
    return this.queue.length;
  }

  push(event: T): void {
    if (this.closed) throw new Error("The publish queue is closed");
    this.queue.push(event);
    this.draining ??= this.drain().finally(() => (this.draining = undefined));
  }

  private async drain(): Promise<void> {
    let attempt = 0;
    while (this.queue.length > 0 && !this.closed) {
      try {
        await this.opts.publish(this.queue[0]);
        this.queue.shift();
        attempt = 0;
      } catch (err) {
        attempt++;
        this.opts.onRetry?.(err, attempt, this.queue[0]);
        await this.pause((this.opts.backoffMs ?? defaultBackoffMs)(attempt));
      }
    }
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(resolve, ms);
    });
  }

  /** Resolves true once everything pushed so far is published, false if `timeoutMs` passes first. */
  async flush(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.queue.length > 0 && !this.closed) {
      if (Date.now() >= deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return this.queue.length === 0;
  }

  /** Stops retrying; returns what was never published (the caller logs it). */
  close(): T[] {
    this.closed = true;
    clearTimeout(this.timer);
    this.wake?.();
    return [...this.queue];
  }
}
