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

export type SnapshotRefusal = { refused: "snapshots" | "storageMb"; limit: number; used: number };

export type NewSnapshot = { id: string; clientId: string; databaseId: string; databaseName: string; owner: string };

const COLUMNS = "id, client_id, database_id, database_name, status, size_bytes, owner, failure, created_at, updated_at";

export class SnapshotsRepository {
  constructor(private readonly db: Pool) {}

  async insertPending(s: NewSnapshot, via: Pick<Pool, "query"> = this.db): Promise<SnapshotRow> {
    const { rows } = await via.query<SnapshotRow>(
      `INSERT INTO dbaas.snapshots (id, client_id, database_id, database_name, status, owner)
       VALUES ($1, $2, $3, $4, 'pending', $5) RETURNING ${COLUMNS}`,
      [s.id, s.clientId, s.databaseId, s.databaseName, s.owner],
    );
    return rows[0];
  }

  /**
   * Records a pending snapshot unless the account already has `perAccount` (pending or ready), or,
   * with `storageLimitMb`, its storage (databases' maxima plus ready snapshots) is already full.
   * Under the account's lock that record_intent_within takes, so creates and snapshots count together.
   */
  async insertPendingWithin(s: NewSnapshot, perAccount: number, storageLimitMb?: number): Promise<SnapshotRow | SnapshotRefusal> {
    const client = await this.db.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT pg_advisory_xact_lock(hashtext('ci-platform:dbaas:account:' || $1))", [s.clientId]);
      const { rows } = await client.query<{ snapshots: number; used_mb: string }>(
        `SELECT (SELECT count(*)::int FROM dbaas.snapshots WHERE client_id = $1 AND status <> 'failed') AS snapshots,
                ceil((SELECT coalesce(sum(max_storage_mb), 0) FROM dbaas.databases
                       WHERE client_id = $1 AND (status = 'active' OR (status = 'provisioning' AND (owner IS NULL OR dbaas.owner_alive(owner)))))
                     + (SELECT coalesce(sum(size_bytes), 0) FROM dbaas.snapshots WHERE client_id = $1 AND status = 'ready') / 1048576.0)::text AS used_mb`,
        [s.clientId],
      );
      const { snapshots } = rows[0];
      const usedMb = Number(rows[0].used_mb);
      let refusal: SnapshotRefusal | undefined;
      if (snapshots >= perAccount) refusal = { refused: "snapshots", limit: perAccount, used: snapshots };
      else if (storageLimitMb !== undefined && usedMb >= storageLimitMb) refusal = { refused: "storageMb", limit: storageLimitMb, used: usedMb };
      if (refusal) {
        await client.query("ROLLBACK");
        return refusal;
      }
      const row = await this.insertPending(s, client);
      await client.query("COMMIT");
      return row;
    } catch (err) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
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
   * Bytes of each account's ready snapshots (accounts with none absent): what they count in the
   * account's storage (the usage service reads it through the internal action dbaas.snapshotStorage).
   */
  async accountBytes(clientIds: string[]): Promise<Map<string, number>> {
    const { rows } = await this.db.query<{ client_id: string; bytes: string }>(
      `SELECT client_id, sum(size_bytes)::text AS bytes FROM dbaas.snapshots
       WHERE client_id = ANY($1::text[]) AND status = 'ready' GROUP BY client_id`,
      [clientIds],
    );
    return new Map(rows.map((r) => [r.client_id, Number(r.bytes)]));
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
