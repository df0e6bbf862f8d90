/**
 * POST /v1/messages, Anthropic's Messages API (the gateway's alias calls `inference.v1Messages`):
 * the request translated (anthropic-api.ts), run as any chat under the account's reservation,
 * rate limits and fallbacks (the service's `held`), and answered in Anthropic's shapes
 * (anthropic-answers.ts); errors become Anthropic's at the gateway (lib/anthropic-errors.ts).
 */
import type { Readable } from "stream";
import type { Context } from "moleculer";
import type { Caller } from "../../lib/identity";
import { parseMessages } from "./anthropic-api";
import { inMessagesTerms } from "./anthropic-tools";
import { anthropicMessage, anthropicStreamFormat } from "./anthropic-answers";
import type { InferenceEngine } from "./engine";
import { estimateTokens } from "./model-info";
import type { InferenceClaim, Spend } from "./quota-holds";
import { promptText } from "./providers";
import { allowedChain } from "./token-models";

/** What the action uses of the inference service. */
export type MessagesHost = {
  engine: InferenceEngine;
  held<T>(ctx: Context, claim: InferenceClaim, work: (hold: Spend) => Promise<T>): Promise<T>;
  streamed(ctx: Context, opened: { id: string; stream: Readable }): Readable;
};

/** The action, on the service's /v1 action settings (`base`). */
export function v1MessagesAction<Base extends object>(base: Base) {
  return {
    ...base,
    streams: { param: "stream" },
    async handler(this: MessagesHost, ctx: Context<unknown, { caller?: Caller }>) {
      const request = parseMessages(ctx.params);
      const clientId = ctx.meta.caller!.clientId;
      const prompt = estimateTokens(promptText(request));
      const claim = { tokens: request.maxTokens + prompt, models: allowedChain(ctx.meta.caller, request, this.engine.modelsOf(request)) };
      return this.held(ctx, claim, async (hold) => {
        if (request.stream) return this.streamed(ctx, await this.engine.openChatStream(clientId, request, anthropicStreamFormat(), hold.settle));
        const answer = await this.engine.chat(clientId, request);
        hold.settle(answer.promptTokens + answer.completionTokens, answer.model);
        return anthropicMessage(answer);
      }).catch((err: { data?: unknown }) => {
        // A provider's refusal names the chat's fields: the client is told the Messages API's names.
        if (err && typeof err === "object") err.data = inMessagesTerms(err.data);
        throw err;
      });
    },
  };
}
