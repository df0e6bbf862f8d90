/**
 * POST /v1/responses (OpenAI's Responses API, stateless): the action inference.service.ts lists
 * as `v1Responses` (with its /v1 policy). It passes the same gate as /v1/chat/completions (the
 * quotas' hold, the rate limits) and the same engine, so usage, fallbacks and abandoned streams
 * count alike; the request and the answer are translated in responses-api.ts and responses-stream.ts.
 */
import type { Readable } from "stream";
import type { Context } from "moleculer";
import type { CallerMeta } from "../../lib/identity";
import type { InferenceEngine } from "./engine";
import { estimateTokens } from "./model-info";
import { promptText } from "./providers";
import type { InferenceClaim, Spend } from "./quota-holds";
import { inResponsesTerms, parseResponseCreate, responseOf } from "./responses-api";
import { responsesStreamFormat } from "./responses-stream";
import { allowedChain } from "./token-models";

/** What the action uses of the inference service. */
export type ChatHost = {
  engine: InferenceEngine;
  config: { reserveMaxTokens: number };
  held<T>(ctx: Context<unknown, CallerMeta>, claim: InferenceClaim, work: (hold: Spend) => Promise<T>): Promise<T>;
  streamed(ctx: Context<unknown, CallerMeta>, opened: { id: string; stream: Readable }): Readable;
};

const unixNow = () => Math.floor(Date.now() / 1000);
/** A provider refusing a field (tools, a format) names it as chat completions do: renamed for this API. */
const rethrown = (err: unknown): never => {
  throw inResponsesTerms(err);
};

export const v1Responses = {
  streams: { param: "stream" },
  async handler(this: ChatHost, ctx: Context<unknown, CallerMeta>) {
    const request = parseResponseCreate(ctx.params);
    const clientId = ctx.meta.caller!.clientId;
    const claim = {
      tokens: (request.maxTokens ?? this.config.reserveMaxTokens) + estimateTokens(promptText(request)),
      models: allowedChain(ctx.meta.caller, request, this.engine.modelsOf(request)),
    };
    const createdAt = unixNow();
    return this.held(ctx, claim, async (hold) => {
      const format = responsesStreamFormat(request, createdAt);
      if (request.stream) return this.streamed(ctx, await this.engine.openChatStream(clientId, request, format, hold.settle).catch(rethrown));
      const answer = await this.engine.chat(clientId, request).catch(rethrown);
      hold.settle(answer.promptTokens + answer.completionTokens, answer.model);
      return responseOf(answer, request, createdAt);
    });
  },
};
