/**
 * A restricted token's model allow-list (lib/identity.ts TokenLimits.models), applied to every
 * inference before it is admitted: a model outside the list is 403 (on /v1 OpenAI's and
 * Anthropic's permission_error); fallbacks outside it are dropped from the chain, so they never
 * answer. A JWT, an API key or a token without a list passes unchanged.
 */
import { apiError } from "../../lib/errors";
import type { Caller } from "../../lib/identity";

export const modelForbidden = (model: string) => apiError("FORBIDDEN", `This token may not use the model '${model}'`, { model });

/**
 * The models that may answer `request` for `caller`, in the order tried (`chain`: the engine's
 * modelsOf). Narrows `request.fallbacks` to the allowed ones, which the engine then follows.
 */
export function allowedChain(caller: Caller | undefined, request: { model: string; fallbacks?: string[] }, chain: string[]): string[] {
  return allowedChainOf(caller?.token?.models, request, chain);
}

/** As allowedChain, for an allow-list kept apart from its caller (a batch's, run later: batches/batch-line.ts). */
export function allowedChainOf(allowed: readonly string[] | null | undefined, request: { model: string; fallbacks?: string[] }, chain: string[]): string[] {
  if (!allowed) return chain;
  if (!allowed.includes(request.model)) throw modelForbidden(request.model);
  const kept = chain.filter((m) => allowed.includes(m));
  request.fallbacks = kept.slice(1);
  return kept;
}

/** A single-model call (embeddings): 403 outside the token's list. */
export function checkModel(caller: Caller | undefined, model: string): void {
  const allowed = caller?.token?.models;
  if (allowed && !allowed.includes(model)) throw modelForbidden(model);
}

/** The models a caller may use, of `models` (all of them for a caller without a list). */
export function visibleModels<M extends { name: string }>(caller: Caller | undefined, models: M[]): M[] {
  const allowed = caller?.token?.models;
  return allowed ? models.filter((m) => allowed.includes(m.name)) : models;
}
