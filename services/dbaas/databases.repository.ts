/** SQL for the dbaas schema of the platform's own database; the only place that knows its tables. */
import type { Pool } from "pg";
import type { CatalogLevel } from "./settings";
import type { DatabaseStats } from "./stats";

/** `failed`: a restore that could not finish (its database and role dropped; status_reason says why). */
export type DatabaseStatus = "provisioning" | "active" | "destroying" | "failed";

export type DatabaseRow = {
  id: string;
  client_id: string;
  database_name: string;
  username: string;
  status: DatabaseStatus;
  storage_bytes: string | null;
  measured_at: Date | null;
  max_storage_mb: number;
  read_only: boolean;
  created_at: Date;
  /** When it was made and filled (its point-in-time restore window starts there); null until then. */
  active_at: Date | null;
  updated_at: Date;
  /** The process working on a provisioning or destroying record (owner-lease.ts). */
  owner: string | null;
  /** The catalog level applied in the database (tenant-sql.ts hiddenAt); null: not known (the reconciler applies the configured one). */
  catalog_level: CatalogLevel | null;
  /** The extension allow-list the database's guard enforces (extension-sql.ts policyOf); null: no guard yet. */
  extension_policy: string | null;
  /** A point-in-time restore (pitr-jobs.ts): the source database and the instant; null otherwise. */
  restore_of: string | null;
  restore_to: Date | null;
  /** Why a restore failed. */
  status_reason: string | null;
};

/** A record with whether the process that owns it still lives (for the reconciler). */
export type OwnedRow = DatabaseRow & { owner_alive: boolean };

export type IntentOutcome = { recorded: true } | { recorded: false; resource: "databases" } | { recorded: false; resource: "storageMb"; usedMb: number };

export type NewDatabase = { id: string; clientId: string; databaseName: string; username: string; maxStorageMb: number; owner?: string };

const COLUMNS = `id, client_id, database_name, username, status, storage_bytes, measured_at, max_storage_mb, read_only, created_at, active_at, updated_at, owner, catalog_level, extension_policy, restore_of, restore_to, status_reason`;
/** Records that hold a place in the account: active, or being provisioned by a live process. */
/** What the account sees (list and detail): active databases, and restores running or failed. */
const VISIBLE = `(status = 'active' OR (restore_to IS NOT NULL AND status IN ('provisioning', 'failed')))`;
const LIVE = `(status = 'active' OR (status = 'provisioning' AND (owner IS NULL OR dbaas.owner_alive(owner))))`;

export class DatabasesRepository {
  constructor(private readonly db: Pool) {}

  async instanceId(): Promise<string> {
    const { rows } = await this.db.query<{ id: string }>("SELECT id FROM dbaas.instance");
    return rows[0].id;
  }

  /**
   * Records the intent to provision, unless the account already has `limit` databases
   * (provisioning or active) or, with `storageLimitMb`, the new database's maximum does not fit
   * in the account's storage; safe under concurrency (see record_intent_within in migrations.ts).
   */
  async insertProvisioning(row: NewDatabase, limit: number, storageLimitMb?: number): Promise<IntentOutcome> {
    const { rows } = await this.db.query<{ outcome: string }>("SELECT dbaas.record_intent_within($1, $2, $3, $4, $5, $6, $7, $8) AS outcome", [
      row.id,
      row.clientId,
      row.databaseName,
      row.username,
      row.maxStorageMb,
      limit,
      row.owner ?? null,
      storageLimitMb ?? null,
    ]);
    const outcome = rows[0].outcome;
    if (outcome === "recorded") return { recorded: true };
    if (outcome === "databases") return { recorded: false, resource: "databases" };
    return { recorded: false, resource: "storageMb", usedMb: Number(outcome.slice("storage:".length)) };
  }

  /** `catalogLevel`, `extensionPolicy`: what prepareSchema applied (also sets catalog_hidden, see migration 4). */
  async activate(id: string, storageBytes: number, catalogLevel: CatalogLevel, extensionPolicy: string | null = null): Promise<DatabaseRow | undefined> {
    const { rows } = await this.db.query<DatabaseRow>(
      `UPDATE dbaas.databases SET status = 'active', storage_bytes = $2, measured_at = now(), updated_at = now(), active_at = clock_timestamp(),
              catalog_level = $3, catalog_hidden = true, extension_policy = $4
        WHERE id = $1 AND status = 'provisioning' RETURNING ${COLUMNS}`,
      [id, storageBytes, catalogLevel, extensionPolicy],
    );
    return rows[0];
  }

  async delete(id: string): Promise<void> {
    await this.db.query("DELETE FROM dbaas.databases WHERE id = $1", [id]);
  }

