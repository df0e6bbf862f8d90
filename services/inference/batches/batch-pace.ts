/**
 * Batch lines paced behind interactive requests (docs/inference.md "Batch API", Pacing). While an
 * interactive request is in flight in this replica, or one began or ended here less than
 * BATCH_PACE_IDLE_MS ago, or (with Redis) any replica marked one less than BATCH_PACE_IDLE_MS ago, the
 * replica's runner keeps at most BATCH_PACED_IN_FLIGHT batch lines in flight: a floor, so batches still
 * progress under constant interactive load. Once interactive traffic has been idle that long
 * everywhere, it goes back to BATCH_MAX_IN_FLIGHT. Lines already in flight are not stopped: the count
 * falls to the floor as they finish.
 */
import type Redis from "ioredis";
import { withRedisTimeout } from "../redis-timeout";

export type PaceSettings = {
  /** BATCH_PACED_IN_FLIGHT: batch lines a replica keeps in flight at most while interactive requests run (≥ 1). */
  pacedInFlight: number;
  /** BATCH_PACE_IDLE_MS: how long interactive traffic must be idle before batches run at full concurrency again. */
  idleMs: number;
};

/** What replicas tell each other: "an interactive request ran here, within ttlMs". */
export interface PaceSignal {
  mark(ttlMs: number): Promise<void>;
  /** Milliseconds the latest mark of any replica has left (0: none). */
  left(): Promise<number>;
}

/** The signal as one Redis key with a TTL: a SET when marked, a PTTL when read. */
export class RedisPaceSignal implements PaceSignal {
  constructor(
    private readonly redis: Redis,
    private readonly key: string,
  ) {}

  async mark(ttlMs: number): Promise<void> {
    await withRedisTimeout(this.redis.set(this.key, "1", "PX", ttlMs));
  }

  async left(): Promise<number> {
    const ms = await withRedisTimeout(this.redis.pttl(this.key));
    return ms > 0 ? ms : 0;
  }
}

export class InteractivePace {
  private inFlight = 0;
  /** When an interactive request last began, ended or was seen in flight here. */
  private lastAt = -Infinity;
  private markedAt = -Infinity;
  private readAt = -Infinity;
  /** Until when another replica's mark holds (as last read). */
  private remoteUntil = -Infinity;
  /** The signal failed last time: reported once until it works again. */
  private failing = false;

  constructor(
    readonly settings: PaceSettings,
    private readonly signal?: PaceSignal,
    /** The signal failed (once until it works again); pacing goes on with this replica's own requests. */
    private readonly onError: (err: Error) => void = () => undefined,
    private readonly now: () => number = Date.now,
  ) {}

  /** Interactive requests in flight in this replica now. */
  get interactive(): number {
    return this.inFlight;
  }

  /** An interactive request begins; the function returned ends it (once). */
  begin(): () => void {
    this.inFlight += 1;
    this.touch();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.inFlight -= 1;
      this.touch();
    };
  }

  /** Whether batch lines are held to the floor now; the other replicas' mark is read at most every idleMs / 4. */
  async paced(): Promise<boolean> {
    if (this.inFlight > 0) {
      this.touch(); // a long request (a stream) keeps the other replicas' view of it fresh
      return true;
    }
    const now = this.now();
    if (now - this.lastAt < this.settings.idleMs) return true;
    if (!this.signal) return false;
    if (now - this.readAt >= this.settings.idleMs / 4) {
      this.readAt = now;
      try {
        this.remoteUntil = now + (await this.signal.left());
        this.failing = false;
      } catch (err) {
        this.failed(err as Error);
      }
    }
    return this.now() < this.remoteUntil;
  }

  /** Batch lines this replica may have in flight now: the floor while paced, else `unpaced`. */
  async limit(unpaced: number): Promise<number> {
    return (await this.paced()) ? Math.min(this.settings.pacedInFlight, unpaced) : unpaced;
  }

  private touch(): void {
    const now = this.now();
    this.lastAt = now;
    // At most every quarter of the window: the others see the mark until idleMs after it.
    if (this.signal && now - this.markedAt >= this.settings.idleMs / 4) {
      this.markedAt = now;
      this.signal.mark(this.settings.idleMs).then(
        () => (this.failing = false),
        (err) => this.failed(err as Error),
      );
    }
  }

  private failed(err: Error): void {
    if (!this.failing) this.onError(err);
    this.failing = true;
  }
}
