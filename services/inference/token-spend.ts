/**
 * What restricted tokens spend on inference, in credits at the usage service's prices (the same
 * amount the account's reservation settles, quota-holds.ts), summed per token and reported to auth
 * (`auth.addTokenCredits`) once a second: GET /api/auth/tokens shows it as `creditsUsed`, and the
 * gateway refuses a token at its `maxCredits` (a second or two after the spend that reached it).
 */
import type { ServiceBroker } from "moleculer";
import { apiError } from "../../lib/errors";
import { KeyedBatch } from "../../lib/keyed-batch";
import type { TokenCredits as AuthCredits } from "../auth/token-actions";
import type { PricedSpend, Spend } from "./quota-holds";

export const tokenSpendBatch = (broker: ServiceBroker, warn: (message: string) => void): KeyedBatch<number> =>
  new KeyedBatch<number>(
    (spent) => broker.call("auth.addTokenCredits", { spent: [...spent].map(([id, credits]) => ({ id, credits })) }),
    (a, b) => a + b,
    (m) => warn(`Token credits: ${m}`),
  );

/** `hold`, also noting what it settles for the restricted token `tokenId` (unchanged without one: a JWT or an API key). */
export function chargingToken(hold: PricedSpend, tokenId: string | undefined, note: (tokenId: string, credits: number) => void): Spend {
  if (!tokenId) return hold;
  return {
    settle: (used, model) => {
      hold.settle(used, model);
      if (hold.lastCredits) note(tokenId, hold.lastCredits);
    },
    release: () => hold.release(),
  };
}

/** What is known of a token: auth's figures when last asked, and what this replica charged it since it first asked. */
type Known = { max: number | null; authUsed: number; firstUsed: number; charged: number; at: number };

const MAX_KNOWN = 10_000;

/**
 * A batch line's token check (the gateway checks interactive calls): its creating token's
 * `maxCredits` reached is 403 QUOTA_EXCEEDED (resource tokenCredits), which fails the line with
 * insufficient_quota. Used = the larger of auth's figure (asked at most `ttlMs` ago) and auth's
 * first figure plus what this replica charged since, so one replica's lines stop at the limit
 * give or take the lines in flight, without waiting for the spend to reach auth. A deleted token
 * is absent from auth: no limit is known, the account's quotas still apply.
 */
export class TokenCreditLimits {
  private readonly known = new Map<string, Known>();
  private readonly asking = new Map<string, Promise<Known | undefined>>();

  constructor(
    private readonly ask: (ids: string[]) => Promise<AuthCredits[]>,
    private readonly warn: (message: string) => void,
    private readonly ttlMs = 1_000,
    private readonly now: () => number = Date.now,
  ) {}

  async check(tokenId: string): Promise<void> {
    let k = this.known.get(tokenId);
    if (!k || this.now() - k.at >= this.ttlMs) k = await this.refresh(tokenId);
    if (!k || k.max === null) return;
    const used = Math.max(k.authUsed, k.firstUsed + k.charged);
    if (used >= k.max) throw apiError("QUOTA_EXCEEDED", `This token's credit limit (${k.max}) is used up`, { resource: "tokenCredits", limit: k.max, used });
  }

  /** This replica charged the token `credits` (a line settled). */
  note(tokenId: string, credits: number): void {
    const k = this.known.get(tokenId);
    if (k) k.charged += credits;
  }

  /** One question to auth per token at a time; when auth fails, the last figures known (else none: allowed, logged). */
  private refresh(tokenId: string): Promise<Known | undefined> {
    const pending = this.asking.get(tokenId);
    if (pending) return pending;
    const asked = this.ask([tokenId])
      .then(([row]) => {
        const last = this.known.get(tokenId);
        const k: Known = last
          ? { ...last, max: row?.maxCredits ?? null, authUsed: row?.creditsUsed ?? 0, at: this.now() }
          : { max: row?.maxCredits ?? null, authUsed: row?.creditsUsed ?? 0, firstUsed: row?.creditsUsed ?? 0, charged: 0, at: this.now() };
        if (this.known.size >= MAX_KNOWN) this.known.clear();
        this.known.set(tokenId, k);
        return k;
      })
      .catch((err: Error) => {
        this.warn(`Token credits not known, the last figures are used: ${err.message}`);
        return this.known.get(tokenId);
      })
      .finally(() => this.asking.delete(tokenId));
    this.asking.set(tokenId, asked);
    return asked;
  }
}
