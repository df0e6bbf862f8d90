/**
 * What the database routes and the operators' actions of dbaas.service.ts do, on the app
 * (app.ts): provision, list, look up and destroy the caller's databases, and run the reconciler
 * and the quota now. Each handler hands over to one function here.
 */
import { apiError, notFound, validationFailed } from "../../lib/errors";
import type { CallerMeta } from "../../lib/identity";
import { respondAccepted, respondCreated } from "../../lib/http-meta";
import { isUuid } from "../../lib/uuid";
import type { DbaasApp } from "./app";
import type { DatabaseCreated, DatabaseDetail, Message } from "./contract";
import type { DatabaseRow } from "./databases.repository";
import type { RestoreFrom } from "./pitr";
import type { DatabaseStats } from "./stats";
import { unavailable } from "./faults";
import { connectionStrings, databaseDetail } from "./lookups";
import { restoreFailureReason } from "./pitr-jobs";
import { DestroyNotStarted } from "./provisioner";
import type { QuotaReport } from "./quota";
import type { ReconcileReport } from "./reconciler";
import { branchRestore } from "./snapshot-actions";

export type CreateParams = { fromSnapshot?: string; maxStorageMb?: number; restoreFrom?: RestoreFrom };

export async function createDatabase(app: DbaasApp, params: CreateParams, meta: CallerMeta): Promise<DatabaseCreated> {
  const fromSnapshot = params.fromSnapshot ?? undefined; // null: as absent
  const maxStorageMb = params.maxStorageMb ?? undefined;
  if (maxStorageMb !== undefined && maxStorageMb > app.config.maxStorageMb)
    throw validationFailed([{ field: "maxStorageMb", message: `must be at most ${app.config.maxStorageMb} (MB per database)` }]);
  // Monthly credits, the account's storage and its (overridable) number of databases; the provisioner still holds DBAAS_MAX_PER_ACCOUNT race-free.
  await app.gate.check(meta.caller!.clientId, ["credits", "storageMb", "databases"]);
  if (!(await app.verifyServer())) throw unavailable();
  const clientId = meta.caller!.clientId;
  const restoreFrom = params.restoreFrom ?? undefined;
  const restore = await fillerOf(app, fromSnapshot, restoreFrom, clientId);
  // A point-in-time restore fills the database in the background (pitr-jobs.ts): 202, "restoring".
  const background = restoreFrom && { restoreOf: restoreFrom.databaseId, restoreTo: new Date(restoreFrom.timestamp), reasonOf: restoreFailureReason };
  const { row, password, filled } = await app.provisioner.provision(clientId, { maxStorageMb, restore, background });
  const { host, port } = databaseDetail(app, row);
  if (filled) {
    app.restoreJobs.track(filled);
    respondAccepted(meta, `/api/databases/${row.id}`);
  } else respondCreated(meta, `/api/databases/${row.id}`);
  return {
    id: row.id,
    databaseName: row.database_name,
    host,
    port,
    username: row.username,
    password,
    ...connectionStrings(app, row, password),
    ...(filled ? { status: "restoring" as const } : {}),
  };
}

/** What fills the new database: a snapshot (a branch), the source's data at a moment (point in time), or nothing. */
async function fillerOf(app: DbaasApp, fromSnapshot: string | undefined, restoreFrom: RestoreFrom | undefined, clientId: string) {
  if (fromSnapshot !== undefined && restoreFrom !== undefined)
    throw validationFailed([{ field: "restoreFrom", message: "give either fromSnapshot or restoreFrom, not both" }]);
  if (fromSnapshot !== undefined) return branchRestore(app, fromSnapshot, clientId);
  if (restoreFrom === undefined) return undefined;
  if (!app.pitr) throw apiError("SERVICE_UNAVAILABLE", "Point-in-time restore is not available on this platform");
  await app.requireSnapshots(); // pg_dump and pg_restore of the server's version
  return app.pitr.restoreFor(restoreFrom, clientId);
}

export async function listDatabases(app: DbaasApp, clientId: string): Promise<{ databases: DatabaseDetail[] }> {
  const rows = await app.repo.listVisible(clientId);
  return { databases: await Promise.all(rows.map((row) => fullDetail(app, row))) };
}

/** The caller's database, active, restoring or failed (a restore); 404 otherwise. */
export async function getDatabase(app: DbaasApp, id: string, clientId: string): Promise<DatabaseDetail> {
  const row = isUuid(id) ? await app.repo.findVisible(id, clientId) : undefined;
  if (!row) throw notFound("Database");
  return fullDetail(app, row);
}

