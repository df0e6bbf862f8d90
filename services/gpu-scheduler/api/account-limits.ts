import type { QuotaGate } from "../../../lib/quota-gate";
import { isUuid } from "../../../lib/uuid";
import { priceOf } from "../../usage/pricing";

/**
 * Per-account limits and fair-share weight: the one place the scheduler asks for them, behind the
 * `AccountLimits` interface (the usage service's overrides over the environment's defaults:
 * UsageAccountLimits; a test passes a fixed answer), so placement and submission never change with their source.
 */
export type AccountLimit = {
  /** Fair-share weight (> 0): an account's usage is divided by it. */
  weight: number;
  /** The most GPUs its jobs may hold at once (QUOTA_RUNNING_GPUS); null: no limit. Over it jobs wait. */
  runningGpus: number | null;
  /** The most jobs it may have queued (QUOTA_QUEUED_JOBS); over it a submission is 403 QUOTA_EXCEEDED. */
  queuedJobs: number;
  /** A monthly quota the account is at or over (its queued jobs wait; running ones finish); absent: none. */
  overQuota?: string;
  /** The monthly GPU-seconds quota and its use (the ledger plus running time); absent: no limit. */
  gpuSeconds?: { limit: number; used: number };
  /** The monthly credits quota and its use, and the credits a GPU-second of a card costs by its name; absent: no limit. */
  credits?: { limit: number; used: number; perGpuSecond: (cardName: string) => number };
};

export interface AccountLimits {
  limitsFor(clientIds: readonly string[]): Promise<Map<string, AccountLimit>>;
}

/**
 * Limits from the usage service (per-account overrides of runningGpus, queuedJobs and
 * fairShareWeight, and the monthly quota it is over), through the QuotaGate's cache: every replica
 * sees an admin's change within QUOTA_CACHE_MS. An account the gate knows nothing of (no usage
 * service) gets the defaults.
 */
export class UsageAccountLimits implements AccountLimits {
  constructor(
    private readonly gate: Pick<QuotaGate, "standings">,
    private readonly defaults: AccountLimit,
  ) {}

  async limitsFor(clientIds: readonly string[]): Promise<Map<string, AccountLimit>> {
    const known = await this.gate.standings(clientIds.filter((id) => isUuid(id)));
    return new Map(
      clientIds.map((id) => {
        const s = known.get(id);
        if (!s) return [id, this.defaults];
        const over = s.quotas.find((q) => GPU_MONTHLY.includes(q.resource) && q.limit !== null && q.used >= q.limit);
        const limit: AccountLimit = { weight: s.limits.fairShareWeight, runningGpus: s.limits.runningGpus, queuedJobs: s.limits.queuedJobs };
        const gpu = s.quotas.find((q) => q.resource === "gpuSeconds");
        if (gpu?.limit != null) limit.gpuSeconds = { limit: gpu.limit, used: gpu.used };
        const credits = s.quotas.find((q) => q.resource === "credits");
        const prices = s.prices;
        if (credits?.limit != null)
          limit.credits = { limit: credits.limit, used: credits.used, perGpuSecond: (name) => (prices ? priceOf(prices.gpuSecond, name) : 0) };
        return [id, over ? { ...limit, overQuota: over.resource } : limit];
      }),
    );
  }
}

/** The monthly quotas a GPU job uses up. */
export const GPU_MONTHLY: readonly string[] = ["credits", "gpuSeconds"];
