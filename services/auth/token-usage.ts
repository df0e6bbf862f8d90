/**
 * When each restricted token was last used, written in batches: resolving a token (at most once a
 * second per gateway replica, caller-resolver.ts) only notes the time here, and one statement writes
 * what was noted every `flushMs`, so no request waits on a database write for it.
 */
export class TokenUseLog {
  private pending = new Map<string, Date>();
  private timer?: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly write: (lastUsed: ReadonlyMap<string, Date>) => Promise<void>,
    private readonly warn: (message: string) => void,
    private readonly flushMs = 2_000,
  ) {}

  seen(tokenId: string, at: Date): void {
    this.pending.set(tokenId, at);
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.flushMs);
    this.timer.unref();
  }

  /** Writes what was noted; a failed write keeps its times for the next flush (newer ones win). */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (!this.pending.size) return;
      const batch = this.pending;
      this.pending = new Map();
      try {
        await this.write(batch);
      } catch (err) {
        for (const [id, at] of batch) if (!this.pending.has(id)) this.pending.set(id, at);
        this.warn(`Token last-use times not written (kept for the next try): ${(err as Error).message}`);
      }
    });
    return this.flushing;
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }
}
