/**
 * Storage quota: measures each active database (pg_database_size stats every file, so the figure
 * is cached in the record), and makes a database read-only while it is over its quota.
 */
import type { LoggerInstance } from "moleculer";
import type { DatabaseRow, DatabasesRepository } from "./databases.repository";
import type { TenantServer } from "./tenant-server";

export const MIB = 1048576;

export type QuotaState = { storageBytes: number; maxStorageMb: number; readOnly: boolean };
export type QuotaAction = "freeze" | "thaw" | "none";

/** Over means strictly more bytes than the quota; back at or under it, rights come back. */
export function decideQuota({ storageBytes, maxStorageMb, readOnly }: QuotaState): QuotaAction {
  const over = storageBytes > maxStorageMb * MIB;
  if (over && !readOnly) return "freeze";
  if (!over && readOnly) return "thaw";
  return "none";
}

export type QuotaReport = { measured: number; frozen: string[]; thawed: string[]; failed: string[] };

export class QuotaEnforcer {
  constructor(
    private readonly deps: { repo: DatabasesRepository; tenant: TenantServer; marker: string; logger: LoggerInstance },
  ) {}

  /** Measures `rows` (default: every active database) and applies the quota to each. */
  async check(rows?: DatabaseRow[]): Promise<QuotaReport> {
    const { repo, tenant, logger } = this.deps;
    const active = (rows ?? (await repo.listByStatus("active"))).filter((r) => r.status === "active");
    const report: QuotaReport = { measured: 0, frozen: [], thawed: [], failed: [] };
    if (!active.length) return report;
    const sizes = await tenant.databaseSizes(active.map((r) => r.database_name));
    const measured = active.filter((r) => sizes.has(r.database_name)).map((r) => ({ id: r.id, bytes: sizes.get(r.database_name)! }));
    await repo.recordSizes(measured);
    report.measured = measured.length;
    for (const { id, bytes } of measured) {
      try {
        const action = await this.enforce(id, bytes);
        if (action === "freeze") report.frozen.push(id);
        if (action === "thaw") report.thawed.push(id);
      } catch (err) {
        report.failed.push(id);
        logger.warn(`Quota of database ${id} not enforced this round: ${(err as Error).message}`);
      }
    }
    return report;
  }

  /** Decides again under the database's lock, on the record as it is now. */
  private async enforce(id: string, bytes: number): Promise<QuotaAction> {
    const { repo, tenant, marker, logger } = this.deps;
    const first = await repo.find(id);
    if (!first || decideQuota({ storageBytes: bytes, maxStorageMb: first.max_storage_mb, readOnly: first.read_only }) === "none") return "none";
    return tenant.withDatabaseLock(first.database_name, async (admin) => {
      const row = await repo.find(id);
      if (!row || row.status !== "active") return "none";
      const action = decideQuota({ storageBytes: bytes, maxStorageMb: row.max_storage_mb, readOnly: row.read_only });
      const ref = { databaseName: row.database_name, username: row.username };
      if (action === "freeze") {
        await tenant.freeze(ref, marker, admin);
        await repo.setReadOnly(id, true);
        logger.info(`Database ${row.database_name} is over its quota (${(bytes / MIB).toFixed(2)} > ${row.max_storage_mb} MiB): read-only`);
      } else if (action === "thaw") {
        await tenant.thaw(ref, admin);
        await repo.setReadOnly(id, false);
        logger.info(`Database ${row.database_name} is back under its quota: writable again`);
      }
      return action;
    });
  }
}
