/**
 * What inference.service.ts's `created` wires once from the settings: the providers and their model
 * catalogue (cached in Redis when there is one), the usage recorder and publisher, the quota gate and
 * reservations, the per-account rate limits and the restricted tokens' spend. Without Redis each
 * replica counts rate limits and holds reservations on its own (docs/usage-and-quotas.md).
 */
import type { LoggerInstance, ServiceBroker } from "moleculer";
import type { Pool } from "pg";
import { ownChannel, sendToChannel } from "../../lib/channels";
import type { KeyedBatch } from "../../lib/keyed-batch";
import { platformSettingsOf } from "../../lib/platform-settings";
import { QuotaGate } from "../../lib/quota-gate";
import { MemoryReservationStore, QuotaReservations, RedisReservationStore } from "../../lib/quota-reservations";
import { MemoryRateLimiter, RedisRateLimiter } from "../../lib/rate-limiter";
import { acquireRedis } from "../../lib/redis";
import { UsagePublisher } from "../../lib/usage-publisher";
import { USAGE_CHANNEL } from "../../lib/usage-protocol";
import { ModelCatalogue, RedisSnapshotStore } from "./catalogue";
import { createProviders } from "./providers";
import type { Provider } from "./providers/types";
import { InferenceRateLimits, UsageInferenceLimits } from "./rate-limits";
import type { InferenceSettings } from "./settings";
import { tokenSpendBatch } from "./token-spend";
import { InferencesRepository, UsageRecorder } from "./usage.repository";

const LIST_TIMEOUT_MS = 3_000;
const PARTIAL_LIST_TTL_MS = 5_000;
const MIN_REFRESH_MS = 1_000;

export type InferenceParts = {
  providers: Provider[];
  catalogue: ModelCatalogue;
  recorder: UsageRecorder;
  gate: QuotaGate;
  reservations: QuotaReservations;
  rates: InferenceRateLimits;
  usage: UsagePublisher;
  tokenSpend: KeyedBatch<number>;
  /** Released by the service when it stops (lib/redis.ts counts its users). */
  redisUrl?: string;
};

export function createInferenceParts(broker: ServiceBroker, db: Pool, config: InferenceSettings, logger: LoggerInstance): InferenceParts {
  const platform = platformSettingsOf(broker);
  const providers = createProviders({ ollamaUrl: config.ollamaUrl, openai: config.openaiProviders });
  const redisUrl = platform.redisUrl;
  const redis = redisUrl ? acquireRedis(redisUrl) : undefined;
  const prefix = platform.namespace || "ci";
  const store = redis
    ? new RedisSnapshotStore(redis, `${prefix}:inference:models`, (err) => logger.warn(`Model list cache (Redis) failed: ${(err as Error).message}`))
    : undefined;
  const catalogue = new ModelCatalogue({
    providers,
    ttlMs: config.modelsCacheS * 1000,
    partialTtlMs: PARTIAL_LIST_TTL_MS,
    fetchTimeoutMs: LIST_TIMEOUT_MS,
    minRefreshMs: MIN_REFRESH_MS,
    store,
  });
  const limiter = redis ? new RedisRateLimiter(redis, `${prefix}:inference-rate`) : new MemoryRateLimiter();
  const recorder = new UsageRecorder(new InferencesRepository(db), (err, lost) =>
    logger.error(`Could not record ${lost} inference(s) for usage accounting: ${(err as Error).message}`),
  );
  const gate = new QuotaGate(broker, platform.quotaCacheMs, (m) => logger.warn(m));
  const holds = redis ? new RedisReservationStore(redis, `${prefix}:quota`) : new MemoryReservationStore();
  // Per-account overrides from usage, read through the gate's cache.
  const rates = new InferenceRateLimits(
    limiter,
    new UsageInferenceLimits(gate, { requestsPerMinute: config.requestsPerMinute, tokensPerMinute: config.tokensPerMinute }),
  );
  return {
    providers,
    catalogue,
    recorder,
    gate,
    reservations: new QuotaReservations(gate, holds, config.reservationTtlS * 1000, (m) => logger.warn(m)),
    rates,
    usage: new UsagePublisher(
      (batch) => sendToChannel(broker, ownChannel(USAGE_CHANNEL, broker.nodeID), batch),
      (err, attempt) => attempt === 1 && logger.warn(`Usage records not published yet (retrying): ${(err as Error).message}`),
    ),
    tokenSpend: tokenSpendBatch(broker, (m) => logger.warn(m)),
    redisUrl,
  };
}
