/**
 * dbaas's housekeeping pass (run by the reconciler's loop, and on demand by database-ops.ts): the
 * restores a dead process left, the reconciler, then what a crash or a changed setting left behind
 * (catalog level, extension policy, blocked logins, unfinished snapshots). Each part is tried again
 * at the next pass if it fails.
 */
import type { LoggerInstance } from "moleculer";
import type { DatabasesRepository } from "./databases.repository";
import type { Extensions } from "./extensions";
import type { RestoreJobs } from "./pitr-jobs";
import type { Provisioner } from "./provisioner";
import type { Reconciler, ReconcileReport } from "./reconciler";
import type { DbaasSettings } from "./settings";
import type { Snapshotter } from "./snapshotter";
import type { TenantServer } from "./tenant-server";

/** What a pass works with (the started DbaasApp). */
export type HousekeepingParts = {
  config: Pick<DbaasSettings, "hideCatalog">;
  logger: LoggerInstance;
  repo: DatabasesRepository;
  tenant: TenantServer;
  restoreJobs: RestoreJobs;
  reconciler: Reconciler;
  extensions: Extensions;
  provisioner: Provisioner;
  snapshotter: Snapshotter;
};

/**
 * Brings every active database whose catalog is at another level (provisioned under another
 * DBAAS_HIDE_CATALOG, or before levels were recorded) to the configured one, hiding or opening
 * as needed (one failure stops no other; it is tried again at the next round).
 */
export async function applyCatalogLevel(p: HousekeepingParts): Promise<void> {
  const level = p.config.hideCatalog;
  for (const row of await p.repo.listCatalogNotAt(level)) {
    try {
      await p.tenant.setCatalogLevel(row.database_name, level);
      await p.repo.markCatalogLevel(row.id, level);
    } catch (err) {
      p.logger.warn(`Catalog of database ${row.database_name} not at level ${level} yet: ${(err as Error).message}`);
    }
  }
}

/** One reconciler pass, then the catalog level and logins a crashed freeze left blocked. */
export async function housekeepingPass(p: HousekeepingParts, graceMs: number): Promise<ReconcileReport> {
  await p.restoreJobs.failInterrupted(); // before the reconciler, which leaves restores alone
  const report = await p.reconciler.reconcile(graceMs);
  await applyCatalogLevel(p);
  await p.extensions.applyPolicy();
  await p.provisioner.repairBlockedLogins();
  await p.snapshotter.recover();
  return report;
}
