/**
 * GPU usage on its way to the ledger: the rows the ending statement wrote to usage_outbox are
 * published on USAGE_CHANNEL in batches and marked published in the same transaction (SKIP LOCKED:
 * replicas drain side by side). A publish that fails keeps the rows for the next tick; a replica
 * dying after publishing but before committing publishes them again, which the ledger ignores
 * (source key). A published row stays `keepPublishedMs`: the usage service records it on its own
 * time, and until then the quotas read it from here (`pendingOf`; the reader skips the keys its
 * ledger has), so a job ending cannot free its account's quota before the ledger holds its use.
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

/** How long a published record stays readable here: far longer than the usage service takes to record it. */
export const KEEP_PUBLISHED_MS = 120_000;

/** How often a drain forgets what was published long ago (a statement of its own). */
const PURGE_EVERY_MS = 10_000;

export class UsageOutbox {
  private purgedAt = 0;

  constructor(
    private readonly db: Pool,
    private readonly publish: (batch: UsageBatch) => Promise<void>,
    private readonly batchSize = 500,
    private readonly keepPublishedMs = KEEP_PUBLISHED_MS,
  ) {}

  /** The records of these accounts not yet published or published lately: GPU time the ledger may not have yet (the usage service adds those it lacks). */
  async pendingOf(clientIds: readonly string[]): Promise<UsageRecord[]> {
    const { rows } = await this.db.query<OutboxRow>(
      `SELECT job_id, attempt, client_id, started_at, ended_at, cards, gpu_name FROM gpu_scheduler.usage_outbox WHERE client_id = ANY($1::uuid[])`,
      [clientIds],
    );
    return rows.map(toUsageRecord);
  }

  /** Publishes what is waiting, a batch at a time; returns how many records left. Forgets what was published over keepPublishedMs ago. */
  async drain(maxBatches = 10): Promise<number> {
    if (Date.now() - this.purgedAt >= Math.min(PURGE_EVERY_MS, this.keepPublishedMs)) {
      this.purgedAt = Date.now();
      await this.db.query(`DELETE FROM gpu_scheduler.usage_outbox WHERE published_at < now() - $1 * interval '1 millisecond'`, [this.keepPublishedMs]);
    }
    let sent = 0;
    for (let i = 0; i < maxBatches; i++) {
      const n = await transaction(this.db, async (client) => {
        const { rows } = await client.query<OutboxRow>(
          `SELECT job_id, attempt, client_id, started_at, ended_at, cards, gpu_name FROM gpu_scheduler.usage_outbox
           WHERE published_at IS NULL ORDER BY ended_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
          [this.batchSize],
        );
        if (!rows.length) return 0;
        await this.publish({ records: rows.map(toUsageRecord) });
        await client.query(
          `UPDATE gpu_scheduler.usage_outbox o SET published_at = now() FROM unnest($1::uuid[], $2::int[]) AS d(job_id, attempt)
           WHERE o.job_id = d.job_id AND o.attempt = d.attempt`,
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

/**
 * Migration 9 (usage outbox):
 * The GPU time of each ended attempt, written by the statement that ends it and kept until the
 * usage ledger has it (published on USAGE_CHANNEL, marked so since migration 19, then deleted): a replica dying in between
 * publishes it again later, and the ledger stores a (job, attempt) once.
 */
export const USAGE_OUTBOX_TABLE = `
      CREATE TABLE usage_outbox (
        job_id uuid NOT NULL,
        attempt integer NOT NULL,
        client_id uuid NOT NULL,
        started_at timestamptz NOT NULL,
        ended_at timestamptz NOT NULL,
        cards integer NOT NULL,
        gpu_name text NOT NULL,
        PRIMARY KEY (job_id, attempt)
      );
`;

/**
 * Migration 19 (usage kept a while after publishing):
 * published_at: when the record went out on USAGE_CHANNEL. The row stays a while after it
 * (store/usage-outbox.ts KEEP_PUBLISHED_MS): the usage service consumes the channel on its own
 * time, and until its ledger has the record the quotas read it from here (by key, never twice).
 */
export const USAGE_OUTBOX_PUBLISHED = `
      ALTER TABLE usage_outbox ADD COLUMN published_at timestamptz;
      CREATE INDEX usage_outbox_unpublished ON usage_outbox (ended_at) WHERE published_at IS NULL;
      CREATE INDEX usage_outbox_published ON usage_outbox (published_at) WHERE published_at IS NOT NULL;
`;
