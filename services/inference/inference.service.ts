/**
 * Hosted model inference: the model list merged from every configured provider (Ollama, and
 * OpenAI-compatible servers), inference with or without streaming, provider health, usage
 * accounting and per-account rate limits; and the OpenAI-compatible API (the gateway's /v1 route
 * calls the `v1*` actions). The work happens in engine.ts; the actions only hand over.
 */
import type { Readable } from "stream";
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { Type } from "../../lib/contract";
import { brokerEnv } from "../../lib/settings";
import { InferenceSettings, parseInferenceSettings } from "./settings";
import type { CallerMeta } from "../../lib/identity";
import { releaseRedis } from "../../lib/redis";
import { DbMixin, DbThis } from "../../mixins/db.mixin";
import type { StreamAbortHook } from "../api-gateway/streaming";
import { INFER_STREAM, InferenceResult, ModelList, ProviderHealth, PublicModel } from "./contract";
import type { InferenceRecord } from "./attempt-log";
import { InferenceEngine, InferParams } from "./engine";
import { chatCompletion, embeddingList, modelList, openAiStreamFormat, parseChatCompletion, parseEmbeddings } from "./openai-api";
import type { InferenceRateLimits } from "./rate-limits";
import { v1MessagesAction } from "./messages-action";
import { INFERENCE_COMPLETED } from "../../lib/event-names";
import { inferenceCompleted } from "./events";
import { migrations } from "./migrations";
import { promptText } from "./providers";
import { providerReport } from "./startup-report";
import { inferenceUsage } from "./usage.repository";
import { createInferenceParts, InferenceParts } from "./parts";
import { v1Responses } from "./responses-action";
import type { InferenceClaim, Spend } from "./quota-holds";
import type { InteractivePace } from "./batches/batch-pace";
import { estimateTokens } from "./model-info";
import { USAGE_CHANNEL } from "../../lib/usage-protocol";
import { allowedChain, checkModel, visibleModels } from "./token-models";
import { admitInference, heldInference } from "./inference-gate";
import { allModels, DeploymentsMixin } from "./deployments/mixin";
import type { DeploymentsSetup } from "./deployments/setup";
import { BatchMixin, batchActions } from "./batches/batch.mixin";

export interface InferActionParams extends InferParams {
  stream: boolean;
}

type InferenceMeta = CallerMeta & { $streamAbort?: StreamAbortHook; $responseType?: string; $responseHeaders?: Record<string, string> };

const STREAM_HEADERS = { "Cache-Control": "no-cache", "X-Accel-Buffering": "no" };
/** /v1 actions: reached through the gateway's /v1 route only (no `rest`: not under /api); OpenAI's own API document describes them. */
const V1 = {
  auth: "required" as const,
  scope: "inference" as const,
  callers: ["api-gateway"] as const,
  openapi: { tag: "models" as const, summary: "OpenAI-compatible API", status: 200, response: Type.Unknown(), hidden: true as const },
};
const unixNow = () => Math.floor(Date.now() / 1000);

type InferenceThis = Service &
  DbThis &
  Omit<InferenceParts, "providers" | "catalogue"> & {
    config: InferenceSettings;
    engine: InferenceEngine;
    deployments: DeploymentsSetup;
    batchPace: InteractivePace;
    recordFinished(record: InferenceRecord, batch?: { rates: InferenceRateLimits; creditFactor: number }): void;
    stopBatches(): Promise<void>;
    admit(ctx: Context<unknown, InferenceMeta>, claim: InferenceClaim): Promise<Spend>;
    held<T>(ctx: Context<unknown, InferenceMeta>, claim: InferenceClaim, work: (hold: Spend) => Promise<T>): Promise<T>;
    streamed(ctx: Context<unknown, InferenceMeta>, opened: { id: string; stream: Readable }): Readable;
  };

const HEALTH_TIMEOUT_MS = 2_000;

