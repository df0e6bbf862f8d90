/**
 * `queuePosition`: a queued job's 1-based place in the order the scheduler would start the queue
 * now (placement.ts `queuePosition`, exact for that order). Nothing counts the queue: the accounts
 * waiting and their queued jobs come from the counters (queued_counts), the jobs of its own account
 * ahead of a new job from the count its batch read once per account (admission.ts); only a job
 * read later (a GET) counts its own account's jobs ahead of it, at most its queued-jobs limit.
 */
import type { Pool, PoolClient } from "pg";
import type { AccountLimits } from "./account-limits";
import type { JobsRepository } from "../store/jobs.repository";
import { QueueAccount, queuePosition } from "../core/queue-position";

type Target = { id: string; clientId: string; ahead: number };

export class QueuePositions {
  constructor(
    private readonly repo: Pick<JobsRepository, "queueStanding" | "queueAccounts">,
    private readonly limits: AccountLimits,
  ) {}

  /** The positions of those of `ids` that are queued (the others are absent). `db`: a transaction's client. */
  async of(ids: string[], db?: Pool | PoolClient): Promise<Map<string, number>> {
    if (!ids.length) return new Map();
    const { targets, accounts } = await this.repo.queueStanding(ids, db);
    return this.place(targets, accounts);
  }

  /** The positions of jobs just created, given the jobs of their account ahead of each (`admitAndInsert`). */
  async ofCreated(created: Target[], db?: Pool | PoolClient): Promise<Map<string, number>> {
    if (!created.length) return new Map();
    return this.place(created, await this.repo.queueAccounts(db));
  }

  /** As `ofCreated`, with the waiting accounts already read (store/submit-batch.ts reads them in its round trip). */
  ofCreatedAmong(created: Target[], accounts: Array<Omit<QueueAccount, "weight">>): Promise<Map<string, number>> {
    return this.place(created, accounts);
  }

  private async place(targets: Target[], found: Array<Omit<QueueAccount, "weight">>): Promise<Map<string, number>> {
    if (!targets.length) return new Map();
    const weights = await this.limits.limitsFor(found.map((a) => a.clientId));
    const accounts: QueueAccount[] = found.map((a) => ({ ...a, weight: weights.get(a.clientId)?.weight ?? 1 }));
    return new Map(targets.map((t) => [t.id, queuePosition(t, accounts)]));
  }
}
