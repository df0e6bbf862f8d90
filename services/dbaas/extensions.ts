/**
 * The extension allow-list at work (docs/databases.md "Extensions"): what the detail lists, and
 * the guard brought to every active database whose guard enforces another list (databases from
 * before the guard, or a changed DBAAS_EXTENSIONS), as the catalog level is.
 */
import type { LoggerInstance } from "moleculer";
import type { DatabaseRow, DatabasesRepository } from "./databases.repository";
import { GuardConfig, guardPolicy } from "./guard-sql";
import type { TenantServer } from "./tenant-server";

export type ExtensionsDetail = { available: string[]; installed: string[] };

/** How long the server's list of available extensions is kept (packages change rarely). */
const AVAILABLE_TTL_MS = 60_000;

export class Extensions {
  private available?: { names: Promise<string[]>; at: number };

  constructor(private readonly deps: { repo: DatabasesRepository; tenant: TenantServer; guard: GuardConfig; logger: LoggerInstance }) {}

  /** The allow-listed ones installed on the server and creatable by a tenant. */
  async availableNow(): Promise<string[]> {
    if (!this.available || Date.now() - this.available.at > AVAILABLE_TTL_MS) {
      const names = this.deps.tenant.availableExtensions(this.deps.guard.extensions);
      this.available = { names, at: Date.now() };
      names.catch(() => (this.available = undefined));
    }
    return this.available.names;
  }

  /** The detail's `extensions`; undefined when the server cannot be asked now (the rest of the detail still answers). */
  async detail(row: DatabaseRow): Promise<ExtensionsDetail | undefined> {
    try {
      const [available, installed] = await Promise.all([this.availableNow(), this.deps.tenant.installedExtensions(row.database_name)]);
      return { available, installed };
    } catch (err) {
      this.deps.logger.warn(`Extensions of ${row.database_name} not read: ${(err as Error).message}`);
      return undefined;
    }
  }

  /** Every active database's guard at the configuration (one failure stops no other; retried next pass). */
  async applyPolicy(): Promise<void> {
    const { repo, tenant, guard, logger } = this.deps;
    const policy = guardPolicy(guard);
    for (const row of await repo.listExtensionPolicyNot(policy)) {
      try {
        await tenant.setGuard(row.database_name, guard);
        await repo.markExtensionPolicy(row.id, policy);
      } catch (err) {
        logger.warn(`Extension guard of database ${row.database_name} not applied yet: ${(err as Error).message}`);
      }
    }
  }
}
