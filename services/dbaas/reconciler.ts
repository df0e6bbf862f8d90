/**
 * Removes what a crash left behind on the tenant server: databases and roles of records stuck in
 * provisioning or destroying whose process died (or past a grace period), and objects carrying this instance's marker
 * that no record knows. Objects of other platforms (other markers, or none) are never touched.
 */
import type { LoggerInstance } from "moleculer";
import type { DatabaseStatus, DatabasesRepository } from "./databases.repository";
import { holdRoleOf } from "./naming";
import type { TenantServer } from "./tenant-server";

/** `ownerAlive`: false when the process that owned the record died; absent for records without an owner. */
/** `restore`: a point-in-time restore, left to pitr-jobs.ts (failed, not removed, when its process died). */
export type ReconcileRecord = {
  id: string;
  databaseName: string;
  username: string;
  status: DatabaseStatus;
  updatedAt: Date;
  ownerAlive?: boolean;
  restore?: boolean;
};

export type ReconcileSnapshot = {
  records: ReconcileRecord[];
  marked: { databases: string[]; roles: string[] };
  now: Date;
  graceMs: number;
};

export type ReconcilePlan = { dropDatabases: string[]; dropRoles: string[]; deleteRecords: string[] };

/** Pure: what to remove, given the records and the marked objects. */
export function planReconcile({ records, marked, now, graceMs }: ReconcileSnapshot): ReconcilePlan {
  // A dead owner's record is stale at once; the grace period covers records without one (and hung owners).
  // Failed restores keep their record (their objects are gone: any left with the marker are dropped).
  const kept = records.filter((r) => r.status !== "failed");
  const stale = kept.filter(
    (r) => r.status !== "active" && !(r.restore && r.status === "provisioning") && (r.ownerAlive === false || now.getTime() - r.updatedAt.getTime() >= graceMs),
  );
  const live = kept.filter((r) => !stale.includes(r));
  const liveNames = new Set(live.flatMap((r) => [r.databaseName, r.username, holdRoleOf(r.username)]));
  const dropDatabases = new Set(stale.map((r) => r.databaseName));
  const dropRoles = new Set(stale.flatMap((r) => [r.username, holdRoleOf(r.username)]));
  for (const name of marked.databases) if (!liveNames.has(name)) dropDatabases.add(name);
  for (const name of marked.roles) if (!liveNames.has(name)) dropRoles.add(name);
  return {
    dropDatabases: [...dropDatabases].sort(),
    dropRoles: [...dropRoles].sort(),
    deleteRecords: stale.map((r) => r.id).sort(),
  };
}

export type ReconcileReport = { databasesDropped: number; rolesDropped: number; recordsDeleted: number; failed: number };

export class Reconciler {
  constructor(private readonly deps: { repo: DatabasesRepository; tenant: TenantServer; marker: string; logger: LoggerInstance; now?: () => Date }) {}

  async reconcile(graceMs: number): Promise<ReconcileReport> {
    const { repo, tenant, marker, logger } = this.deps;
    // Marked objects first: a provisioning that marks one after this still has its record read below.
    const marked = await tenant.listMarked(marker);
    const rows = await repo.listAll();
    const plan = planReconcile({
      records: rows.map((r) => ({
        id: r.id,
        databaseName: r.database_name,
        username: r.username,
        status: r.status,
        updatedAt: r.updated_at,
        ...(r.owner ? { ownerAlive: r.owner_alive } : {}),
        ...(r.restore_to ? { restore: true } : {}),
      })),
      marked,
      now: (this.deps.now ?? (() => new Date()))(),
      graceMs,
    });
    const report: ReconcileReport = { databasesDropped: 0, rolesDropped: 0, recordsDeleted: 0, failed: 0 };
    const failedDatabases = new Set<string>();
    for (const name of plan.dropDatabases) {
      try {
        await tenant.withDatabaseLock(name, (admin) => tenant.dropDatabase(name, admin));
        report.databasesDropped++;
      } catch (err) {
        failedDatabases.add(name);
        report.failed++;
        logger.warn(`Reconciler could not drop database ${name}: ${(err as Error).message}`);
      }
    }
    for (const name of plan.dropRoles) {
      try {
        await tenant.dropRoles([name]);
        report.rolesDropped++;
      } catch (err) {
        report.failed++;
        logger.warn(`Reconciler could not drop role ${name}: ${(err as Error).message}`);
      }
    }
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const id of plan.deleteRecords) {
      // Keep the record while its database still exists: the next pass tries again.
      if (failedDatabases.has(byId.get(id)!.database_name)) continue;
      await repo.delete(id);
      report.recordsDeleted++;
    }
    if (report.databasesDropped || report.rolesDropped || report.recordsDeleted)
      logger.info(`Reconciler removed ${report.databasesDropped} database(s), ${report.rolesDropped} role(s), ${report.recordsDeleted} stale record(s)`);
    return report;
  }
}
