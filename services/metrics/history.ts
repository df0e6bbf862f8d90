/**
 * Each card's utilisation and memory over the last window (default an hour), one sample per bucket
 * (default 10 s: the mean of the heartbeats that fell in it), for the console's cluster chart
 * (GET /api/gpu/status/history). Bounded: at most window/bucket samples per card and `maxCards`
 * cards (the longest silent is forgotten first); a card not heard from for a whole window is
 * dropped with its samples. Pure: the caller passes the clock.
 */
import type { GpuCard } from "../../lib/gpu-protocol";

export type HistoryOptions = { bucketMs: number; windowMs: number; maxCards: number };

/** One bucket as answered: its start, and the card's mean figures over it. */
export type HistorySample = { at: string; utilization: number; memoryUsed: number; memoryTotal: number };
export type CardHistory = { uuid: string; samples: HistorySample[] };

type Bucket = { start: number; n: number; utilization: number; memoryUsed: number; memoryTotal: number };
type Card = { seenAt: number; buckets: Bucket[] };

/** Enough cards for a large cluster, few enough that a node announcing thousands cannot grow this without end. */
export const MAX_CARDS = 4096;

export class GpuHistory {
  /** uuid → its buckets, oldest first; Map order is last-seen order (a card seen again moves to the end). */
  private cards = new Map<string, Card>();

  constructor(private readonly options: HistoryOptions) {}

  get bucketMs(): number {
    return this.options.bucketMs;
  }

  get windowMs(): number {
    return this.options.windowMs;
  }

  /** A heartbeat's cards at `now`: added to the bucket `now` falls in (a new one when it is past the last). */
  record(cards: readonly GpuCard[], now: number): void {
    const start = now - (now % this.options.bucketMs);
    for (const gpu of cards) {
      const card = this.cards.get(gpu.uuid) ?? { seenAt: now, buckets: [] };
      this.cards.delete(gpu.uuid);
      this.cards.set(gpu.uuid, card);
      card.seenAt = now;
      const last = card.buckets.at(-1);
      if (last && last.start === start) {
        last.n += 1;
        last.utilization += gpu.utilization;
        last.memoryUsed += gpu.memoryUsed;
        last.memoryTotal = gpu.memoryTotal;
      } else if (!last || last.start < start) {
        card.buckets.push({ start, n: 1, utilization: gpu.utilization, memoryUsed: gpu.memoryUsed, memoryTotal: gpu.memoryTotal });
      } // a heartbeat older than the last bucket (a clock stepped back) is not history any more
      this.trim(card, now);
    }
    // The longest silent cards go first (Map order).
    for (const uuid of this.cards.keys()) {
      if (this.cards.size <= this.options.maxCards) break;
      this.cards.delete(uuid);
    }
  }

  /** Every card heard from within the window with its samples in it, oldest first; forgets the others. */
  snapshot(now: number): CardHistory[] {
    const out: CardHistory[] = [];
    for (const [uuid, card] of this.cards) {
      if (now - card.seenAt > this.options.windowMs) {
        this.cards.delete(uuid);
        continue;
      }
      this.trim(card, now);
      out.push({ uuid, samples: card.buckets.map(sampleOf) });
    }
    return out;
  }

  /** Cards held now (for tests of the bounds). */
  get size(): number {
    return this.cards.size;
  }

  private trim(card: Card, now: number): void {
    const oldest = now - this.options.windowMs;
    let drop = 0;
    while (drop < card.buckets.length && card.buckets[drop].start + this.options.bucketMs <= oldest) drop++;
    if (drop) card.buckets.splice(0, drop);
  }
}

const sampleOf = (b: Bucket): HistorySample => ({
  at: new Date(b.start).toISOString(),
  utilization: Math.round((b.utilization / b.n) * 10) / 10,
  memoryUsed: Math.round(b.memoryUsed / b.n),
  memoryTotal: b.memoryTotal,
});
