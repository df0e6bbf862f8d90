/**
 * Register and login limits that a third party cannot turn against an account's owner:
 * - every attempt counts against the client address (AUTH_RATE_LIMIT_PER_IP per window);
 * - login failures count per (e-mail, address) pair (AUTH_RATE_LIMIT_PER_EMAIL per window), so
 *   failing from one address blocks that address for that e-mail only; the owner logging in from
 *   anywhere else is never refused because of someone else's failures;
 * - registration attempts count per (e-mail, address) pair the same way.
 * Guessing one account's password from many addresses is bounded by the per-address limit only
 * (and scrypt's cost); refusing a correct password would hand that attacker a lockout instead.
 */
import type { RateDecision, RateLimiter } from "../../lib/rate-limiter";

export type ThrottleLimits = { perAddress: number; perEmail: number; windowS: number };

const ALLOWED: RateDecision = { allowed: true, retryAfterS: 0 };

/** The stricter of several decisions: refused if any refuses, retry after the longest wait. */
function worst(decisions: RateDecision[]): RateDecision {
  const refused = decisions.filter((d) => !d.allowed);
  return refused.length ? { allowed: false, retryAfterS: Math.max(...refused.map((d) => d.retryAfterS)) } : ALLOWED;
}

export class LoginThrottle {
  constructor(
    private readonly limiter: RateLimiter,
    private readonly limits: ThrottleLimits,
  ) {}

  private addressKey = (address: string | undefined) => `ip:${address ?? "internal"}`;
  private pairKey = (kind: string, email: string, address: string | undefined) => `${kind}:${email.toLowerCase()}|${address ?? "internal"}`;

  /** Counts a registration attempt; says whether it may go on. */
  async register(email: string, address: string | undefined): Promise<RateDecision> {
    const { perAddress, perEmail, windowS } = this.limits;
    return worst(
      await Promise.all([
        this.limiter.hit(this.addressKey(address), perAddress, windowS),
        this.limiter.hit(this.pairKey("register", email, address), perEmail, windowS),
      ]),
    );
  }

  /** Counts a login attempt against the address and checks this pair's failures (not counted here). */
  async beforeLogin(email: string, address: string | undefined): Promise<RateDecision> {
    const { perAddress, perEmail, windowS } = this.limits;
    return worst(
      await Promise.all([
        this.limiter.hit(this.addressKey(address), perAddress, windowS),
        this.limiter.peek(this.pairKey("login-failed", email, address), perEmail),
      ]),
    );
  }

  async loginFailed(email: string, address: string | undefined): Promise<void> {
    await this.limiter.hit(this.pairKey("login-failed", email, address), this.limits.perEmail, this.limits.windowS);
  }
}
