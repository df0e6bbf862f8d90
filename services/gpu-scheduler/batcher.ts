/**
 * Group commit: items pushed while a batch is in flight go together in the next one, so an idle
 * system pays no delay and a busy one makes one database round trip for many requests.
 */
export class Batcher<In, Out> {
  private pending: Array<{ item: In; resolve: (o: Out) => void; reject: (e: unknown) => void }> = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    /** Handles a batch; returns one result per item, in order. */
    private readonly run: (items: In[]) => Promise<Out[]>,
    private readonly opts: { maxBatch: number; maxInFlight: number } = { maxBatch: 500, maxInFlight: 2 },
  ) {}

  /** Resolves once nothing is pending or in flight. */
  async idle(): Promise<void> {
    while (this.pending.length || this.inFlight) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  push(item: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      this.kick();
    });
  }

  private kick(): void {
    if (this.scheduled || this.inFlight >= this.opts.maxInFlight || !this.pending.length) return;
    this.scheduled = true;
    // Let the items pushed in this same tick join the batch.
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    if (this.inFlight >= this.opts.maxInFlight || !this.pending.length) return;
    const batch = this.pending.splice(0, this.opts.maxBatch);
    this.inFlight += 1;
    this.run(batch.map((b) => b.item))
      .then((outs) => batch.forEach((b, i) => b.resolve(outs[i])))
      .catch((err) => batch.forEach((b) => b.reject(err)))
      .finally(() => {
        this.inFlight -= 1;
        this.kick();
      });
  }
}

/**
 * Runs `work` one at a time; a request made while it runs schedules exactly one more run, so no
 * trigger is lost and bursts of triggers collapse into one.
 */
export class Coalescer {
  private running: Promise<void> | null = null;
  private again = false;

  constructor(
    private readonly work: () => Promise<void>,
    private readonly onError: (err: unknown) => void,
    /** Under load, runs start at most this often, so each one takes more of the waiting work. */
    private readonly minIntervalMs = 0,
  ) {}

  request(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        const startedAt = Date.now();
        try {
          await this.work();
        } catch (err) {
          this.onError(err);
        }
        const wait = startedAt + this.minIntervalMs - Date.now();
        if (this.again && wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      } while (this.again);
      this.running = null;
    })();
    return this.running;
  }

  /** Resolves when no run is in progress. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }
}
