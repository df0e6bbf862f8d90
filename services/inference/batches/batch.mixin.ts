/**
 * The Batch API on the inference service (API-DECISIONS "Inference: the Batch API"): the /v1
 * files and batches actions (the gateway's /v1 route calls them), and the replica's batch runner
 * (batch-runner.ts), which runs lines on a copy of the service's engine whose attempts are
 * accounted as batch usage (BATCH_CREDIT_FACTOR, a rate budget of their own).
 */
import { randomBytes } from "crypto";
import dns from "dns/promises";
import type { Context, LoggerInstance, Service, ServiceBroker, ServiceSchema, ServiceSettingSchema } from "moleculer";
import type { Pool } from "pg";
import { apiError, notFound, validationFailed } from "../../../lib/errors";
import type { CallerMeta } from "../../../lib/identity";
import type { InferenceEngine } from "../engine";
import type { InferenceSettings } from "../settings";
import type { InferenceRateLimits } from "../rate-limits";
import type { InferenceRecord } from "../attempt-log";
import { holdInference, PricedSpend } from "../quota-holds";
import { chargingToken, TokenCreditLimits } from "../token-spend";
import type { KeyedBatch } from "../../../lib/keyed-batch";
import type { TokenCredits } from "../../auth/token-actions";
import type { QuotaGate } from "../../../lib/quota-gate";
import type { QuotaReservations } from "../../../lib/quota-reservations";
import { acquireRedis, releaseRedis } from "../../../lib/redis";
import { MemoryRateLimiter, RedisRateLimiter } from "../../../lib/rate-limiter";
import { platformSettingsOf } from "../../../lib/platform-settings";
import { InferenceRateLimits as RateLimits, UsageInferenceLimits } from "../rate-limits";
import { checkBatchInput } from "./batch-input";
import { runLine } from "./batch-line";
import { parseBatchCreate, parseIdParams, parseListParams } from "./batch-params";
import { batchEvents, batchesMoved, KEEP_ALIVE_MS, nextBatchEvent, StatusWatch } from "./batch-events";
import { fileActions } from "./file-actions";
import { BatchRunner } from "./batch-runner";
import { InteractivePace, RedisPaceSignal } from "./batch-pace";
import { batchObject, cursorPage } from "./batch-views";
import { BatchesRepository } from "./batches.repository";
import { FilesRepository } from "./files.repository";
import { LinesRepository } from "./lines.repository";
import { BatchWebhooks } from "./batch-webhooks";
import { postOnce } from "../../gpu-scheduler/webhooks/webhook-delivery";

/** What the mixin uses of the inference service. */
export type BatchHost = Service & {
  db: Pool;
  config: InferenceSettings;
  engine: InferenceEngine;
  logger: LoggerInstance;
  broker: ServiceBroker;
  /** Interactive requests in flight in this replica (the service's `held` and `streamed` count them), batch lines paced behind them. */
  batchPace: InteractivePace;
  gate: QuotaGate;
  reservations: QuotaReservations;
  redisUrl?: string;
  batchRates: InferenceRateLimits;
  admitBatchLine(clientId: string, tokens: number, models: readonly string[]): Promise<PricedSpend>;
  /** Restricted tokens' spend, reported to auth (token-spend.ts); batch lines charge their batch's token. */
  tokenSpend: KeyedBatch<number>;
  batchTokenLimits: TokenCreditLimits;
  stopBatches(): Promise<void>;
  recordFinished(record: InferenceRecord, batch?: { rates: InferenceRateLimits; creditFactor: number }): void;
  files: FilesRepository;
  batches: BatchesRepository;
  batchRunner: BatchRunner;
  batchWebhooks: BatchWebhooks;
  /** This replica's batch event streams, woken when its runner moves a batch (batch-events.ts). */
  batchWatch: StatusWatch;
};

type Meta = CallerMeta & { $responseType?: string; $responseHeaders?: Record<string, string> };

const newId = () => randomBytes(12).toString("hex");
const clientOf = (ctx: Context<unknown, Meta>) => ctx.meta.caller!.clientId;

/** A restricted token's batch: every line's model must be on its list (403 naming the line); fallbacks are narrowed when lines run. */
async function checkModels(files: FilesRepository, clientId: string, fileId: string, allowed: readonly string[]): Promise<void> {
  const content = await files.content(clientId, fileId);
  if (!content) throw notFound("File");
  for (const { line, body } of checkBatchInput(content).lines)
    if (typeof body.model === "string" && !allowed.includes(body.model.trim()))
      throw apiError("FORBIDDEN", `line ${line}: this token may not use the model '${body.model.slice(0, 200)}'`, { model: body.model, line });
}

