/**
 * Fixed-window counters. With Redis the window is shared by every replica; without, it is
 * per process. `hit` counts one attempt and says whether it is allowed.
 */
import type Redis from "ioredis";

export type RateDecision = { allowed: boolean; retryAfterS: number };

export interface RateLimiter {
  hit(key: string, limit: number, windowS: number): Promise<RateDecision>;
  /** Whether one more would be allowed, without counting it (e.g. failures counted only when they happen). */
  peek(key: string, limit: number): Promise<RateDecision>;
}

export type Clock = () => number;

export class MemoryRateLimiter implements RateLimiter {
  private windows = new Map<string, { count: number; resetAt: number }>();

  constructor(private readonly now: Clock = Date.now) {}

  async hit(key: string, limit: number, windowS: number): Promise<RateDecision> {
    const now = this.now();
    let w = this.windows.get(key);
    if (!w || w.resetAt <= now) {
      if (this.windows.size > 100_000) this.sweep(now);
      w = { count: 0, resetAt: now + windowS * 1000 };
      this.windows.set(key, w);
    }
    w.count += 1;
    return { allowed: w.count <= limit, retryAfterS: Math.ceil((w.resetAt - now) / 1000) };
  }

  async peek(key: string, limit: number): Promise<RateDecision> {
    const now = this.now();
    const w = this.windows.get(key);
    if (!w || w.resetAt <= now) return { allowed: true, retryAfterS: 0 };
    return { allowed: w.count < limit, retryAfterS: Math.ceil((w.resetAt - now) / 1000) };
  }

  private sweep(now: number) {
    for (const [key, w] of this.windows) if (w.resetAt <= now) this.windows.delete(key);
  }
}

const HIT_SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return {count, redis.call('PTTL', KEYS[1])}`;

export class RedisRateLimiter implements RateLimiter {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  async hit(key: string, limit: number, windowS: number): Promise<RateDecision> {
    const [count, ttlMs] = (await this.redis.eval(HIT_SCRIPT, 1, `${this.prefix}:${key}`, windowS * 1000)) as [number, number];
    return { allowed: count <= limit, retryAfterS: Math.max(1, Math.ceil(ttlMs / 1000)) };
  }

  async peek(key: string, limit: number): Promise<RateDecision> {
    const full = `${this.prefix}:${key}`;
    const [[, count], [, ttlMs]] = (await this.redis.multi().get(full).pttl(full).exec()) as [[unknown, string | null], [unknown, number]];
    return { allowed: Number(count ?? 0) < limit, retryAfterS: Math.max(1, Math.ceil(Number(ttlMs) / 1000)) };
  }
}
