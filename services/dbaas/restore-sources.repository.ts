/**
 * The databases a point-in-time restore may come from (pitr.ts): the account's active ones
 * (dbaas.databases) and those it destroyed, kept in dbaas.destroyed_databases for the retention.
 */
import type { Pool } from "pg";
import type { DatabaseRow } from "./databases.repository";

/**
 * A database a restore may come from: the account's, active or destroyed within the retention.
 * `activeAt`: when it was made and filled, where its restore window starts.
 */
export type RestoreSource = { id: string; databaseName: string; activeAt: Date; destroyedAt: Date | null };

export class RestoreSources {
  constructor(private readonly db: Pool) {}

  /** The account's database, active or destroyed (and not yet forgotten); undefined otherwise. */
  async find(id: string, clientId: string): Promise<RestoreSource | undefined> {
    const { rows } = await this.db.query<{ id: string; database_name: string; active_at: Date; destroyed_at: Date | null }>(
      `SELECT id, database_name, COALESCE(active_at, created_at) AS active_at, NULL::timestamptz AS destroyed_at
         FROM dbaas.databases WHERE id = $1 AND client_id = $2 AND status = 'active'
       UNION ALL
       SELECT id, database_name, COALESCE(active_at, created_at), destroyed_at FROM dbaas.destroyed_databases WHERE id = $1 AND client_id = $2`,
      [id, clientId],
    );
    const row = rows[0];
    return row && { id: row.id, databaseName: row.database_name, activeAt: row.active_at, destroyedAt: row.destroyed_at };
  }

  /** Called when the database has been dropped. */
  async recordDestroyed(row: DatabaseRow): Promise<void> {
    await this.db.query(
      `INSERT INTO dbaas.destroyed_databases (id, client_id, database_name, created_at, active_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
      [row.id, row.client_id, row.database_name, row.created_at, row.active_at ?? row.created_at],
    );
  }

  async forgetDestroyedBefore(before: Date): Promise<void> {
    await this.db.query("DELETE FROM dbaas.destroyed_databases WHERE destroyed_at < $1", [before]);
  }
}