const eventsPorts = (host: BatchHost) => ({ batches: host.batches, watch: host.batchWatch, pollMs: host.config.batch.pollMs, keepAliveMs: KEEP_ALIVE_MS });

/** The /v1 actions, on the service's /v1 action settings (`base`). */
export function batchActions<Base extends object>(base: Base) {
  return {
    ...fileActions(base),
    v1BatchesCreate: {
      ...base,
      async handler(this: BatchHost, ctx: Context<unknown, Meta>) {
        const request = parseBatchCreate(ctx.params);
        const clientId = clientOf(ctx);
        const file = await this.files.get(clientId, request.inputFileId);
        if (!file) throw notFound("File");
        if (file.purpose !== "batch") throw validationFailed([{ field: "input_file_id", message: 'must be a file of purpose "batch"' }]);
        if (file.endpoint !== request.endpoint)
          throw validationFailed([
            { field: "endpoint", message: `must be the url of every line of the input file (${file.endpoint ?? "its lines mix urls"})` },
          ]);
        const allowedModels = ctx.meta.caller?.token?.models ?? null;
        if (allowedModels) await checkModels(this.files, clientId, file.id, allowedModels);
        const batch = await this.batches.create({
          allowedModels,
          tokenId: ctx.meta.caller?.token?.id ?? null,
          id: `batch_${newId()}`,
          client_id: clientId,
          endpoint: request.endpoint,
          input_file_id: file.id,
          completion_window: "24h",
          metadata: request.metadata,
          windowS: this.config.batch.completionWindowS,
        });
        this.batchRunner.wake();
        return batchObject(batch);
      },
    },
    v1BatchesList: {
      ...base,
      async handler(this: BatchHost, ctx: Context<unknown, Meta>) {
        const page = parseListParams(ctx.params, { max: 100, fallback: 20, files: false });
        return cursorPage(await this.batches.list(clientOf(ctx), { ...page, order: "desc" }), page.limit, batchObject);
      },
    },
    v1BatchesGet: {
      ...base,
      async handler(this: BatchHost, ctx: Context<unknown, Meta>) {
        const batch = await this.batches.get(clientOf(ctx), parseIdParams(ctx.params));
        if (!batch) throw notFound("Batch");
        return batchObject(batch);
      },
    },
    v1BatchesCancel: {
      ...base,
      async handler(this: BatchHost, ctx: Context<unknown, Meta>) {
        const clientId = clientOf(ctx);
        const id = parseIdParams(ctx.params);
        const cancelled = await this.batches.cancel(clientId, id);
        if (cancelled) {
          batchesMoved(this.batchWatch);
          this.batchRunner.wake();
          return batchObject(cancelled);
        }
        const batch = await this.batches.get(clientId, id);
        if (!batch) throw notFound("Batch");
        if (batch.status === "cancelling" || batch.status === "cancelled") return batchObject(batch);
        throw apiError("INVALID_STATE", `Cannot cancel a batch with status ${batch.status}`);
      },
    },
    /** GET /v1/batches/:id/events: the batch's status as server-sent events (batch-events.ts). */
    v1BatchesEvents: {
      ...base,
      streams: true as const,
      handler(this: BatchHost, ctx: Context<unknown, Meta>) {
        return batchEvents(eventsPorts(this), ctx);
      },
    },
    /** The next page of an events stream (the gateway asks as the client reads); the same caller's batch only. */
    v1BatchesEventsPage: {
      ...base,
      handler(this: BatchHost, ctx: Context<unknown, Meta>) {
        return nextBatchEvent(eventsPorts(this), ctx);
      },
    },
  };
}

