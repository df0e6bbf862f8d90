/**
 * Point-in-time restores in the background (docs/databases.md "Point-in-time restore"): the create
 * answers 202 at once with the new database `restoring` while the provisioner fills it; a restore
 * that fails ends `failed` with a reason (its database and role dropped, the record kept until the
 * account deletes it, holding no place in the account). One whose dbaas process died is failed by
 * the next housekeeping pass, not resumed: pg_restore connects as the new role with the password
 * only the client was given, so no other process can finish it as the tenant.
 */
import type { LoggerInstance } from "moleculer";
import type { DatabaseRow, DatabasesRepository } from "./databases.repository";
import { holdRoleOf } from "./naming";
import type { TenantServer } from "./tenant-server";

export type ApiStatus = "active" | "restoring" | "failed";

export const INTERRUPTED_REASON = "The restore was interrupted (the database service restarted); create the restore again";
const UNKNOWN_REASON = "The restore failed on the database server (the operator is told why in the dbaas log)";

/** How long a stopping dbaas lets its restores in flight end (their tools are stopped first). */
const STOP_WAIT_MS = 5_000;

/** The status the API shows for a record (a restore being filled is `restoring`). */
export function apiStatusOf(row: DatabaseRow): { status: ApiStatus; statusReason?: string } {
  if (row.status === "failed") return { status: "failed", statusReason: row.status_reason ?? UNKNOWN_REASON };
  if (row.status === "provisioning" && row.restore_to) return { status: "restoring" };
  return { status: "active" };
}

/** What the account is told when a restore fails: the platform's own answers as they are, anything else in general words (the detail goes to the log). */
export function restoreFailureReason(err: unknown): string {
  const e = err as { type?: unknown; message?: unknown };
  if (typeof e?.type === "string" && typeof e.message === "string") return e.message;
  if (typeof e?.message === "string" && /was not archived within/.test(e.message))
    return "The tenant server's write-ahead log was not archived in time (the operator is alerted); retry later";
  if (typeof e?.message === "string" && /aborted|AbortError/i.test(e.message)) return INTERRUPTED_REASON;
  // pg_restore ran as the new role: what the server refused it is the account's own SQL error.
  const refused = typeof e?.message === "string" && /pg_restore failed/.test(e.message) ? /ERROR:\s+([^\n]+)/.exec(e.message) : null;
  if (refused) return `The restored data could not be loaded: ${refused[1].trim()}`;
  return UNKNOWN_REASON;
}

export type RestoreJobsDeps = {
  repo: DatabasesRepository;
  tenant: TenantServer;
  logger: LoggerInstance;
  /** Splits the account's connections again once a role is gone (provisioner.ts rebalance). */
  rebalance: (clientId: string) => Promise<void>;
};

export class RestoreJobs {
  private readonly running = new Set<Promise<void>>();

  constructor(private readonly deps: RestoreJobsDeps) {}

  /** Keeps a restore in flight so that stop() can let it end. */
  track(filled: Promise<void>): void {
    const job = filled.catch((err) => this.deps.logger.error(`Restore not settled: ${(err as Error).message}`)).finally(() => this.running.delete(job));
    this.running.add(job);
  }

  /** Waits a little for restores in flight (already told to stop); what is left is failed by the next start. */
  async stop(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((resolve) => (timer = setTimeout(resolve, STOP_WAIT_MS)));
    await Promise.race([Promise.allSettled([...this.running]), waited]);
    clearTimeout(timer);
  }

  /** Restores whose process died: their database and role dropped, their record `failed`. Returns how many. */
  async failInterrupted(): Promise<number> {
    const { repo, tenant, logger } = this.deps;
    let failed = 0;
    for (const row of await repo.listInterruptedRestores()) {
      try {
        await tenant.withDatabaseLock(row.database_name, (admin) => tenant.dropDatabase(row.database_name, admin));
        await tenant.dropRoles([row.username, holdRoleOf(row.username)]);
        if (await repo.fail(row.id, INTERRUPTED_REASON)) failed++;
        await this.deps.rebalance(row.client_id);
        logger.warn(`Restore ${row.id} (${row.database_name}) was interrupted: marked failed`);
      } catch (err) {
        logger.warn(`Interrupted restore ${row.id} not cleaned up yet: ${(err as Error).message}`);
      }
    }
    return failed;
  }
}
