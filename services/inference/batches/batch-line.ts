/**
 * One line of a batch, run as its /v1 route runs it: the same parsing (openai-api.ts), the same
 * engine (providers, deployments, fallbacks, usage records), the account's monthly quotas held
 * and settled, and a rate-limit budget of its own. What comes of it: a stored outcome (the output
 * file's line, or the error file's), or a retry after a delay (a provider fault while attempts
 * are left, a rate limit). Clock and ids are handed in.
 */
import type { InferenceEngine } from "../engine";
import { chatCompletion, embeddingList, parseChatCompletion, parseEmbeddings } from "../openai-api";
import { estimateTokens } from "../model-info";
import { promptText } from "../providers";
import type { Spend } from "../quota-holds";
import { allowedChainOf } from "../token-models";
import { answeredLine, refusedLine, unrunLine } from "./batch-views";
import type { ClaimedLine, LineOutcome } from "./lines.repository";

export type LineDecision = { store: LineOutcome } | { retryInMs: number; counted: boolean };

export type LinePorts = {
  engine: Pick<InferenceEngine, "chat" | "embed" | "modelsOf">;
  /**
   * Holds the line's worst case of the monthly quotas and counts it in the batch rate budget, its
   * batch's token (if any) within its maxCredits and charged what it settles (throws 403 QUOTA_EXCEEDED, 429 RATE_LIMITED).
   */
  admit(clientId: string, tokens: number, models: readonly string[], tokenId: string | null): Promise<Spend>;
  reserveMaxTokens: number;
  maxAttempts: number;
  retryBaseMs: number;
  newId(): string;
  now(): number;
};

type ApiFault = { type?: unknown; code?: unknown; message?: unknown; data?: unknown };
/** Faults another try may not meet: the provider's, or no provider reachable. */
const RETRYABLE = new Set(["PROVIDER_ERROR", "PROVIDER_TIMEOUT", "SERVICE_UNAVAILABLE"]);

const unixNow = (ports: LinePorts) => Math.floor(ports.now() / 1000);

/** The line's answer as its route gives it, under a hold of its worst case (released if it fails); the batch's allow-list narrows its models. */
async function answer(ports: LinePorts, l: ClaimedLine) {
  if (l.endpoint === "/v1/embeddings") {
    const request = parseEmbeddings(l.body);
    const models = allowedChainOf(l.allowed_models, request, [request.model]);
    const spend = await ports.admit(l.client_id, estimateTokens(request.input.join("\n")), models, l.token_id);
    try {
      const embedded = await ports.engine.embed(l.client_id, request.model, request.input);
      spend.settle(embedded.promptTokens, embedded.model);
      return { requestId: embedded.id, body: embeddingList(embedded, request.base64) };
    } catch (err) {
      spend.release();
      throw err;
    }
  }
  const request = parseChatCompletion(l.body);
  const models = allowedChainOf(l.allowed_models, request, ports.engine.modelsOf(request));
  const tokens = (request.maxTokens ?? ports.reserveMaxTokens) + estimateTokens(promptText(request));
  const spend = await ports.admit(l.client_id, tokens, models, l.token_id);
  try {
    const a = await ports.engine.chat(l.client_id, request);
    spend.settle(a.promptTokens + a.completionTokens, a.model);
    return { requestId: a.id, body: chatCompletion(a, unixNow(ports)) };
  } catch (err) {
    spend.release();
    throw err;
  }
}

export async function runLine(ports: LinePorts, l: ClaimedLine): Promise<LineDecision> {
  const id = `batch_req_${ports.newId()}`;
  try {
    const { requestId, body } = await answer(ports, l);
    return { store: { ok: true, result: answeredLine(id, l.custom_id, requestId, body) } };
  } catch (err) {
    const e = err as ApiFault;
    const type = typeof e.type === "string" ? e.type : "INTERNAL";
    if (type === "QUOTA_EXCEEDED") return { store: { ok: false, result: unrunLine(id, l.custom_id, "insufficient_quota", String(e.message)) } };
    if (type === "RATE_LIMITED") {
      const retryAfterS = Number((e.data as { retryAfter?: unknown } | null)?.retryAfter) || 1;
      return { retryInMs: retryAfterS * 1000, counted: false };
    }
    if (RETRYABLE.has(type) && l.attempts < ports.maxAttempts) return { retryInMs: ports.retryBaseMs * 2 ** (l.attempts - 1), counted: true };
    const status = typeof e.code === "number" && e.code >= 400 ? e.code : 500;
    const fault = { code: type, status, message: typeof e.message === "string" ? e.message : "Internal error", details: e.data ?? null };
    return { store: { ok: false, result: refusedLine(id, l.custom_id, `req_${ports.newId()}`, fault) } };
  }
}
