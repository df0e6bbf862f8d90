/**
 * An inference's monthly reservations (lib/quota-reservations.ts): its worst case in tokens, and
 * those tokens in credits at the dearest model that may answer it (its own or a fallback), at the
 * prices the ledger charges (the usage service's, carried by the standing).
 */
import type { Standing } from "../../lib/quota-gate";
import type { QuotaReservations } from "../../lib/quota-reservations";
import { priceOf } from "../usage/pricing";

/** Settled once with the tokens used and the model that answered (charged at its price); `release`: nothing used. */
export type Spend = { settle(tokensUsed: number, model: string): void; release(): void };
/** A hold that says what its settle charged, in credits (token-spend.ts counts it for a restricted token). */
export type PricedSpend = Spend & { lastCredits?: number };

/** `tokens`: the worst case (`maxTokens` plus the prompt); `models`: those that may answer. */
export type InferenceClaim = { tokens: number; models: readonly string[] };

/** Holds both, or neither and 403 QUOTA_EXCEEDED; `creditFactor`: the share of the price charged (batch lines: BATCH_CREDIT_FACTOR). */
export async function holdInference(
  reservations: Pick<QuotaReservations, "holdAll">,
  clientId: string,
  standing: Standing | undefined,
  claim: InferenceClaim,
  creditFactor = 1,
): Promise<PricedSpend> {
  const perToken = (model: string) => (standing?.prices ? (priceOf(standing.prices.kTokens, model) / 1000) * creditFactor : 0);
  const worstPrice = Math.max(0, ...claim.models.map(perToken));
  const [tokens, credits] = await reservations.holdAll(clientId, standing, [
    ["tokens", claim.tokens],
    ["credits", claim.tokens * worstPrice],
  ]);
  const spend: PricedSpend = {
    settle: (used, model) => {
      tokens.settle(used);
      spend.lastCredits = used * perToken(model);
      credits.settle(spend.lastCredits);
    },
    release: () => {
      tokens.release();
      credits.release();
    },
  };
  return spend;
}
