/**
 * What the database routes and the operators' actions of dbaas.service.ts do, on the app
 * (app.ts): provision, list, look up and destroy the caller's databases, and run the reconciler
 * and the quota now. Each handler hands over to one function here.
 */
import { notFound, validationFailed } from "../../lib/errors";
import type { CallerMeta } from "../../lib/identity";
import { respondCreated } from "../../lib/http-meta";
import { isUuid } from "../../lib/uuid";
import type { DbaasApp } from "./app";
import type { DatabaseCreated, DatabaseDetail, Message } from "./contract";
import type { DatabaseRow } from "./databases.repository";
import { unavailable } from "./faults";
import { connectionStrings, databaseDetail, findOwn } from "./lookups";
import { DestroyNotStarted } from "./provisioner";
import type { QuotaReport } from "./quota";
import type { ReconcileReport } from "./reconciler";
import { branchRestore } from "./snapshot-actions";

export type CreateParams = { fromSnapshot?: string; maxStorageMb?: number };

export async function createDatabase(app: DbaasApp, params: CreateParams, meta: CallerMeta): Promise<DatabaseCreated> {
  const fromSnapshot = params.fromSnapshot ?? undefined; // null: as absent
  const maxStorageMb = params.maxStorageMb ?? undefined;
  if (maxStorageMb !== undefined && maxStorageMb > app.config.maxStorageMb)
    throw validationFailed([{ field: "maxStorageMb", message: `must be at most ${app.config.maxStorageMb} (MB per database)` }]);
  // Monthly credits, the account's storage and its (overridable) number of databases; the provisioner still holds DBAAS_MAX_PER_ACCOUNT race-free.
  await app.gate.check(meta.caller!.clientId, ["credits", "storageMb", "databases"]);
  if (!(await app.verifyServer())) throw unavailable();
  const clientId = meta.caller!.clientId;
  const restore = fromSnapshot === undefined ? undefined : await branchRestore(app, fromSnapshot, clientId);
  const { row, password } = await app.provisioner.provision(clientId, { maxStorageMb, restore });
  const { host, port } = databaseDetail(app, row);
  respondCreated(meta, `/api/databases/${row.id}`);
  return {
    id: row.id,
    databaseName: row.database_name,
    host,
    port,
    username: row.username,
    password,
    ...connectionStrings(app, row, password),
  };
}

export async function listDatabases(app: DbaasApp, clientId: string): Promise<{ databases: DatabaseDetail[] }> {
  const rows = await app.repo.listActive(clientId);
  return { databases: await Promise.all(rows.map((row) => fullDetail(app, row))) };
}

export async function getDatabase(app: DbaasApp, id: string, clientId: string): Promise<DatabaseDetail> {
  return fullDetail(app, await findOwn(app, id, clientId));
}

/** The detail with what the tenant server says of the database now (its extensions). */
async function fullDetail(app: DbaasApp, row: DatabaseRow): Promise<DatabaseDetail> {
  const extensions = await app.extensions.detail(row);
  return { ...databaseDetail(app, row), ...(extensions ? { extensions } : {}) };
}

export async function destroyDatabase(app: DbaasApp, id: string, clientId: string): Promise<Message> {
  if (!isUuid(id)) throw notFound("Database");
  const row = await app.repo.claimForDestroy(id, clientId, app.lease.id);
  if (!row) throw notFound("Database");
  try {
    await app.provisioner.destroy(row);
  } catch (err) {
    if (!(err instanceof DestroyNotStarted)) throw err;
    await app.repo.setStatus(row.id, "active"); // nothing was dropped: it stays usable
    throw unavailable();
  }
  return { message: `Database ${row.database_name} destroyed` };
}

/** Operators: a reconciler pass now (never beside a periodic one); `graceS` defaults to DBAAS_RECONCILE_GRACE_S. */
export async function reconcileNow(app: DbaasApp, graceS: number | undefined): Promise<ReconcileReport> {
  const graceMs = (graceS ?? app.config.reconcileGraceS) * 1000;
  return app.reconcileLoop.exclusive(() => app.housekeeping(graceMs));
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
