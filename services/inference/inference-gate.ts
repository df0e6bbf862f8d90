/**
 * The one gate every inference passes (infer, v1ChatCompletions, v1Responses, v1Messages,
 * v1Embeddings), after validation: the monthly tokens and credits hold the request's worst case
 * (quota-holds.ts) or it is 403 before the provider is asked; then the account's rate limits count
 * the request, set the x-ratelimit-* headers, or throw 429 (the reservations released).
 */
import type { Context, LoggerInstance } from "moleculer";
import type { CallerMeta } from "../../lib/identity";
import type { QuotaGate } from "../../lib/quota-gate";
import type { QuotaReservations } from "../../lib/quota-reservations";
import { holdInference, InferenceClaim, Spend } from "./quota-holds";
import type { InferenceRateLimits } from "./rate-limits";
import { chargingToken, type tokenSpendBatch } from "./token-spend";
import type { DeploymentRouter } from "./deployments/router";

/** What the gate needs of the inference service. */
export type GateParts = {
  gate: QuotaGate;
  reservations: QuotaReservations;
  rates: InferenceRateLimits;
  tokenSpend: ReturnType<typeof tokenSpendBatch>;
  logger: LoggerInstance;
  deployments: { router: Pick<DeploymentRouter, "prepare"> };
};

/** On an answer that waited for a deployment's replica to start. */
export const COLD_START_HEADER = "x-ci-cold-start";

type GateMeta = CallerMeta & { $responseHeaders?: Record<string, string> };

export async function admitInference(parts: GateParts, ctx: Context<unknown, GateMeta>, claim: InferenceClaim): Promise<Spend> {
  const clientId = ctx.meta.caller!.clientId;
  const standing = (await parts.gate.standings([clientId])).get(clientId);
  const priced = await holdInference(parts.reservations, clientId, standing, claim);
  const hold = chargingToken(priced, ctx.meta.caller?.token?.id, (id, credits) => parts.tokenSpend.note(id, credits));
  const headers = await parts.rates.admit(clientId, standing).catch((err) => {
    // A limit reached refuses; Redis failing does not stop inference (it is logged).
    if ((err as { type?: string }).type === "RATE_LIMITED") {
      hold.release();
      throw err;
    }
    parts.logger.warn(`Rate limits could not be checked (allowed): ${(err as Error).message}`);
    return {};
  });
  if (Object.keys(headers).length) ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, ...headers };
  // A model deployment of the caller's: held here until a replica is ready (a cold start), within the reservation.
  let deployed: { coldStart: boolean } | undefined;
  try {
    deployed = claim.models.length ? await parts.deployments.router.prepare(clientId, claim.models[0]) : undefined;
  } catch (err) {
    hold.release();
    throw err;
  }
  if (deployed?.coldStart) ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, [COLD_START_HEADER]: "true" };
  return hold;
}

/** `work` under the request's reservation: it settles it with what was used; a failure releases it. */
export async function heldInference<T>(
  parts: GateParts,
  ctx: Context<unknown, GateMeta>,
  claim: InferenceClaim,
  work: (hold: Spend) => Promise<T>,
): Promise<T> {
  const hold = await admitInference(parts, ctx, claim);
  try {
    return await work(hold);
  } catch (err) {
    hold.release();
    throw err;
  }
}
