/** The gpu-scheduler's settings (README "Configuration"), parsed when it is created. */
import { DEFAULT_DATABASE_URL } from "../../lib/platform-settings";
import { Env, flag, int, intAtLeast, list, optionalInt, positive, SettingError, text } from "../../lib/settings";
import { DEFAULT_RETRY_DELAYS_S } from "./webhooks/webhook-delivery";
import type { WebhookSettings } from "./webhooks/webhook-sender";
import type { AccountLimit } from "./api/account-limits";
import type { HistorySettings } from "./loop/job-history";
import { parseHeartbeatS, parseJobTimeoutS } from "../gpu-node/settings";
import { parseAllowedRegistries } from "../../lib/registry-policy";
import { NodeCardLimits, parseNodeCards } from "./core/node-cards";

export type SchedulerSettings = {
  /** Registries job images may come from (checked when a job is submitted). */
  allowedRegistries: string[];
  /** A gpu-node silent this long has left the cluster (its running jobs fail). */
  nodeTimeoutS: number;
  /** Safety tick (placement, node loss, stale placements), in milliseconds. */
  scheduleTickMs: number;
  /** How long a `gpu-node.run`/`cancel` call may take before the placement is retried. */
  dispatchTimeoutS: number;
  /** The nodes' heartbeat period (GPU_HEARTBEAT_S): the view warms up for 1.5 of them after a start. */
  heartbeatS: number;
  /** JOB_TIMEOUT_S: the `timeoutSeconds` of a job that sets none. */
  jobTimeoutS: number;
  /** Key of the opaque node labels clients see instead of node ids (default: derived from DATABASE_URL, which every replica shares). */
  nodeLabelSecret: string;
  /** How long an `Idempotency-Key` of a job submission is kept (README "GPU jobs"). */
  idempotencyTtlS: number;
  /** RETRY_BACKOFF_S: a failed job with retries left waits this long before its first retry, twice as long before each later one. */
  retryBackoffS: number;
  /** FAIR_SHARE_HALF_LIFE_S: GPU-seconds used count half after this long, for fair sharing. */
  fairShareHalfLifeS: number;
  /** Every account's limits (QUOTA_RUNNING_GPUS, QUOTA_QUEUED_JOBS; weight 1) until an admin sets its own. */
  accountDefaults: AccountLimit;
  /** GPU_EVENTS_KEEPALIVE_MS: a job's event stream sends a comment after this long without an event. */
  eventsKeepAliveMs: number;
  /** GPU_FOLLOW_WAIT_MS: a followed log's page waits at most this long for new output (then asks again). */
  followWaitMs: number;
  /** WEBHOOK_* (README "Webhooks"). */
  webhooks: WebhookSettings;
  /** Archiving, retention and vacuum of ended jobs (job-history.ts). */
  history: HistorySettings;
  /** GPU_NODE_CARDS: the card types and counts each node may use (node-cards.ts); empty: no bound. */
  nodeCards: NodeCardLimits;
};

/** WEBHOOK_RETRY_DELAYS_S: comma-separated positive seconds (default: Standard Webhooks' schedule, 27.6 h). */
export function retryDelays(env: Env): number[] {
  const raw = list(env, "WEBHOOK_RETRY_DELAYS_S");
  if (!raw.length) return DEFAULT_RETRY_DELAYS_S;
  const delays = raw.map(Number);
  if (delays.some((d) => !Number.isFinite(d) || d <= 0))
    throw new SettingError("WEBHOOK_RETRY_DELAYS_S", env.WEBHOOK_RETRY_DELAYS_S ?? "", "comma-separated positive seconds");
  return delays;
}

export const parseSchedulerSettings = (env: Env): SchedulerSettings => ({
  allowedRegistries: parseAllowedRegistries(env.GPU_ALLOWED_REGISTRIES),
  nodeTimeoutS: positive(env, "GPU_NODE_TIMEOUT_S", 10),
  scheduleTickMs: int(env, "GPU_SCHEDULE_TICK_MS", 1000),
  dispatchTimeoutS: positive(env, "GPU_DISPATCH_TIMEOUT_S", 10),
  heartbeatS: parseHeartbeatS(env),
  jobTimeoutS: parseJobTimeoutS(env),
  nodeLabelSecret: text(env, "NODE_LABEL_SECRET", `node-label:${text(env, "DATABASE_URL", DEFAULT_DATABASE_URL)}`),
  idempotencyTtlS: positive(env, "GPU_IDEMPOTENCY_TTL_S", 24 * 3600),
  retryBackoffS: positive(env, "RETRY_BACKOFF_S", 5),
  fairShareHalfLifeS: positive(env, "FAIR_SHARE_HALF_LIFE_S", 3600),
  accountDefaults: {
    weight: 1,
    runningGpus: optionalInt(env, "QUOTA_RUNNING_GPUS") ?? null,
    queuedJobs: int(env, "QUOTA_QUEUED_JOBS", 1000),
  },
  eventsKeepAliveMs: positive(env, "GPU_EVENTS_KEEPALIVE_MS", 15_000),
  followWaitMs: positive(env, "GPU_FOLLOW_WAIT_MS", 10_000),
  webhooks: {
    allowPrivate: flag(env, "WEBHOOK_ALLOW_PRIVATE"),
    retryDelaysS: retryDelays(env),
    timeoutMs: positive(env, "WEBHOOK_TIMEOUT_MS", 10_000),
    pollMs: positive(env, "WEBHOOK_POLL_MS", 1000),
    concurrency: intAtLeast(env, "WEBHOOK_CONCURRENCY", 50, 1),
    accountConcurrency: intAtLeast(env, "WEBHOOK_ACCOUNT_CONCURRENCY", 4, 1),
  },
  history: {
    archiveAfterS: positive(env, "GPU_JOB_ARCHIVE_AFTER_S", 300),
    retentionDays: positive(env, "GPU_JOB_RETENTION_DAYS", 30),
    vacuumRows: nonNegative(env, "GPU_JOBS_VACUUM_ROWS", 5000),
    vacuumIntervalS: positive(env, "GPU_JOBS_VACUUM_INTERVAL_S", 10),
  },
  nodeCards: parseNodeCards(env.GPU_NODE_CARDS),
});

/** A whole number of at least 0. */
function nonNegative(env: Env, name: string, fallback: number): number {
  const value = int(env, name, fallback);
  if (value < 0) throw new SettingError(name, String(value), "a whole number of at least 0");
  return value;
}
