/**
 * What restricted tokens spend on inference, in credits at the usage service's prices (the same
 * amount the account's reservation settles, quota-holds.ts), summed per token and reported to auth
 * (`auth.addTokenCredits`) once a second: GET /api/auth/tokens shows it as `creditsUsed`, and the
 * gateway refuses a token at its `maxCredits` (a second or two after the spend that reached it).
 */
import type { ServiceBroker } from "moleculer";
import type { Caller } from "../../lib/identity";
import { KeyedBatch } from "../../lib/keyed-batch";
import type { PricedSpend, Spend } from "./quota-holds";

export const tokenSpendBatch = (broker: ServiceBroker, warn: (message: string) => void): KeyedBatch<number> =>
  new KeyedBatch<number>(
    (spent) => broker.call("auth.addTokenCredits", { spent: [...spent].map(([id, credits]) => ({ id, credits })) }),
    (a, b) => a + b,
    (m) => warn(`Token credits: ${m}`),
  );

/** `hold`, also counting what it settles in the caller's token (unchanged for a JWT or an API key). */
export function chargingToken(hold: PricedSpend, caller: Caller | undefined, batch: KeyedBatch<number>): Spend {
  const tokenId = caller?.token?.id;
  if (!tokenId) return hold;
  return {
    settle: (used, model) => {
      hold.settle(used, model);
      if (hold.lastCredits) batch.note(tokenId, hold.lastCredits);
    },
    release: () => hold.release(),
  };
}
