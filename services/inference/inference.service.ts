/**
 * Hosted model inference: the model list merged from every configured provider (Ollama, and
 * OpenAI-compatible servers), inference with or without streaming, provider health, and usage
 * accounting. The work happens in engine.ts; the actions only hand over.
 */
import type { Context, Service, ServiceSchema, ServiceSettingSchema } from "moleculer";
import { platformSettingsOf } from "../../lib/platform-settings";
import { brokerEnv } from "../../lib/settings";
import { InferenceSettings, parseInferenceSettings } from "./settings";
import type { CallerMeta } from "../../lib/identity";
import { acquireRedis, releaseRedis } from "../../lib/redis";
import { DbMixin, DbThis } from "../../mixins/db.mixin";
import type { StreamAbortHook } from "../api-gateway/streaming";
import { ModelCatalogue, RedisSnapshotStore } from "./catalogue";
import { INFER_STREAM, InferenceResult, ModelList, ProviderHealth, PublicModel } from "./contract";
import { InferenceEngine, InferenceRecord, InferParams } from "./engine";
import { INFERENCE_COMPLETED, inferenceCompleted } from "./events";
import { migrations } from "./migrations";
import { createProviders } from "./providers";
import { inferenceUsage, InferencesRepository, UsageRecorder } from "./usage.repository";
import { UsagePublisher } from "../../lib/usage-publisher";
import { QuotaGate } from "../../lib/quota-gate";
import { ownChannel, sendToChannel } from "../../lib/channels";
import { USAGE_CHANNEL } from "../../lib/usage-protocol";

export interface InferActionParams extends InferParams {
  stream: boolean;
}

type InferenceMeta = CallerMeta & { $streamAbort?: StreamAbortHook };

type InferenceThis = Service &
  DbThis & {
    config: InferenceSettings;
    engine: InferenceEngine;
    recorder: UsageRecorder;
    usage: UsagePublisher;
    gate: QuotaGate;
    redisUrl?: string;
    recordFinished(record: InferenceRecord): void;
  };

const HEALTH_TIMEOUT_MS = 2_000;
const LIST_TIMEOUT_MS = 3_000;
const PARTIAL_LIST_TTL_MS = 5_000;
const MIN_REFRESH_MS = 1_000;

const InferenceService: ServiceSchema<ServiceSettingSchema, InferenceThis> = {
  name: "inference",
  mixins: [DbMixin({ schema: "inference", migrations })],

  settings: {
    rest: "/models",
  },

  actions: {
    list: {
      rest: "GET /",
      auth: "public",
      openapi: { tag: "models", summary: "Models of every configured provider", status: 200, response: ModelList },
      async handler(this: InferenceThis): Promise<{ models: PublicModel[] }> {
        return { models: await this.engine.listModels() };
      },
    },

    infer: {
      rest: "POST /infer",
      auth: "required",
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
        const clientId = ctx.meta.caller!.clientId;
        // At or over a monthly quota an inference uses up: 403 before the provider is asked.
        await this.gate.check(clientId, ["credits", "tokens"]);
        if (!ctx.params.stream) return this.engine.infer(clientId, ctx.params) as Promise<InferenceResult>;
        const { id, stream } = await this.engine.openStream(clientId, ctx.params);
        ctx.meta.$responseType = "text/event-stream";
        ctx.meta.$responseHeaders = { "Cache-Control": "no-cache", "X-Accel-Buffering": "no", "X-Inference-Id": id };
        // Over NATS the gateway holds only a copy of the stream: it calls this when its client leaves.
        ctx.meta.$streamAbort = { action: "inference.abort", params: { id }, nodeID: this.broker.nodeID };
        return stream;
      },
    },

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
    /** Off the response path: a batched row for accounting, an event for metrics. */
    recordFinished(this: InferenceThis, record: InferenceRecord) {
      this.recorder.add(record);
      // Answered, or tokens generated (a stream abandoned): it counts in the account's usage.
      if (record.provider && (record.outcome === "ok" || record.tokensUsed > 0)) this.usage.add(inferenceUsage(record));
      this.broker.emit(INFERENCE_COMPLETED, inferenceCompleted(record)).catch(() => undefined);
    },
  },

  created(this: InferenceThis) {
    this.config = parseInferenceSettings(brokerEnv(this.broker));
    const platform = platformSettingsOf(this.broker);
    const providers = createProviders({ ollamaUrl: this.config.ollamaUrl, openai: this.config.openaiProviders });
    this.logger.info(`Model providers: ${providers.map((p) => p.name).join(", ") || "none configured"}`);
    this.redisUrl = platform.redisUrl;
    const store = this.redisUrl
      ? new RedisSnapshotStore(acquireRedis(this.redisUrl), `${platform.namespace || "ci"}:inference:models`, (err) =>
          this.logger.warn(`Model list cache (Redis) failed: ${(err as Error).message}`),
        )
      : undefined;
    const catalogue = new ModelCatalogue({
      providers,
      ttlMs: this.config.modelsCacheS * 1000,
      partialTtlMs: PARTIAL_LIST_TTL_MS,
      fetchTimeoutMs: LIST_TIMEOUT_MS,
      minRefreshMs: MIN_REFRESH_MS,
      store,
    });
    this.recorder = new UsageRecorder(new InferencesRepository(this.db), (err, lost) =>
      this.logger.error(`Could not record ${lost} inference(s) for usage accounting: ${(err as Error).message}`),
    );
    this.gate = new QuotaGate(this.broker, platform.quotaCacheMs, (m) => this.logger.warn(m));
    this.usage = new UsagePublisher(
      (batch) => sendToChannel(this.broker, ownChannel(USAGE_CHANNEL, this.broker.nodeID), batch),
      (err, attempt) => attempt === 1 && this.logger.warn(`Usage records not published yet (retrying): ${(err as Error).message}`),
    );
    this.engine = new InferenceEngine({
      catalogue,
      providers,
      timeoutMs: this.config.timeoutMs,
      healthTimeoutMs: HEALTH_TIMEOUT_MS,
      onFinished: (record) => this.recordFinished(record),
    });
  },

  async stopped(this: InferenceThis) {
    this.engine.abortAll();
    await this.recorder.flush();
    const lost = await this.usage.close(2000);
    if (lost) this.logger.error(`${lost} inference usage record(s) could not be published before stopping`);
    if (this.redisUrl) await releaseRedis(this.redisUrl);
  },
};

export default InferenceService;
