/**
 * The Batch API on the inference service (API-DECISIONS "Inference: the Batch API"): the /v1
 * files and batches actions (the gateway's /v1 route calls them), and the replica's batch runner
 * (batch-runner.ts), which runs lines on a copy of the service's engine whose attempts are
 * accounted as batch usage (BATCH_CREDIT_FACTOR, a rate budget of their own).
 */
import { randomBytes } from "crypto";
import dns from "dns/promises";
import { Readable } from "stream";
import type { Context, LoggerInstance, Service, ServiceBroker, ServiceSchema, ServiceSettingSchema } from "moleculer";
import type { Pool } from "pg";
import { apiError, notFound, validationFailed } from "../../../lib/errors";
import type { CallerMeta } from "../../../lib/identity";
import type { InferenceEngine } from "../engine";
import type { InferenceSettings } from "../settings";
import type { InferenceRateLimits } from "../rate-limits";
import type { InferenceRecord } from "../attempt-log";
import { holdInference, Spend } from "../quota-holds";
import type { QuotaGate } from "../../../lib/quota-gate";
import type { QuotaReservations } from "../../../lib/quota-reservations";
import { acquireRedis, releaseRedis } from "../../../lib/redis";
import { MemoryRateLimiter, RedisRateLimiter } from "../../../lib/rate-limiter";
import { platformSettingsOf } from "../../../lib/platform-settings";
import { InferenceRateLimits as RateLimits, UsageInferenceLimits } from "../rate-limits";
import { checkBatchInput, MAX_BYTES } from "./batch-input";
import { runLine } from "./batch-line";
import { parseBatchCreate, parseIdParams, parseListParams } from "./batch-params";
import { BatchRunner } from "./batch-runner";
import { batchObject, cursorPage, fileObject } from "./batch-views";
import { BatchesRepository } from "./batches.repository";
import { FilesRepository } from "./files.repository";
import { LinesRepository } from "./lines.repository";
import { readUpload } from "./multipart";
import { BatchWebhooks } from "./batch-webhooks";
import { postOnce } from "../../gpu-scheduler/webhooks/webhook-delivery";

/** What the mixin uses of the inference service. */
export type BatchHost = Service & {
  db: Pool;
  config: InferenceSettings;
  engine: InferenceEngine;
  logger: LoggerInstance;
  broker: ServiceBroker;
  /** Interactive requests in flight in this replica (the service's `held`). */
  interactive: number;
  gate: QuotaGate;
  reservations: QuotaReservations;
  redisUrl?: string;
  batchRates: InferenceRateLimits;
  admitBatchLine(clientId: string, tokens: number, models: readonly string[]): Promise<Spend>;
  stopBatches(): Promise<void>;
  recordFinished(record: InferenceRecord, batch?: { rates: InferenceRateLimits; creditFactor: number }): void;
  files: FilesRepository;
  batches: BatchesRepository;
  batchRunner: BatchRunner;
  batchWebhooks: BatchWebhooks;
};

type Meta = CallerMeta & { $multipartType?: string; $responseType?: string; $responseHeaders?: Record<string, string> };

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

/** The /v1 actions, on the service's /v1 action settings (`base`). */
export function batchActions<Base extends object>(base: Base) {
  return {
    /** POST /v1/files (multipart: the gateway streams the body here). */
    v1FilesCreate: {
      ...base,
      async handler(this: BatchHost, ctx: Context<Readable, Meta>) {
        const upload = await readUpload(ctx.params, ctx.meta.$multipartType, MAX_BYTES);
        if (upload.purpose !== "batch") throw validationFailed([{ field: "purpose", message: 'must be "batch"' }]);
        const { lines, endpoint } = checkBatchInput(upload.content);
        const file = await this.files.insert({
          id: `file-${newId()}`,
          client_id: clientOf(ctx),
          purpose: "batch",
          filename: upload.filename,
          line_count: lines.length,
          endpoint,
          content: upload.content,
        });
        return fileObject(file);
      },
    },
    v1FilesList: {
      ...base,
      async handler(this: BatchHost, ctx: Context<unknown, Meta>) {
        const page = parseListParams(ctx.params, { max: 10_000, fallback: 10_000, files: true });
        return cursorPage(await this.files.list(clientOf(ctx), page, page.purpose), page.limit, fileObject);
      },
    },
    v1FilesGet: {
      ...base,
      async handler(this: BatchHost, ctx: Context<unknown, Meta>) {
        const file = await this.files.get(clientOf(ctx), parseIdParams(ctx.params));
        if (!file) throw notFound("File");
        return fileObject(file);
      },
    },
    v1FilesContent: {
      ...base,
      async handler(this: BatchHost, ctx: Context<unknown, Meta>) {
        const content = await this.files.content(clientOf(ctx), parseIdParams(ctx.params));
        if (!content) throw notFound("File");
        ctx.meta.$responseType = "application/jsonl";
        // A Readable crosses the bus in chunks (a file is up to 100 MiB).
        return Readable.from([content]);
      },
    },
    v1FilesDelete: {
      ...base,
      async handler(this: BatchHost, ctx: Context<unknown, Meta>) {
        const id = parseIdParams(ctx.params);
        if (!(await this.files.delete(clientOf(ctx), id))) throw notFound("File");
        return { id, object: "file", deleted: true };
      },
    },
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
          this.batchRunner.wake();
          return batchObject(cancelled);
        }
        const batch = await this.batches.get(clientId, id);
        if (!batch) throw notFound("Batch");
        if (batch.status === "cancelling" || batch.status === "cancelled") return batchObject(batch);
        throw apiError("INVALID_STATE", `Cannot cancel a batch with status ${batch.status}`);
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
    admit: (clientId: string, tokens: number, models: readonly string[]) => host.admitBatchLine(clientId, tokens, models),
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
      interactive: () => host.interactive,
      onTick: () => webhooks.wake(),
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
    async admitBatchLine(this: BatchHost, clientId: string, tokens: number, models: readonly string[]): Promise<Spend> {
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
    this.interactive = 0;
  },
  started(this: BatchHost) {
    this.files = new FilesRepository(this.db);
    this.batches = new BatchesRepository(this.db);
    const platform = platformSettingsOf(this.broker);
    // A budget of its own (README "Rate limits"): a batch never spends its account's interactive requests per minute.
    const limiter = platform.redisUrl
      ? new RedisRateLimiter(acquireRedis(platform.redisUrl), `${platform.namespace || "ci"}:batch-rate`)
      : new MemoryRateLimiter();
    const limits = { requestsPerMinute: this.config.requestsPerMinute, tokensPerMinute: this.config.tokensPerMinute };
    this.batchRates = new RateLimits(limiter, new UsageInferenceLimits(this.gate, limits));
    const secret = async (clientId: string) =>
      (await this.broker.call<{ secret: string | null }, { clientId: string }>("auth.webhookSecret", { clientId })).secret;
    this.batchWebhooks = new BatchWebhooks(
      { batches: this.batches, secret, lookup: (host) => dns.lookup(host, { all: true }), post: postOnce, now: () => new Date() },
      this.config.batch.webhooks,
      this.logger,
    );
    this.batchRunner = createBatchRunner(this, this.batchRates, this.batchWebhooks);
    this.batchRunner.start();
  },
};

// moleculer types `mixins` with the plain Service as `this` (as DbMixin does).
export const BatchMixin = mixin as Partial<ServiceSchema>;
