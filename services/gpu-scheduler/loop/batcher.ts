export type BatcherOptions = {
  maxBatch: number;
  maxInFlight: number;
  /** What the pusher of an item that failed on its own gets (e.g. a data error made a 400). */
  itemError?: (err: unknown) => unknown;
};

type Pending<In, Out> = { item: In; resolve: (o: Out) => void; reject: (e: unknown) => void };

/**
 * Group commit: items pushed while a batch is in flight go together in the next one, so an idle
 * system pays no delay and a busy one makes one database round trip for many requests. A batch
 * that fails is retried item by item, so one bad item fails only its own pusher (`run` must be
 * safe to repeat for the items of a failed batch: one statement, or compare-and-set writes).
 */
export class Batcher<In, Out> {
  private pending: Array<Pending<In, Out>> = [];
  private inFlight = 0;
  private scheduled = false;

  constructor(
    /** Handles a batch; returns one result per item, in order. */
    private readonly run: (items: In[]) => Promise<Out[]>,
    private readonly opts: BatcherOptions = { maxBatch: 500, maxInFlight: 2 },
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
      .then(
        (outs) => batch.forEach((b, i) => b.resolve(outs[i])),
        (err) => (batch.length === 1 ? this.fail(batch[0], err) : this.oneByOne(batch)),
      )
      // A broken `run` (no result per item): every pusher still hears back (settled ones ignore it).
      .catch((err) => batch.forEach((b) => b.reject(err)))
      .finally(() => {
        this.inFlight -= 1;
        this.kick();
      });
  }

  /** After a failed batch: each item alone, so only the ones that fail by themselves get an error. */
  private async oneByOne(batch: Array<Pending<In, Out>>): Promise<void> {
    await Promise.all(
      batch.map((b) =>
        this.run([b.item]).then(
          ([out]) => b.resolve(out),
          (err) => this.fail(b, err),
        ),
      ),
    );
  }

  private fail(b: Pending<In, Out>, err: unknown): void {
    b.reject(this.opts.itemError ? this.opts.itemError(err) : err);
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
