/**
 * Values noted per key on a hot path and written in one call every `flushMs` (a token's last use,
 * the credits it spent), so no request waits on that write. A value noted again before the flush
 * is merged into the one waiting; a failed write keeps its values for the next flush.
 */
export class KeyedBatch<V> {
  private pending = new Map<string, V>();
  private timer?: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly write: (batch: ReadonlyMap<string, V>) => Promise<void>,
    /** The value waiting for a key and a newer one, as one. */
    private readonly merge: (waiting: V, added: V) => V,
    private readonly warn: (message: string) => void,
    private readonly flushMs = 1_000,
  ) {}

  note(key: string, value: V): void {
    const waiting = this.pending.get(key);
    this.pending.set(key, waiting === undefined ? value : this.merge(waiting, value));
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.flushMs);
    this.timer.unref();
  }

  /** Writes what was noted; resolves when every flush started so far has finished. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (!this.pending.size) return;
      const batch = this.pending;
      this.pending = new Map();
      try {
        await this.write(batch);
      } catch (err) {
        for (const [key, value] of batch) this.note(key, value);
        this.warn(`A batch of ${batch.size} was not written (kept for the next try): ${(err as Error).message}`);
      }
    });
    return this.flushing;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }
}