  async findActive(id: string, clientId: string): Promise<DatabaseRow | undefined> {
    const { rows } = await this.db.query<DatabaseRow>(`SELECT ${COLUMNS} FROM dbaas.databases WHERE id = $1 AND client_id = $2 AND status = 'active'`, [
      id,
      clientId,
    ]);
    return rows[0];
  }

  /** The account's record in whatever state (active or not). */
  async findOwned(id: string, clientId: string): Promise<DatabaseRow | undefined> {
    const { rows } = await this.db.query<DatabaseRow>(`SELECT ${COLUMNS} FROM dbaas.databases WHERE id = $1 AND client_id = $2`, [id, clientId]);
    return rows[0];
  }

  async find(id: string): Promise<DatabaseRow | undefined> {
    const { rows } = await this.db.query<DatabaseRow>(`SELECT ${COLUMNS} FROM dbaas.databases WHERE id = $1`, [id]);
    return rows[0];
  }

  /** The account's record as list and detail show it (VISIBLE). */
  async findVisible(id: string, clientId: string): Promise<DatabaseRow | undefined> {
    const sql = `SELECT ${COLUMNS} FROM dbaas.databases WHERE id = $1 AND client_id = $2 AND ${VISIBLE}`;
    return (await this.db.query<DatabaseRow>(sql, [id, clientId])).rows[0];
  }

  async listVisible(clientId: string): Promise<DatabaseRow[]> {
    const sql = `SELECT ${COLUMNS} FROM dbaas.databases WHERE client_id = $1 AND ${VISIBLE} ORDER BY created_at DESC, id`;
    return (await this.db.query<DatabaseRow>(sql, [clientId])).rows;
  }

  /** Marks a record being provisioned as a restore of `sourceId` to `target` (shown "restoring" until active). */
  async markRestore(id: string, sourceId: string, target: Date): Promise<void> {
    await this.db.query("UPDATE dbaas.databases SET restore_of = $2, restore_to = $3 WHERE id = $1", [id, sourceId, target]);
  }

  /** A restore that could not finish: kept, owned by nobody, holding no place in the account. */
  async fail(id: string, reason: string): Promise<boolean> {
    const { rowCount } = await this.db.query(
      "UPDATE dbaas.databases SET status = 'failed', status_reason = $2, owner = NULL, updated_at = now() WHERE id = $1 AND status = 'provisioning'",
      [id, reason.slice(0, 1000)],
    );
    return (rowCount ?? 0) > 0;
  }

  /** Restores whose process died (its lease freed): pitr-jobs.ts fails them. */
  async listInterruptedRestores(): Promise<DatabaseRow[]> {
    const sql = `SELECT ${COLUMNS} FROM dbaas.databases
                  WHERE status = 'provisioning' AND restore_to IS NOT NULL AND owner IS NOT NULL AND NOT dbaas.owner_alive(owner)`;
    return (await this.db.query<DatabaseRow>(sql)).rows;
  }

  /** Deletes a failed restore's record (its database and role are already gone). */
  async deleteFailed(id: string, clientId: string): Promise<boolean> {
    const { rowCount } = await this.db.query("DELETE FROM dbaas.databases WHERE id = $1 AND client_id = $2 AND status = 'failed'", [id, clientId]);
    return (rowCount ?? 0) > 0;
  }

  async listActive(clientId: string): Promise<DatabaseRow[]> {
    const { rows } = await this.db.query<DatabaseRow>(
      `SELECT ${COLUMNS} FROM dbaas.databases WHERE client_id = $1 AND status = 'active' ORDER BY created_at DESC, id`,
      [clientId],
    );
    return rows;
  }

  async listAll(): Promise<OwnedRow[]> {
    const { rows } = await this.db.query<OwnedRow>(`SELECT ${COLUMNS}, dbaas.owner_alive(owner) AS owner_alive FROM dbaas.databases`);
    return rows;
  }

  /** The account's records that hold a place (see LIVE), oldest first. */
  async listLive(clientId: string): Promise<DatabaseRow[]> {
    const { rows } = await this.db.query<DatabaseRow>(`SELECT ${COLUMNS} FROM dbaas.databases WHERE client_id = $1 AND ${LIVE} ORDER BY created_at, id`, [
      clientId,
    ]);
    return rows;
  }

  /** Active databases whose catalog is at another level than `level`, or not known to be at any. */
  async listCatalogNotAt(level: CatalogLevel): Promise<DatabaseRow[]> {
    const { rows } = await this.db.query<DatabaseRow>(`SELECT ${COLUMNS} FROM dbaas.databases WHERE status = 'active' AND catalog_level IS DISTINCT FROM $1`, [
      level,
    ]);
    return rows;
  }

  /** Active databases whose extension guard enforces another allow-list than `policy`, or none. */
  async listExtensionPolicyNot(policy: string): Promise<DatabaseRow[]> {
    const sql = `SELECT ${COLUMNS} FROM dbaas.databases WHERE status = 'active' AND extension_policy IS DISTINCT FROM $1`;
    return (await this.db.query<DatabaseRow>(sql, [policy])).rows;
  }