/** The runner of this replica, on a copy of the engine whose attempts count as batch usage. */
export function createBatchRunner(host: BatchHost, rates: InferenceRateLimits, webhooks: BatchWebhooks): BatchRunner {
  const settings = host.config.batch;
  const engine = host.engine.derive((record) => host.recordFinished(record, { rates, creditFactor: settings.creditFactor }));
  const lines = new LinesRepository(host.db);
  const linePorts = {
    engine,
    admit: async (clientId: string, tokens: number, models: readonly string[], tokenId: string | null) => {
      if (tokenId) await host.batchTokenLimits.check(tokenId);
      const note = (id: string, credits: number) => {
        host.tokenSpend.note(id, credits);
        host.batchTokenLimits.note(id, credits);
      };
      return chargingToken(await host.admitBatchLine(clientId, tokens, models), tokenId ?? undefined, note);
    },
    reserveMaxTokens: host.config.reserveMaxTokens,
    maxAttempts: settings.maxAttempts,
    retryBaseMs: settings.retryBaseMs,
    newId,
    now: Date.now,
  };
  return new BatchRunner(
    {
      db: host.db,
      batches: host.batches,
      files: host.files,
      lines,
      newId,
      run: (line) => runLine(linePorts, line),
      interactive: () => host.batchPace.interactive,
      paced: (unpaced) => host.batchPace.limit(unpaced),
      onTick: () => webhooks.wake(),
      onMoved: () => batchesMoved(host.batchWatch),
    },
    {
      perAccount: settings.concurrency,
      maxInFlight: settings.maxInFlight,
      pollMs: settings.pollMs,
      // Longer than a line's every attempt along its fallbacks: a lease running out means its replica is gone.
      leaseMs: host.config.timeoutMs * 6 + 30_000,
    },
    host.logger,
  );
}

/**
 * Lifecycle and methods: repositories and the runner once migrations ran (the service lists this
 * mixin before DbMixin: moleculer starts the later mixin first), stopBatches() first thing in the service's stopped().
 */
const mixin: Partial<ServiceSchema<ServiceSettingSchema, BatchHost>> = {
  methods: {
    /** Holds a batch line's monthly quotas at the batch credit price, then counts it in the batch rate budget (429 releases the hold). */
    async admitBatchLine(this: BatchHost, clientId: string, tokens: number, models: readonly string[]): Promise<PricedSpend> {
      const standing = (await this.gate.standings([clientId])).get(clientId);
      const hold = await holdInference(this.reservations, clientId, standing, { tokens, models }, this.config.batch.creditFactor);
      try {
        await this.batchRates.admit(clientId);
      } catch (err) {
        if ((err as { type?: string }).type === "RATE_LIMITED") {
          hold.release();
          throw err;
        }
        this.logger.warn(`Batch rate limits could not be checked (allowed): ${(err as Error).message}`);
      }
      return hold;
    },
    async stopBatches(this: BatchHost): Promise<void> {
      await this.batchRunner?.stop();
      await this.batchWebhooks?.stop();
      const redisUrl = platformSettingsOf(this.broker).redisUrl;
      if (redisUrl) await releaseRedis(redisUrl);
    },
  },
  created(this: BatchHost) {
    this.batchWatch = new StatusWatch();
  },
  started(this: BatchHost) {
    this.files = new FilesRepository(this.db);
    this.batches = new BatchesRepository(this.db);
    const platform = platformSettingsOf(this.broker);
    // A budget of its own (README "Rate limits"): a batch never spends its account's interactive requests per minute.
    const redis = platform.redisUrl ? acquireRedis(platform.redisUrl) : undefined;
    const prefix = platform.namespace || "ci";
    const limiter = redis ? new RedisRateLimiter(redis, `${prefix}:batch-rate`) : new MemoryRateLimiter();
    // Interactive requests of every replica hold batch lines to the floor (batch-pace.ts); without Redis, this replica's only.
    this.batchPace = new InteractivePace(this.config.batch.pace, redis ? new RedisPaceSignal(redis, `${prefix}:inference:interactive`) : undefined, (err) =>
      this.logger.warn(`Batch pacing signal (Redis) failed: ${err.message}`),
    );
    const limits = { requestsPerMinute: this.config.requestsPerMinute, tokensPerMinute: this.config.tokensPerMinute };
    this.batchRates = new RateLimits(limiter, new UsageInferenceLimits(this.gate, limits));
    const secret = async (clientId: string) =>
      (await this.broker.call<{ secret: string | null }, { clientId: string }>("auth.webhookSecret", { clientId })).secret;
    this.batchWebhooks = new BatchWebhooks(
      { batches: this.batches, secret, lookup: (host) => dns.lookup(host, { all: true }), post: postOnce, now: () => new Date() },
      this.config.batch.webhooks,
      this.logger,
    );
    this.batchTokenLimits = new TokenCreditLimits(
      (ids) => this.broker.call<TokenCredits[], { ids: string[] }>("auth.tokenCredits", { ids }),
      (m) => this.logger.warn(m),
    );
    this.batchRunner = createBatchRunner(this, this.batchRates, this.batchWebhooks);
    this.batchRunner.start();
  },
};

// moleculer types `mixins` with the plain Service as `this` (as DbMixin does).
export const BatchMixin = mixin as Partial<ServiceSchema>;
