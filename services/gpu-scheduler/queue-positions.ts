/**
 * `queuePosition`: a queued job's 1-based place in the order the scheduler would start the queue
 * now (placement.ts `queuePosition`, exact for that order). The cost is bounded without counting
 * the whole queue: one index probe per account with queued jobs, the job's own account's jobs ahead
 * of it (at most QUOTA_QUEUED_JOBS), and per other account its queued jobs counted only up to the
 * number that could come first, so in all about the position itself.
 */
import type { Pool, PoolClient } from "pg";
import type { AccountLimits } from "./account-limits";
import type { JobsRepository } from "./jobs.repository";
import { jobsAhead, QueueAccount, queuePosition, shareBefore } from "./placement";

export class QueuePositions {
  constructor(
    private readonly repo: Pick<JobsRepository, "queueStanding" | "countQueued">,
    private readonly limits: AccountLimits,
  ) {}

  /** The positions of those of `ids` that are queued (the others are absent). `db`: a transaction's client. */
  async of(ids: string[], db?: Pool | PoolClient): Promise<Map<string, number>> {
    if (!ids.length) return new Map();
    const { targets, accounts: found } = await this.repo.queueStanding(ids, db);
    if (!targets.length) return new Map();
    const weights = await this.limits.limitsFor(found.map((a) => a.clientId));
    const accounts: QueueAccount[] = found.map((a) => ({ ...a, weight: weights.get(a.clientId)?.weight ?? 1, queued: Infinity }));
    const byId = new Map(accounts.map((a) => [a.clientId, a]));
    // How many of each account's jobs could come before the furthest target: count only those.
    const bounds = new Map<string, number>();
    for (const t of targets) {
      // Its account may have left the queue between the reads (the job was placed meanwhile).
      const own = byId.get(t.clientId) ?? { usage: 0, held: 0, weight: 1 };
      const share = shareBefore(own, t.ahead);
      for (const b of accounts) {
        if (b.clientId === t.clientId) continue;
        bounds.set(b.clientId, Math.max(bounds.get(b.clientId) ?? 0, Math.min(jobsAhead(b, share, t.clientId), 1_000_000)));
      }
    }
    // Only the job's own account waits: nothing to count.
    const counted = bounds.size ? await this.repo.countQueued(bounds, db) : new Map<string, number>();
    for (const a of accounts) a.queued = counted.get(a.clientId) ?? 0;
    return new Map(targets.map((t) => [t.id, queuePosition(t, accounts)]));
  }
}
