/**
 * Point-in-time restore in the tests: the tenant cluster's one WAL archive
 * (.ci/setup.d/30-tenant-postgres.sh) and one folder of base backups, shared by every test file
 * that restores. A dbaas removes the archived WAL older than its oldest base backup
 * (services/dbaas/pitr-store.ts, prune): test files with backup folders of their own, running side
 * by side, removed WAL that another one's restore still replayed. One folder, as for the replicas
 * of one dbaas (docs/databases.md), whose backups are taken one at a time under the tenant
 * server's advisory lock; never removed by a test (another may be restoring from it), kept small
 * by the retention below.
 */
import { chmodSync, mkdirSync } from "fs";
import os from "os";
import path from "path";

export const PITR_WAL_DIR = process.env.TENANT_PG_WAL_ARCHIVE ?? "/var/lib/postgresql/pitr/tenant/wal";
const PITR_TEST_DIR = process.env.TEST_PITR_DIR ?? path.join(os.tmpdir(), "ci-platform-test-pitr");

/** dbaas's settings for point-in-time restore in a test: the shared folders, backups kept an hour. */
export function pitrTestEnv(): Record<string, string> {
  mkdirSync(PITR_TEST_DIR, { recursive: true, mode: 0o711 });
  // The scratch instance runs as the archive's owner (postgres) inside this folder.
  chmodSync(PITR_TEST_DIR, 0o711);
  return { DBAAS_PITR_WAL_DIR: PITR_WAL_DIR, DBAAS_PITR_DIR: PITR_TEST_DIR, DBAAS_PITR_RETENTION_H: "1" };
}
