/**
 * Snapshots: a `pg_dump -Fc` of a client database taken in the background (one transaction's
 * snapshot, so consistent while the tenant writes), kept in the snapshot store until the account
 * deletes it, and restored into a new database (a branch) with `pg_restore` as that database's own
 * role. Dumps and restores share DBAAS_SNAPSHOT_CONCURRENCY slots per tenant server.
 *
 * Restart rule: a pending snapshot whose process died is failed (not retried): its dump died with
 * the process, and a retry would copy the database as it is later than the client asked. The
 * client sees `failed` and takes another.
 */
import { randomUUID } from "crypto";
import { apiError } from "../../lib/errors";
import { mkdtemp, rm, writeFile } from "fs/promises";
import { tmpdir } from "os";
import path from "path";
import type { LoggerInstance } from "moleculer";
import type { DatabaseRow } from "./databases.repository";
import { checkIdentifier } from "./naming";
import { libpqEnv, PgProgram, runTool, tenantToc, TOOLS, toolMajor, toolsMismatch } from "./pg-tools";
import type { SnapshotStore } from "./snapshot-store";
import type { SnapshotRow, SnapshotsRepository } from "./snapshots.repository";
import type { TenantServer } from "./tenant-server";

export const SNAPSHOT_STEPS = ["record", "dump", "commit", "ready"] as const;
export type SnapshotStep = (typeof SNAPSHOT_STEPS)[number];

export type SnapshotterDeps = {
  repo: SnapshotsRepository;
  store: SnapshotStore;
  tenant: TenantServer;
  /** Where pg_dump and pg_restore are (empty: PATH). */
  binDir: string;
  /** This process's owner id (owner-lease.ts). */
  owner: string;
  /** Snapshots an account may keep (pending or ready), and its storage quota in MiB (undefined: none). */
  limits: { perAccount: number; accountStorageMb?: number };
  logger: LoggerInstance;
  newId?: () => string;
  /** Called as each step ends (a throw there is a failure of that step): the tests' fault injection point. */
  onStep?: (step: SnapshotStep, id: string) => void;
};

export class Snapshotter {
  private readonly running = new Set<Promise<void>>();
  private readonly abort = new AbortController();

  constructor(readonly deps: SnapshotterDeps) {}

  /** Why the tools cannot serve this tenant server (see pg-tools.ts), or undefined when they can. */
  async checkTools(): Promise<string | undefined> {
    const serverMajor = await this.deps.tenant.serverMajor();
    const majors = await Promise.all(TOOLS.map((t) => toolMajor(this.bin(t))));
    return toolsMismatch(serverMajor, { pg_dump: majors[0], pg_restore: majors[1] });
  }

  /** Records the snapshot as pending and starts its dump; answers at once. */
  async start(db: DatabaseRow): Promise<SnapshotRow> {
    const { repo, owner, onStep, limits } = this.deps;
    const id = (this.deps.newId ?? randomUUID)();
    const row = await repo.insertPendingWithin(
      { id, clientId: db.client_id, databaseId: db.id, databaseName: db.database_name, owner },
      limits.perAccount,
      limits.accountStorageMb,
    );
    if ("refused" in row)
      throw apiError(
        "QUOTA_EXCEEDED",
        row.refused === "snapshots" ? `An account may keep at most ${row.limit} snapshots` : `The account's storage quota of ${row.limit} MB is used up`,
        { resource: row.refused, limit: row.limit, used: row.used },
      );
    const job = this.take(row, onStep ? () => onStep("record", id) : undefined).finally(() => this.running.delete(job));
    this.running.add(job);
    return row;
  }

  /** Resolves once every dump this process started has ended (tests, shutdown). */
  async settled(): Promise<void> {
    while (this.running.size) await Promise.all([...this.running]);
  }

  /** Stops the dumps in flight (they end failed) and waits for them. */
  async stop(): Promise<void> {
    this.abort.abort();
    await this.settled();
  }

