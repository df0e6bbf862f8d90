/**
 * Point-in-time restore (docs/databases.md "Point-in-time restore"): the restore window of a
 * database, the base backups on a schedule and their pruning, and what fills a database restored
 * from `restoreFrom { databaseId, timestamp }`: the newest base backup that ended before the
 * timestamp recovered in a scratch instance to that instant (pitr-scratch.ts), the one database
 * dumped there and restored as the new database's own role, exactly as a branch is.
 */
import { existsSync } from "fs";
import path from "path";
import type { LoggerInstance } from "moleculer";
import { apiError, notFound, validationFailed } from "../../lib/errors";
import { isUuid } from "../../lib/uuid";
import type { RestoreSource, RestoreSources } from "./restore-sources.repository";
import { checkIdentifier } from "./naming";
import { libpqEnv, runTool } from "./pg-tools";
import { withRecoveredScratch } from "./pitr-scratch";
import type { BaseBackup, PitrStore } from "./pitr-store";
import type { Snapshotter } from "./snapshotter";
import type { TenantServer } from "./tenant-server";

export type RestoreFrom = { databaseId: string; timestamp: string };
export type RestoreWindow = { earliest: string; latest: string };

const PITR_LOCK = "ci-platform:dbaas:pitr";
/** How long a restore waits for the server to archive the WAL it needs. */
const ARCHIVE_WAIT_MS = 60_000;

const ARCHIVER_SQL = `SELECT (last_failed_time IS NOT NULL AND (last_archived_time IS NULL OR last_failed_time > last_archived_time))::int AS failing,
         failed_count::int AS failed, coalesce(extract(epoch FROM pg_catalog.now() - last_archived_time), -1)::int AS since
    FROM pg_catalog.pg_stat_archiver`;

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})$/;

export type PitrDeps = {
  store: PitrStore;
  tenant: TenantServer;
  sources: RestoreSources;
  snapshotter: Snapshotter;
  retentionMs: number;
  logger: LoggerInstance;
  now?: () => Date;
};

export class PointInTime {
  private abort = new AbortController();
  private leftoversPending = true;

  constructor(private readonly deps: PitrDeps) {}

  private now(): Date {
    return (this.deps.now ?? (() => new Date()))();
  }

  /** From the oldest base backup's end (or the moment the database was made and filled, or the retention's start: the latest of these) to now (or its destruction); undefined without a base backup. */
  async window(source: { activeAt: Date; destroyedAt: Date | null }): Promise<RestoreWindow | undefined> {
    const backups = await this.deps.store.list();
    if (!backups.length) return undefined;
    const now = this.now();
    const earliest = Math.max(backups[0].endedAt.getTime(), source.activeAt.getTime(), now.getTime() - this.deps.retentionMs);
    const latest = source.destroyedAt ?? now;
    if (earliest > latest.getTime()) return undefined;
    return { earliest: new Date(earliest).toISOString(), latest: latest.toISOString() };
  }

  /**
   * A base backup now, then pruning to the retention, one at a time across replicas; with
   * `ifOlderThanMs`, only when the newest is that old (decided under the lock, so replicas never
   * take one each). Returns the newest backup.
   */
  async backupNow(ifOlderThanMs?: number): Promise<BaseBackup> {
    const { store, tenant, retentionMs, logger } = this.deps;
    return tenant.conn.withLock(PITR_LOCK, async () => {
      const newest = (await store.list()).pop();
      if (newest && ifOlderThanMs !== undefined && this.now().getTime() - newest.endedAt.getTime() < ifOlderThanMs) return newest;
      const backup = await store.take(tenant.adminUrl, this.abort.signal);
      const removed = await store.prune(new Date(this.now().getTime() - retentionMs));
      await this.deps.sources.forgetDestroyedBefore(new Date(this.now().getTime() - retentionMs));
      const seconds = (backup.endedAt.getTime() - backup.startedAt.getTime()) / 1000;
      logger.info(`Base backup ${backup.id} taken in ${seconds.toFixed(1)} s (${removed} older removed)`);
      return backup;
    });
  }

  /**
   * What a dbaas that died mid-way left in the folder the replicas share: half-taken base backups
   * while no replica takes one (the backup lock), scratch instances while no replica dumps or
   * restores (every dump slot free). False when the scratch folders had to wait.
   */
  async removeLeftovers(): Promise<boolean> {
    const { store, tenant } = this.deps;
    await tenant.conn.withLock(PITR_LOCK, () => store.removePartialBackups());
    return tenant.conn.withoutDumps(() => store.removeScratchLeftovers());
  }