/** The detail with what the tenant server says of an active database now (its extensions, its restore window). */
async function fullDetail(app: DbaasApp, row: DatabaseRow): Promise<DatabaseDetail> {
  if (row.status !== "active") return databaseDetail(app, row);
  const [extensions, restoreWindow] = await Promise.all([
    app.extensions.detail(row),
    app.pitr?.window({ activeAt: row.active_at ?? row.created_at, destroyedAt: null }).catch(() => undefined),
  ]);
  return { ...databaseDetail(app, row), ...(extensions ? { extensions } : {}), ...(restoreWindow ? { restoreWindow } : {}) };
}

export async function destroyDatabase(app: DbaasApp, id: string, clientId: string): Promise<Message> {
  if (!isUuid(id)) throw notFound("Database");
  const row = await app.repo.claimForDestroy(id, clientId, app.lease.id);
  if (!row) return destroyUnclaimed(app, id, clientId);
  try {
    await app.provisioner.destroy(row);
  } catch (err) {
    if (!(err instanceof DestroyNotStarted)) throw err;
    await app.repo.setStatus(row.id, "active"); // nothing was dropped: it stays usable
    throw unavailable();
  }
  // Restorable to a moment of its life for DBAAS_PITR_RETENTION_H.
  if (app.pitr)
    await app.restoreSources.recordDestroyed(row).catch((err) => app.logger.warn(`Destroyed ${row.id} not kept for restores: ${(err as Error).message}`));
  return { message: `Database ${row.database_name} destroyed` };
}

/** A failed restore's record is deleted (nothing of it is left on the server); a restore still running is 409; anything else 404. */
async function destroyUnclaimed(app: DbaasApp, id: string, clientId: string): Promise<Message> {
  const row = await app.repo.findVisible(id, clientId);
  if (row?.status === "failed" && (await app.repo.deleteFailed(id, clientId))) return { message: `Database ${row.database_name} destroyed` };
  if (row?.status === "provisioning") throw apiError("INVALID_STATE", "The database is still being restored; destroy it once it is active or failed");
  throw notFound("Database");
}

/** Operators: a reconciler pass now (never beside a periodic one); `graceS` defaults to DBAAS_RECONCILE_GRACE_S. */
export async function reconcileNow(app: DbaasApp, graceS: number | undefined): Promise<ReconcileReport> {
  const graceMs = (graceS ?? app.config.reconcileGraceS) * 1000;
  return app.reconcileLoop.exclusive(() => app.housekeeping(graceMs));
}

/** Operators and tests: a base backup for point-in-time restore now (503 without it). */
export async function baseBackupNow(app: DbaasApp): Promise<{ id: string; endedAt: string }> {
  const { pitr, backupLoop } = app;
  if (!pitr || !backupLoop) throw apiError("SERVICE_UNAVAILABLE", "Point-in-time restore is not configured (DBAAS_PITR_WAL_DIR)");
  const backup = await backupLoop.exclusive(() => pitr.backupNow());
  return { id: backup.id, endedAt: backup.endedAt.toISOString() };
}

/** The metrics service's figures: the records', and the WAL archiver's with point-in-time restore (left out while the server does not answer). */
export async function databaseStats(app: DbaasApp): Promise<DatabaseStats> {
  const stats = await app.repo.stats();
  const walArchive = await app.pitr?.archiveFigures().catch((err) => void app.logger.warn(`WAL archiver not read: ${(err as Error).message}`));
  return walArchive ? { ...stats, walArchive } : stats;
}

/** Operators: the quota measured and enforced now. */
export async function checkQuotaNow(app: DbaasApp): Promise<QuotaReport> {
  const report = await app.quotaLoop.exclusive(() => app.quotaWatch.full());
  app.quotaLoop.runWithin(app.quotaWatch.intervalS() * 1000); // a database near its quota is watched from now on
  return report;
}

/** Operators: one database's quota changed and applied at once. */
export async function setMaxStorage(app: DbaasApp, id: string, maxStorageMb: number): Promise<DatabaseDetail> {
  if (!(await app.repo.setMaxStorage(id, maxStorageMb))) throw notFound("Database");
  const row = (await app.repo.find(id))!;
  await app.tenant.setTempFileLimit(row.username, maxStorageMb);
  await app.quotaLoop.exclusive(() => app.quota.check([row]));
  return fullDetail(app, (await app.repo.find(id))!);
}
