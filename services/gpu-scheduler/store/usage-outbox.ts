/**
 * GPU usage on its way to the ledger: the rows the ending statement wrote to usage_outbox are
 * published on USAGE_CHANNEL in batches and deleted in the same transaction (SKIP LOCKED: replicas
 * drain side by side). A publish that fails keeps the rows for the next tick; a replica dying
 * after publishing but before committing publishes them again, which the ledger ignores (source key).
 */
import type { Pool } from "pg";
import { transaction } from "../../../lib/db";
import { gpuUsageKey, UsageBatch, UsageRecord } from "../../../lib/usage-protocol";

type OutboxRow = { job_id: string; attempt: number; client_id: string; started_at: Date; ended_at: Date; cards: number; gpu_name: string };

const toUsageRecord = (r: OutboxRow): UsageRecord => ({
  key: gpuUsageKey(r.job_id, r.attempt),
  clientId: r.client_id,
  resource: "gpu",
  name: r.gpu_name,
  start: r.started_at.toISOString(),
  end: r.ended_at.toISOString(),
  quantity: r.cards,
});

export class UsageOutbox {
  constructor(
    private readonly db: Pool,
    private readonly publish: (batch: UsageBatch) => Promise<void>,
    private readonly batchSize = 500,
  ) {}

  /** The records of these accounts not yet published: GPU time the ledger does not have yet (the usage service adds it). */
  async pendingOf(clientIds: readonly string[]): Promise<UsageRecord[]> {
    const { rows } = await this.db.query<OutboxRow>(
      `SELECT job_id, attempt, client_id, started_at, ended_at, cards, gpu_name FROM gpu_scheduler.usage_outbox WHERE client_id = ANY($1::uuid[])`,
      [clientIds],
    );
    return rows.map(toUsageRecord);
  }

  /** Publishes what is waiting, a batch at a time; returns how many records left. */
  async drain(maxBatches = 10): Promise<number> {
    let sent = 0;
    for (let i = 0; i < maxBatches; i++) {
      const n = await transaction(this.db, async (client) => {
        const { rows } = await client.query<OutboxRow>(
          `SELECT job_id, attempt, client_id, started_at, ended_at, cards, gpu_name FROM gpu_scheduler.usage_outbox
           ORDER BY ended_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
          [this.batchSize],
        );
        if (!rows.length) return 0;
        await this.publish({ records: rows.map(toUsageRecord) });
        await client.query(
          `DELETE FROM gpu_scheduler.usage_outbox o USING unnest($1::uuid[], $2::int[]) AS d(job_id, attempt) WHERE o.job_id = d.job_id AND o.attempt = d.attempt`,
          [rows.map((r) => r.job_id), rows.map((r) => r.attempt)],
        );
        return rows.length;
      });
      sent += n;
      if (n < this.batchSize) break;
    }
    return sent;
  }
}
