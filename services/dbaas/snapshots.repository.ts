/** SQL for dbaas.snapshots (migration 5): the only place that knows that table. */
import type { Pool } from "pg";

export type SnapshotStatus = "pending" | "ready" | "failed";

export type SnapshotRow = {
  id: string;
  client_id: string;
  database_id: string;
  database_name: string;
  status: SnapshotStatus;
  size_bytes: string | null;
  owner: string | null;
  failure: string | null;
  created_at: Date;
  updated_at: Date;
};

export type NewSnapshot = { id: string; clientId: string; databaseId: string; databaseName: string; owner: string };

const COLUMNS = "id, client_id, database_id, database_name, status, size_bytes, owner, failure, created_at, updated_at";

export class SnapshotsRepository {
  constructor(private readonly db: Pool) {}

  async insertPending(s: NewSnapshot): Promise<SnapshotRow> {
    const { rows } = await this.db.query<SnapshotRow>(
      `INSERT INTO dbaas.snapshots (id, client_id, database_id, database_name, status, owner)
       VALUES ($1, $2, $3, $4, 'pending', $5) RETURNING ${COLUMNS}`,
      [s.id, s.clientId, s.databaseId, s.databaseName, s.owner],
    );
    return rows[0];
  }

  /** pending → ready with its size; false when it is no longer pending (deleted, or failed by recovery). */
  async markReady(id: string, bytes: number): Promise<boolean> {
    const { rowCount } = await this.db.query(
      "UPDATE dbaas.snapshots SET status = 'ready', size_bytes = $2, owner = NULL, updated_at = now() WHERE id = $1 AND status = 'pending'",
      [id, bytes],
    );
    return (rowCount ?? 0) > 0;
  }

  /** pending → failed, with the reason kept for operators (never shown to the client). */
  async markFailed(id: string, failure: string): Promise<boolean> {
    const { rowCount } = await this.db.query(
      "UPDATE dbaas.snapshots SET status = 'failed', failure = left($2, 2000), owner = NULL, updated_at = now() WHERE id = $1 AND status = 'pending'",
      [id, failure],
    );
    return (rowCount ?? 0) > 0;
  }

  async findOwned(id: string, clientId: string): Promise<SnapshotRow | undefined> {
    const { rows } = await this.db.query<SnapshotRow>(`SELECT ${COLUMNS} FROM dbaas.snapshots WHERE id = $1 AND client_id = $2`, [id, clientId]);
    return rows[0];
  }

  /** The account's snapshots, newest first (at most `limit`). */
  async list(clientId: string, limit = 100): Promise<SnapshotRow[]> {
    const { rows } = await this.db.query<SnapshotRow>(`SELECT ${COLUMNS} FROM dbaas.snapshots WHERE client_id = $1 ORDER BY created_at DESC, id LIMIT $2`, [
      clientId,
      limit,
    ]);
    return rows;
  }

  /** Deletes the account's snapshot unless it is still pending; the deleted row, if any. */
  async deleteSettled(id: string, clientId: string): Promise<SnapshotRow | undefined> {
    const { rows } = await this.db.query<SnapshotRow>(
      `DELETE FROM dbaas.snapshots WHERE id = $1 AND client_id = $2 AND status <> 'pending' RETURNING ${COLUMNS}`,
      [id, clientId],
    );
    return rows[0];
  }

  /**
   * Bytes of the account's ready snapshots: what they count in the account's storage (the usage
   * ledger reads it through the internal action dbaas.snapshotStorage).
   */
  async accountBytes(clientId: string): Promise<number> {
    const { rows } = await this.db.query<{ bytes: string }>(
      "SELECT coalesce(sum(size_bytes), 0)::text AS bytes FROM dbaas.snapshots WHERE client_id = $1 AND status = 'ready'",
      [clientId],
    );
    return Number(rows[0].bytes);
  }

  /** Fails every pending snapshot whose process died (its pg_dump died with it); their ids. */
  async failAbandoned(): Promise<string[]> {
    const { rows } = await this.db.query<{ id: string }>(
      `UPDATE dbaas.snapshots SET status = 'failed', failure = 'the dbaas process taking it stopped', owner = NULL, updated_at = now()
        WHERE status = 'pending' AND (owner IS NULL OR NOT dbaas.owner_alive(owner)) RETURNING id`,
    );
    return rows.map((r) => r.id);
  }

  /** Which of these ids still need their dump kept: ready, or pending under a live process. */
  async keptOf(ids: string[]): Promise<Set<string>> {
    if (!ids.length) return new Set();
    const { rows } = await this.db.query<{ id: string }>(
      `SELECT id FROM dbaas.snapshots WHERE id = ANY($1::uuid[])
          AND (status = 'ready' OR (status = 'pending' AND owner IS NOT NULL AND dbaas.owner_alive(owner)))`,
      [ids],
    );
    return new Set(rows.map((r) => r.id));
  }
}
