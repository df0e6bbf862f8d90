/**
 * An owner's side of the usage channel (lib/usage-protocol.ts): records are batched (at
 * `maxBatch` or `flushMs` after the first) off the response path and published with retries and
 * backoff until the channel has them (lib/publish-queue.ts). Used where the record is only
 * in memory anyway (an inference's own row is written the same way); gpu-scheduler publishes
 * from a table written in the ending transaction instead (usage-outbox.ts).
 */
import { PublishQueue } from "./publish-queue";
import type { UsageBatch, UsageRecord } from "./usage-protocol";
import { MAX_BATCH_RECORDS } from "./usage-protocol";

export class UsagePublisher {
  private buffer: UsageRecord[] = [];
  private timer?: NodeJS.Timeout;
  private readonly queue: PublishQueue<UsageBatch>;

  constructor(
    publish: (batch: UsageBatch) => Promise<void>,
    onRetry: (err: unknown, attempt: number) => void,
    private readonly opts = { maxBatch: 500, flushMs: 50 },
  ) {
    this.queue = new PublishQueue<UsageBatch>({ publish, onRetry: (err, attempt) => onRetry(err, attempt) });
  }

  add(record: UsageRecord): void {
    this.buffer.push(record);
    if (this.buffer.length >= Math.min(this.opts.maxBatch, MAX_BATCH_RECORDS)) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.opts.flushMs);
  }

  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.buffer.length) this.queue.push({ records: this.buffer });
    this.buffer = [];
  }

  /** On stop: publishes what is buffered, waiting at most `timeoutMs`; returns the records left unpublished. */
  async close(timeoutMs: number): Promise<number> {
    this.flush();
    await this.queue.flush(timeoutMs);
    return this.queue.close().reduce((n, b) => n + b.records.length, 0);
  }

  /** Records not yet on the channel. */
  get pending(): number {
    return this.buffer.length + this.queue.pending;
  }
}
