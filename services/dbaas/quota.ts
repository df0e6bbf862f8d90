/**
 * Storage quota: measures each active database (pg_database_size stats every file, so the figure
 * is cached in the record), and makes a database read-only while it is over its quota.
 */
import type { LoggerInstance } from "moleculer";
import type { DatabaseRow, DatabasesRepository } from "./databases.repository";
import type { TenantServer } from "./tenant-server";
import { decideQuota, isNearQuota, MIB, type QuotaAction } from "./quota-rules";

// The rules are pure and have their own module (quota-activity.ts reads them without the enforcer).
export { decideQuota, isNearQuota, MIB, NEAR_RATIO, type QuotaAction, type QuotaState } from "./quota-rules";

/**
 * `near`: databases measured above NEAR_RATIO of their quota and still writable; `refrozen`: frozen
 * ones found writable somewhere again (a path the freeze missed), frozen again.
 */
export type QuotaReport = { measured: number; frozen: string[]; thawed: string[]; refrozen: string[]; failed: string[]; near: string[] };

export class QuotaEnforcer {
  constructor(private readonly deps: { repo: DatabasesRepository; tenant: TenantServer; marker: string; logger: LoggerInstance }) {}

  /**
   * Measures `rows` (default: every active database) and applies the quota to each. Whether a
   * database is read-only is read from the server, not the record, so a crash between changing
   * the server and the record heals at the next check.
   */
  async check(rows?: DatabaseRow[]): Promise<QuotaReport> {
    const { repo, tenant, logger } = this.deps;
    const active = (rows ?? (await repo.listByStatus("active"))).filter((r) => r.status === "active");
    const report: QuotaReport = { measured: 0, frozen: [], thawed: [], refrozen: [], failed: [], near: [] };
    if (!active.length) return report;
    const measured = await tenant.measure(active.map(refOf));
    const found = active.filter((r) => measured.has(r.database_name));
    await repo.recordSizes(found.map((r) => ({ id: r.id, bytes: measured.get(r.database_name)!.bytes })));
    report.measured = found.length;
    for (const row of found) {
      const { bytes, writable } = measured.get(row.database_name)!;
      try {
        const action = await this.enforce(row, bytes, writable);
        if (action === "freeze") report.frozen.push(row.id);
        if (action === "thaw") report.thawed.push(row.id);
        if (action === "refreeze") report.refrozen.push(row.id);
        const readOnly = action === "freeze" || action === "refreeze" || (action === "none" && !writable);
        if (isNearQuota({ storageBytes: bytes, maxStorageMb: row.max_storage_mb, readOnly })) report.near.push(row.id);
      } catch (err) {
        report.failed.push(row.id);
        logger.warn(`Quota of database ${row.id} not enforced this round: ${(err as Error).message}`);
      }
    }
    return report;
  }

  /**
   * Decides again under the database's lock, on the record and the server as they are now. A
   * database that stays frozen is verified each time it is measured, and frozen again if its
   * tenant can write anywhere (objects created after the freeze through a path prepared before).
   */
  private async enforce(seen: DatabaseRow, bytes: number, writable: boolean): Promise<QuotaAction | "refreeze"> {
    const { repo, tenant, marker, logger } = this.deps;
    const state = (row: DatabaseRow, canWrite: boolean) => ({ storageBytes: bytes, maxStorageMb: row.max_storage_mb, readOnly: !canWrite });
    const holds = async (row: DatabaseRow, canWrite: boolean) => canWrite || (await tenant.frozenWritePaths(refOf(row))) === null;
    if (decideQuota(state(seen, writable)) === "none" && seen.read_only === !writable && (await holds(seen, writable))) return "none";
    return tenant.withDatabaseLock(seen.database_name, async (admin) => {
      const row = await repo.find(seen.id);
      if (!row || row.status !== "active") return "none";
      const ref = refOf(row);
      const canWrite = await tenant.isWritable(ref, admin);
      const action = decideQuota(state(row, canWrite));
      const leak = action === "none" && !canWrite ? await tenant.frozenWritePaths(ref) : null;
      if (leak) {
        await tenant.freeze(ref, marker, admin);
        logger.warn(`Database ${row.database_name} was frozen but its tenant ${leak}: frozen again`);
        if (!row.read_only) await repo.setReadOnly(row.id, true);
        return "refreeze";
      }
      if (action === "freeze") {
        await tenant.freeze(ref, marker, admin);
        logger.info(`Database ${row.database_name} is over its quota (${(bytes / MIB).toFixed(2)} > ${row.max_storage_mb} MiB): read-only`);
      } else if (action === "thaw") {
        await tenant.thaw(ref, admin);
        logger.info(`Database ${row.database_name} is back under its quota: writable again`);
      }
      const readOnly = action === "freeze" || (action === "none" && !canWrite);
      if (row.read_only !== readOnly) await repo.setReadOnly(row.id, readOnly);
      return action;
    });
  }
}

const refOf = (row: DatabaseRow) => ({ databaseName: row.database_name, username: row.username });
