/** The Batch API's settings (docs/inference.md "Batch API"), parsed with the inference service's. */
import { Env, flag, intAtLeast, positive, SettingError } from "../../../lib/settings";
import { retryDelays } from "../../gpu-scheduler/settings";
import type { PaceSettings } from "./batch-pace";
import type { BatchWebhookSettings } from "./batch-webhooks";

export type BatchSettings = {
  /** BATCH_CONCURRENCY: lines of one account in flight at once in one replica. */
  concurrency: number;
  /** BATCH_MAX_IN_FLIGHT: inferences in flight at once in one replica, interactive ones included; batches keep one free. */
  maxInFlight: number;
  /** BATCH_PACED_IN_FLIGHT, BATCH_PACE_IDLE_MS: batch lines held to a floor while interactive requests run (batch-pace.ts). */
  pace: PaceSettings;
  /** BATCH_POLL_MS: how often each replica looks for due lines and batches to move. */
  pollMs: number;
  /** BATCH_MAX_ATTEMPTS: tries of a line whose provider fails, before it is failed. */
  maxAttempts: number;
  /** BATCH_RETRY_BASE_MS: the wait after a line's first failed try, doubling after each. */
  retryBaseMs: number;
  /** BATCH_CREDIT_FACTOR: a batch's tokens cost this share of the model's credit price. */
  creditFactor: number;
  /** BATCH_COMPLETION_WINDOW_S: how long "24h" is (a batch not done by then expires). */
  completionWindowS: number;
  /** WEBHOOK_ALLOW_PRIVATE, WEBHOOK_RETRY_DELAYS_S, WEBHOOK_TIMEOUT_MS: as the jobs' webhooks (README "Webhooks"). */
  webhooks: BatchWebhookSettings;
};

function factor(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === "") return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < 0 || value > 1) throw new SettingError(name, raw, "a number from 0 to 1");
  return value;
}

export function parseBatchSettings(env: Env): BatchSettings {
  return {
    concurrency: intAtLeast(env, "BATCH_CONCURRENCY", 4, 1),
    maxInFlight: intAtLeast(env, "BATCH_MAX_IN_FLIGHT", 32, 2),
    pace: { pacedInFlight: intAtLeast(env, "BATCH_PACED_IN_FLIGHT", 1, 1), idleMs: intAtLeast(env, "BATCH_PACE_IDLE_MS", 1000, 10) },
    pollMs: intAtLeast(env, "BATCH_POLL_MS", 500, 10),
    maxAttempts: intAtLeast(env, "BATCH_MAX_ATTEMPTS", 5, 1),
    retryBaseMs: intAtLeast(env, "BATCH_RETRY_BASE_MS", 1000, 1),
    creditFactor: factor(env, "BATCH_CREDIT_FACTOR", 0.5),
    completionWindowS: intAtLeast(env, "BATCH_COMPLETION_WINDOW_S", 86_400, 1),
    webhooks: {
      allowPrivate: flag(env, "WEBHOOK_ALLOW_PRIVATE"),
      retryDelaysS: retryDelays(env),
      timeoutMs: positive(env, "WEBHOOK_TIMEOUT_MS", 10_000),
    },
  };
}
