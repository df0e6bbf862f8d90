/**
 * The caller's databases as the routes find and show them (database-ops.ts, credential-actions.ts,
 * snapshot-actions.ts): the lookups that answer 404 or 409, a database's detail, and the
 * connection string every answer with a password carries.
 */
import { apiError, notFound } from "../../lib/errors";
import { isUuid } from "../../lib/uuid";
import type { DbaasApp } from "./app";
import type { DatabaseDetail } from "./contract";
import { DatabaseRow, roundMb } from "./databases.repository";
import { MIB } from "./quota-rules";
import { apiStatusOf } from "./pitr-jobs";

export function databaseDetail(app: DbaasApp, row: DatabaseRow): DatabaseDetail {
  return {
    id: row.id,
    databaseName: row.database_name,
    host: app.config.publicHost,
    port: app.config.publicPort,
    username: row.username,
    storageMb: roundMb(Number(row.storage_bytes ?? 0) / MIB),
    maxStorageMb: row.max_storage_mb,
    createdAt: row.created_at.toISOString(),
    readOnly: row.read_only,
    ...apiStatusOf(row),
    ...(app.config.pooledPort ? { pooledHost: app.config.pooledHost, pooledPort: app.config.pooledPort } : {}),
  };
}

/** With the sslmode DBAAS_SSLMODE settles (README "TLS"; app.ts resolveSslMode). */
export function connectionString(app: DbaasApp, row: DatabaseRow, password: string, host = app.config.publicHost, port = app.config.publicPort): string {
  return `postgresql://${row.username}:${password}@${host}:${port}/${row.database_name}${app.sslSuffix ?? ""}`;
}

/** The direct string, and the pooled one (same role and password, the pooler's host and port) when a pooler is configured. */
export function connectionStrings(app: DbaasApp, row: DatabaseRow, password: string): { connectionString: string; pooledConnectionString?: string } {
  const { pooledHost, pooledPort } = app.config;
  return {
    connectionString: connectionString(app, row, password),
    ...(pooledPort ? { pooledConnectionString: connectionString(app, row, password, pooledHost, pooledPort) } : {}),
  };
}

const NOT_READY: Record<string, string> = {
  provisioning: "is still being provisioned",
  restoring: "is still being restored",
  destroying: "is being destroyed",
  failed: "failed to restore; destroy it",
};

/** The caller's database, active: 404 for a malformed id or another account's, 409 INVALID_STATE while it is being provisioned or destroyed. */
export async function findReady(app: DbaasApp, id: string, clientId: string): Promise<DatabaseRow> {
  if (!isUuid(id)) throw notFound("Database");
  const row = await app.repo.findOwned(id, clientId);
  if (!row) throw notFound("Database");
  if (row.status !== "active") throw apiError("INVALID_STATE", `Database ${NOT_READY[apiStatusOf(row).status === "restoring" ? "restoring" : row.status]}`);
  return row;
}
