/**
 * Storage usage for the ledger: every DBAAS_USAGE_SAMPLE_S each replica reports every active
 * database's last measured size for the current hour, as MB held over that hour (from its creation
 * when it began in it). The source key is (database, hour): the first sample of an hour counts, the
 * others (later rounds, other replicas) are ignored by the ledger, so replicas need no coordination.
 */
import type { Pool } from "pg";
import { storageUsageKey, UsageBatch, UsageRecord } from "../../lib/usage-protocol";
import { MAX_BATCH_RECORDS } from "../../lib/usage-protocol";

const HOUR_MS = 3600 * 1000;
const MIB = 1024 * 1024;
export const STORAGE_ENGINE = "postgresql";

type Active = { id: string; client_id: string; storage_bytes: string | null; created_at: Date };

/** The record of one database for the hour holding `now`. */
export function storageSample(db: Active, now: Date): UsageRecord {
  const hour = new Date(Math.floor(now.getTime() / HOUR_MS) * HOUR_MS);
  const start = db.created_at > hour ? db.created_at : hour;
  return {
    key: storageUsageKey(db.id, hour),
    clientId: db.client_id,
    resource: "storage",
    name: STORAGE_ENGINE,
    start: start.toISOString(),
    end: new Date(hour.getTime() + HOUR_MS).toISOString(),
    quantity: Number(db.storage_bytes ?? 0) / MIB,
  };
}

export class StorageSampler {
  constructor(
    private readonly db: Pool,
    private readonly publish: (batch: UsageBatch) => Promise<void>,
  ) {}

  /** Publishes this hour's sample of every active database; returns how many. */
  async sample(now = new Date()): Promise<number> {
    const { rows } = await this.db.query<Active>(`SELECT id, client_id, storage_bytes::text, created_at FROM dbaas.databases WHERE status = 'active'`);
    const records = rows.map((r) => storageSample(r, now));
    for (let i = 0; i < records.length; i += MAX_BATCH_RECORDS) await this.publish({ records: records.slice(i, i + MAX_BATCH_RECORDS) });
    return records.length;
  }

  /** For the usage service: each account's active databases and their size now (MiB). */
  async accountState(clientIds: string[]): Promise<Record<string, { databases: number; storageMb: number }>> {
    const { rows } = await this.db.query<{ client_id: string; n: number; bytes: string | null }>(
      `SELECT client_id, count(*)::int AS n, sum(storage_bytes)::text AS bytes FROM dbaas.databases
       WHERE client_id = ANY($1::text[]) AND status = 'active' GROUP BY client_id`,
      [clientIds],
    );
    return Object.fromEntries(rows.map((r) => [r.client_id, { databases: r.n, storageMb: Number(r.bytes ?? 0) / MIB }]));
  }
}