const InferenceService: ServiceSchema<ServiceSettingSchema, InferenceThis> = {
  name: "inference",
  emits: [{ event: INFERENCE_COMPLETED, kind: "emit" }],
  publishes: [USAGE_CHANNEL],
  // The /api/deployments routes and their controller (deployments/mixin.ts), and the Batch API (batches/batch.mixin.ts). Listed
  // before DbMixin, their hooks run after its (moleculer applies the list from the end): they use its pool and tables.
  mixins: [DeploymentsMixin, BatchMixin, DbMixin({ schema: "inference", migrations })],

  settings: {
    rest: "/models",
  },

  actions: {
    list: {
      rest: "GET /",
      auth: "public",
      openapi: {
        tag: "models",
        summary: "Models of every configured provider, and with credentials the caller's deployments",
        status: 200,
        response: ModelList,
      },
      async handler(this: InferenceThis, ctx: Context<unknown, InferenceMeta>): Promise<{ models: PublicModel[] }> {
        return { models: await allModels(this, ctx.meta.caller?.clientId) };
      },
    },

    infer: {
      rest: "POST /infer",
      streams: { param: "stream" },
      auth: "required",
      scope: "inference",
      openapi: {
        tag: "models",
        summary: "Generate text with a model",
        status: 200,
        response: InferenceResult,
        alternatives: { "text/event-stream": INFER_STREAM },
        errors: ["MODEL_NOT_FOUND", "PROVIDER_ERROR", "PROVIDER_TIMEOUT", "QUOTA_EXCEEDED"],
      },
      params: {
        $$strict: "remove",
        model: { type: "string", trim: true, empty: false, max: 256 },
        prompt: { type: "string", empty: false },
        systemPrompt: { type: "string", optional: true },
        temperature: { type: "number", min: 0, max: 2, optional: true, default: 0.7 },
        maxTokens: { type: "number", integer: true, min: 1, max: 8192, optional: true, default: 1024 },
        stream: { type: "boolean", optional: true, default: false },
      },
      async handler(this: InferenceThis, ctx: Context<InferActionParams, InferenceMeta>) {
        const { params } = ctx;
        const clientId = ctx.meta.caller!.clientId;
        const tokens = params.maxTokens + estimateTokens(`${params.systemPrompt ?? ""}\n${params.prompt}`);
        return this.held(ctx, { tokens, models: allowedChain(ctx.meta.caller, params, this.engine.modelsOf(params)) }, async (hold) => {
          if (params.stream) return this.streamed(ctx, await this.engine.openStream(clientId, params, hold.settle));
          const result = await this.engine.infer(clientId, params);
          hold.settle(result.tokensUsed, result.model);
          return result;
        });
      },
    },

    /** GET /v1/models */
    v1Models: {
      ...V1,
      async handler(this: InferenceThis, ctx: Context<unknown, InferenceMeta>) {
        return modelList(visibleModels(ctx.meta.caller, await allModels(this, ctx.meta.caller?.clientId)), unixNow());
      },
    },

    /** POST /v1/chat/completions */
    v1ChatCompletions: {
      ...V1,
      streams: { param: "stream" },
      async handler(this: InferenceThis, ctx: Context<unknown, InferenceMeta>) {
        const request = parseChatCompletion(ctx.params);
        const clientId = ctx.meta.caller!.clientId;
        const prompt = estimateTokens(promptText(request));
        const claim = {
          tokens: (request.maxTokens ?? this.config.reserveMaxTokens) + prompt,
          models: allowedChain(ctx.meta.caller, request, this.engine.modelsOf(request)),
        };
        return this.held(ctx, claim, async (hold) => {
          // The stream's format (its closures) only for a stream: a whole answer is the hot path.
          if (request.stream) {
            const format = openAiStreamFormat(request.includeUsage, unixNow());
            return this.streamed(ctx, await this.engine.openChatStream(clientId, request, format, hold.settle));
          }
          const answer = await this.engine.chat(clientId, request);
          hold.settle(answer.promptTokens + answer.completionTokens, answer.model);
          return chatCompletion(answer, unixNow());
        });
      },
    },

    /** POST /v1/responses (responses-action.ts) */
    v1Responses: { ...V1, ...v1Responses },

    /** POST /v1/messages (Anthropic's Messages API) */
    v1Messages: v1MessagesAction(V1),

    /** POST /v1/embeddings */
    v1Embeddings: {
      ...V1,
      async handler(this: InferenceThis, ctx: Context<unknown, InferenceMeta>) {
        const request = parseEmbeddings(ctx.params);
        checkModel(ctx.meta.caller, request.model);
        return this.held(ctx, { tokens: estimateTokens(request.input.join("\n")), models: [request.model] }, async (hold) => {
          const embedded = await this.engine.embed(ctx.meta.caller!.clientId, request.model, request.input);
          hold.settle(embedded.promptTokens, embedded.model);
          return embeddingList(embedded, request.base64);
        });
      },
    },

    /** /v1/files and /v1/batches: the Batch API (batches/batch.mixin.ts). */
    ...batchActions(V1),

    health: {
      rest: "GET /health",
      auth: "public",
      openapi: { tag: "models", summary: "Whether each model provider is reachable", status: 200, response: ProviderHealth },
      handler(this: InferenceThis): Promise<Record<string, boolean>> {
        return this.engine.health();
      },
    },

    /** Internal (no route): cancels a running stream whose HTTP client went away. */
    abort: {
      visibility: "public",
      callers: ["api-gateway"],
      params: { id: { type: "string", max: 64 } },
      handler(this: InferenceThis, ctx: Context<{ id: string }, CallerMeta>): { aborted: boolean } {
        return { aborted: this.engine.abort(ctx.params.id, ctx.meta.caller?.clientId) };
      },
    },
  },

  methods: {
    /** Off the response path: a batched row for accounting, an event for metrics; a batch line's at its price and in its rate budget. */
    recordFinished(this: InferenceThis, record: InferenceRecord, batch?: { rates: InferenceRateLimits; creditFactor: number }) {
      this.recorder.add(record);
      // Answered, or tokens generated (a stream abandoned): it counts in the account's usage.
      if (record.provider && (record.outcome === "ok" || record.tokensUsed > 0)) this.usage.add(inferenceUsage(record, new Date(), batch?.creditFactor));
      this.broker.emit(INFERENCE_COMPLETED, inferenceCompleted(record)).catch(() => undefined);
      (batch?.rates ?? this.rates)
        .charge(record.clientId, record.tokensUsed)
        .catch((err) => this.logger.warn(`Could not count tokens for rate limits: ${(err as Error).message}`));
    },

    /** A stream as the answer: server-sent events, and the hook that cancels it when its client leaves. */
    streamed(this: InferenceThis, ctx: Context<unknown, InferenceMeta>, { id, stream }: { id: string; stream: Readable }): Readable {
      ctx.meta.$responseType = "text/event-stream";
      ctx.meta.$responseHeaders = { ...ctx.meta.$responseHeaders, ...STREAM_HEADERS, "X-Inference-Id": id };
      // Over NATS the gateway holds only a copy of the stream: it calls this when its client leaves.
      ctx.meta.$streamAbort = { action: "inference.abort", params: { id }, nodeID: this.broker.nodeID };
      // Interactive until it ends (or its client leaves): batch lines stay paced while it runs (batch-pace.ts).
      const end = this.batchPace.begin();
      stream.once("close", end); // after its end, an error or its client leaving (Readable's emitClose)
      return stream;
    },

    /** The one gate every inference passes (inference-gate.ts). */
    admit(this: InferenceThis, ctx: Context<unknown, InferenceMeta>, claim: InferenceClaim): Promise<Spend> {
      return admitInference(this, ctx, claim);
    },

    /** `work` under the request's reservation: it settles it with what was used; a failure releases it. */
    async held<T>(this: InferenceThis, ctx: Context<unknown, InferenceMeta>, claim: InferenceClaim, work: (hold: Spend) => Promise<T>): Promise<T> {
      // Counted while it runs (a stream: until it opened, then streamed() counts it): batch lines keep out of its way (batch-pace.ts).
      const end = this.batchPace.begin();
      try {
        return await heldInference(this, ctx, claim, work);
      } finally {
        end();
      }
    },
  },

  created(this: InferenceThis) {
    this.config = parseInferenceSettings(brokerEnv(this.broker));
    const { providers, catalogue, ...parts } = createInferenceParts(this.broker, this.db, this.config, this.logger);
    Object.assign(this, parts);
    this.tokenSpend.start();
    this.engine = new InferenceEngine({
      catalogue,
      providers,
      timeoutMs: this.config.timeoutMs,
      healthTimeoutMs: HEALTH_TIMEOUT_MS,
      fallbacks: this.config.fallbacks,
      // After the answer is on its way: the accounting (exact, only later) is not part of a request's latency.
      onFinished: (record) => setImmediate(() => this.recordFinished(record)),
      deployments: this.deployments.router,
    });
  },

  started(this: InferenceThis) {
    // Whether each provider answers, and how to get one: not awaited, a provider that is down must not hold up the start.
    const targets = [...(this.config.ollamaUrl ? [{ name: "ollama", url: this.config.ollamaUrl }] : []), ...this.config.openaiProviders];
    void this.engine.health().then((health) => {
      const { line, anyAnswers } = providerReport(targets, health);
      if (anyAnswers) this.logger.info(line);
      else this.logger.warn(line);
    });
  },

  async stopped(this: InferenceThis) {
    // Batch lines in flight are stored before the engine, the recorder and the usage publisher stop.
    await this.stopBatches();
    this.engine.abortAll();
    await this.recorder.flush();
    await this.tokenSpend.stop();
    const lost = await this.usage.close(2000);
    if (lost) this.logger.error(`${lost} inference usage record(s) could not be published before stopping`);
    if (this.redisUrl) await releaseRedis(this.redisUrl);
  },
};

export default InferenceService;