  /**
   * Restores a ready snapshot into a new, empty database, connected as that database's role
   * (`tenantUrl`): everything restored is owned by it, and the dump's own code (functions run by
   * CHECK constraints, say) runs with that role's rights only. No owner, no grants of the source.
   */
  async restore(snapshotId: string, tenantUrl: string, databaseName: string): Promise<void> {
    await this.restoreDump(this.deps.store.pathOf(snapshotId), tenantUrl, databaseName);
  }

  /** Restores a custom-format dump file as snapshots are (above), leaving out the source's platform objects (pg-tools.ts tenantToc); `slot`: false when the caller holds a dump slot already. */
  async restoreDump(dumpPath: string, tenantUrl: string, databaseName: string, slot = true): Promise<void> {
    const env = libpqEnv(tenantUrl, databaseName);
    const toc = tenantToc(await runTool(this.bin("pg_restore"), ["-l", dumpPath], env, this.abort.signal, true));
    const listDir = await mkdtemp(path.join(tmpdir(), "dbaas-toc-"));
    try {
      const list = path.join(listDir, "toc.list");
      await writeFile(list, toc, { mode: 0o600 });
      const args = [
        "--no-owner",
        "--no-acl",
        "--single-transaction",
        "--exit-on-error",
        `--dbname=${checkIdentifier("database", databaseName)}`,
        "-L",
        list,
        dumpPath,
      ];
      const run = () => runTool(this.bin("pg_restore"), args, env, this.abort.signal);
      await (slot ? this.deps.tenant.withDumpSlot(run) : run());
    } finally {
      await rm(listDir, { recursive: true, force: true });
    }
  }

  /** Deletes the account's snapshot (not while pending) and its dump; the deleted record. */
  async delete(id: string, clientId: string): Promise<SnapshotRow | undefined> {
    const row = await this.deps.repo.deleteSettled(id, clientId);
    // A dump left behind (store down now) is removed by the next recover().
    if (row) await this.deps.store.remove(id).catch((err) => this.deps.logger.warn(`Dump of snapshot ${id} not removed yet: ${(err as Error).message}`));
    return row;
  }

  /**
   * At start and every reconcile: pending snapshots of dead processes become failed, and dumps
   * that no ready (or live pending) snapshot keeps are removed.
   */
  async recover(): Promise<{ failed: number; removed: number }> {
    const { repo, store, logger } = this.deps;
    const failed = await repo.failAbandoned();
    const ids = await store.ids();
    const kept = await repo.keptOf(ids);
    const orphans = ids.filter((id) => !kept.has(id));
    for (const id of orphans) await store.remove(id);
    if (failed.length || orphans.length) logger.info(`Snapshots: ${failed.length} abandoned marked failed, ${orphans.length} orphan dump(s) removed`);
    return { failed: failed.length, removed: orphans.length };
  }

  private async take(row: SnapshotRow, recorded?: () => void): Promise<void> {
    const { tenant, store, repo, logger, onStep } = this.deps;
    const step = (s: SnapshotStep) => onStep?.(s, row.id);
    try {
      recorded?.();
      const args = ["-Fc", "-f", store.partialPath(row.id)];
      await tenant.withDumpSlot(() => runTool(this.bin("pg_dump"), args, libpqEnv(tenant.adminUrl, row.database_name), this.abort.signal));
      step("dump");
      const bytes = await store.commit(row.id);
      step("commit");
      if (!(await repo.markReady(row.id, bytes))) throw new Error("the snapshot is no longer pending");
      step("ready");
    } catch (err) {
      const message = (err as Error).message;
      try {
        // Only a snapshot this failure really failed loses its dump (a fault after "ready" keeps a ready one whole).
        if (await repo.markFailed(row.id, message)) await store.remove(row.id);
        logger.warn(`Snapshot ${row.id} of ${row.database_name} failed: ${message}`);
      } catch (cleanup) {
        logger.error(`Snapshot ${row.id} failed (${message}); its clean-up waits for the reconciler: ${(cleanup as Error).message}`);
      }
    }
  }

  /** Where a PostgreSQL program of the server's major version is (DBAAS_PG_BIN_DIR or Debian's folder; else PATH). */
  bin(tool: PgProgram): string {
    return this.deps.binDir ? path.join(this.deps.binDir, tool) : tool;
  }
}
