/**
 * Fixed-window counters. With Redis the window is shared by every replica; without, it is
 * per process. `hit` counts one attempt (or `amount`, e.g. tokens) and says whether it is allowed.
 */
import type Redis from "ioredis";

export type RateDecision = { allowed: boolean; retryAfterS: number };

/** A decision with the window's count so far (what a client is told it has left). */
export type Counted = RateDecision & { count: number };

export interface RateLimiter {
  hit(key: string, limit: number, windowS: number, amount?: number): Promise<Counted>;
  /** Whether one more would be allowed, without counting it (e.g. failures counted only when they happen). */
  peek(key: string, limit: number): Promise<Counted>;
}

export type Clock = () => number;

export class MemoryRateLimiter implements RateLimiter {
  private windows = new Map<string, { count: number; resetAt: number }>();

  constructor(private readonly now: Clock = Date.now) {}

  async hit(key: string, limit: number, windowS: number, amount = 1): Promise<Counted> {
    const now = this.now();
    let w = this.windows.get(key);
    if (!w || w.resetAt <= now) {
      if (this.windows.size > 100_000) this.sweep(now);
      w = { count: 0, resetAt: now + windowS * 1000 };
      this.windows.set(key, w);
    }
    w.count += amount;
    return { allowed: w.count <= limit, retryAfterS: Math.ceil((w.resetAt - now) / 1000), count: w.count };
  }

  async peek(key: string, limit: number): Promise<Counted> {
    const now = this.now();
    const w = this.windows.get(key);
    if (!w || w.resetAt <= now) return { allowed: true, retryAfterS: 0, count: 0 };
    return { allowed: w.count < limit, retryAfterS: Math.ceil((w.resetAt - now) / 1000), count: w.count };
  }

  private sweep(now: number) {
    for (const [key, w] of this.windows) if (w.resetAt <= now) this.windows.delete(key);
  }
}

const HIT_SCRIPT = `
local count = redis.call('INCRBY', KEYS[1], ARGV[2])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {count, redis.call('PTTL', KEYS[1])}`;

export class RedisRateLimiter implements RateLimiter {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  async hit(key: string, limit: number, windowS: number, amount = 1): Promise<Counted> {
    const [count, ttlMs] = (await this.redis.eval(HIT_SCRIPT, 1, `${this.prefix}:${key}`, windowS * 1000, amount)) as [number, number];
    return { allowed: count <= limit, retryAfterS: Math.max(1, Math.ceil(ttlMs / 1000)), count };
  }

  async peek(key: string, limit: number): Promise<Counted> {
    const full = `${this.prefix}:${key}`;
    const [[, raw], [, ttlMs]] = (await this.redis.multi().get(full).pttl(full).exec()) as [[unknown, string | null], [unknown, number]];
    const count = Number(raw ?? 0);
    return { allowed: count < limit, retryAfterS: Math.max(1, Math.ceil(Number(ttlMs) / 1000)), count };
  }
}