  async markExtensionPolicy(id: string, policy: string): Promise<void> {
    await this.db.query("UPDATE dbaas.databases SET extension_policy = $2 WHERE id = $1", [id, policy]);
  }

  /**
   * Records the level now applied. catalog_hidden = true keeps replicas of the version before
   * migration 4 (during a rolling update), which hid everything where it was false, away from it.
   */
  async markCatalogLevel(id: string, level: CatalogLevel): Promise<void> {
    await this.db.query("UPDATE dbaas.databases SET catalog_level = $2, catalog_hidden = true WHERE id = $1", [id, level]);
  }

  /** Hands a record to nobody: it no longer counts towards its account, and the reconciler removes what it left. */
  async abandon(id: string): Promise<void> {
    await this.db.query("UPDATE dbaas.databases SET owner = gen_random_uuid() WHERE id = $1", [id]);
  }

  /** Whether a provisioning or destroying record's process is gone (its lease freed, or handed to nobody by abandon). */
  async hasAbandoned(): Promise<boolean> {
    const { rows } = await this.db.query<{ found: boolean }>(
      "SELECT EXISTS (SELECT 1 FROM dbaas.databases WHERE status <> 'active' AND owner IS NOT NULL AND NOT dbaas.owner_alive(owner)) AS found",
    );
    return rows[0].found;
  }

  async listByStatus(status: DatabaseStatus): Promise<DatabaseRow[]> {
    const { rows } = await this.db.query<DatabaseRow>(`SELECT ${COLUMNS} FROM dbaas.databases WHERE status = $1`, [status]);
    return rows;
  }

  /** Active (or already destroying: a retried destroy finishes the job) → destroying. */
  async claimForDestroy(id: string, clientId: string, owner?: string): Promise<DatabaseRow | undefined> {
    const { rows } = await this.db.query<DatabaseRow>(
      `UPDATE dbaas.databases SET status = 'destroying', updated_at = now(), owner = $3
        WHERE id = $1 AND client_id = $2 AND status IN ('active', 'destroying') RETURNING ${COLUMNS}`,
      [id, clientId, owner ?? null],
    );
    return rows[0];
  }

  async setStatus(id: string, status: DatabaseStatus): Promise<void> {
    await this.db.query("UPDATE dbaas.databases SET status = $2, updated_at = now() WHERE id = $1", [id, status]);
  }

  async recordSizes(sizes: Array<{ id: string; bytes: number }>): Promise<void> {
    if (!sizes.length) return;
    await this.db.query(
      `UPDATE dbaas.databases d SET storage_bytes = s.bytes, measured_at = now()
         FROM unnest($1::uuid[], $2::bigint[]) AS s(id, bytes) WHERE d.id = s.id AND d.id = ANY($1::uuid[])`,
      [sizes.map((s) => s.id), sizes.map((s) => s.bytes)],
    );
  }

  async setReadOnly(id: string, readOnly: boolean): Promise<void> {
    await this.db.query("UPDATE dbaas.databases SET read_only = $2, updated_at = now() WHERE id = $1", [id, readOnly]);
  }

  async setMaxStorage(id: string, maxStorageMb: number): Promise<boolean> {
    const { rowCount } = await this.db.query("UPDATE dbaas.databases SET max_storage_mb = $2 WHERE id = $1 AND status = 'active'", [id, maxStorageMb]);
    return (rowCount ?? 0) > 0;
  }

  async stats(): Promise<DatabaseStats> {
    const { rows } = await this.db.query<{ status: DatabaseStatus; read_only: boolean; n: number; bytes: string | null }>(
      `SELECT status, read_only, count(*)::int AS n, sum(storage_bytes)::text AS bytes
         FROM dbaas.databases GROUP BY status, read_only`,
    );
    const stats: DatabaseStats = {
      databasesByState: { active: 0, provisioning: 0, destroying: 0, failed: 0, readOnly: 0 },
      storageMbByState: { active: 0, readOnly: 0 },
    };
    for (const row of rows) {
      stats.databasesByState[row.status] += row.n;
      if (row.status !== "active") continue;
      const mb = Number(row.bytes ?? 0) / 1048576;
      stats.storageMbByState.active += mb;
      if (row.read_only) {
        stats.databasesByState.readOnly += row.n;
        stats.storageMbByState.readOnly += mb;
      }
    }
    stats.storageMbByState.active = roundMb(stats.storageMbByState.active);
    stats.storageMbByState.readOnly = roundMb(stats.storageMbByState.readOnly);
    return stats;
  }
}

export const roundMb = (mb: number): number => Math.round(mb * 100) / 100;