  /** A base backup when the newest is older than `everyMs` (or there is none); the leftovers first, until they are gone. */
  async backupIfDue(everyMs: number): Promise<void> {
    if (this.leftoversPending) this.leftoversPending = !(await this.removeLeftovers());
    const newest = (await this.deps.store.list()).pop();
    if (!newest || this.now().getTime() - newest.endedAt.getTime() >= everyMs) await this.backupNow(everyMs);
  }

  /** The server's archiver now (dbaas.stats walArchive, the metric platform_databases_wal_archive). */
  async archiveFigures(): Promise<Record<string, number>> {
    const { rows } = await this.deps.tenant.conn.pool.query<{ failing: number; failed: number; since: number }>(ARCHIVER_SQL);
    return { failing: rows[0].failing, failedTotal: rows[0].failed, secondsSinceArchived: rows[0].since };
  }

  stop(): void {
    this.abort.abort();
  }

  /**
   * Checks the request and the window (400, 404, 422) and returns what fills the new database.
   * 404 for a database that is not the account's, or destroyed longer ago than the retention.
   */
  async restoreFor(from: RestoreFrom, clientId: string): Promise<(names: { databaseName: string; username: string }, password: string) => Promise<void>> {
    if (!isInstant(from.timestamp))
      throw validationFailed([{ field: "restoreFrom.timestamp", message: "must be an ISO 8601 date and time with a time zone, e.g. 2026-11-27T15:04:05Z" }]);
    if (!isUuid(from.databaseId)) throw notFound("Database");
    const source = await this.deps.sources.find(from.databaseId, clientId);
    if (!source) throw notFound("Database");
    const target = new Date(from.timestamp);
    const window = await this.window(source);
    if (!window || target < new Date(window.earliest) || target > new Date(window.latest))
      throw apiError(
        "OUT_OF_RESTORE_WINDOW",
        window ? `The timestamp must be within ${window.earliest} and ${window.latest}` : "This database has no restore window yet",
        { restoreWindow: window ?? null },
      );
    return (names, password) => this.restore(source, target, names.databaseName, tenantUrl(this.deps.tenant.adminUrl, names.username, password));
  }

  private async restore(source: RestoreSource, target: Date, databaseName: string, url: string): Promise<void> {
    const { store, tenant, snapshotter } = this.deps;
    const backup = (await store.list()).filter((b) => b.endedAt <= target).pop();
    if (!backup) throw apiError("OUT_OF_RESTORE_WINDOW", "No base backup ends before this timestamp");
    // The WAL up to the target and one commit after it (where recovery stops) must be in the archive.
    await archiveNow(tenant, store.walDir);
    const adminUser = decodeURIComponent(new URL(tenant.adminUrl).username);
    const bin = snapshotter.bin.bind(snapshotter);
    await tenant.withDumpSlot(() =>
      withRecoveredScratch(store.root, { backup, walDir: store.walDir, target, bin, adminUser, readyTimeoutMs: 10 * 60_000 }, async (socketDir) => {
        const dump = path.join(socketDir, "database.dump");
        const env = {
          ...libpqEnv(`postgresql://${encodeURIComponent(adminUser)}@localhost/postgres`, checkIdentifier("database", source.databaseName)),
          PGHOST: socketDir,
        };
        await runTool(bin("pg_dump"), ["-Fc", "-f", dump], env, this.abort.signal);
        await snapshotter.restoreDump(dump, url, databaseName, false);
      }),
    );
  }
}

/** An ISO 8601 date and time with a zone, and a real one (no 30 February, no 25 o'clock). */
export function isInstant(text: string): boolean {
  const match = ISO_INSTANT.exec(text);
  if (!match || Number.isNaN(Date.parse(text))) return false;
  const [y, m, d, h, min, s] = text.split(/[-T:.Z+]/).map(Number);
  const day = new Date(Date.UTC(y, m - 1, d));
  return day.getUTCMonth() === m - 1 && day.getUTCDate() === d && h < 24 && min < 60 && s < 60;
}

/**
 * Makes the server write a commit now (after the target, so recovery has a record to stop at),
 * switch to a new WAL file, and waits until the finished one is in the archive.
 */
async function archiveNow(tenant: TenantServer, walDir: string): Promise<void> {
  const pool = tenant.conn.pool;
  await pool.query("SELECT pg_catalog.txid_current()");
  const { rows } = await pool.query<{ file: string }>("SELECT pg_catalog.pg_walfile_name(pg_catalog.pg_switch_wal()) AS file");
  const file = path.join(walDir, rows[0].file);
  const deadline = Date.now() + ARCHIVE_WAIT_MS;
  while (!existsSync(file)) {
    if (Date.now() > deadline) throw new Error(`WAL file ${rows[0].file} was not archived within ${ARCHIVE_WAIT_MS} ms: is archive_command failing?`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function tenantUrl(adminUrl: string, username: string, password: string): string {
  const url = new URL(adminUrl);
  url.username = username;
  url.password = password;
  return url.toString();
}
